"""Provenance: the operations that produced a tensor-valued expression, as a graph of `Origin`s.

`Provenance(analysis).of(expression)` answers "where does this value come from": names are
followed to the bindings that reach the statement (`bindings.py`: in program order, and inside
a loop the binding of the same iteration; a binding made by a previous iteration is a `CARRIED`
origin, not followed), through operators, torch functions, tensor methods, module and loss
calls, tuple unpacking, list elements and loop targets. Calls of the file's own functions,
methods, `forward`s and `__call__`s (an instance of a class of the file called) are followed
into their bodies with the arguments given, a few calls deep; anything else stays `UNKNOWN`.

One `Origin` is one evaluation: asking twice for the same expression, or for two names bound to
it, gives the same object, so two values share part of their autograd graph exactly when their
provenance graphs share an `Origin` of a graph node (`OP`, `FORWARD`, `LOSS` that is attached).
An evaluation repeated by a loop is still one `Origin`: `evaluated_in(origin, loop)` says
whether each iteration makes a new one.

Operations carry the key of `codemods/data/saved_ops.json` (`torch.sigmoid`,
`torch.nn.functional.relu`, `Tensor.sum[dim]`, `operator.mul[scalar]`, `operator.getitem`,
`torch.nn.Linear`); `saves_tensors(origin)` reads the table, plus two documented assumptions
for what it cannot list (a module with parameters saves; a loss saves its input).
"""

from __future__ import annotations

import ast
import bisect
import io
import tokenize
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from enum import Enum

from codemods.analysis import FileAnalysis, layers, saved_ops, torch_api
from codemods.analysis.bindings import Binding, BindingKind, ScopeBindings
from codemods.analysis.imports import dotted_name
from codemods.analysis.index import FUNCTION_TYPES, ScopeNode
from codemods.analysis.interpreter import target_key
from codemods.analysis.syntax import is_false, is_true, keyword_argument
from codemods.analysis.values import Grad, Kind, Value

_Function = ast.FunctionDef | ast.AsyncFunctionDef
_MAX_CALL_DEPTH = 3
# Expressions that are data, whatever they hold: literals, comparisons, lambdas (`_build`).
# `...` is a Constant too, but not data (`_build`).
_DATA = frozenset({ast.Constant, ast.JoinedStr, ast.Compare, ast.BoolOp, ast.Lambda})
_COMPREHENSIONS = frozenset({ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp})
_LOOPS = (ast.For, ast.AsyncFor, ast.While)

# Python operators, keyed like the op table (`operator.<name>`).
_BINARY_OPERATORS: dict[type[ast.operator], str] = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "truediv",
    ast.FloorDiv: "floordiv",
    ast.Mod: "mod",
    ast.Pow: "pow",
    ast.MatMult: "matmul",
}
# `x op= y`: the same operator classes as `BinOp`, keyed as the in-place operator.
_AUGMENTED_OPERATORS: dict[type[ast.operator], str] = {
    ast.Add: "iadd",
    ast.Sub: "isub",
    ast.Mult: "imul",
    ast.Div: "itruediv",
    ast.Pow: "ipow",
    ast.MatMult: "imatmul",
}
# Operators whose result is an int when both operands are.
_INT_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_UNARY_OPERATORS: dict[type[ast.unaryop], str] = {
    ast.USub: "neg",
    ast.UAdd: "pos",
    ast.Invert: "invert",
}
# Builtins whose result is a Python number or string whatever their argument.
_NUMBER_BUILTINS = frozenset(
    {"float", "int", "len", "bool", "round", "str", "repr", "isinstance", "hash", "id", "print"}
)
# Builtins that return their argument's elements (a new container of the same values).
_COPYING_BUILTINS = frozenset({"list", "tuple", "sorted", "reversed"})
# Methods of containers through which one of their elements comes out.
_ELEMENT_METHODS = frozenset({"pop", "get", "popleft", "__getitem__"})
# Tensor attributes that are not tensors of the graph.
FREE_ATTRIBUTES = frozenset(
    {"shape", "dtype", "device", "requires_grad", "is_leaf", "data", "grad", "ndim", "grad_fn"}
)
_VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "real", "imag"})


class OriginKind(Enum):
    OP = "op"  # a tensor operation: operator, torch function, tensor method (`key` set)
    FORWARD = "forward"  # a call of an nn.Module gradfix cannot look into (`key`: its class)
    LOSS = "loss"  # a call of a criterion or a functional loss (`key`: class or function)
    LEAF = "leaf"  # a graph leaf: a parameter or a tensor made with requires_grad=True
    DATA = "data"  # no autograd history: numbers, data, factories, detached, made under no_grad
    PART = "part"  # one element of a tuple or list value (`a, b = f(x)`): no autograd node
    ITEM = "item"  # one element template of a collection (see `repeats_in`)
    COLLECTION = "collection"  # a list/tuple/dict built here: `inputs` are its ITEMs
    ELEMENT = "element"  # what a `for` or comprehension target takes: `inputs` = (iterable,)
    CHOICE = "choice"  # one of several bindings or branches: `inputs` are the alternatives
    CARRIED = "carried"  # a value made by a previous loop iteration: not followed
    UNKNOWN = "unknown"  # gradfix cannot follow it (a parameter, a global, an unseen call)


# Kinds that are nodes of the autograd graph when attached (LEAF is a graph leaf: it saves
# nothing, and two backward passes through a leaf never conflict).
GRAPH_NODE_KINDS = frozenset({OriginKind.OP, OriginKind.FORWARD, OriginKind.LOSS})


@dataclass(frozen=True, eq=False)
class Origin:
    """One evaluation of an expression. Compared by identity."""

    kind: OriginKind
    expression: ast.AST | None  # what was evaluated (a call, operator, subscript, ...)
    # where the evaluation happens in the scope asked about: `expression` itself, or the call
    # of this file's function whose body it belongs to (see `evaluated_in`)
    site: ast.AST | None
    key: str | None = None  # OP / FORWARD / LOSS: the op-table key of the operation
    inputs: tuple[Origin, ...] = ()
    grad: Grad = Grad.UNKNOWN  # whether the value is in the autograd graph
    # ITEM: the loop or comprehension that makes a new element each iteration (None: the
    # item is evaluated once); ELEMENT: the loop or comprehension whose target takes it
    repeats_in: ast.AST | None = None
    followed: bool = True  # False when gradfix cannot prove the value comes from `inputs`
    module: bool = False  # FORWARD: the module has parameters (it is not parameterless)

    @property
    def is_graph_node(self) -> bool:
        """An autograd node (not a leaf, not structure): an attached operation."""
        return self.kind in GRAPH_NODE_KINDS and self.grad is not Grad.FREE

    @property
    def starts_forward(self) -> bool:
        """A module or loss call whose inputs carry no graph: a fresh forward starts here, so
        two of them never share autograd nodes (only the parameters, which are leaves)."""
        return self.kind in (OriginKind.FORWARD, OriginKind.LOSS) and not any(
            reachable_graph_nodes(origin) for origin in self.inputs
        )


@dataclass(frozen=True)
class CallSite:
    """A call of the file's own function: what it passes for each parameter, by name."""

    call: ast.Call
    arguments: dict[str, ast.expr]


@dataclass(eq=False)
class _Frame:
    """One scope being evaluated: the scope asked about, or a call into the file's code."""

    scope: ScopeNode
    bindings: ScopeBindings
    arguments: dict[str, Origin]  # parameter name -> what the call passes
    site: ast.AST | None  # the call in the outermost frame that leads here
    grad: bool  # False when the call runs with grad disabled
    depth: int
    functions: frozenset[_Function] = frozenset()  # calls in progress, against recursion
    children: dict[ast.Call, _Frame] = field(default_factory=dict)
    # the calls of the file's functions, from the scope asked about down to this body
    calls: tuple[tuple[ast.Call, _Function], ...] = ()


_BUFFER_CLASSES = frozenset({"torch.nn.Buffer", "torch.nn.parameter.Buffer"})
# How many provenance questions may be open at once (each waits on the next): real code
# needs tens; beyond this a value's origin is unknown rather than a RecursionError.
_MAX_NESTING = 400


class Provenance:
    """Provenance of expressions in one analysed file. Build once per file and reuse: origins
    are memoised, which is what makes them comparable by identity."""

    def __init__(self, analysis: FileAnalysis) -> None:
        self.analysis = analysis
        self._frames: dict[ScopeNode, _Frame] = {}
        self._memo: dict[tuple[int, int, str], Origin] = {}
        self._in_progress: set[tuple[int, int, str]] = set()
        self._names: dict[Origin, Binding] = {}
        self._constructors_in_progress: set[ast.AST] = set()
        self._call_sites: dict[_Function, list[CallSite] | None] = {}
        self._statements: dict[ast.AST, ast.AST | None] = {}
        self._calls_to: dict[Origin, tuple[tuple[ast.Call, _Function], ...]] = {}
        # the source-order spans of the outermost comprehensions and lambdas, when first asked
        self._outer_spans: tuple[list[int], list[int]] | None = None

    # -- questions rules ask ------------------------------------------------------------
    def of(self, expression: ast.expr) -> Origin:
        """The provenance of `expression`, evaluated where it stands."""
        frame = self._frame(self.analysis.scope_of(expression))
        return self._expression(expression, frame)

    def of_in_call(self, expression: ast.expr, call: ast.Call) -> Origin | None:
        """The provenance of `expression`, in the body of the file's function that `call`
        runs, with the arguments `call` passes; None when provenance does not follow `call`
        into that function."""
        frame = self._frame(self.analysis.scope_of(call))
        self._expression(call, frame)
        inner = frame.children.get(call)
        if inner is None or inner.scope is not self.analysis.scope_of(expression):
            return None
        return self._expression(expression, inner)

    def function_run_by(self, call: ast.Call) -> ScopeNode | None:
        """The file's function that `call` runs (a method of an object's class, a helper, an
        instance's `__call__`), when provenance follows the call into it."""
        frame = self._frame(self.analysis.scope_of(call))
        self._expression(call, frame)
        inner = frame.children.get(call)
        return inner.scope if inner is not None else None

    def attribute_at_exit(self, method: _Function, key: str) -> Origin | None:
        """The provenance of `self.<attribute>` (`key`) as `method` leaves it, evaluated in
        the method's own body (`self.fake = self.netG(z)` in `forward()`): one Origin
        however many other methods later read the cached value. None when no single plain
        binding of the method reaches its end."""
        reaching = self.bindings(method).final.get(key, frozenset())
        if len(reaching) != 1:
            return None
        (binding,) = reaching
        if binding.kind is not BindingKind.ASSIGN:
            return None
        return self._binding(binding, self._frame(method))

    def op_key_family(self, node: ast.AST) -> str | None:
        """The op-table key the op `node` is evaluated under, less the call-shape suffix
        (`[scalar]`, `[dim]`, ...) that its provenance may add, when it is known without
        building that provenance: for an arithmetic operator (`operator.add`) and a call of
        a `torch.` function (`torch.zeros`; `_call` sends every one to `_torch_call`), and
        for a keyed method of what the interpreter knows is a tensor or knows nothing of
        (`x.view(n)`, which `_method_call` makes an op of that key, or data, as for
        `x.detach()`: it treats both receivers alike but for `scaler.scale(loss)`, a
        multiplication, so `scale` of an unknown receiver gives None); else None. An
        operator with no key (`a | b`) gives None too."""
        key: str | None = None
        if type(node) is ast.BinOp:
            key = _operator_key(node)  # type: ignore[arg-type]
        elif type(node) is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            key = self.analysis.qualified_name(func)
            if key is not None and not key.startswith("torch."):
                key = None
            if key is None and type(func) is ast.Attribute and _keyed_tensor_method(func.attr):
                receiver = self.analysis.value_of(func.value).kind
                if receiver is Kind.TENSOR or (receiver is Kind.UNKNOWN and func.attr != "scale"):
                    key = f"Tensor.{func.attr}"
        return _table_key(key, ())

    def without_grad(self, node: ast.AST) -> bool:
        """Whether `node` runs with grad disabled (under `no_grad`, or in a function decorated
        so): every op evaluating it makes, the file's functions it calls included, is then
        out of the graph (`Grad.FREE`), which is known before building its provenance."""
        scope = self.analysis.scope_of(node)
        return not (self._frame(scope).grad and self.analysis.grad_enabled(node))

    def bindings(self, scope: ScopeNode) -> ScopeBindings:
        return self.analysis.bindings(scope)

    def statement_of(self, node: ast.AST) -> ast.AST | None:
        """The statement of its scope's bindings that contains `node` (asked again and
        again for the same ops: remembered)."""
        if node in self._statements:
            return self._statements[node]
        before = self.bindings(self.analysis.scope_of(node)).before
        current: ast.AST | None = node
        while current is not None and current not in before:
            current = self.analysis.parent(current)
        self._statements[node] = current
        return current

    def reaching(self, key: str, at: ast.AST) -> frozenset[Binding]:
        """The bindings of `key` (`x` or `self.x`) that may reach the statement of `at`."""
        statement = self.statement_of(at)
        if statement is None:
            return frozenset()
        scope = self.analysis.scope_of(at)
        return self.bindings(scope).reaching(key, statement) or frozenset()

    def calls_to(self, origin: Origin) -> tuple[tuple[ast.Call, _Function], ...]:
        """The calls of the file's functions (each with the function it runs) through which
        `origin` was evaluated, outermost first: `self.critic(s, a)` then `self.Q1(s, a)` for
        a layer of `Q1` that `critic`'s forward runs; empty for the scope asked about."""
        return self._calls_to.get(origin, ())

    def binding_of(self, origin: Origin) -> Binding | None:
        """The assignment that named `origin` (`h` in `h = trunk(x)`), if one did."""
        return self._names.get(origin)

    def module_constructor(self, module: ast.expr) -> ast.Call | None:
        """The call that built the module `module` names: `nn.Linear(4, 2)` for `fc` after
        `fc = nn.Linear(4, 2)`, and for `self.fc` or `model.fc` when the class (of this file)
        assigns `self.fc` once."""
        built = self._built(module)
        return self._built_by_factory(built) if isinstance(built, ast.Call) else None

    def _built(self, module: ast.expr) -> ast.Call | ast.Dict | None:
        """The call that built the module `module` names, or the dict literal that built the
        table of modules it names (`models = {"trunk": ...}` for `self.models`)."""
        if module in self._constructors_in_progress:
            return None  # a cycle: `self.m = m` with `C(self.m)` inside `C`, `x = x.parent`
        self._constructors_in_progress.add(module)
        try:
            return self._module_constructor(module)
        finally:
            self._constructors_in_progress.discard(module)

    def _built_by_factory(self, call: ast.Call | None) -> ast.Call | None:
        """The module constructor a factory of the file returns, for `call` a call of one
        (`self.netD = self.getNetD()`, `model = build_model()`); `call` itself otherwise. A
        method called on `self` may be overridden: every definition a subclass of the file
        can run must return one and the same constructor (a base's `raise
        NotImplementedError` returns nothing and counts for none)."""
        if call is None or self._module_kind(call) is not Kind.UNKNOWN:
            return call
        func = call.func
        if isinstance(func, ast.Name):
            function = self.analysis.index.functions.get(func.id)
            candidates = [function] if function is not None else []
        elif isinstance(func, ast.Attribute) and dotted_name(func.value) == "self":
            info = self.analysis.class_of(self.analysis.scope_of(call))
            candidates = self._overrides(info.name, func.attr) if info is not None else []
        else:
            return call
        products: set[ast.Call] = set()
        for function in candidates:
            returned = _returned_values(self.analysis, function)
            if returned is None or len(returned) > 1:
                return call
            if returned:
                product = returned[0]
                if not isinstance(product, ast.Call) or not self._is_module_constructor(product):
                    return call
                products.add(product)
        return products.pop() if len(products) == 1 else call

    def _overrides(self, class_name: str, method: str) -> list[_Function]:
        """The definitions of `method` that `self.<method>()` in `class_name` may run: its
        own, and those of the file's classes deriving from it."""
        found: list[_Function] = []
        for name, info in self.analysis.index.classes.items():
            function = info.methods.get(method)
            if (
                function is not None
                and function not in found
                and class_name in self.analysis.lineage(name)
            ):
                found.append(function)
        return found

    def _module_constructor(self, module: ast.expr) -> ast.Call | ast.Dict | None:
        if isinstance(module, ast.Subscript):  # `self.models["trunk"]`
            table = self._built(module.value)
            if isinstance(table, ast.Call) and self.analysis.qualified_name(table.func) == (
                "torch.nn.ModuleDict"
            ):
                table = table.args[0] if len(table.args) == 1 and not table.keywords else None
            return _entry(table, module.slice) if isinstance(table, ast.Dict) else None
        key = target_key(module)
        if key is not None and key.startswith("self."):
            info = self.analysis.class_of(self.analysis.scope_of(module))
            owner = self._assigning_class(info.name, key[5:]) if info else None
            return self._attribute_constructor(owner, key[5:]) if owner else None
        if key is not None:
            scope = self.analysis.scope_of(module)
            info = self.analysis.class_of(scope)
            if info is not None and isinstance(module, ast.Name) and scope.name == "__init__":  # type: ignore[union-attr]
                passed = self._passed_constructor(info.name, module, module)
                if passed is not None:  # `torch.optim.SGD(net.parameters())` in `__init__`
                    return passed
            if info is None and isinstance(module, ast.Name):
                passed = self._argument_built(module)
                if passed is not None:  # `def embed(models, X)` called with the dict
                    return passed
            values = self._assigned_values(key, module)
            if len(values) == 1 and isinstance(values[0], (ast.Call, ast.Dict)):
                return values[0]
            return None
        if isinstance(module, ast.Attribute):
            owner = self.module_constructor(module.value)
            if owner is not None and isinstance(owner.func, ast.Name):
                return self._attribute_constructor(owner.func.id, module.attr)
        return None

    def _argument_built(self, parameter: ast.Name) -> ast.Call | ast.Dict | None:
        """What every call of the file passes for the parameter `parameter` of a function
        (not a method), when it is one module or one dict literal of modules."""
        function = self.analysis.scope_of(parameter)
        bindings = self.reaching(parameter.id, parameter)
        if not isinstance(function, FUNCTION_TYPES) or not bindings:
            return None
        if any(b.kind is not BindingKind.PARAMETER for b in bindings):
            return None
        built: set[ast.Call | ast.Dict] = set()
        for site in self.call_sites(function) or [None]:
            passed = site.arguments.get(parameter.id) if site is not None else None
            made = self._built(passed) if isinstance(passed, ast.Name | ast.Attribute) else passed
            if not isinstance(made, ast.Call | ast.Dict):
                return None
            built.add(made)
        return built.pop() if len(built) == 1 else None

    def call_sites(self, function: _Function) -> list[CallSite] | None:
        """Every call of the file that runs `function`, each with what it passes for each
        parameter; None when the function may run in a way gradfix cannot see: a `*args`
        call, a call on an object of unknown class, a method name used other than called,
        an instance of its module class built into a container or passed on (`nn.Sequential(
        Block())`), or no call in the file at all (a library's callers are elsewhere)."""
        if function not in self._call_sites:
            self._call_sites[function] = self._find_call_sites(function)
        return self._call_sites[function]

    def _find_call_sites(self, function: _Function) -> list[CallSite] | None:
        analysis = self.analysis
        info = analysis.class_of(function)
        if info is None:
            if analysis.index.functions.get(function.name) is not function:
                return None
            calls = analysis.index.calls_by_name.get(function.name, [])
            called = {call.func for call in calls}
            for names in analysis.index.names.values():
                if any(use not in called for use in names.get(function.name, [])):
                    return None  # passed as a value (a callback), or rebound
            if any(not isinstance(call.func, ast.Name) for call in calls):
                return None  # a method of the same name: the file's calls are ambiguous
            return self._sites(function, calls, bound=False)
        owners = [
            name
            for name, other in analysis.index.classes.items()
            if other.methods.get(function.name) is function
        ]
        calls = list(analysis.index.calls_by_name.get(function.name, []))
        for call in calls:  # `obj.method(...)`, `module.forward(...)`
            func = call.func
            if (
                not isinstance(func, ast.Attribute)
                or analysis.value_of(func.value).cls not in owners
            ):
                return None
        layer_sites: list[CallSite] = []
        if function.name in torch_api.FORWARD_METHODS and analysis.is_module_class(info.name):
            for owner in owners:
                held = self._instances_held(owner, function)
                if held is None:
                    return None
                layer_sites += held
                calls += analysis.module_calls(analysis.index.classes[owner])  # `module(...)`
        sites = self._sites(function, calls, bound=True)
        if not layer_sites:
            return sites
        return None if sites is None and calls else [*(sites or []), *layer_sites]

    def _instances_held(self, class_name: str, forward: _Function) -> list[CallSite] | None:
        """Where gradfix sees every call of the instances of the class the file builds: each
        is assigned to a name or a `self` attribute (whose calls `module_calls` finds), or is
        a layer of an `nn.Sequential` (`self.body.add_module("b1", Block())`), which passes
        its own input to its first layer (a site passing what the Sequential's caller passes)
        and the previous layer's output to the others (a site passing no caller's tensor).
        The sites of the layers; None when some instance goes where gradfix cannot see."""
        builds = self.analysis.index.calls_by_name.get(class_name, [])
        if not builds:
            return None
        sites: list[CallSite] = []
        for build in builds:
            statement = self.analysis.parent(build)
            if (
                isinstance(statement, ast.Assign)
                and statement.value is build
                and len(statement.targets) == 1
                and target_key(statement.targets[0]) is not None
            ) or self._held_by_key_or_object(build):
                continue
            layer_sites = self._layer_sites(build, forward)
            if layer_sites is None:
                return None
            sites += layer_sites
        return sites

    def _held_by_key_or_object(self, build: ast.Call) -> bool:
        """An instance built as an entry of a dict under a constant key (`{"embedder":
        MLP(...)}`) or as an argument of one of the file's classes (`Trainer(MLP(...))`):
        the interpreter follows it there by its class, so `module_calls` finds its calls,
        unless the file also calls modules of mixed classes (`for m in models.values()`)."""
        holder = self.analysis.parent(build)
        if isinstance(holder, ast.Dict):
            position = holder.values.index(build) if build in holder.values else -1
            key = holder.keys[position] if position >= 0 else None
            held = isinstance(key, ast.Constant) and isinstance(key.value, str)
        elif isinstance(holder, ast.Call) and build in holder.args:
            held = self.analysis.value_of(holder.func).kind is Kind.CLASS
        else:
            held = False
        return held and not self.analysis.calls_of_mixed_modules()

    def _layer_sites(self, build: ast.Call, forward: _Function) -> list[CallSite] | None:
        params = [p.arg for p in (*forward.args.posonlyargs, *forward.args.args)][1:]
        if not params:
            return None
        sequentials = layers.holding_sequentials(self.analysis, build)
        if sequentials is None:
            return None
        sites: list[CallSite] = []
        for sequential in sequentials:
            where = layers.positions(self.analysis, sequential, build)
            calls = self.calls_of_built(sequential)
            if where is None or calls is None:
                return None
            for call in calls:
                if len(call.args) != 1 or call.keywords or isinstance(call.args[0], ast.Starred):
                    return None
                if "inner" in where:
                    sites.append(CallSite(call, {}))
                if "first" in where:
                    sites.append(CallSite(call, {params[0]: call.args[0]}))
        return sites

    def calls_of_built(self, constructor: ast.Call) -> list[ast.Call] | None:
        """The calls of the module `constructor` builds, when it is bound to a name or a
        `self` attribute and called only as `name(...)`."""
        statement = self.analysis.parent(constructor)
        if not (
            isinstance(statement, ast.Assign)
            and statement.value is constructor
            and len(statement.targets) == 1
        ):
            return None
        key = target_key(statement.targets[0])
        if key is None:
            return None
        name = key.rsplit(".", 1)[-1]
        calls = []
        for call in self.analysis.index.calls_by_name.get(name, []):
            if isinstance(call.func, (ast.Name, ast.Attribute)) and (
                self.module_constructor(call.func) is constructor
            ):
                calls.append(call)
        return calls

    def _sites(
        self, function: _Function, calls: list[ast.Call], bound: bool
    ) -> list[CallSite] | None:
        params = [param.arg for param in (*function.args.posonlyargs, *function.args.args)]
        if bound:
            params = params[1:]
        sites = []
        for call in calls:
            if any(isinstance(arg, ast.Starred) for arg in call.args) or any(
                keyword.arg is None for keyword in call.keywords
            ):
                return None
            passed = dict(zip(params, call.args, strict=False))
            passed.update((keyword.arg, keyword.value) for keyword in call.keywords)  # type: ignore[misc]
            sites.append(CallSite(call, passed))
        return sites or None

    # -- frames -------------------------------------------------------------------------
    def _frame(self, scope: ScopeNode) -> _Frame:
        if scope not in self._frames:
            grad = not (
                isinstance(scope, FUNCTION_TYPES)
                and self.analysis.grad_disabled_by_decorator(scope)
            )
            self._frames[scope] = _Frame(scope, self.bindings(scope), {}, None, grad, 0)
        return self._frames[scope]

    def _call_frame(
        self, parent: _Frame, call: ast.Call, function: _Function, arguments: dict
    ) -> _Frame:
        if call not in parent.children:
            parent.children[call] = _Frame(
                scope=function,
                bindings=self.bindings(function),
                arguments=arguments,
                site=parent.site or call,
                grad=parent.grad
                and self.analysis.grad_enabled(call)
                and not self.analysis.grad_disabled_by_decorator(function),
                depth=parent.depth + 1,
                functions=parent.functions | {function},
                calls=(*parent.calls, (call, function)),
            )
        return parent.children[call]

    def _memoised(self, frame: _Frame, node: ast.AST, tag: str, build) -> Origin:
        """One Origin per (frame, node, tag); a cycle (a value defined through itself, which
        only loop-carried bindings make and those are not followed) yields UNKNOWN."""
        memo = (id(frame), id(node), tag)
        if memo in self._memo:
            return self._memo[memo]
        if memo in self._in_progress or len(self._in_progress) >= _MAX_NESTING:
            # A cycle, or a chain of thousands of rebindings (generated code): unknown.
            return self._unknown(node, frame)
        self._in_progress.add(memo)
        try:
            origin = build()
        finally:
            self._in_progress.discard(memo)
        self._memo[memo] = origin
        if frame.calls:
            self._calls_to.setdefault(origin, frame.calls)
        return origin

    # -- expressions --------------------------------------------------------------------
    def _expression(self, node: ast.expr, frame: _Frame) -> Origin:
        return self._memoised(frame, node, "", lambda: self._build(node, frame))

    def _build(self, node: ast.expr, frame: _Frame) -> Origin:
        kind = type(node)
        if kind in _DATA and not (kind is ast.Constant and node.value is Ellipsis):  # type: ignore[attr-defined]
            return self._data(node, frame)
        key = target_key(node)
        if key is not None:
            return self._name(node, key, frame)
        if kind is ast.Attribute:  # by class: `is`, cheaper than `isinstance`
            return self._attribute(node, frame)  # type: ignore[arg-type]
        if kind is ast.Call:
            return self._call(node, frame)  # type: ignore[arg-type]
        if isinstance(node, ast.BinOp):
            left, right = node.left, node.right
            op = _operator_key(node)
            return self._op(node, frame, op, [left, right], _scalar_suffix(self, left, right))
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return self._data(node, frame)
            name = _UNARY_OPERATORS.get(type(node.op))
            return self._op(node, frame, f"operator.{name}", [node.operand])
        if isinstance(node, ast.Subscript):
            return self._subscript(node, frame)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return self._literal(node, [_unstarred(element) for element in node.elts], frame)
        if isinstance(node, ast.Dict):
            values = [v for k, v in zip(node.keys, node.values, strict=True) if k is not None]
            return self._literal(node, values, frame)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            element = node.value if isinstance(node, ast.DictComp) else node.elt
            item = self._item(self._expression(element, frame), node, frame)
            return self._structure(OriginKind.COLLECTION, node, frame, (item,))
        if isinstance(node, ast.IfExp):
            branches = (self._expression(node.body, frame), self._expression(node.orelse, frame))
            return self._structure(OriginKind.CHOICE, node, frame, branches)
        if isinstance(node, ast.NamedExpr):
            return self._expression(node.value, frame)
        return self._unknown(node, frame)

    def _name(self, node: ast.expr, key: str, frame: _Frame) -> Origin:
        if key in ("True", "False", "None"):
            return self._data(node, frame)
        if self._in_comprehension_or_lambda(node):  # most names are not: spared two walks
            comprehension = _comprehension_binding(self.analysis, node, key)
            if comprehension is not None:
                comp_for, path = comprehension
                iterable = self._expression(comp_for.iter, frame)
                owner = self.analysis.parent(comp_for)  # the ListComp/SetComp/... it is part of
                return self._element(iterable, comp_for, owner or comp_for, path, frame)
            if _lambda_parameter(self.analysis, node, key):
                return self._unknown(node, frame)
        statement = self._statement_in(node, frame)
        reaching = frame.bindings.reaching(key, statement) if statement is not None else None
        if reaching is None:
            return self._unknown(node, frame)
        if not reaching:
            return self._global(node, key, frame)
        alternatives = tuple(
            self._carried(node, binding, frame)
            if frame.bindings.carried(binding, statement)  # type: ignore[arg-type]
            else self._binding(binding, frame)
            for binding in sorted(reaching, key=lambda b: frame.bindings.order.get(b.statement, -1))
        )
        if len(alternatives) == 1:
            return alternatives[0]
        tag = "choice:" + ",".join(str(id(a)) for a in alternatives)
        return self._memoised(
            frame,
            statement,  # type: ignore[arg-type]
            tag,
            lambda: self._structure(OriginKind.CHOICE, node, frame, alternatives),
        )

    def _in_comprehension_or_lambda(self, node: ast.AST) -> bool:
        """Whether `node` is inside a comprehension or a lambda, whose variables `_name` then
        looks for: by its place in the source order, against the spans of the file's
        outermost ones (a node's descendants are one stretch of that order)."""
        index = self.analysis.index
        if self._outer_spans is None:
            starts: list[int] = []
            ends: list[int] = []
            for outer in index.of_types(*_COMPREHENSIONS, ast.Lambda):  # in source order
                if not ends or index.start[outer] >= ends[-1]:  # else inside the previous
                    starts.append(index.start[outer])
                    ends.append(index.end[outer])
            self._outer_spans = (starts, ends)
        start = index.start.get(node)
        if start is None:
            return True  # not placed: let the walks tell
        starts, ends = self._outer_spans
        at = bisect.bisect_right(starts, start) - 1
        return at >= 0 and start < ends[at]

    def _global(self, node: ast.expr, key: str, frame: _Frame) -> Origin:
        """A name nothing in its function binds: the module-level binding, if any."""
        if isinstance(frame.scope, ast.Module) or key.startswith("self."):
            return self._unknown(node, frame)
        module = self._frame(self.analysis.module)
        bindings = module.bindings.final.get(key, frozenset())
        if len(bindings) != 1:
            return self._unknown(node, frame)
        return self._binding(next(iter(bindings)), module)

    def _binding(self, binding: Binding, frame: _Frame) -> Origin:
        return self._memoised(
            frame,
            binding.target,
            _binding_tag("binding", binding),
            lambda: self._build_binding(binding, frame),
        )

    def _build_binding(self, binding: Binding, frame: _Frame) -> Origin:
        value = binding.value
        if binding.kind is BindingKind.PARAMETER:
            passed = frame.arguments.get(binding.key)
            return passed if passed is not None else self._parameter(binding, frame)
        if value is None or binding.kind is BindingKind.OTHER:
            origin = self._unknown(binding.target, frame)
            if frame.depth == 0 and not isinstance(binding.target, ast.expr):
                # A name `ast` spells as a string (a def, class, import, except-as, global):
                # the target is the node that holds it; what is known of the name there.
                known = _name_value(self.analysis, binding.target, binding.key)
                origin = replace(origin, grad=known.grad)
            return origin
        if binding.kind is BindingKind.AUGMENTED:
            return self._augmented(binding, frame)
        if binding.kind is BindingKind.LOOP_TARGET:
            return self._loop_target(binding, frame)
        origin = self._parts(self._expression(value, frame), binding.path, binding.target, frame)
        if isinstance(value, (ast.List, ast.ListComp)) and not binding.path:
            appended = self._appended(binding, frame)
            if appended:
                items = (*origin.inputs, *appended)
                origin = self._structure(OriginKind.COLLECTION, value, frame, items)
        self._names.setdefault(origin, binding)
        return origin

    def _parameter(self, binding: Binding, frame: _Frame) -> Origin:
        """A parameter no followed call passes: UNKNOWN, with what the interpreter knows of
        it from the file's own callers (a module output passed to a loss function)."""
        origin = self._unknown(binding.target, frame)
        scope = frame.scope
        if frame.depth > 0 or not isinstance(scope, FUNCTION_TYPES) or not scope.body:
            return origin
        known = self.analysis.env_before(scope.body[0]).get(binding.key)
        grad = known.grad if known is not None else Grad.UNKNOWN
        if grad is Grad.UNKNOWN:
            grad = self._passed_grad(scope, binding.key)
        return replace(origin, grad=grad)

    def _passed_grad(self, function: _Function, parameter: str) -> Grad:
        """Whether what every call of `function` in the file passes for `parameter` is in the
        graph (a module's `forward`, called by a `forward` the interpreter saw first)."""
        sites = self.call_sites(function)
        passed = [site.arguments.get(parameter) for site in sites or ()]
        if not passed or any(argument is None for argument in passed):
            return Grad.UNKNOWN
        # The interpreter's value at each call, not the argument's provenance: it was
        # computed already, and following every caller's argument back costs a walk each.
        grads = (self.analysis.value_of(argument).grad for argument in passed if argument)
        return _joined(grads)

    def _appended(self, binding: Binding, frame: _Frame) -> tuple[Origin, ...]:
        """Items `name.append(value)` adds to the list `binding` makes, each made anew per
        iteration of the innermost loop around the append that the binding is outside of."""
        items = []
        for call in self.analysis.index.calls_by_name.get("append", []):
            func = call.func
            if not (
                isinstance(func, ast.Attribute)
                and target_key(func.value) == binding.key
                and len(call.args) + len(call.keywords) == 1
                and self.analysis.scope_of(call) is frame.scope
            ):
                continue
            statement = self._statement_in(call, frame)
            reaching = frame.bindings.reaching(binding.key, statement) if statement else None
            if not reaching or binding not in reaching:
                continue
            repeats_in = next(
                (
                    loop
                    for loop in self.analysis.enclosing_loops(call)
                    if not _inside(binding.statement, loop, self.analysis)
                ),
                None,
            )
            value = self._expression(_argument_values(call)[0], frame)
            items.append(self._item(value, repeats_in, frame))
        return tuple(items)

    def _augmented(self, binding: Binding, frame: _Frame) -> Origin:
        statement = binding.statement
        assert isinstance(statement, ast.AugAssign) and binding.value is not None
        name = _AUGMENTED_OPERATORS.get(type(statement.op))
        key = f"operator.{name}" if name else None
        return self._op(
            statement,
            frame,
            key,
            [statement.target, binding.value],
            _scalar_suffix(self, statement.target, binding.value, reflected=False),
        )

    def _loop_target(self, binding: Binding, frame: _Frame) -> Origin:
        loop = binding.statement
        assert isinstance(loop, (ast.For, ast.AsyncFor)) and binding.value is not None
        return self._iterated(binding.value, loop, loop, binding.path, frame)

    def _iterated(
        self,
        iterable: ast.expr,
        header: ast.For | ast.AsyncFor | ast.comprehension,
        repeats_in: ast.AST,
        path: tuple[int, ...],
        frame: _Frame,
    ) -> Origin:
        """What a loop target at `path` takes from `iterable`: `enumerate` and `zip` are seen
        through, `range` gives numbers."""
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name):
            builtin = iterable.func.id
            args = [arg for arg in iterable.args if type(arg) is not ast.Starred]
            if builtin == "range":
                return self._data(iterable, frame)
            if builtin == "enumerate" and args and path:
                if path[0] == 0:
                    return self._data(iterable, frame)
                return self._iterated(args[0], header, repeats_in, path[1:], frame)
            if builtin == "zip" and path and path[0] < len(args):
                return self._iterated(args[path[0]], header, repeats_in, path[1:], frame)
        collection = self._expression(iterable, frame)
        return self._element(collection, header, repeats_in, path, frame)

    def _element(
        self,
        collection: Origin,
        header: ast.For | ast.AsyncFor | ast.comprehension,
        repeats_in: ast.AST,
        path: tuple[int, ...],
        frame: _Frame,
    ) -> Origin:
        def build() -> Origin:
            element = Origin(
                OriginKind.ELEMENT,
                header.target,
                frame.site or header.target,
                inputs=(collection,),
                grad=_joined(item.grad for item in collection.inputs)
                if collection.kind is OriginKind.COLLECTION
                else collection.grad,
                repeats_in=repeats_in,
            )
            return self._parts(element, path, header.target, frame)

        return self._memoised(frame, header, f"element:{id(collection)}:{path}", build)

    def _carried(self, use: ast.AST, binding: Binding, frame: _Frame) -> Origin:
        return self._memoised(
            frame,
            binding.target,
            _binding_tag("carried", binding),
            lambda: Origin(
                OriginKind.CARRIED,
                binding.target,
                frame.site or binding.target,
                grad=self.analysis.value_of(use).grad
                if isinstance(use, ast.expr)
                else Grad.UNKNOWN,
            ),
        )

    def _parts(
        self, origin: Origin, path: tuple[int, ...], where: ast.AST, frame: _Frame
    ) -> Origin:
        """Element `path` of a destructured value: the literal's element when it is one."""
        for position in path:
            items = origin.inputs if origin.kind is OriginKind.COLLECTION else ()
            if items and all(i.repeats_in is None for i in items) and position < len(items):
                origin = items[position].inputs[0]
                continue
            whole = origin
            origin = self._memoised(
                frame,
                where,
                f"part:{id(whole)}:{position}",
                lambda whole=whole: self._structure(OriginKind.PART, where, frame, (whole,)),
            )
        return origin

    def _attribute(self, node: ast.Attribute, frame: _Frame) -> Origin:
        attribute = node.attr
        if attribute in FREE_ATTRIBUTES:
            return self._data(node, frame)
        if attribute in _VIEW_ATTRIBUTES:
            return self._op(node, frame, f"Tensor.{attribute}", [node.value])
        owner = self.analysis.value_of(node.value)
        if (
            owner.kind is Kind.MODULE
            and attribute in ("weight", "bias")
            and not self._buffer_of(owner.cls, attribute)
        ):
            return self._leaf(node, frame)
        if owner.kind in (Kind.MODULE, Kind.OBJECT, Kind.OPTIMIZER):
            return self._unknown(node, frame)
        return self._structure(OriginKind.PART, node, frame, (self._expression(node.value, frame),))

    def _buffer_of(self, class_name: str | None, attribute: str) -> bool:
        """Whether the file's module class registers `attribute` as a buffer (a frozen
        batch norm's `weight`): no parameter, so no leaf that requires grad."""
        info = self.analysis.index.classes.get(class_name or "")
        if info is None:
            return False
        for call in self.analysis.index.calls_by_name.get("register_buffer", []):
            arguments = _argument_values(call)
            name = arguments[0] if arguments else None
            if (
                self.analysis.contains(info.node, call)
                and isinstance(name, ast.Constant)
                and type(name.value) is str
                and name.value == attribute
            ):
                return True
        for occurrence in self.analysis.self_attribute_occurrences(info.name, attribute):
            assign = self.analysis.parent(occurrence)
            if (  # `self.weight = nn.Buffer(...)`
                _assigns(assign, occurrence)
                and isinstance(assign.value, ast.Call)  # type: ignore[union-attr]
                and self.analysis.qualified_name(assign.value.func) in _BUFFER_CLASSES  # type: ignore[union-attr]
            ):
                return True
        return False

    def _subscript(self, node: ast.Subscript, frame: _Frame) -> Origin:
        container = self._expression(node.value, frame)
        index = _single_index(node, self.analysis)
        if container.kind is OriginKind.COLLECTION and _is_int_literal(index):
            items = container.inputs
            position = index.value  # type: ignore[union-attr]
            if all(i.repeats_in is None for i in items) and position < len(items):
                return items[position].inputs[0]
        kind = self.analysis.value_of(node.value).kind
        if kind in (Kind.LIST, Kind.TUPLE, Kind.DICT) or container.kind in (
            OriginKind.COLLECTION,
            OriginKind.PART,
        ):
            return self._structure(OriginKind.PART, node, frame, (container,))
        key = f"operator.getitem{_index_suffix(self, node, frame)}"
        return self._op(node, frame, key, [node.value])

    def _literal(self, node: ast.expr, values: list[ast.expr], frame: _Frame) -> Origin:
        items = tuple(self._item(self._expression(v, frame), None, frame) for v in values)
        return self._structure(OriginKind.COLLECTION, node, frame, items)

    def _item(self, origin: Origin, repeats_in: ast.AST | None, frame: _Frame) -> Origin:
        return Origin(
            OriginKind.ITEM,
            origin.expression,
            origin.site,
            inputs=(origin,),
            grad=origin.grad,
            repeats_in=repeats_in,
        )

    # -- calls --------------------------------------------------------------------------
    def _call(self, node: ast.Call, frame: _Frame) -> Origin:
        qualified = self.analysis.qualified_name(node.func)
        if qualified is not None and qualified.startswith("torch."):
            return self._torch_call(node, qualified, frame)
        if isinstance(node.func, ast.Attribute):
            method = self._method_call(node, node.func, frame)
            if method is not None:
                return method
        callee = self.analysis.value_of(node.func)
        kind = callee.kind
        if kind is Kind.UNKNOWN:
            kind = self._module_kind(self.module_constructor(node.func))
        if kind in (Kind.MODULE, Kind.PASSTHROUGH, Kind.CRITERION):
            return self._module_call(node, node.func, kind, frame)
        function = self.analysis.function_named(callee) or self._local_function(node, frame)
        if function is not None:
            return self._inline(node, function, self._positional(node), frame)
        dunder_call = self._dunder_call(callee)
        if dunder_call is not None:
            return self._inline(node, dunder_call, self._positional(node), frame, bound=True)
        if callee.kind in (Kind.CLASS, Kind.OPTIMIZER):
            return self._data(node, frame)
        if isinstance(node.func, ast.Name):
            builtin = self._builtin_call(node, node.func.id, frame)
            if builtin is not None:
                return builtin
        modules = self._callee_modules(node.func, frame)
        if modules is not None:
            keys = {self.analysis.qualified_name(module.func) for module in modules}
            parameterless = bool(modules) and keys <= torch_api.PARAMETERLESS_MODULES
            key = keys.pop() if len(keys) == 1 else None
            arguments = _argument_values(node)
            return self._op(
                node, frame, key, arguments, kind=OriginKind.FORWARD, module=not parameterless
            )
        return self._unknown_call(node, frame)

    def _local_function(self, node: ast.Call, frame: _Frame) -> _Function | None:
        """The helper `def` of the enclosing function that `helper(...)` calls, when it is
        the only binding of its name there and it reads no name the enclosing function
        binds (evaluated in a frame of its own, a closure's variables would be unknown)."""
        func = node.func
        statement = self._statement_in(node, frame)
        if not isinstance(func, ast.Name) or statement is None:
            return None
        reaching = frame.bindings.reaching(func.id, statement) or frozenset()
        if len(reaching) != 1:
            return None
        (binding,) = reaching
        function = binding.target
        if not isinstance(function, FUNCTION_TYPES) or function is frame.scope:
            return None
        inside = self.analysis.bindings(function).final
        enclosing = frame.bindings.final
        for name in self.analysis.index.names.get(function, {}):
            if enclosing.get(name) and not inside.get(name):
                return None
        return function

    def _dunder_call(self, callee: Value) -> _Function | None:
        """`__call__` of the file's own class that `callee` is an instance of (a loss
        object): calling the instance runs it."""
        if callee.kind is not Kind.OBJECT or callee.cls not in self.analysis.index.classes:
            return None
        return self.analysis.index.classes[callee.cls].methods.get("__call__")

    def _callee_modules(self, func: ast.expr, frame: _Frame) -> list[ast.Call] | None:
        """The constructor calls of the modules `func` may be (`head` in `for head in [fc_a,
        fc_b]`, or in a loop over an `nn.ModuleList`: then the list is empty), or None when
        it may be something else."""
        constructors: list[ast.Call] = []
        for origin, _ in walk(self._expression(func, frame)):
            if origin.kind in (OriginKind.COLLECTION, OriginKind.ITEM, OriginKind.CHOICE):
                continue
            expression = origin.expression
            if origin.kind is OriginKind.ELEMENT:
                iterable = origin.inputs[0].expression
                if isinstance(iterable, ast.expr) and (
                    self.analysis.value_of(iterable).kind is Kind.MODULE
                    or self._module_kind(self.module_constructor(iterable)) is Kind.MODULE
                ):
                    return constructors  # elements of a ModuleList or Sequential
                continue
            if (
                origin.kind is OriginKind.DATA
                and isinstance(expression, ast.Call)
                and self._is_module_constructor(expression)
            ):
                constructors.append(expression)
                continue
            return None
        return constructors or None

    def _is_module_constructor(self, call: ast.Call) -> bool:
        return self._module_kind(call) in (Kind.MODULE, Kind.PASSTHROUGH)

    def _module_kind(self, constructor: ast.Call | None) -> Kind:
        """MODULE, PASSTHROUGH (parameterless) or CRITERION for a call that builds one."""
        if constructor is None:
            return Kind.UNKNOWN
        name = self.analysis.qualified_name(constructor.func) or ""
        short = name.rsplit(".", 1)[-1]
        if name.startswith("torch.nn.") and short[:1].isupper() and short != "Parameter":
            if short.endswith("Loss"):
                return Kind.CRITERION
            if name in torch_api.PARAMETERLESS_MODULES:
                return Kind.PASSTHROUGH
            return Kind.MODULE
        func = constructor.func
        if isinstance(func, ast.Name) and self.analysis.is_module_class(func.id):
            return Kind.MODULE
        return Kind.UNKNOWN

    def _torch_call(self, node: ast.Call, qualified: str, frame: _Frame) -> Origin:
        short = qualified.rsplit(".", 1)[-1]
        arguments = _argument_values(node)
        if qualified in torch_api.FUNCTIONAL_LOSSES:
            return self._op(node, frame, qualified, arguments, kind=OriginKind.LOSS)
        if qualified in torch_api.TENSOR_FACTORIES:
            requires = keyword_argument(node, "requires_grad")
            if is_true(requires):
                return self._leaf(node, frame)
            return self._data(node, frame)
        if short == "Parameter":
            return self._leaf(node, frame)
        if qualified in torch_api.GRAPH_LEAVING_FUNCTIONS or short[:1].isupper():
            return self._data(node, frame)  # modules, losses, optimizers are built, not run
        if qualified in torch_api.AUTOGRAD_FUNCTIONS:
            create = keyword_argument(node, "create_graph")
            if not is_true(create):
                return self._data(node, frame)
        return self._op(node, frame, qualified, arguments, _call_suffix(self, node, frame))

    def _method_call(self, node: ast.Call, func: ast.Attribute, frame: _Frame) -> Origin | None:
        method = func.attr
        receiver = self.analysis.value_of(func.value)
        if receiver.kind is Kind.MODULE and method == "forward":
            return self._module_call(node, func.value, Kind.MODULE, frame)
        if (
            receiver.kind in (Kind.OBJECT, Kind.MODULE)
            and receiver.cls in self.analysis.index.classes
        ):
            function = self.analysis.index.classes[receiver.cls].methods.get(method)
            if function is not None:
                return self._inline(node, function, self._positional(node), frame, bound=True)
        if receiver.kind in (Kind.LIST, Kind.TUPLE, Kind.DICT):
            if method in _ELEMENT_METHODS:
                return self._structure(
                    OriginKind.PART, node, frame, (self._expression(func.value, frame),)
                )
            return None
        if receiver.kind not in (Kind.TENSOR, Kind.UNKNOWN):
            return None
        if method in torch_api.GRAPH_LEAVING_METHODS:
            return self._data(node, frame)
        if method == "requires_grad_":
            if _has_arguments(node) and is_false(_argument_values(node)[0]):
                return self._data(node, frame)  # `requires_grad_(False)`
            return self._leaf(node, frame)
        arguments = _argument_values(node)
        if method == "scale" and receiver.kind is Kind.UNKNOWN and len(arguments) == 1:
            # `scaler.scale(loss)` (torch.amp.GradScaler) multiplies by the scale factor.
            return self._op(node, frame, "operator.mul", [arguments[0]])
        if _keyed_tensor_method(method):
            arguments = [func.value, *arguments]
            key = f"Tensor.{method}"
            return self._op(node, frame, key, arguments, _call_suffix(self, node, frame))
        return None

    def _builtin_call(self, node: ast.Call, name: str, frame: _Frame) -> Origin | None:
        if name in _NUMBER_BUILTINS or name == "range":
            return self._data(node, frame)
        arguments = _unnamed_values(node)
        if name in _COPYING_BUILTINS and len(arguments) == 1:
            return self._expression(arguments[0], frame)
        if name == "sum" and arguments:
            # A sum of tensors is a chain of additions over the elements.
            return self._op(node, frame, "operator.add", arguments)
        return None

    def _module_call(self, node: ast.Call, module: ast.expr, kind: Kind, frame: _Frame) -> Origin:
        """A call of a module or criterion instance: followed into `forward` when its class is
        in the file, expanded layer by layer for `nn.Sequential`, else one FORWARD/LOSS."""
        arguments = _argument_values(node)
        constructor = self.module_constructor(module)
        name = self.analysis.qualified_name(constructor.func) if constructor else None
        if constructor is not None and isinstance(constructor.func, ast.Name):
            info = self.analysis.index.classes.get(constructor.func.id)
            forward = info.methods.get("forward") if info is not None else None
            if forward is not None:
                return self._inline(node, forward, self._positional(node), frame, bound=True)
        if kind is Kind.CRITERION:
            return self._op(node, frame, name, arguments, kind=OriginKind.LOSS)
        if name == "torch.nn.Sequential" and constructor is not None and len(arguments) == 1:
            return self._sequential(node, constructor, arguments[0], frame)
        module = kind is Kind.MODULE
        return self._op(node, frame, name, arguments, kind=OriginKind.FORWARD, module=module)

    def _sequential(
        self, node: ast.Call, constructor: ast.Call, argument: ast.expr, frame: _Frame
    ) -> Origin:
        """`nn.Sequential(a, b, c)(x)` is `c(b(a(x)))`: one FORWARD per layer."""
        value = self._expression(argument, frame)
        for position, layer in enumerate(_argument_values(constructor)):
            layer_call = layer if isinstance(layer, ast.Call) else None
            key = self.analysis.qualified_name(layer_call.func) if layer_call else None
            parameterless = key in torch_api.PARAMETERLESS_MODULES
            previous = value
            value = self._memoised(
                frame,
                node,
                f"layer:{position}",
                lambda previous=previous, key=key, parameterless=parameterless: Origin(
                    OriginKind.FORWARD,
                    node,
                    frame.site or node,
                    key=key,
                    inputs=(previous,),
                    grad=self._grad_of(node, frame, [previous], parameters=not parameterless),
                    module=not parameterless,
                ),
            )
        return value

    def _inline(
        self,
        node: ast.Call,
        function: _Function,
        positional: list[ast.expr],
        frame: _Frame,
        bound: bool = False,
    ) -> Origin:
        """A call of the file's own function: the provenance of what its body returns."""
        if frame.depth >= _MAX_CALL_DEPTH or function in frame.functions:
            return self._unknown_call(node, frame)
        returned = _returned_values(self.analysis, function)
        if returned is None:
            return self._unknown_call(node, frame)
        params = [*function.args.posonlyargs, *function.args.args]
        if bound:
            params = params[1:]
        arguments = {
            param.arg: self._expression(value, frame)
            for param, value in zip(params, positional, strict=False)
        }
        for keyword in node.keywords:
            if keyword.arg is not None:
                arguments[keyword.arg] = self._expression(keyword.value, frame)
        inner = self._call_frame(frame, node, function, arguments)
        returned = self._returns_taken(function, returned, arguments) or returned
        values = tuple(self._expression(value, inner) for value in returned)
        if not values:
            return self._data(node, frame)
        if len(values) == 1:
            return values[0]
        return self._memoised(
            frame, node, "returns", lambda: self._structure(OriginKind.CHOICE, node, frame, values)
        )

    def _returns_taken(
        self, function: _Function, returned: list[ast.expr], arguments: dict[str, Origin]
    ) -> list[ast.expr]:
        """The returned values a call can reach when it passes a literal `True` or `False`
        for a flag the function branches on (`if get_features: return out, phi` then
        `return out`): the others sit in a branch the flag rules out, or after a branch that
        always returns."""
        flags: dict[str, bool] = {}
        for name, origin in arguments.items():
            literal = origin.expression
            if isinstance(literal, ast.Constant) and isinstance(literal.value, bool):
                flags[name] = literal.value

        def always_returns(block: list[ast.stmt]) -> bool:
            return bool(block) and isinstance(block[-1], ast.Return)

        def reachable(value: ast.expr) -> bool:
            child: ast.AST = value
            parent = self.analysis.parent(child)
            while parent is not None and child is not function:
                if isinstance(parent, ast.If) and isinstance(child, ast.stmt):
                    taken = _flag_value(parent.test, flags)
                    in_body = any(child is statement for statement in parent.body)
                    if taken is not None and taken is not in_body:
                        return False
                block = getattr(parent, self.analysis.index.field.get(child, ""), None)
                if isinstance(child, ast.stmt) and isinstance(block, list):
                    for earlier in block[: block.index(child)]:
                        if isinstance(earlier, ast.If):
                            taken = _flag_value(earlier.test, flags)
                            ends = earlier.body if taken else earlier.orelse
                            if taken is not None and always_returns(ends):
                                return False
                child, parent = parent, self.analysis.parent(parent)
            return True

        if not flags:
            return returned
        return [value for value in returned if reachable(value)]

    def _unknown_call(self, node: ast.Call, frame: _Frame) -> Origin:
        """A call gradfix cannot see into: its result may or may not come from its inputs."""
        if self.analysis.value_of(node).grad is Grad.FREE:
            return self._data(node, frame)  # the interpreter knows it leaves the graph
        inputs = _argument_values(node)
        if isinstance(node.func, ast.Attribute):
            inputs.insert(0, node.func.value)
        return self._op(node, frame, None, inputs, followed=False)

    # -- building origins ---------------------------------------------------------------
    def _op(
        self,
        node: ast.AST,
        frame: _Frame,
        key: str | None,
        arguments: list[ast.expr],
        suffixes: tuple[str, ...] = (),
        kind: OriginKind = OriginKind.OP,
        followed: bool = True,
        module: bool = False,
    ) -> Origin:
        inputs = tuple(self._expression(argument, frame) for argument in arguments)
        inputs = tuple(_flattened(inputs))
        return Origin(
            kind,
            node,
            frame.site or node,
            key=_table_key(key, suffixes),
            inputs=inputs,
            grad=self._grad_of(node, frame, list(inputs), parameters=module),
            followed=followed,
            module=module,
        )

    def _grad_of(
        self, node: ast.AST, frame: _Frame, inputs: list[Origin], parameters: bool
    ) -> Grad:
        if not frame.grad or not self.analysis.grad_enabled(node):
            return Grad.FREE
        if parameters:
            return Grad.ATTACHED
        grad = _combined(origin.grad for origin in inputs)
        # An input made without history may have been written in place with attached values
        # since (`buf = x.new_zeros(n, k); buf[:, :h] = lsm(y); lsm(buf[:, h:])`): provenance
        # does not follow writes, the interpreter does.
        if (
            grad is Grad.FREE
            and frame.depth == 0
            and isinstance(node, ast.expr)
            and self.analysis.value_of(node).grad is Grad.ATTACHED
        ):
            return Grad.ATTACHED
        return grad

    def _structure(
        self, kind: OriginKind, node: ast.AST, frame: _Frame, inputs: tuple[Origin, ...]
    ) -> Origin:
        combine = _joined if kind is OriginKind.CHOICE else _combined
        return Origin(
            kind, node, frame.site or node, inputs=inputs, grad=combine(i.grad for i in inputs)
        )

    def _data(self, node: ast.AST, frame: _Frame) -> Origin:
        return Origin(OriginKind.DATA, node, frame.site or node, grad=Grad.FREE)

    def _leaf(self, node: ast.AST, frame: _Frame) -> Origin:
        return Origin(OriginKind.LEAF, node, frame.site or node, grad=Grad.ATTACHED)

    def _unknown(self, node: ast.AST, frame: _Frame) -> Origin:
        grad = Grad.UNKNOWN
        if frame.depth == 0 and isinstance(node, ast.expr):
            grad = self.analysis.value_of(node).grad
        return Origin(OriginKind.UNKNOWN, node, frame.site or node, grad=grad)

    # -- helpers ------------------------------------------------------------------------
    def _statement_in(self, node: ast.AST, frame: _Frame) -> ast.AST | None:
        current: ast.AST | None = node
        while current is not None and current not in frame.bindings.before:
            current = self.analysis.parent(current)
        return current

    def _positional(self, node: ast.Call) -> list[ast.expr]:
        return [arg for arg in node.args if type(arg) is not ast.Starred]

    def _assigned_values(self, key: str, at: ast.AST) -> list[ast.expr]:
        """What the plain assignments of `key` reaching `at` assign (module level if the
        function does not bind it)."""
        bindings = self.reaching(key, at)
        if not bindings and not isinstance(self.analysis.scope_of(at), ast.Module):
            bindings = self.bindings(self.analysis.module).final.get(key, frozenset())
        values = []
        for binding in bindings:
            if binding.kind is not BindingKind.ASSIGN or binding.path or binding.value is None:
                return []
            if isinstance(binding.value, (ast.Name, ast.Attribute)):
                constructor = self.module_constructor(binding.value)
                if constructor is None:
                    return []
                values.append(constructor)
            else:
                values.append(binding.value)
        return values

    def _assigning_class(self, class_name: str, attribute: str) -> str | None:
        """The nearest class of `class_name`'s lineage that assigns `self.<attribute>` (a
        base class's `__init__` for an attribute its subclasses only read)."""
        for owner in self.analysis.lineage(class_name):
            for occurrence in self.analysis.self_attribute_occurrences(owner, attribute):
                if _assigns(self.analysis.parent(occurrence), occurrence):
                    return owner
        return None

    def _instantiations(self, class_name: str) -> list[ast.Call]:
        """The calls that run `class_name`'s `__init__`: of the class itself and of the
        file's subclasses that inherit that `__init__`."""
        classes = self.analysis.index.classes
        init = classes[class_name].methods.get("__init__")
        calls: list[ast.Call] = []
        for name, info in classes.items():
            # A class's methods include those it inherits from the file's classes.
            if class_name in self.analysis.lineage(name) and info.methods.get("__init__") is init:
                calls.extend(self.analysis.index.calls_by_name.get(name, []))
        return calls

    def _attribute_constructor(self, class_name: str, attribute: str) -> ast.Call | ast.Dict | None:
        """The call (or dict literal) `self.<attribute>` is assigned in `class_name`, when it
        is one."""
        if class_name not in self.analysis.index.classes:
            return None
        constructors: set[ast.Call | ast.Dict] = set()
        for occurrence in self.analysis.self_attribute_occurrences(class_name, attribute):
            assign = self.analysis.parent(occurrence)
            if _assigns(assign, occurrence):
                constructor = assign.value  # type: ignore[union-attr]
                if isinstance(constructor, ast.Name):  # `self.model = model` in __init__
                    constructor = self._passed_constructor(class_name, constructor, assign)  # type: ignore[arg-type]
                if not isinstance(constructor, (ast.Call, ast.Dict)):
                    return None
                constructors.add(constructor)
        return next(iter(constructors)) if len(constructors) == 1 else None

    def _passed_constructor(
        self, class_name: str, parameter: ast.Name, at: ast.AST
    ) -> ast.Call | ast.Dict | None:
        """The module (or dict literal of modules) every `ClassName(...)` call of the file
        passes for the `__init__` parameter `parameter` (`Trainer(Net(), ...)` gives `Net()`)."""
        init = self.analysis.index.classes[class_name].methods.get("__init__")
        if init is None or self.analysis.scope_of(at) is not init:
            return None
        params = [p.arg for p in (*init.args.posonlyargs, *init.args.args)][1:]
        bindings = self.reaching(parameter.id, at)
        if parameter.id not in params or any(b.kind is not BindingKind.PARAMETER for b in bindings):
            return None
        position = params.index(parameter.id)
        constructors: set[ast.Call | ast.Dict] = set()
        for call in self._instantiations(class_name):
            passed = _argument_for(call, position, parameter.id)
            if isinstance(passed, (ast.Name, ast.Attribute)):
                built = self._built(passed)
                passed = self._built_by_factory(built) if isinstance(built, ast.Call) else built
            if not isinstance(passed, (ast.Call, ast.Dict)):
                return None
            constructors.add(passed)
        return next(iter(constructors)) if len(constructors) == 1 else None


def _entry(table: ast.Dict, key: ast.expr) -> ast.Call | None:
    """The call a dict literal holds under the constant string `key`, when it holds one
    there and nothing is unpacked into it (`{**base, ...}` may replace it)."""
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)) or None in table.keys:
        return None
    found = [
        value
        for entry, value in zip(table.keys, table.values, strict=True)
        if isinstance(entry, ast.Constant) and entry.value == key.value
    ]
    return found[0] if len(found) == 1 and isinstance(found[0], ast.Call) else None


# -- walking provenance graphs ---------------------------------------------------------------
def walk(
    origin: Origin,
    certain_only: bool = False,
    stop: Callable[[Origin], bool] | None = None,
) -> Iterator[tuple[Origin, bool]]:
    """Every origin `origin` is made from (itself included), each once, with whether it is
    certainly part of it: not only through one alternative of a CHOICE or one element of a
    collection with several, nor through a call gradfix cannot see into. CARRIED and
    UNKNOWN origins end the walk, as do those `stop` accepts (after being yielded). With
    `certain_only`, uncertain ones are skipped."""
    seen: dict[Origin, bool] = {}
    stack = [(origin, True)]
    while stack:
        current, certain = stack.pop()
        if current in seen and (seen[current] or not certain):
            continue
        seen[current] = certain
        if certain_only and not certain:
            continue
        yield current, certain
        if stop is None or not stop(current):
            for child in current.inputs:
                stack.append((child, certain and _certain_edge(current)))
            if certain and current.kind is OriginKind.CHOICE:
                base = _base_alternative(current)
                if base is not None:
                    stack.append((base, True))


def reachable_graph_nodes(origin: Origin, certain_only: bool = False) -> set[Origin]:
    """The autograd nodes (attached OP / FORWARD / LOSS origins) in `origin`'s graph."""
    return {node for node, _ in walk(origin, certain_only) if node.is_graph_node}


# How far `_base_alternative` looks into each alternative: a conditional rebinding
# (`if ignore_grad: loss = loss * 0`) builds on the previous value within a few operations.
_BASE_SEARCH_LIMIT = 32
_BASES: weakref.WeakKeyDictionary[Origin, Origin | None] = weakref.WeakKeyDictionary()


def _base_alternative(choice: Origin) -> Origin | None:
    """The alternative of `choice` that every other alternative is certainly made from: the
    value before a conditional rebinding that builds on it (`loss` in `if scale: loss =
    loss * s`). Whichever branch ran, the value holds it, so it is certainly part of it."""
    if choice in _BASES:
        return _BASES[choice]
    found = choice.inputs[0] if len(choice.inputs) == 1 else None  # one branch could run
    for candidate in choice.inputs if found is None else ():
        others = [other for other in choice.inputs if other is not candidate]
        if others and all(_certainly_made_from(other, candidate) for other in others):
            found = candidate
            break
    _BASES[choice] = found
    return found


def _certainly_made_from(origin: Origin, base: Origin) -> bool:
    """Whether `base` is reached from `origin` through certain edges, within a few steps."""
    seen = {origin}
    frontier = [origin]
    while frontier and len(seen) <= _BASE_SEARCH_LIMIT:
        current = frontier.pop()
        if current is base:
            return True
        if not _certain_edge(current):
            continue
        for child in current.inputs:
            if child not in seen:
                seen.add(child)
                frontier.append(child)
    return False


def _certain_edge(origin: Origin) -> bool:
    if origin.kind is OriginKind.CHOICE or not origin.followed:
        return False
    if origin.kind is OriginKind.ELEMENT:
        collection = origin.inputs[0]
        return collection.kind is OriginKind.COLLECTION and len(collection.inputs) == 1
    return True


def evaluated_in(origin: Origin, region: ast.AST, analysis: FileAnalysis) -> bool:
    """Whether `origin` is evaluated inside `region` (a loop or a comprehension): each
    iteration then makes a new one. A loop's or comprehension's own ELEMENT is per iteration."""
    if origin.kind is OriginKind.ELEMENT:
        return origin.repeats_in is region or _inside(origin.repeats_in, region, analysis)
    if isinstance(region, _LOOPS):  # its body, not its target, iterable or test
        return origin.site is not None and _inside_body(origin.site, region, analysis)
    return origin.site is not None and _inside(origin.site, region, analysis)


def saves_tensors(origin: Origin) -> bool | None:
    """Whether the autograd node of `origin` holds saved tensors (so that a backward frees them
    and a second backward through it fails); None when gradfix does not know.

    Read from the op table; where it has no entry, a module with parameters is taken to save
    (every layer that multiplies an input by a weight saves that input) and a loss to save its
    input (its gradient depends on it). Structure (PART, ITEM, ...) and leaves save nothing."""
    if origin.kind not in GRAPH_NODE_KINDS:
        return False
    known = saved_ops.saves_anything(origin.key) if origin.key is not None else None
    if known is not None:
        return known
    if origin.kind is OriginKind.LOSS or (origin.kind is OriginKind.FORWARD and origin.module):
        return True
    return None


# -- syntax helpers ----------------------------------------------------------------------------
def _inside(node: ast.AST | None, region: ast.AST | None, analysis: FileAnalysis) -> bool:
    if node is None or region is None:
        return False
    start, end = analysis.index.start, analysis.index.end
    if node in start and region in start:  # by source order: deep nesting costs nothing
        return start[region] <= start[node] and end[node] <= end[region]
    current: ast.AST | None = node
    while current is not None:
        if current is region:
            return True
        current = analysis.parent(current)
    return False


def _inside_body(node: ast.AST, loop: ast.AST, analysis: FileAnalysis) -> bool:
    """Whether `node` is in a statement of `loop.body` (not its `else`, target, iterable or
    test): the body's statements are one stretch of the source order."""
    body = getattr(loop, "body", None)
    start, end = analysis.index.start, analysis.index.end
    if not body or node not in start:
        return False
    return start[body[0]] <= start[node] and end[node] <= end[body[-1]]


def _comprehension_binding(
    analysis: FileAnalysis, node: ast.AST, key: str
) -> tuple[ast.comprehension, tuple[int, ...]] | None:
    """The comprehension `for` whose target binds `key` where `node` reads it, and where in
    the target (`for i, x in ...` binds `x` at (1,))."""
    child, current = node, analysis.parent(node)
    while current is not None and not isinstance(current, ast.stmt):
        if type(current) in _COMPREHENSIONS:
            for comp_for in current.generators:  # type: ignore[attr-defined]
                if child is comp_for.iter:
                    break  # the first iterable is evaluated outside the comprehension
                path = _target_path(comp_for.target, key)
                if path is not None:
                    return comp_for, path
        child, current = current, analysis.parent(current)
    return None


def _target_path(target: ast.expr, key: str) -> tuple[int, ...] | None:
    if target_key(target) == key:
        return ()
    if isinstance(target, (ast.Tuple, ast.List)):
        for position, element in enumerate(target.elts):
            inner = _target_path(_unstarred(element), key)
            if inner is not None:
                return (position, *inner)
    return None


def _lambda_parameter(analysis: FileAnalysis, node: ast.AST, key: str) -> bool:
    current = analysis.parent(node)
    while current is not None and not isinstance(current, ast.stmt):
        if type(current) is ast.Lambda and any(
            param.arg == key
            for param in current.args.args  # type: ignore[attr-defined]
        ):
            return True
        current = analysis.parent(current)
    return False


def _binding_tag(tag: str, binding: Binding) -> str:
    """The memo tag of an origin made for `binding`: with its name when its target is a node
    that may bind several (`global a, b`), which LibCST gave a `Name` each."""
    return tag if isinstance(binding.target, ast.expr) else f"{tag}:{binding.key}"


def _name_value(analysis: FileAnalysis, holder: ast.AST, name: str) -> Value:
    """What the interpreter knows of the variable `name` just before the statement of
    `holder` (the node that binds it without an `ast.Name`)."""
    statement = analysis.statement_of(holder)
    if statement is None:
        return Value()
    grad = analysis.grad_enabled(statement)
    interpreter = analysis._interpreter(analysis.scope_of(statement), grad)
    variable = ast.Name(id=name, ctx=ast.Load())
    return interpreter.value(variable, analysis.env_before(statement), grad)


def _returned_values(analysis: FileAnalysis, function: _Function) -> list[ast.expr] | None:
    """The expressions `function` returns (None for a generator, which gradfix does not
    follow); a bare `return` returns nothing worth following."""
    values: list[ast.expr] = []
    for statement in function.body:
        for node in analysis.descendants(statement):
            kind = type(node)  # by class: `is`, cheaper than `isinstance`
            if (
                kind is ast.Return or kind is ast.Yield or kind is ast.YieldFrom
            ) and analysis.scope_of(node) is function:
                if kind is not ast.Return:
                    return None
                if node.value is not None:  # type: ignore[attr-defined]
                    values.append(node.value)  # type: ignore[attr-defined]
    return values


def _argument_for(call: ast.Call, position: int, name: str) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    positional = [arg for arg in call.args if type(arg) is not ast.Starred]
    return positional[position] if position < len(positional) else None


def call_arguments(call: ast.Call) -> list[tuple[ast.expr, bool]]:
    """Every argument of `call` in source order, each with whether it is passed by name: a
    positional one, `x` of `*x`, the value of `k=v` (True), `kw` of `**kw`. The inputs of a
    call's origin are made from these, in this order (after the receiver for a method)."""
    arguments: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
    if call.keywords and call.args and type(call.args[-1]) is ast.Starred:
        # `f(a=1, *rest)`: a `*` may follow keywords
        arguments.sort(key=lambda node: (node.lineno, node.col_offset))
    return [
        (node.value, node.arg is not None)
        if type(node) is ast.keyword
        else (_unstarred(node), False)  # type: ignore[arg-type]
        for node in arguments
    ]


def _argument_values(call: ast.Call) -> list[ast.expr]:
    """Every argument's value, in source order (`call_arguments`)."""
    if not call.keywords:
        return [_unstarred(arg) for arg in call.args]
    return [value for value, _ in call_arguments(call)]


def _unnamed_values(call: ast.Call) -> list[ast.expr]:
    """The values of the arguments passed without a name: positional ones, `x` of `*x` and
    `kw` of `**kw`."""
    values = [_unstarred(arg) for arg in call.args]
    values.extend(keyword.value for keyword in call.keywords if keyword.arg is None)
    return values


def _has_arguments(call: ast.Call) -> bool:
    return bool(call.args or call.keywords)


def _unstarred(node: ast.expr) -> ast.expr:
    """`x` for `*x` (in a call, a literal or a target), else `node`."""
    return node.value if type(node) is ast.Starred else node  # type: ignore[attr-defined]


def _is_int_literal(node: ast.expr | None) -> bool:
    return type(node) is ast.Constant and type(node.value) is int  # type: ignore[union-attr]


def _assigns(statement: ast.AST | None, target: ast.AST) -> bool:
    """Whether `statement` is a plain assignment with `target` as one of its targets."""
    return type(statement) is ast.Assign and any(
        t is target
        for t in statement.targets  # type: ignore[union-attr]
    )


def _subscript_elements(node: ast.Subscript, analysis: FileAnalysis) -> list[ast.expr]:
    """The comma-separated parts of a subscript: `i, j` in `a[i, j]` (but the one tuple of
    `a[(i, j)]`), `1:` in `a[1:]`."""
    index = node.slice
    if type(index) is ast.Tuple and not _parenthesized_tuple(index, analysis):
        return list(index.elts)  # type: ignore[attr-defined]
    return [index]


def _parenthesized_tuple(node: ast.Tuple, analysis: FileAnalysis) -> bool:
    """Whether the tuple's code is one pair of parentheses around it (`(i, j)`, `()`), which
    `ast` counts in its range: not `(i), j` nor `(i, j)[0], k`."""
    code = analysis.code_of(node)  # on one line
    if not (code.startswith("(") and code.endswith(")")):
        return False
    if "#" in code:  # a comment, or a `#` in a string: the exact lines (rare)
        code = ast.get_source_segment(analysis.source, node) or code
    lines = code.splitlines()
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type != tokenize.OP or token.string not in ("(", ")", "[", "]", "{", "}"):
                continue
            depth += 1 if token.string in ("(", "[", "{") else -1
            if depth == 0:  # the first parenthesis closes here: at the end only if it wraps
                return token.end == (len(lines), len(lines[-1]))
    except (tokenize.TokenError, SyntaxError):
        return False
    return False


def _single_index(node: ast.Subscript, analysis: FileAnalysis) -> ast.expr | None:
    elements = _subscript_elements(node, analysis)
    if len(elements) == 1 and type(elements[0]) is not ast.Slice:
        return elements[0]
    return None


def _is_python_number(provenance: Provenance, node: ast.expr) -> bool:
    if type(node) is ast.Constant and type(node.value) in (int, float):  # not a bool
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _is_python_number(provenance, node.operand)
    return provenance.analysis.value_of(node).kind is Kind.NUMBER


def _is_python_int(provenance: Provenance, node: ast.expr) -> bool:
    """An integer index: a literal, a number value, a `range` / `enumerate` counter, or
    integer arithmetic on those (`t - 1`)."""
    if _is_python_number(provenance, node):
        return True
    if isinstance(node, ast.Name):
        bindings = provenance.reaching(node.id, node)
        return bool(bindings) and all(_counts(binding) for binding in bindings)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _INT_OPERATORS):
        return _is_python_int(provenance, node.left) and _is_python_int(provenance, node.right)
    return False


def _counts(binding: Binding) -> bool:
    """Whether a loop target binding takes the numbers of `range(...)` or of `enumerate`."""
    value = binding.value
    if binding.kind is not BindingKind.LOOP_TARGET or not isinstance(value, ast.Call):
        return False
    if not isinstance(value.func, ast.Name):
        return False
    if value.func.id == "range":
        return True
    return value.func.id == "enumerate" and binding.path[:1] == (0,)


def _scalar_suffix(
    provenance: Provenance,
    left: ast.expr,
    right: ast.expr,
    reflected: bool = True,
) -> tuple[str, ...]:
    """`[scalar]` for `tensor op number`, `[rscalar]` for `number op tensor`."""
    if _is_python_number(provenance, right) and not _is_python_number(provenance, left):
        return ("[scalar]",)
    if reflected and _is_python_number(provenance, left):
        return ("[rscalar]",)
    return ()


def _call_suffix(provenance: Provenance, node: ast.Call, frame: _Frame) -> tuple[str, ...]:
    """The op-table variants a call may be, most specific first: `[dim]` for reductions over
    a dimension, `[scalar]` for a number operand, `[min]` for a one-sided clamp."""
    positional = _unnamed_values(node)
    keywords = {keyword.arg for keyword in node.keywords if keyword.arg is not None}
    method = isinstance(node.func, ast.Attribute) and not isinstance(
        provenance.analysis.qualified_name(node.func), str
    )
    operands = positional if method else positional[1:]
    suffixes = []
    if "dim" in keywords or (operands and _is_python_int(provenance, operands[0])):
        suffixes.append("[dim]")
    if operands and _is_python_number(provenance, operands[0]):
        suffixes.append("[scalar]")
    if len(operands) == 1 and not _is_python_number(provenance, operands[0]):
        suffixes.append("[other]")
    if keywords == {"min"}:
        suffixes.append("[min]")
    return tuple(suffixes)


def _index_suffix(provenance: Provenance, node: ast.Subscript, frame: _Frame) -> str:
    """`operator.getitem` for basic indexing (numbers, slices, None, Ellipsis), which saves
    nothing; `[mask]` / `[tensor-index]` for advanced indexing, which saves the index; `[?]`
    (not in the table) when gradfix cannot tell."""
    suffix = ""
    for value in _subscript_elements(node, provenance.analysis):
        if isinstance(value, ast.Slice):
            continue
        if isinstance(value, ast.Constant) and (value.value is Ellipsis or value.value is None):
            continue
        if _is_python_int(provenance, value):
            continue
        if isinstance(value, ast.Compare) or (
            isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Invert)
        ):
            suffix = "[mask]"
        elif provenance.analysis.value_of(value).kind is Kind.TENSOR:
            suffix = suffix or "[tensor-index]"
        else:
            return "[?]"
    return suffix


# Keys the op table cannot measure, looked up as an equivalent it has: the CPU build of torch
# cannot run `.cuda()`, whose backward node is the same device copy as `.cpu()`'s.
_KEY_ALIASES = {"Tensor.cuda": "Tensor.cpu"}


def _keyed_tensor_method(method: str) -> bool:
    """A tensor method that provenance makes an op keyed `Tensor.<method>`."""
    return method in torch_api.GRAPH_KEEPING_METHODS or (
        saved_ops.op_saving(f"Tensor.{method}") is not None
    )


def _operator_key(node: ast.BinOp) -> str | None:
    name = _BINARY_OPERATORS.get(type(node.op))
    return f"operator.{name}" if name else None


def _table_key(key: str | None, suffixes: tuple[str, ...]) -> str | None:
    """The most specific variant of `key` the op table lists, else `key` itself."""
    if key is None:
        return None
    key = _KEY_ALIASES.get(key, key)
    for suffix in suffixes:
        if saved_ops.op_saving(key + suffix) is not None:
            return key + suffix
    return key


def _flattened(inputs: tuple[Origin, ...]) -> Iterator[Origin]:
    """Arguments that are literal lists of tensors (`torch.cat([a, b])`) are their tensors."""
    for origin in inputs:
        literal = origin.kind is OriginKind.COLLECTION and all(
            item.repeats_in is None for item in origin.inputs
        )
        if literal:
            yield from (item.inputs[0] for item in origin.inputs)
        else:
            yield origin


def _combined(grads: Iterator[Grad]) -> Grad:
    result = Grad.FREE
    for grad in grads:
        result = result.combine(grad)
    return result


def _joined(grads: Iterator[Grad]) -> Grad:
    result: Grad | None = None
    for grad in grads:
        result = grad if result is None else result.join(grad)
    return result if result is not None else Grad.UNKNOWN


def _flag_value(test: ast.expr, flags: dict[str, bool]) -> bool | None:
    """What an `if` test is when each name of `flags` holds its flag (`flag`, `not flag`);
    None for any other test. (A loop, not a closure calling itself: that closure was a
    reference cycle for the collector.)"""
    negated = False
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negated = test.operand, not negated
    value = flags.get(test.id) if isinstance(test, ast.Name) else None
    return None if value is None else value is not negated
