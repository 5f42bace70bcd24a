"""Where a stored value goes next: followed forward through names, `self` attributes,
containers, arithmetic and calls into this file's functions, until it is differentiated,
consumed as a number, needed as a tensor, or leaves what gradfix can see."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from enum import Enum

from codemods.analysis import FileAnalysis, Function, Kind, torch_api
from codemods.analysis.index import ScopeNode
from codemods.analysis.interpreter import target_key

_MAX_DEPTH = 24

# Container methods that change the container in place: no value leaves through them.
_MUTATING_METHODS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "clear",
        "remove",
        "sort",
        "reverse",
        "setdefault",
        "update",
        "add",
        "discard",
    }
)
# Tensor methods returning `(values, indices)` when unpacked (with a `dim`).
_VALUES_AND_INDICES = frozenset({"topk", "sort", "max", "min", "median", "mode", "kthvalue"})
# Builtins that only iterate their arguments.
_ITERATING_BUILTINS = frozenset(
    {"zip", "enumerate", "iter", "reversed", "sorted", "list", "tuple", "set"}
)
# Container methods through which elements come out.
_ELEMENT_METHODS = frozenset({"pop", "copy", "get", "values", "items", "popleft"})


class Use(Enum):
    DIFFERENTIATED = "reaches backward()"
    NEEDS_TENSOR = "is used as a tensor"
    RETURNED_UNSEEN = "is returned to callers outside this file"
    UNKNOWN_CONSUMER = "is passed to code gradfix cannot see"


@dataclass
class Flow:
    """Where a value goes: how it is used, and the backward calls it reaches."""

    uses: set[Use] = field(default_factory=set)
    backward_calls: list[ast.Call] = field(default_factory=list)
    # Backward calls reached only through the newest element (`losses[-1].backward()`): they
    # differentiate one entry, not what the container keeps.
    newest_element_calls: list[ast.Call] = field(default_factory=list)


def follow_target(analysis: FileAnalysis, target: ast.expr | ast.arg) -> Flow:
    """Where a value stored into `target` (`x`, `self.x`, `d[k]`) goes next. Following a
    variable visits all of its occurrences in its scope, whichever binding is asked about, so
    that answer is kept per variable: a script of many steps asks it once per step."""
    name = target.id if isinstance(target, ast.Name) else getattr(target, "arg", None)
    key = (name, analysis.scope_of(target)) if name is not None else None
    known = analysis.variable_flows.get(key) if key is not None else None
    if known is not None:
        return Flow(set(known.uses), list(known.backward_calls), list(known.newest_element_calls))
    follower = _Follower(analysis)
    uses = follower.of_target(target, depth=0)
    flow = Flow(uses, follower.backward_calls, follower.newest_element_calls)
    if key is not None:
        analysis.variable_flows[key] = Flow(
            set(flow.uses), list(flow.backward_calls), list(flow.newest_element_calls)
        )
    return flow


def follow_self_attribute(analysis: FileAnalysis, class_name: str, attribute: str) -> Flow:
    """Where values stored into `self.<attribute>` of `class_name` go next."""
    follower = _Follower(analysis)
    uses = follower.of_self_attribute(class_name, attribute, depth=0)
    return Flow(uses, follower.backward_calls)


def follow_expression(analysis: FileAnalysis, expression: ast.expr) -> Flow:
    """Where the value of `expression` goes."""
    follower = _Follower(analysis)
    uses = follower.of_expression(expression, depth=0)
    return Flow(uses, follower.backward_calls)


# An argument of a call: an expression in `call.args` (`Starred` for `*xs`) or a `keyword`.
Argument = ast.expr | ast.keyword

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_CONTAINERS = (ast.List, ast.Tuple, ast.Set)
_NO_FLOW = (
    ast.Compare,
    ast.BoolOp,
    ast.If,
    ast.While,
    ast.Assert,
    ast.FormattedValue,
    ast.Expr,
    ast.Delete,
)


class _Follower:
    """One question's walk: remembers what it followed so that cycles end."""

    def __init__(self, analysis: FileAnalysis) -> None:
        self.analysis = analysis
        self._followed: set[object] = set()  # names and attributes already followed
        self.backward_calls: list[ast.Call] = []
        self.newest_element_calls: list[ast.Call] = []
        # scope -> names it declares `global`/`nonlocal`, gathered when first needed
        self._declarations: dict[ScopeNode, set[str]] | None = None

    def of_name(self, name: str, scope: ScopeNode, depth: int) -> set[Use]:
        if (name, scope) in self._followed:
            return set()
        self._followed.add((name, scope))
        uses: set[Use] = set()
        if self._declared_outer(name, scope):
            uses.add(Use.UNKNOWN_CONSUMER)  # `global x`: other scopes read it too
        for occurrence in self.analysis.occurrences(name, scope):
            if self.analysis.is_load(occurrence):
                uses |= self.of_expression(occurrence, depth + 1)
        return uses

    def _declared_outer(self, name: str, scope: ScopeNode) -> bool:
        """Whether `scope` declares `name` `global` or `nonlocal`."""
        if self._declarations is None:
            self._declarations = {}
            for declaration in self.analysis.index.of_types(ast.Global, ast.Nonlocal):
                declared = self._declarations.setdefault(self.analysis.scope_of(declaration), set())
                declared.update(declaration.names)  # type: ignore[attr-defined]
        return name in self._declarations.get(scope, ())

    def of_self_attribute(self, class_name: str, attribute: str, depth: int) -> set[Use]:
        """Reads of `self.<attribute>` in the class, in its bases (whose methods run on the
        same object: `self.losses` filled by a subclass, summed by the base's step) and in
        the classes deriving from it, and of `obj.<attribute>` where an instance of one of
        them is held (`self.loss_sum.total`)."""
        uses: set[Use] = set()
        for owner in self.analysis.class_family(class_name):
            if (owner, attribute) in self._followed:
                continue
            self._followed.add((owner, attribute))
            occurrences = [
                *self.analysis.self_attribute_occurrences(owner, attribute),
                *self.analysis.held_attribute_occurrences(owner, attribute),
            ]
            for occurrence in occurrences:
                if self.analysis.is_load(occurrence):
                    uses |= self.of_expression(occurrence, depth + 1)
        return uses

    def of_target(self, target: ast.expr | ast.arg, depth: int) -> set[Use]:
        """Where a value stored into `target` goes next."""
        scope = self.analysis.scope_of(target)
        if isinstance(target, ast.Name):
            return self.of_name(target.id, scope, depth)
        if isinstance(target, ast.arg):  # a parameter: what its function does with it
            return self.of_name(target.arg, scope, depth)
        if isinstance(target, ast.Subscript):
            return self.of_target(target.value, depth)
        if isinstance(target, (ast.Tuple, ast.List)):
            uses: set[Use] = set()
            for element in target.elts:
                uses |= self.of_target(_unstarred(element), depth)
            return uses
        if isinstance(target, ast.Starred):
            return self.of_target(target.value, depth)
        key = target_key(target)
        info = self.analysis.class_of(scope)
        if key is not None and key.startswith("self.") and info is not None:
            return self.of_self_attribute(info.name, key[5:], depth)
        return {Use.UNKNOWN_CONSUMER}

    def of_expression(self, node: ast.AST, depth: int = 0) -> set[Use]:
        """Where the value of the expression `node` goes."""
        if depth > _MAX_DEPTH:
            return {Use.UNKNOWN_CONSUMER}
        parent = self.analysis.parent(node)
        if parent is None:
            return set()
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return self._method_or_attribute(parent, depth)
        if isinstance(parent, ast.Call) and parent.func is not node:
            return self._argument(parent, node, depth)  # type: ignore[arg-type]
        if isinstance(parent, ast.keyword):
            call = self.analysis.parent(parent)
            if isinstance(call, ast.Call):
                return self._argument(call, parent, depth)
            return {Use.UNKNOWN_CONSUMER}  # `class C(metaclass=M)`
        if isinstance(parent, ast.Starred) and isinstance(self.analysis.parent(parent), ast.Call):
            return self._argument(self.analysis.parent(parent), parent, depth)  # type: ignore[arg-type]
        if isinstance(parent, (ast.BinOp, ast.UnaryOp)) and self._no_grad(node):
            return {Use.NEEDS_TENSOR}
        if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.IfExp, ast.Starred)):
            return self.of_expression(parent, depth + 1)
        if isinstance(parent, _CONTAINERS):
            # two steps for an item (container, element), one for a starred item, as before
            step = 1 if type(node) is ast.Starred else 2
            return self.of_expression(parent, depth + step)
        if isinstance(parent, ast.Dict):
            if any(key is None and value is node for key, value in _entries(parent)):
                return {Use.UNKNOWN_CONSUMER}  # `{**d}`
            return self.of_expression(parent, depth + 2)
        if isinstance(parent, ast.Subscript):
            if parent.value is not node:
                return set()
            before = len(self.backward_calls)
            uses = self.of_expression(parent, depth + 1)
            if _is_newest_index(parent.slice):
                self.newest_element_calls.extend(self.backward_calls[before:])
            return uses
        if isinstance(parent, _NO_FLOW):
            return set()
        if isinstance(parent, ast.AnnAssign) and parent.annotation is node:
            return {Use.UNKNOWN_CONSUMER}  # an annotation (LibCST wrapped it in a node)
        if isinstance(parent, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and (
            parent.value is not node
        ):
            return set()  # stored into (`d[k] = ...`, `d[k] += 1`): nothing flows out
        if isinstance(parent, ast.Return):
            return self._returned(node, depth)
        if isinstance(parent, (ast.Yield, ast.Await, ast.Lambda)):
            return {Use.RETURNED_UNSEEN}  # (`yield from x` is an unknown consumer, as before)
        if isinstance(parent, ast.Assign) and parent.value is node:
            uses: set[Use] = set()
            for target in parent.targets:
                uses |= self.of_target(_graph_part(node, target), depth + 1)
            return uses
        if isinstance(parent, (ast.AugAssign, ast.AnnAssign)) and parent.value is node:
            return self.of_target(parent.target, depth + 1)
        if (
            isinstance(parent, (ast.For, ast.AsyncFor, ast.comprehension))
            and parent.iter is node
            and self.analysis.value_of(node).kind is Kind.DICT  # type: ignore[arg-type]
        ):
            return set()  # iterating a dict gives its keys, not what it stores
        if isinstance(parent, (ast.For, ast.AsyncFor)) and parent.iter is node:
            return self.of_target(parent.target, depth + 1)
        if isinstance(parent, ast.comprehension) and parent.iter is node:
            return self._comprehension(parent, depth)
        if _element_of(parent, node):
            return self.of_expression(parent, depth + 1)  # the elements flow on
        return {Use.UNKNOWN_CONSUMER}

    # -- the cases ----------------------------------------------------------------------
    def _method_or_attribute(self, attribute: ast.Attribute, depth: int) -> set[Use]:
        name = attribute.attr
        call = self.analysis.parent(attribute)
        called = isinstance(call, ast.Call) and call.func is attribute
        if name == "backward":
            if isinstance(call, ast.Call):
                self.backward_calls.append(call)
            return {Use.DIFFERENTIATED}
        if called and name in _MUTATING_METHODS:
            return set()
        if called and name in _ELEMENT_METHODS:
            return self.of_expression(call, depth + 1)  # type: ignore[arg-type]
        if name in torch_api.TO_PYTHON_METHODS or (called and self._no_grad(attribute)):
            return {Use.NEEDS_TENSOR}
        if called and name in torch_api.GRAPH_LEAVING_METHODS:
            return {Use.NEEDS_TENSOR}  # `h.detach()`: what goes on carries no graph
        result = call if called else attribute
        return {Use.NEEDS_TENSOR} | self.of_expression(result, depth + 1)  # type: ignore[arg-type]

    def _argument(self, call: ast.Call, arg: Argument, depth: int) -> set[Use]:
        func = call.func
        qualified = self.analysis.qualified_name(func) or ""
        if qualified in torch_api.AUTOGRAD_FUNCTIONS or (
            isinstance(func, ast.Attribute) and func.attr == "backward"
        ):
            self.backward_calls.append(call)
            return {Use.DIFFERENTIATED}
        head = qualified.split(".")[0] if qualified else ""
        simple = func.id if isinstance(func, ast.Name) else None
        if simple in torch_api.NUMERIC_CONSUMERS or head in ("math", "numpy", "statistics"):
            return set()
        if isinstance(func, ast.Attribute) and func.attr in _MUTATING_METHODS:
            # `xs.append(v)`, `d.setdefault(k, []).append(v)`: v goes where xs (d) goes
            return self.of_target(through_setdefault(func.value), depth + 1)
        if self._written_into_tensor(func):
            # `host.copy_(v)`, `total.add_(v)`: v's data (and graph) go into `host`, which
            # the call also returns
            uses = self.of_target(func.value, depth + 1)  # type: ignore[attr-defined]
            return {Use.NEEDS_TENSOR} | uses | self.of_expression(call, depth + 1)
        if self._dict_lookup(func):
            # `d.get(key, default)`: the key is only hashed; the default may be the result.
            return set() if _first_argument(call) is arg else self.of_expression(call, depth + 1)
        if (
            simple in _ITERATING_BUILTINS
            and self.analysis.value_of(_argument_value(arg)).kind is Kind.DICT
        ):
            return set()  # `zip(d, ...)`, `enumerate(d)`: iterating a dict gives its keys
        if (
            simple in _ITERATING_BUILTINS
            or simple in torch_api.ITERABLE_REDUCERS
            or qualified in torch_api.COPIES
        ):
            return self.of_expression(call, depth + 1)  # the elements come out of the result
        logging = isinstance(func, ast.Attribute) and func.attr in torch_api.LOGGING_METHODS
        if logging and head != "torch":  # `logger.log(loss)` logs; `torch.log(p)` computes
            return set()
        if head == "torch":
            if self._no_grad(call):
                return {Use.NEEDS_TENSOR}  # computed under `no_grad`: the result has no graph
            return {Use.NEEDS_TENSOR} | self.of_expression(call, depth + 1)
        callee = self.analysis.value_of(func)
        if callee.kind in (Kind.MODULE, Kind.PASSTHROUGH, Kind.CRITERION):
            if self._no_grad(call):
                return {Use.NEEDS_TENSOR}
            return self.of_expression(call, depth + 1)  # a forward: the output carries it
        local = self._into_local_function(call, arg, depth)
        if local is not None:
            return local
        return {Use.UNKNOWN_CONSUMER} | self.of_expression(call, depth + 1)

    def _no_grad(self, node: ast.AST) -> bool:
        """Whether `node` is evaluated with grad disabled (`with torch.no_grad():`, a
        `@torch.no_grad()` function): what an operation makes there carries no graph."""
        return self.analysis.statement_of(node) is not None and not self.analysis.grad_enabled(node)

    def _written_into_tensor(self, func: ast.expr) -> bool:
        """`dst.copy_`, `dst.add_`: a method writing the data of a proven tensor in place."""
        return (
            isinstance(func, ast.Attribute)
            and torch_api.writes_data(func.attr)
            and self.analysis.value_of(func.value).kind is Kind.TENSOR
        )

    def _dict_lookup(self, func: ast.expr) -> bool:
        return (
            isinstance(func, ast.Attribute)
            and func.attr == "get"
            and self.analysis.value_of(func.value).kind is Kind.DICT
        )

    def _into_local_function(self, call: ast.Call, arg: Argument, depth: int) -> set[Use] | None:
        """Follow an argument into a function of this file, or a method of an object of one
        of its classes (`self.progress.finish_epoch(totals)`): its uses there, and, when the
        function returns it, the uses of the call's result."""
        function = self._local_callee(call)
        if function is None or isinstance(arg, ast.Starred):
            return None
        params = self.analysis.passed_parameters(function)
        if isinstance(arg, ast.keyword):
            named = [*params, *function.args.kwonlyargs]
            param = next((p for p in named if p.arg == arg.arg), None)
        else:
            position = next(i for i, passed in enumerate(call.args) if passed is arg)
            param = params[position] if position < len(params) else None
        if param is None:
            return None
        inner = self.of_name(param.arg, function, depth + 1)
        if Use.RETURNED_UNSEEN in inner:
            inner.discard(Use.RETURNED_UNSEEN)
            inner |= self.of_expression(call, depth + 1)
        return inner

    def _local_callee(self, call: ast.Call) -> Function | None:
        """The function of this file that `call` runs: a function by name, or a method of an
        object whose class the file defines (found through its bases)."""
        function = self.analysis.function_named(self.analysis.value_of(call.func))
        if function is not None or not isinstance(call.func, ast.Attribute):
            return function
        receiver = self.analysis.value_of(call.func.value)
        info = self.analysis.index.classes.get(receiver.cls or "")
        if receiver.kind not in (Kind.OBJECT, Kind.MODULE) or info is None:
            return None
        return info.methods.get(call.func.attr)

    def _returned(self, node: ast.AST, depth: int) -> set[Use]:
        """A returned value goes wherever the function's callers in this file put it."""
        function = self.analysis.scope_of(node)
        if not isinstance(function, _FUNCTIONS):
            return {Use.RETURNED_UNSEEN}
        calls = [
            call
            for call in self.analysis.index.calls_by_name.get(function.name, [])
            if not self._tensor_method_call(call)
        ]
        if function.name == "forward":
            calls += self.analysis.module_calls(self.analysis.class_of(function))
        reads: list[ast.AST] = []
        if self._is_property(function):
            # `meter.avg` runs the property: its reads are its calls
            reads = [
                attribute
                for attribute in self.analysis.index.of_types(ast.Attribute)
                if attribute.attr == function.name  # type: ignore[attr-defined]
                and self.analysis.is_load(attribute)
                and getattr(self.analysis.parent(attribute), "func", None) is not attribute
            ]
        if not calls and not reads:
            return {Use.RETURNED_UNSEEN}
        uses: set[Use] = set()
        for call in [*calls, *reads]:
            if call in self._followed:
                continue  # a cycle (`m.compute()` in a `compute` of the same name) adds nothing
            self._followed.add(call)
            uses |= self.of_expression(call, depth + 1)
        return uses

    def _is_property(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """A method decorated `@property` in a class of the file."""
        return self.analysis.class_of(function) is not None and any(
            self.analysis.code_of(decorator) == "property" for decorator in function.decorator_list
        )

    def _tensor_method_call(self, call: ast.Call) -> bool:
        """`x.mean()` on a proven tensor: never a call of the file's own `mean` method."""
        func = call.func
        return (
            isinstance(func, ast.Attribute)
            and self.analysis.value_of(func.value).kind is Kind.TENSOR
        )

    def _comprehension(self, generator: ast.comprehension, depth: int) -> set[Use]:
        """What the comprehension does with its target names (`x`, or `k, v` over
        `d.items()`); what it makes of them flows on with its result (`_element_of`)."""
        comprehension = self.analysis.parent(generator)
        names = _target_names(generator.target)
        if names is None or comprehension is None:
            return {Use.UNKNOWN_CONSUMER}
        uses: set[Use] = set()
        # As with LibCST's nested `CompFor`s: the names are looked for in the whole
        # comprehension for its first `for`, and for a later `for` only in the `for`s from
        # the one before it on (its target, iterable and conditions), not in `elt`.
        generators: list[ast.comprehension] = comprehension.generators  # type: ignore[attr-defined]
        position = next(i for i, other in enumerate(generators) if other is generator)
        if position == 0:
            nodes = self.analysis.descendants(comprehension)
        else:
            nodes = [n for g in generators[position - 1 :] for n in self.analysis.descendants(g)]
        for target in names:
            for occurrence in nodes:
                if (
                    type(occurrence) is ast.Name
                    and occurrence.id == target.id  # type: ignore[attr-defined]
                    and occurrence is not target
                ):
                    uses |= self.of_expression(occurrence, depth + 1)
        return uses


def _is_newest_index(index: ast.expr) -> bool:
    """`[-1]`: the element appended last."""
    return (
        isinstance(index, ast.UnaryOp)
        and isinstance(index.op, ast.USub)
        and isinstance(index.operand, ast.Constant)
        and index.operand.value == 1
    )


def _unstarred(node: ast.expr) -> ast.expr:
    """`x` for `*x` (a starred element of a target or a display), else the node itself."""
    return node.value if type(node) is ast.Starred else node  # type: ignore[attr-defined]


def _argument_value(arg: Argument) -> ast.expr:
    """The expression an argument passes (`xs` for `*xs`, `v` for `k=v` and `**v`)."""
    if type(arg) is ast.keyword or type(arg) is ast.Starred:
        return arg.value  # type: ignore[union-attr]
    return arg  # type: ignore[return-value]


def _first_argument(call: ast.Call) -> Argument | None:
    """The first argument of `call`, positional ones first."""
    if call.args:
        return call.args[0]
    return call.keywords[0] if call.keywords else None


def _entries(node: ast.Dict) -> zip[tuple[ast.expr | None, ast.expr]]:
    return zip(node.keys, node.values, strict=True)


def _target_names(target: ast.expr) -> list[ast.Name] | None:
    """The names a comprehension's `for` binds (`x`, `k, v`), None for other targets."""
    if isinstance(target, ast.Name):
        return [target]
    if isinstance(target, (ast.Tuple, ast.List)) and all(
        isinstance(_unstarred(element), ast.Name) for element in target.elts
    ):
        return [_unstarred(element) for element in target.elts]  # type: ignore[misc]
    return None


def _element_of(comprehension: ast.AST, node: ast.AST) -> bool:
    """Whether `node` is what `comprehension` makes of each element (its `elt`, or a dict
    comprehension's key or value)."""
    if isinstance(comprehension, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        return comprehension.elt is node
    if isinstance(comprehension, ast.DictComp):
        return node is comprehension.key or node is comprehension.value
    return False


def through_setdefault(receiver: ast.expr) -> ast.expr:
    """`d` for `d.setdefault(k, [])`: what an append to that result stores into."""
    if (
        isinstance(receiver, ast.Call)
        and isinstance(receiver.func, ast.Attribute)
        and receiver.func.attr == "setdefault"
    ):
        return receiver.func.value
    return receiver


def _graph_part(value: ast.AST, target: ast.expr) -> ast.expr:
    """In `values, indices = x.topk(k)` (`sort`, `max(dim)`, ...) only `values` can carry a
    graph: the indices are integers."""
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _VALUES_AND_INDICES
        and isinstance(target, (ast.Tuple, ast.List))
        and len(target.elts) == 2
    ):
        return _unstarred(target.elts[0])
    return target
