"""The loop rules' screens (GF002, GF003), on Python's `ast` tree.

Both rules need a value that crosses loop iterations, and both need it graph-attached:
- GF002 carries a value into the next iteration of a training loop (a store that reaches a read
  of the next iteration, by reaching bindings) or keeps one in a container that outlives the
  loop; the value must be proven attached (`interpreter`), and the loop must reach a backward
  or optimizer step, directly or through the file's own functions (`analysis.training`).
- GF003 pairs two backward calls of one function, of two methods of one class, or of a function
  and its caller; or it finds one backward in a loop whose every iteration backpropagates
  through a graph node evaluated once, outside the loop (`provenance.evaluated_in`): one of the
  names the call reads, followed through the bindings of its function, is bound outside the
  loop to what may be an attached operation.

The screens follow the same paths coarsely, by name and over all bindings of a name in its
function, so that they pass every file the rules may report in; "may be attached" is false only
for what never is: literals, numbers, strings, comparisons, classes being built, values taken
out of the graph (`.item()`, `.detach()`), results of functions imported from outside torch,
and names bound only to those.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

from codemods.analysis.interpreter import CONVENTIONAL_CRITERIA
from codemods.analysis.provenance import FREE_ATTRIBUTES
from codemods.analysis.torch_api import (
    AUTOGRAD_FUNCTIONS,
    BATCHES_TEXT,
    EVALUATION_NAME,
    FORWARD_METHODS,
    FUNCTIONAL_LOSSES,
    GRAPH_LEAVING_METHODS,
    SCHEDULER_NAME,
    STEPPER_NAME,
)
from codemods.screen_inplace import (
    ast_fields,
    called_name,
    decorated_without_grad,
    end_line,
    grad_inside,
    qualified_name,
    reversed_fields,
)

_Function = ast.FunctionDef | ast.AsyncFunctionDef
_Scope = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef
_Loop = ast.For | ast.AsyncFor | ast.While
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_SCOPE_KINDS = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Methods that give the module's parameters, leaves whatever the grad mode.
_LEAF_METHODS = frozenset({"parameters", "named_parameters", "requires_grad_"})
# Methods through which a container's element comes out (`provenance._ELEMENT_METHODS`, and
# a dict's views).
_ELEMENT_METHODS = frozenset({"pop", "get", "popleft", "__getitem__", "values", "items"})
# Methods that grow a container by one element (`gf002._GROWING_METHODS`).
GROWING_METHODS = frozenset({"append", "insert"})
# Builtins whose result is a number or a string (`interpreter.builtin_call`), never attached.
_NUMBER_BUILTINS = frozenset(
    {"len", "int", "float", "str", "bool", "round", "repr", "range", "print", "isinstance"}
    | {"hash", "id", "type", "format", "hasattr", "callable", "open", "chr", "ord"}
)
_NEVER_ATTACHED = (ast.Constant, ast.JoinedStr, ast.Compare, ast.Lambda)
# Displays: a kept container's entry must be a tensor (`_judge_kept`: `Kind.TENSOR`).
_DISPLAYS = (
    ast.Tuple,
    ast.List,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)
# Reads that do not carry a value on (`gf002._carries_on`, `_is_method_receiver`).
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_DETACHING_ATTRIBUTES = frozenset({"detach", "detach_", "data"})
# Methods that store their (last) argument into their receiver.
_STORING_METHODS = frozenset({"append", "insert", "extend", "add", "appendleft", "update"})
# Methods that return the module they are called on.
_MOVING_METHODS = frozenset({"to", "cuda", "cpu", "train", "eval", "half", "float", "double"})


@dataclass(eq=False)
class _Binding:
    statement: ast.AST  # the statement that binds
    # "value", "augmented", "element" (of `value`, iterated), "parameter", "definition" (a
    # def, class or import), "unknown" (`with ... as x`), "global" (`global x`: the module's),
    # "opaque" (anything else)
    kind: str
    value: ast.expr | None = None
    key: str = ""
    inner: bool = False  # made inside its statement's expression (a comprehension, `:=`)


@dataclass
class _ScopeFacts:
    scope: _Scope
    bindings: dict[str, list[_Binding]] = field(default_factory=dict)
    loops: list[_Loop] = field(default_factory=list)  # every loop of the scope's own code
    statements: list[ast.stmt] = field(default_factory=list)  # its own statements, in order
    calls: list[ast.Call] = field(default_factory=list)  # every call of its own code
    enclosing_loops: dict[ast.AST, list[_Loop]] = field(default_factory=dict)  # innermost first
    # each statement's block, its index there, and the statement whose block it is
    place: dict[int, tuple[list[ast.stmt], int, ast.stmt | None]] = field(default_factory=dict)
    statement_of: dict[int, ast.AST] = field(default_factory=dict)  # a call's statement
    grad_off: set[int] = field(default_factory=set)  # statements run with grad mode off


class LoopScreens:
    """What the loop rules need of one file, gathered in one pass over its scopes."""

    def __init__(
        self,
        module: ast.Module,
        text: str,
        imports: dict[str, str],
        classes: set[str],
        foreign: set[str],
    ) -> None:
        self.module = module
        self.lines = source_lines(text)
        self.imports = imports
        self.classes = classes
        self.foreign = foreign
        self.scopes: dict[ast.AST, _ScopeFacts] = {}
        self.parent_function: dict[ast.AST, _Scope] = {}  # a def -> the scope it is in
        self.owner_class: dict[ast.AST, ast.ClassDef] = {}  # a method -> its class
        self.functions_by_name: dict[str, list[_Function]] = {}
        self._collect(module, module)
        self._reaches: dict[ast.AST, bool] = {}
        self._carried: dict[ast.AST, set[str]] = {}  # `_carried_keys`, once per loop
        self._attached: dict[tuple[bool, ast.AST, str], bool] = {}
        self._tentative: dict[tuple[bool, ast.AST, str], bool] = {}
        self._in_progress: set[tuple[bool, ast.AST, str]] = set()
        self.backward_roots = {
            root
            for facts in self.scopes.values()
            for call in facts.calls
            if _method(call) == "backward" and (root := _root_name(call.func.value)) is not None  # type: ignore[attr-defined]
        }

    # -- GF002 ------------------------------------------------------------------------------
    def gf002(self) -> bool:
        """A value carried into the next iteration of a loop that reaches a training step, or
        kept in a container by a training or evaluation loop, that may be attached."""
        return any(
            self._carries(facts) or self._keeps(facts)
            for facts in self.scopes.values()
            if facts.loops and not self._in_forward(facts.scope)
        )

    def _carries(self, facts: _ScopeFacts) -> bool:
        """`gf002._carry_of`: an assignment in a loop whose value a read of the next iteration
        may see, in a loop that reaches a training step, of a value that may be attached."""
        for statement in facts.statements:
            loops = facts.enclosing_loops[statement]
            if type(statement) is not ast.Assign or not loops:
                continue
            loop = loops[0]
            keys = {key for target in statement.targets for key in _stored_keys(target)}
            if not isinstance(loop, ast.While):
                keys -= _bound_by(loop.target)  # rebound at the top of every iteration
            if keys.isdisjoint(self._carried_keys(loop)):
                continue
            if not self.reaches_step(loop.body):
                continue
            if not keys.isdisjoint(self.backward_roots) or self._evaluated_may_be_attached(
                statement.value, statement, facts.scope, parameters=True
            ):
                return True
        return False

    def _carried_keys(self, loop: _Loop) -> set[str]:
        if loop not in self._carried:
            self._carried[loop] = _carried_keys(loop)
        return self._carried[loop]

    def _keeps(self, facts: _ScopeFacts) -> bool:
        """`gf002._kept_stores` and `_judge_kept`: a tensor that may be attached, appended or
        stored by a varying index into a container, in a training or evaluation loop."""
        for statement in facts.statements:
            if not facts.enclosing_loops[statement]:
                continue
            operand = _kept_operand(statement, self.lines)
            if operand is None or isinstance(operand, _DISPLAYS):
                continue
            if self._evaluated_may_be_attached(
                operand, statement, facts.scope, parameters=True
            ) and self._training_or_evaluation(facts, statement):
                return True
        return False

    def _training_or_evaluation(self, facts: _ScopeFacts, store: ast.stmt) -> bool:
        """`_judge_kept`'s loops: one that reaches a training step, or an evaluation loop (over
        batches, in a function that trains, or in an evaluation function)."""
        loops = facts.enclosing_loops[store]
        if self.reaches_step(loops[-1].body):
            return True
        for loop in loops:
            if isinstance(loop, (ast.For, ast.AsyncFor)):
                source = "\n".join(self.lines[loop.iter.lineno - 1 : end_line(loop.iter)])
                if BATCHES_TEXT.search(source):
                    return True
        scope = facts.scope
        return self.reaches_step(scope.body) or (isinstance(scope, _FUNCTIONS) and evaluates(scope))

    # -- GF003 ------------------------------------------------------------------------------
    def gf003(self) -> bool:
        """Two backward calls of one scope, of two methods of one class, or of a function and
        a caller of it; or one in a loop over a graph node evaluated outside the loop."""
        sites = {scope: _backward_sites(facts) for scope, facts in self.scopes.items()}
        sites = {scope: calls for scope, calls in sites.items() if calls}
        if any(
            self._share_graph(self.scopes[scope], first, second)
            for scope, calls in sites.items()
            for position, first in enumerate(calls)
            for second in calls[position + 1 :]
        ):
            return True
        by_class: dict[ast.ClassDef, int] = {}
        for scope in sites:
            owner = self.owner_class.get(scope)
            if owner is not None:
                by_class[owner] = by_class.get(owner, 0) + 1
        if any(count >= 2 for count in by_class.values()):
            return True  # `judge_methods`
        # `judge_calls`: a scope with a backward calls a function (or an object's `__call__`)
        # that runs another.
        names = {scope.name for scope in sites if isinstance(scope, _FUNCTIONS)}
        if len(sites) >= 2 and any(
            called_name(call) in names or "__call__" in names
            for scope in sites
            for call in self.scopes[scope].calls
        ):
            return True
        return any(
            self._shared_across_iterations(self.scopes[scope], call)
            for scope, calls in sites.items()
            for call in calls
        )

    def _shared_across_iterations(self, facts: _ScopeFacts, site: ast.Call) -> bool:
        """`_Checker._shared_across_iterations`: a name the call reads, followed through the
        bindings that may reach each read (`bindings.reaching`, coarsely: all of the scope's,
        less those outside the loop when a statement of the loop's body always rebinds the
        name before the read), bound outside the loop to what may be attached; or a call that
        provenance follows into the file's own code."""
        loops = facts.enclosing_loops[site]
        if not loops:
            return False
        loop = loops[0]
        if self._calls_own_code(site):
            return True
        # The statement of the loop's body each node is in, by position.
        position = {id(node): i for i, top in enumerate(loop.body) for node in _walk([top])}
        # Bindings after the loop reach it only around an enclosing loop.
        around = {id(node) for outer in loops[1:] for node in _walk(outer.body)}
        todo = [(key, position[id(site)]) for key in _keys_in(site)]
        seen: set[tuple[str, int]] = set()
        while todo:
            key, read_at = todo.pop()
            if (key, read_at) in seen:
                continue
            seen.add((key, read_at))
            bindings = facts.bindings.get(key)
            if not bindings:
                if self._global_may_be_attached(facts.scope, key):
                    return True
                continue
            rebound = any(_always_binds(top, key) for top in loop.body[:read_at])
            for binding in bindings:
                at = position.get(id(binding.statement))
                if binding.statement is loop:
                    at = 0  # the loop's own target, bound before each iteration
                if at is None:
                    reaches = not rebound and (
                        _line(binding.statement) < loop.lineno or id(binding.statement) in around
                    )
                    if reaches and self._binding_may_be_graph_node(binding, facts.scope):
                        return True
                elif binding.kind == "opaque":
                    return True
                elif binding.value is not None:
                    if self._calls_own_code(binding.value):
                        return True
                    todo.extend((inner, at) for inner in _keys_in(binding.value))
                    if binding.kind == "augmented":
                        todo.append((key, at))
        return False

    def _share_graph(self, facts: _ScopeFacts, first: ast.Call, second: ast.Call) -> bool:
        """`_Checker._shared`: whether two backward calls of one scope may backpropagate
        through one evaluation of an attached graph node: their roots, followed through the
        bindings that may reach each read, meet at a binding (or a global) that may be one;
        or one of them may be followed into the file's own code that reads such a global."""
        reached = []
        for site in (first, second):
            closure = self._reached(facts, site)
            if closure is None:
                return True
            reached.append(closure)
        # One evaluation is one value expression (`logits, values = model(x)` binds two).
        evaluations = [{_evaluation(binding): binding for binding in r} for r in reached]
        return any(
            self._global_may_be_attached(facts.scope, binding)
            if isinstance(binding, str)
            else self._binding_may_be_graph_node(binding, facts.scope)
            for evaluation, binding in evaluations[0].items()
            if evaluation in evaluations[1]
        )

    def _reached(self, facts: _ScopeFacts, site: ast.Call) -> set[_Binding | str] | None:
        """The bindings (and globals, by name) `site`'s reads may reach, through the values
        of those bindings in turn; None when the call, or a value, may run the file's own
        code reading a global graph node."""
        if self._calls_own_code(site):
            return None
        reached: set[_Binding | str] = set()
        statement = facts.statement_of[id(site)]
        todo = [(key, statement) for key in _keys_in(site)]
        seen: set[tuple[str, int]] = set()
        while todo:
            key, at = todo.pop()
            if (key, id(at)) in seen:
                continue
            seen.add((key, id(at)))
            bindings = facts.bindings.get(key)
            if not bindings:
                reached.add(key)
                continue
            for binding in _reaching(facts, bindings, key, at):
                if binding in reached:
                    continue
                reached.add(binding)
                if binding.value is None or binding.kind not in ("value", "augmented", "element"):
                    continue
                if self._calls_own_code(binding.value):
                    return None
                todo.extend((inner, binding.statement) for inner in _keys_in(binding.value))
                if binding.kind == "augmented":
                    todo.append((key, binding.statement))
        return reached

    def _global_may_be_attached(self, scope: _Scope, key: str) -> bool:
        """`provenance._global`: a name its function does not bind is the module's."""
        if isinstance(scope, ast.Module) or key.startswith("self."):
            return False
        return self._name_may_be_attached(self.module, key, parameters=False)

    def _calls_own_code(self, value: ast.expr) -> bool:
        """A call that provenance may follow into the file's own code (a function, a method,
        a module's forward) that reads, itself or through its calls, a global that may be a
        graph node: evaluated once, before the loop."""
        for node in _walk([value]):
            if type(node) is ast.Call and any(
                self._function_reads_graph(callee)
                for callee in self._callees(node)  # type: ignore[arg-type]
            ):
                return True
        return False

    def _callees(self, call: ast.Call) -> list[_Function]:
        """The file's functions `call` may run: those of its name, and any forward when it
        may be a module's call."""
        name = called_name(call)
        callees = list(self.functions_by_name.get(name or "", ()))
        if name not in self.foreign:
            for forward in FORWARD_METHODS:
                callees += self.functions_by_name.get(forward, ())
        return callees

    def _function_reads_graph(self, function: _Function) -> bool:
        return self._memoised(
            (False, function, "<reads graph>"),
            lambda: (
                any(
                    self._global_may_be_attached(function, node.id)  # type: ignore[attr-defined]
                    for node in _walk(function.body, scopes=False)
                    if type(node) is ast.Name
                    and type(node.ctx) is ast.Load  # type: ignore[attr-defined]
                    and node.id not in self.scopes[function].bindings  # type: ignore[attr-defined]
                )
                or any(
                    self._function_reads_graph(callee)
                    for call in self.scopes[function].calls
                    for callee in self._callees(call)
                )
            ),
        )

    # -- the training-step boundary (`analysis.training`) ------------------------------------
    def reaches_step(self, body: list[ast.stmt]) -> bool:
        for node in _walk(body):
            if type(node) is not ast.Call:
                continue
            if self._is_training_step(node):
                return True
            name = _method(node) or (node.func.id if type(node.func) is ast.Name else None)
            for function in self.functions_by_name.get(name or "", ()):
                if self._function_reaches(function):
                    return True
        return False

    def _function_reaches(self, function: _Function) -> bool:
        if function not in self._reaches:
            self._reaches[function] = False  # a recursion reaches nothing new
            self._reaches[function] = self.reaches_step(function.body)
        return self._reaches[function]

    def _is_training_step(self, call: ast.Call) -> bool:
        """`training.is_training_step`, or a call of `torch.autograd.grad`/`backward`."""
        method = _method(call)
        if method == "backward":
            return True
        receiver = _dotted(call.func.value) if method is not None else ""  # type: ignore[attr-defined]
        if method == "grad" and receiver.endswith("autograd"):
            return True
        if method == "step":
            last = receiver.rsplit(".", 1)[-1]
            if STEPPER_NAME.search(last) and not SCHEDULER_NAME.search(last):
                return True
        return qualified_name(call.func, self.imports) in AUTOGRAD_FUNCTIONS

    def _in_forward(self, scope: _Scope) -> bool:
        current: _Scope | None = scope
        while isinstance(current, _FUNCTIONS):
            if current.name in FORWARD_METHODS and current in self.owner_class:
                return True
            current = self.parent_function.get(current)
        return False

    # -- may a value be attached? ------------------------------------------------------------
    def may_be_attached(self, value: ast.expr, scope: _Scope, parameters: bool) -> bool:
        """Whether `value`, evaluated in `scope`, may be graph-attached. `parameters`: whether
        the function's parameters may be (the interpreter follows callers' arguments into
        them; provenance leaves them unknown)."""
        if isinstance(value, _NEVER_ATTACHED) or (
            isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)
        ):
            return False
        if isinstance(value, ast.Name):
            return self._name_may_be_attached(scope, value.id, parameters)
        if isinstance(value, ast.Attribute):
            key = target_key(value)
            if key is not None:
                return self._name_may_be_attached(scope, key, parameters)
            if value.attr in FREE_ATTRIBUTES:
                return False
            # An attribute of a module may be a parameter (`model.fc.weight`).
            receiver = value.value
            return self.may_be_attached(receiver, scope, parameters) or self._may_hold_parameters(
                receiver, scope, parameters
            )
        if isinstance(value, ast.Call):
            return self._call_may_be_attached(value, scope, parameters)
        parts = _parts(value)
        if parts is None:
            return True  # awaits, yields: not followed
        return any(self.may_be_attached(part, scope, parameters) for part in parts)

    def _call_may_be_attached(self, call: ast.Call, scope: _Scope, parameters: bool) -> bool:
        func = call.func
        arguments = [*call.args, *(keyword.value for keyword in call.keywords)]

        def any_argument() -> bool:
            return any(self.may_be_attached(argument, scope, parameters) for argument in arguments)

        qualified = qualified_name(func, self.imports) or ""
        if qualified.startswith("torch."):
            short = qualified.rsplit(".", 1)[-1]
            if short == "Parameter" or qualified in FUNCTIONAL_LOSSES:
                return True
            if any(keyword.arg == "requires_grad" for keyword in call.keywords):
                return True
            if short[:1].isupper():
                return False  # a module, a criterion, an optimizer being built
            return any_argument()
        if type(func) is ast.Name:
            name = func.id
            if name in _NUMBER_BUILTINS:
                return False
            if name in self.functions_by_name:
                return self._returns_may_be_attached(name, parameters)
            if name in self.foreign or name in self.classes:
                # an imported function's result is unknown, a class is being built
                return name in CONVENTIONAL_CRITERIA
            if not self._bound_anywhere(scope, name):
                return any_argument()  # a builtin (`sum`, `max`, `zip`)
            # A local value called: a module, a criterion (a parameter is one only for the
            # interpreter, which follows callers' arguments).
            return self._may_hold_parameters(func, scope, parameters)
        if type(func) is ast.Attribute:
            method = func.attr
            receiver = func.value
            root = _root_name(receiver)
            if method in GRAPH_LEAVING_METHODS or (root is not None and root in self.foreign):
                return False  # `loss.item()`; `np.mean(x)`, `utils.accuracy(out, y)`: unknown
            if method in _MOVING_METHODS:
                return self.may_be_attached(receiver, scope, parameters)  # a module stays one
            if method in FORWARD_METHODS or self.may_be_attached(receiver, scope, parameters):
                return True  # a module's forward; a tensor's method
            if method in self.functions_by_name:
                # the file's method, followed into (or a module attribute of the same name)
                if self._returns_may_be_attached(method, parameters):
                    return True
                if is_self(receiver) and f"self.{method}" not in self.self_attributes:
                    return any_argument()
            # `model.fc(x)`, `self.encoder(x)`: a module's attribute called
            return self._may_hold_parameters(receiver, scope, parameters) or any_argument()
        # `nn.Linear(4, 2)(x)`, `self.layers[i](x)`: a module built or taken out of one
        return self._may_hold_parameters(func, scope, parameters) or any_argument()

    def _may_hold_parameters(
        self, value: ast.expr, scope: _Scope, parameters: bool, depth: int = 0
    ) -> bool:
        """Whether `value` may be a module (or hold one), whose attributes and methods may
        give parameters or forwards: a module or a class of the file being built, what a
        function of the file returns, a parameter (see `may_be_attached`), a `self` attribute,
        or what is taken out of one of those (`model.fc`, `model.to(device)`, `blocks[0]`)."""
        if depth > 20:
            return True
        kind = type(value)
        if is_self(value):
            return True  # its attributes may be modules (`self.model = model` in `__init__`)
        if kind is ast.Name:
            bindings = self.scopes[scope].bindings.get(value.id)  # type: ignore[attr-defined]
            if not bindings and not isinstance(scope, ast.Module):
                scope, bindings = self.module, self.scopes[self.module].bindings.get(value.id)  # type: ignore[attr-defined]
            return any(
                binding.kind == "opaque"
                or (binding.kind == "parameter" and parameters)
                or (
                    binding.kind in ("value", "element")
                    and binding.value is not None
                    and self._may_hold_parameters(binding.value, scope, parameters, depth + 1)
                )
                for binding in bindings or ()
            )
        if kind is ast.Attribute:
            if target_key(value) is not None:
                return True  # `self.encoder`
            return self._may_hold_parameters(value.value, scope, parameters, depth + 1)  # type: ignore[attr-defined]
        if kind is ast.Subscript or kind is ast.Starred:
            return self._may_hold_parameters(value.value, scope, parameters, depth + 1)  # type: ignore[attr-defined]
        if kind in (ast.Tuple, ast.List):
            return any(
                self._may_hold_parameters(item, scope, parameters, depth + 1)
                for item in value.elts  # type: ignore[attr-defined]
            )
        if kind is not ast.Call:
            return kind not in _NEVER_ATTACHED and kind not in (ast.BinOp, ast.UnaryOp, ast.Dict)
        func = value.func  # type: ignore[attr-defined]
        qualified = qualified_name(func, self.imports) or ""
        if qualified.startswith("torch."):
            short = qualified.rsplit(".", 1)[-1]
            return qualified.startswith("torch.nn.") and short[:1].isupper()
        name = called_name(value)  # type: ignore[arg-type]
        if name in self.functions_by_name or name in self.classes:
            return True
        if type(func) is ast.Name:
            if not self._bound_anywhere(scope, func.id):  # type: ignore[attr-defined]
                # a builtin: `getattr(model, "fc")`, `list(model.children())`
                return any(
                    self._may_hold_parameters(argument, scope, parameters, depth + 1)
                    for argument in value.args  # type: ignore[attr-defined]
                )
            return self._may_hold_parameters(func, scope, parameters, depth + 1)
        if type(func) is ast.Attribute:
            # `model.to(device)`, `model.children()`, `model.get_submodule("fc")`
            return self._may_hold_parameters(func.value, scope, parameters, depth + 1)  # type: ignore[attr-defined]
        return True

    @cached_property
    def self_attributes(self) -> set[str]:
        """Every `self.x` the file binds."""
        return {
            key for facts in self.scopes.values() for key in facts.bindings if key[:5] == "self."
        }

    def _bound_anywhere(self, scope: _Scope, name: str) -> bool:
        return name in self.scopes[scope].bindings or name in self.scopes[self.module].bindings

    def _name_may_be_attached(self, scope: _Scope, key: str, parameters: bool) -> bool:
        return self._memoised(
            (parameters, scope, key),
            lambda: self._bindings_may_be_attached(scope, key, parameters),
        )

    def _returns_may_be_attached(self, name: str, parameters: bool) -> bool:
        """Whether a function or method of the file named `name` may return an attached
        value (`interpreter.call_value` follows the call into it)."""
        return any(
            self._memoised(
                (parameters, function, "<return>"),
                lambda function=function: (
                    yields(function)
                    or any(
                        self.may_be_attached(value, function, parameters=True)
                        for value in returned(function)
                    )
                ),
            )
            for function in self.functions_by_name.get(name, ())
        )

    def _memoised(self, memo: tuple[bool, ast.AST, str], compute: Callable[[], bool]) -> bool:
        """`compute()` once per `memo`. A value defined through itself (`h = f(h)`, a
        recursion) adds nothing to what its other definitions give, so inside such a cycle the
        value being computed counts as not attached. Within one outermost question every
        answer is then kept; the negative ones stay only if the outermost answer is negative
        too (a positive answer may have come around a cycle that an earlier negative one
        assumed negative)."""
        known = self._attached.get(memo)
        if known is None:
            known = self._tentative.get(memo)
        if known is not None:
            return known
        if memo in self._in_progress:
            return False
        outermost = not self._in_progress
        self._in_progress.add(memo)
        try:
            result = compute()
        finally:
            self._in_progress.discard(memo)
        if result:
            self._attached[memo] = True
        else:
            self._tentative[memo] = False
        if outermost:
            if not result:
                self._attached.update(self._tentative)
            self._tentative.clear()
        return result

    def _bindings_may_be_attached(self, scope: _Scope, key: str, parameters: bool) -> bool:
        bindings = self.scopes[scope].bindings.get(key)
        if bindings:
            if key in self.backward_roots and any(b.kind == "value" for b in bindings):
                return True  # `interpreter.assignment`: a backward on it proves it attached
            return any(self._binding_may_be_attached(b, scope, parameters) for b in bindings)
        if key.startswith("self."):
            if not parameters:
                return False  # provenance: an attribute its method does not bind is unknown
            # `interpreter._global_lookup`: what any method of the class assigned it
            return any(
                self._binding_may_be_attached(binding, other, parameters)
                for other, facts in self.scopes.items()
                for binding in facts.bindings.get(key, ())
            )
        if isinstance(scope, ast.Module):
            return False  # a builtin, or a name bound nowhere
        return self._name_may_be_attached(self.module, key, parameters)

    def _binding_may_be_attached(self, binding: _Binding, scope: _Scope, parameters: bool) -> bool:
        kind = binding.kind
        if kind == "definition":
            return False
        if kind == "parameter":
            return parameters
        if kind == "unknown":
            return False  # `with ... as x`, a lambda's parameter: unknown to the analysis
        if kind == "global":
            return self._name_may_be_attached(self.module, binding.key, parameters)
        if kind == "opaque" or binding.value is None:
            return True
        return self._evaluated_may_be_attached(binding.value, binding.statement, scope, parameters)

    def _evaluated_may_be_attached(
        self, value: ast.expr, statement: ast.AST, scope: _Scope, parameters: bool
    ) -> bool:
        """`may_be_attached` for `value` evaluated by `statement`, in the grad mode it runs in."""
        if id(statement) in self.scopes[scope].grad_off:
            return self._may_be_attached_without_grad(value, scope, parameters)
        return self.may_be_attached(value, scope, parameters)

    def _may_be_attached_without_grad(
        self, value: ast.expr, scope: _Scope, parameters: bool
    ) -> bool:
        """Whether `value`, evaluated with grad mode off, may be attached: what an op or a
        module computes there is not (`interpreter.tensor_result`, `provenance._grad_of`),
        what it names or takes out of a container may be, and so may a parameter or a tensor
        made to require grad, and what the file's own functions return."""
        kind = type(value)
        if kind is ast.Name or kind is ast.Attribute:
            return self.may_be_attached(value, scope, parameters)
        if kind in _NEVER_ATTACHED:
            return False
        if kind is not ast.Call:
            parts = _parts(value)  # an operator's operands, a display's items, an element
            return parts is None or any(
                self._may_be_attached_without_grad(part, scope, parameters) for part in parts
            )
        call: ast.Call = value  # type: ignore[assignment]
        func = call.func
        arguments = [*call.args, *(keyword.value for keyword in call.keywords)]
        name = called_name(call)
        if name in self.functions_by_name:
            return self._call_may_be_attached(call, scope, parameters)  # as with grad on, or less
        if self._makes_leaf(call) or name in _LEAF_METHODS:
            return True
        if type(func) is ast.Name and not self._bound_anywhere(scope, func.id):
            # a builtin passing values on: `list(xs)`, `max(a, b)`, `getattr(m, "w")`
            return any(self._may_be_attached_without_grad(a, scope, parameters) for a in arguments)
        if type(func) is ast.Attribute and func.attr in _ELEMENT_METHODS:
            return self._may_be_attached_without_grad(func.value, scope, parameters)
        return False

    def _binding_may_be_graph_node(self, binding: _Binding, scope: _Scope) -> bool:
        """GF003: whether a binding may give an attached graph node (a parameter, or a tensor
        made to require grad, is a leaf: it saves nothing)."""
        value = binding.value
        if binding.kind == "value" and type(value) is ast.Call and self._makes_leaf(value):
            return False
        if binding.kind == "value" and type(value) is ast.Name:
            return any(
                self._binding_may_be_graph_node(other, scope)
                for other in self.scopes[scope].bindings.get(value.id, ())
                if other is not binding
            ) or not self.scopes[scope].bindings.get(value.id)
        return self._binding_may_be_attached(binding, scope, parameters=False)

    def _makes_leaf(self, call: ast.Call) -> bool:
        qualified = qualified_name(call.func, self.imports) or ""
        if qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] == "Parameter":
            return True
        return any(keyword.arg == "requires_grad" for keyword in call.keywords) and all(
            not self.may_be_attached(argument, self.module, parameters=False)
            for argument in call.args
        )

    # -- collection ------------------------------------------------------------------------
    def _collect(self, scope: _Scope, owner: ast.AST) -> None:
        facts = _ScopeFacts(scope)
        self.scopes[scope] = facts
        if isinstance(scope, _FUNCTIONS):
            arguments = scope.args
            for argument in [
                *arguments.posonlyargs,
                *arguments.args,
                *arguments.kwonlyargs,
                *(a for a in (arguments.vararg, arguments.kwarg) if a is not None),
            ]:
                _bind(facts, argument.arg, _Binding(scope, "parameter"))
        grad = not (isinstance(scope, _FUNCTIONS) and decorated_without_grad(scope, self.imports))
        self._visit(scope.body, facts, [], owner, grad=grad)

    def _visit(
        self,
        body: list[ast.stmt],
        facts: _ScopeFacts,
        loops: list[_Loop],
        owner: ast.AST,
        parent: ast.stmt | None = None,
        grad: bool = True,
    ) -> None:
        """`grad`: whether grad mode is on where the statements run (`interpreter`'s)."""
        for index, statement in enumerate(body):
            facts.place[id(statement)] = (body, index, parent)
            if not grad:
                facts.grad_off.add(id(statement))
            if isinstance(statement, _FUNCTIONS):
                _bind(facts, statement.name, _Binding(statement, "definition"))
                self.functions_by_name.setdefault(statement.name, []).append(statement)
                self.parent_function[statement] = facts.scope
                if isinstance(owner, ast.ClassDef):
                    self.owner_class[statement] = owner
                self._expression(statement.decorator_list, statement, facts, loops)
                self._collect(statement, statement)
                continue
            if isinstance(statement, ast.ClassDef):
                _bind(facts, statement.name, _Binding(statement, "definition"))
                self._visit(statement.body, facts, loops, statement, statement, grad)
                continue
            facts.statements.append(statement)
            facts.enclosing_loops[statement] = loops
            self._bind_statement(statement, facts)
            expressions = [
                value
                for name in ast_fields(type(statement))
                if isinstance(value := getattr(statement, name), ast.expr)
            ]
            self._expression(expressions, statement, facts, loops)
            if isinstance(statement, _LOOPS):
                facts.loops.append(statement)
                self._visit(statement.body, facts, [statement, *loops], owner, statement, grad)
                self._visit(statement.orelse, facts, loops, owner, statement, grad)
                continue
            if isinstance(statement, (ast.With, ast.AsyncWith)):
                inner = grad_inside(statement, grad, self.imports)
                self._visit(statement.body, facts, loops, owner, statement, inner)
                continue
            for name in ("body", "orelse", "finalbody"):
                self._visit(getattr(statement, name, []), facts, loops, owner, statement, grad)
            for handler in getattr(statement, "handlers", []):
                if handler.name:
                    _bind(facts, handler.name, _Binding(handler, "definition"))
                self._visit(handler.body, facts, loops, owner, statement, grad)
            for case in getattr(statement, "cases", []):
                for node in ast.walk(case.pattern):
                    name = getattr(node, "name", None)
                    if isinstance(name, str):
                        _bind(facts, name, _Binding(statement, "opaque"))
                self._visit(case.body, facts, loops, owner, statement, grad)

    def _expression(
        self,
        expressions: list[ast.expr],
        statement: ast.AST,
        facts: _ScopeFacts,
        loops: list[_Loop],
    ) -> None:
        """Calls, comprehension targets and `:=` of an expression of the scope's own code (a
        lambda's body included: it runs where it is called, which the screens need not know)."""
        for node in _walk(expressions):
            kind = type(node)
            if kind is ast.Call:
                facts.calls.append(node)  # type: ignore[arg-type]
                facts.enclosing_loops[node] = loops
                facts.statement_of[id(node)] = statement
            elif kind is ast.comprehension:
                for key in _stored_keys(node.target):  # type: ignore[attr-defined]
                    _bind(facts, key, _Binding(statement, "element", node.iter, inner=True))  # type: ignore[attr-defined]
            elif kind is ast.NamedExpr:
                _bind(facts, node.target.id, _Binding(statement, "value", node.value, inner=True))  # type: ignore[attr-defined]
            elif kind is ast.Lambda:
                for argument in node.args.args:  # type: ignore[attr-defined]
                    _bind(facts, argument.arg, _Binding(statement, "unknown"))

    def _bind_statement(self, statement: ast.stmt, facts: _ScopeFacts) -> None:
        """The bindings of a statement; what it stores into a container (`xs.append(v)`,
        `d[k] = v`) counts as a binding of the container: its elements may then be `v`."""
        kind = type(statement)
        if kind is ast.Assign:
            for target in statement.targets:  # type: ignore[attr-defined]
                for key in _stored_keys(target):
                    _bind(facts, key, _Binding(statement, "value", statement.value))  # type: ignore[attr-defined]
                container = target_key(container_of(target))
                if container is not None and type(target) is ast.Subscript:
                    _bind(facts, container, _Binding(statement, "value", statement.value))  # type: ignore[attr-defined]
        elif kind is ast.Expr and type(statement.value) is ast.Call:  # type: ignore[attr-defined]
            call = statement.value  # type: ignore[attr-defined]
            receiver = target_key(call.func.value) if type(call.func) is ast.Attribute else None
            arguments = [*call.args, *(keyword.value for keyword in call.keywords)]
            if receiver is not None and call.func.attr in _STORING_METHODS and arguments:
                _bind(facts, receiver, _Binding(statement, "value", arguments[-1]))
        elif kind is ast.AnnAssign:
            for key in _stored_keys(statement.target):  # type: ignore[attr-defined]
                _bind(facts, key, _Binding(statement, "value", statement.value))  # type: ignore[attr-defined]
        elif kind is ast.AugAssign:
            for key in _stored_keys(statement.target):  # type: ignore[attr-defined]
                _bind(facts, key, _Binding(statement, "augmented", statement.value))  # type: ignore[attr-defined]
        elif kind in (ast.For, ast.AsyncFor):
            for key in _stored_keys(statement.target):  # type: ignore[attr-defined]
                _bind(facts, key, _Binding(statement, "element", statement.iter))  # type: ignore[attr-defined]
        elif kind in (ast.With, ast.AsyncWith):
            for item in statement.items:  # type: ignore[attr-defined]
                if item.optional_vars is not None:
                    for key in _stored_keys(item.optional_vars):
                        _bind(facts, key, _Binding(statement, "unknown"))
        elif kind in (ast.Import, ast.ImportFrom):
            for alias in statement.names:  # type: ignore[attr-defined]
                name = alias.asname or alias.name.split(".")[0]
                _bind(facts, name, _Binding(statement, "definition"))
        elif kind in (ast.Global, ast.Nonlocal):
            for name in statement.names:  # type: ignore[attr-defined]
                _bind(facts, name, _Binding(statement, "global"))


def source_lines(text: str) -> list[str]:
    """The lines of `text` as Python's parser counts them (`str.splitlines` also breaks at
    form feeds and other separators, which would shift every line number after them)."""
    return _LINE_BREAK.split(text)


# -- helpers --------------------------------------------------------------------------------
def _bind(facts: _ScopeFacts, key: str, binding: _Binding) -> None:
    binding.key = key
    facts.bindings.setdefault(key, []).append(binding)


def target_key(node: ast.AST) -> str | None:
    """`interpreter.target_key`: `x` or `self.x`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and is_self(node.value):
        return f"self.{node.attr}"
    return None


def _stored_keys(target: ast.AST) -> Iterator[str]:
    """The names and `self` attributes a target binds (through unpacking)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _stored_keys(element)
    elif isinstance(target, ast.Starred):
        yield from _stored_keys(target.value)
    else:
        key = target_key(target)
        if key is not None:
            yield key


def _bound_by(target: ast.AST) -> set[str]:
    return set(_stored_keys(target))


def _keys_in(expression: ast.AST) -> Iterator[str]:
    for node in _walk([expression]):
        key = target_key(node)
        if key is not None:
            yield key


def _method(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _dotted(node: ast.AST) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(node.id)
    return ".".join(reversed(parts))


def _walk(roots: list, scopes: bool = True) -> Iterator[ast.AST]:
    """The nodes of `roots` and below, in pre-order (`ast.walk` reads every field through
    generators; this reads a table of the fields that hold nodes). `scopes=False`: not
    into the functions and classes defined there."""
    pending = list(reversed(roots))
    while pending:
        node = pending.pop()
        yield node
        kind = type(node)
        if not scopes and kind in _SCOPE_KINDS:
            continue
        for name in reversed_fields(kind):
            value = getattr(node, name, None)
            if type(value) is list:
                for item in reversed(value):
                    if isinstance(item, ast.AST):
                        pending.append(item)
            elif isinstance(value, ast.AST):
                pending.append(value)


def container_of(target: ast.AST) -> ast.AST:
    while isinstance(target, ast.Subscript):
        target = target.value
    return target


def _parts(value: ast.expr) -> list[ast.expr] | None:
    """The operands whose values `value` may be or hold: both sides of an operator, both
    branches, a display's items, a comprehension's element; None for what is not followed."""
    if isinstance(value, (ast.Subscript, ast.Starred, ast.NamedExpr)):
        return [value.value]
    if isinstance(value, ast.BinOp):
        return [value.left, value.right]
    if isinstance(value, ast.UnaryOp):
        return [value.operand]
    if isinstance(value, ast.IfExp):
        return [value.body, value.orelse]
    if isinstance(value, ast.BoolOp):
        return value.values
    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        return value.elts
    if isinstance(value, ast.Dict):
        return [item for item in value.values if item is not None]
    if isinstance(value, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        return [value.elt]
    if isinstance(value, ast.DictComp):
        return [value.value]
    return None


def is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _line(node: ast.AST) -> int:
    return getattr(node, "lineno", 0)


def _reaching(
    facts: _ScopeFacts, bindings: list[_Binding], key: str, at: ast.AST
) -> list[_Binding]:
    """The bindings of `key` that may reach a read in statement `at` (`bindings.reaching`,
    coarsely): those before it, or in a loop around it, and not before the closest statement
    that always binds `key` on every path to it (which reaches it itself)."""
    chain: list[ast.AST] = []  # `at` and the statements around it, innermost first
    killer: ast.stmt | None = None
    node: ast.AST | None = at
    while node is not None and id(node) in facts.place:
        chain.append(node)
        block, index, parent = facts.place[id(node)]
        if killer is None:
            killer = next(
                (earlier for earlier in reversed(block[:index]) if _always_binds(earlier, key)),
                None,
            )
        node = parent
    start = _start(at)
    floor = _start(killer) if killer is not None else (0, -1)
    loops = [
        statement
        for statement in chain
        if type(statement) in (ast.For, ast.AsyncFor, ast.While) and statement is not at
    ]
    found = []
    for binding in bindings:
        if binding.inner and binding.statement is at:
            found.append(binding)
            continue
        where = _start(binding.statement)
        if binding.kind in ("parameter", "definition") or where < floor:
            if binding.kind in ("parameter", "definition") and killer is None:
                found.append(binding)
            continue
        if where < start or any(
            _start(loop) >= floor and _inside(binding.statement, loop) for loop in loops
        ):
            found.append(binding)
    return found


def _evaluation(binding: _Binding | str) -> object:
    if isinstance(binding, str) or binding.value is None:
        return binding
    return id(binding.value)


def _start(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def _inside(node: ast.AST, loop: ast.AST) -> bool:
    """Whether `node` (a statement) is `loop` or lies in its body, by position."""
    if node is loop:
        return True
    start = _start(node)
    body = loop.body  # type: ignore[attr-defined]
    return _start(body[0]) <= start and start <= (end_line(body[-1]), 1 << 30)


def _carried_keys(loop: _Loop) -> set[str]:
    """The names and `self` attributes a read in `loop` may take from the previous iteration
    (by reaching bindings, as `bindings.carried`): read in a way that carries them on
    (`_carrying_reads`) before any statement on the read's path always binds them, or in the
    loop's header (a `while` test is read before every iteration)."""
    header = loop.test if isinstance(loop, ast.While) else loop.iter
    return _exposed(loop.body) | _carrying_reads([header])


def _exposed(block: list[ast.stmt]) -> set[str]:
    """What `block` may read before binding it (its upward-exposed uses)."""
    exposed: set[str] = set()
    bound: set[str] = set()
    for statement in block:
        exposed |= _exposed_in(statement) - bound
        bound |= _binds(statement)
    return exposed


def _exposed_in(statement: ast.stmt) -> set[str]:
    kind = type(statement)
    if kind is ast.If:
        return (
            _carrying_reads([statement.test])  # type: ignore[attr-defined]
            | _exposed(statement.body)  # type: ignore[attr-defined]
            | _exposed(statement.orelse)  # type: ignore[attr-defined]
        )
    if kind in (ast.With, ast.AsyncWith):
        items = [item.context_expr for item in statement.items]  # type: ignore[attr-defined]
        return _carrying_reads(items) | _exposed(statement.body)  # type: ignore[attr-defined]
    if kind in (ast.For, ast.AsyncFor, ast.While):
        header = statement.iter if kind is not ast.While else statement.test  # type: ignore[attr-defined]
        return (
            _carrying_reads([header])
            | _exposed(statement.body)  # type: ignore[attr-defined]
            | _exposed(statement.orelse)  # type: ignore[attr-defined]
        )
    if kind is ast.Try or kind is ast.TryStar:
        blocks = [statement.body, statement.orelse, statement.finalbody]  # type: ignore[attr-defined]
        blocks += [handler.body for handler in statement.handlers]  # type: ignore[attr-defined]
        return set().union(*map(_exposed, blocks))
    if kind in _SCOPE_KINDS:
        return set()  # another scope (its decorators and defaults read nothing carried)
    return _carrying_reads([statement])


def _always_binds(statement: ast.stmt, key: str) -> bool:
    return key in _binds(statement)


def _binds(statement: ast.stmt) -> set[str]:
    """What `statement` binds whenever it completes: an assignment's targets, or what every
    branch of an `if` (the body of a `with`) binds."""
    kind = type(statement)
    if kind is ast.Assign:
        return set().union(*map(_bound_by, statement.targets))  # type: ignore[attr-defined]
    if kind is ast.AugAssign or (kind is ast.AnnAssign and statement.value is not None):  # type: ignore[attr-defined]
        return _bound_by(statement.target)  # type: ignore[attr-defined]
    if kind is ast.If:
        return _block_binds(statement.body) & _block_binds(statement.orelse)  # type: ignore[attr-defined]
    if kind in (ast.With, ast.AsyncWith):
        return _block_binds(statement.body)  # type: ignore[attr-defined]
    return set()


def _block_binds(block: list[ast.stmt]) -> set[str]:
    return set().union(*map(_binds, block))


def returned(function: _Function) -> Iterator[ast.expr]:
    """The values `function`'s own `return` statements give."""
    for node in _walk(function.body, scopes=False):
        if type(node) is ast.Return and node.value is not None:  # type: ignore[attr-defined]
            yield node.value  # type: ignore[attr-defined]


def yields(function: _Function) -> bool:
    return any(
        type(node) in (ast.Yield, ast.YieldFrom) for node in _walk(function.body, scopes=False)
    )


def _carrying_reads(nodes: list[ast.AST]) -> set[str]:
    """The names and `self` attributes `nodes` read in a way that takes their value further
    (`gf002._carries_on`, `_is_method_receiver`): not as a comparison's or an `if` test's
    operand, not detached there (`h.detach()`, `h.data`), not as the receiver of an in-place
    method (`h.detach_()`)."""
    reads = []
    ignored: set[int] = set()
    for node in _walk(nodes, scopes=False):
        kind = type(node)
        if kind is ast.Compare:
            ignored.update(map(id, [node.left, *node.comparators]))  # type: ignore[attr-defined]
        elif kind is ast.If:
            ignored.add(id(node.test))  # type: ignore[attr-defined]
        elif kind is ast.BoolOp:
            ignored.update(map(id, node.values))  # type: ignore[attr-defined]
        elif kind is ast.Attribute:
            if node.attr in _DETACHING_ATTRIBUTES:  # type: ignore[attr-defined]
                ignored.add(id(node.value))  # type: ignore[attr-defined]
        elif kind is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            if type(func) is ast.Attribute and func.attr.endswith("_"):
                ignored.add(id(func.value))
        if type(getattr(node, "ctx", None)) is ast.Load:
            key = target_key(node)
            if key is not None:
                reads.append((node, key))
    return {key for node, key in reads if id(node) not in ignored}


def evaluates(function: _Function, calls_eval: bool = True) -> bool:
    """`training.is_evaluation_function` without its training-step condition: named for
    inference or evaluation, or calling `.eval()` (`calls_eval`: it may, by its text)."""
    return bool(EVALUATION_NAME.match(function.name)) or (
        calls_eval
        and any(
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "eval"
            and not node.args
            for node in ast.walk(function)
        )
    )


def _kept_operand(node: ast.AST, lines: list[str]) -> ast.expr | None:
    """`gf002._kept_stores`: what `xs.append(v)` / `xs.insert(i, v)` or `bank[idx] = v` keeps
    (into a name or a `self` attribute, by an index that is not a constant: one integer or
    string literal, as LibCST's `Integer` and `SimpleString`)."""
    if type(node) is ast.Expr and type(node.value) is ast.Call:  # type: ignore[attr-defined]
        call = node.value  # type: ignore[attr-defined]
        arguments = [*call.args, *(keyword.value for keyword in call.keywords)]
        grows = _method(call) in GROWING_METHODS and target_key(call.func.value) is not None
        return arguments[-1] if grows and arguments else None
    if type(node) is ast.Assign and len(node.targets) == 1:  # type: ignore[attr-defined]
        target = node.targets[0]  # type: ignore[attr-defined]
        if type(target) is ast.Subscript and target_key(target.value) is not None:
            index = target.slice
            elements = index.elts if type(index) is ast.Tuple else [index]
            if not all(_one_literal(element, lines) for element in elements):
                return node.value  # type: ignore[attr-defined]
    return None


def _one_literal(node: ast.expr, lines: list[str]) -> bool:
    """An integer, or one string literal (`"a" "b"` is two, and `True` a name, to LibCST)."""
    if type(node) is not ast.Constant or type(node.value) not in (int, str, bytes):  # type: ignore[attr-defined]
        return False
    if type(node.value) is int:  # type: ignore[attr-defined]
        return True
    if node.lineno != node.end_lineno:
        return False
    text = lines[node.lineno - 1].encode()[node.col_offset : node.end_col_offset].decode()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    return sum(token.type == tokenize.STRING for token in tokens) == 1


def _backward_sites(facts: _ScopeFacts) -> list[ast.Call]:
    """`gf003._site`, coarsely: `x.backward(...)`, and any call of a `grad`/`backward` function
    (an alias of autograd's lets the file through before this)."""
    return [call for call in facts.calls if called_name(call) in ("backward", "grad")]
