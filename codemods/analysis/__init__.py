"""The shared per-file analysis every rule reads: built once per parsed file.

`FileAnalysis` indexes the tree, then interprets each scope (module first, then functions in
callers-before-callees order so that parameters take the values their callers pass) and
answers the questions rules ask: what is known of this expression here, which loops enclose
this statement, in which grad mode does it run, where else does this name occur.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property

import libcst as cst
from libcst.metadata import CodeRange

from codemods.analysis import torch_api
from codemods.analysis.bindings import NamedExpressions, ScopeBindings, scope_bindings
from codemods.analysis.imports import import_aliases, qualify
from codemods.analysis.index import ClassInfo, Index, ScopeNode, build_index
from codemods.analysis.interpreter import Env, Interpreter, ScopeFacts, backward_root, target_key
from codemods.analysis.positions import SourcePositions
from codemods.analysis.training import TrainingSteps
from codemods.analysis.values import UNKNOWN, Grad, Kind, Value
from codemods.cst_speedups import node_classes

__all__ = ["FileAnalysis", "Grad", "Kind", "Value"]

_CALL_DEPTH = 3
# By `type(...) in`: LibCST's node classes are final, and these walks run for every question.
_SCOPE_TYPES = frozenset({cst.FunctionDef, cst.Module})
_LOOP_TYPES = frozenset({cst.For, cst.While})
# `is_load`: what a stored name sits in (`a, [b, *c] = ...`), and what stores it.
_UNPACKING = node_classes(cst.Element, cst.Tuple, cst.List, cst.StarredElement)
_STORING = node_classes(cst.AssignTarget, cst.AsName)
_TARGET_HOLDERS = node_classes(cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor)
Loop = cst.For | cst.While


class FileAnalysis:
    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.index: Index = build_index(module)
        self.aliases = import_aliases(module)
        self.facts: dict[ScopeNode, ScopeFacts] = {}
        self._env_before: dict[cst.CSTNode, Env] = {}
        self._grad_enabled: dict[cst.CSTNode, bool] = {}
        self._loop_entry: dict[cst.CSTNode, Env] = {}
        self._call_args: dict[cst.FunctionDef, list[list[Value]]] = {}
        self._summaries: dict[tuple[object, ...], Value] = {}
        self._in_progress: set[tuple[object, ...]] = set()
        self._class_env: dict[str, Env] = {}
        self._bindings: dict[ScopeNode, ScopeBindings] = {}
        self._backward_by_root = self._index_backward_calls()
        self._interpret_all()

    def release(self) -> None:
        """Drop everything the analysis holds. Its parts link back to it (the interpreters'
        callbacks, the training steps), so without this the cyclic garbage collector, not
        reference counting, frees the file's tree, after traversing all of it."""
        self.__dict__.clear()

    # -- questions rules ask ------------------------------------------------------------
    def qualified_name(self, node: cst.BaseExpression) -> str | None:
        return qualify(node, self.aliases)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.index.parents.get(node)

    def statement_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The innermost interpreted statement that contains `node`."""
        current: cst.CSTNode | None = node
        while current is not None and current not in self._env_before:
            current = self.index.parents.get(current)
        return current

    def value_of(self, expression: cst.BaseExpression) -> Value:
        """What is known of `expression` just before its statement runs."""
        statement = self.statement_of(expression)
        if statement is None:
            return UNKNOWN
        interpreter = self._interpreter(self.scope_of(statement), self._grad_enabled[statement])
        return interpreter.value(
            expression, self._env_before[statement], self._grad_enabled[statement]
        )

    def env_before(self, statement: cst.CSTNode) -> Env:
        return self._env_before.get(statement, {})

    def grad_enabled(self, node: cst.CSTNode) -> bool:
        statement = self.statement_of(node)
        return statement is not None and self._grad_enabled[statement]

    def loop_entry(self, loop: Loop) -> Env:
        """The environment flowing into `loop` from before it (its first iteration)."""
        return self._loop_entry.get(loop, {})

    def enclosing_loops(self, node: cst.CSTNode) -> list[Loop]:
        """Loops around `node` in its own function, innermost first. A node in a loop's
        `for` target or iterable is not inside that loop's iterations."""
        loops: list[Loop] = []
        child = node
        parents = self.index.parents
        current = parents.get(node)
        while current is not None and type(current) not in _SCOPE_TYPES:
            if type(current) in _LOOP_TYPES and child is current.body:  # type: ignore[union-attr]
                loops.append(current)  # type: ignore[arg-type]
            child, current = current, parents.get(current)
        return loops

    def contains(self, outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
        start, end = self.index.start, self.index.end
        return start[outer] <= start[inner] and end[inner] <= end[outer]

    def exclusive_branches(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """Whether `a` and `b` sit in different branches of one `if` (never both run)."""
        ancestors: dict[cst.CSTNode, cst.CSTNode] = {}  # ancestor -> its child on the way to `a`
        child, current = a, self.parent(a)
        while current is not None:
            ancestors[current] = child
            child, current = current, self.parent(current)
        child, current = b, self.parent(b)
        while current is not None and current not in ancestors:
            child, current = current, self.parent(current)
        if not isinstance(current, cst.If):
            return False
        branch_a, branch_b = ancestors[current], child
        return branch_a is not branch_b and current.test not in (branch_a, branch_b)

    @cached_property
    def positions(self) -> Mapping[cst.CSTNode, CodeRange]:
        """Where each node is in the source, located when first asked (`SourcePositions`)."""
        return SourcePositions(self.module, self.index.parents)

    def code_of(self, node: cst.CSTNode, limit: int | None = None) -> str:
        """`node`'s source on one line, for messages; cut to `limit` characters."""
        code = " ".join(self.module.code_for_node(node).split())
        if limit is not None and len(code) > limit:
            return code[: limit - 3] + "..."
        return code

    def attached_operands(
        self,
        expression: cst.BaseExpression,
        skip: Callable[[cst.BaseExpression], bool] = lambda _: False,
        proven_only: bool = False,
    ) -> list[cst.BaseExpression]:
        """The smallest graph-attached parts of an arithmetic expression, the ones a fix takes
        out of the graph: `loss` in `loss * n`, both losses in `l1 + 0.5 * l2`, a whole
        parenthesised sum. `skip` leaves out parts (the accumulator itself); `proven_only`
        leaves out values attached by naming convention only."""
        if skip(expression):
            return []
        wanted = (Grad.ATTACHED,) if proven_only else (Grad.ATTACHED, Grad.LIKELY)

        def attached(part: cst.BaseExpression) -> bool:
            return self.value_of(part).grad in wanted

        if getattr(expression, "lpar", ()) and attached(expression):
            return [expression]
        if isinstance(expression, cst.BinaryOperation):
            return self.attached_operands(expression.left, skip, proven_only) + (
                self.attached_operands(expression.right, skip, proven_only)
            )
        if isinstance(expression, cst.UnaryOperation):
            return self.attached_operands(expression.expression, skip, proven_only)
        if isinstance(expression, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and (
            attached(expression)
        ):
            return [expression]
        return []

    def descendants(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """`node` and every node inside it, in source order (whitespace nodes excepted).
        Prefer this to a LibCST visitor, which rebuilds every node it passes."""
        return self.index.order[self.index.start[node] : self.index.end[node]]

    def scope_of(self, node: cst.CSTNode) -> ScopeNode:
        """The function (or the module) whose body `node` is in."""
        known = self.index.scope_of.get(node)
        if known is not None:
            return known
        parents = self.index.parents
        current = parents.get(node)
        while current is not None and type(current) not in _SCOPE_TYPES:
            current = parents.get(current)
        scope = current if current is not None else self.module
        self.index.scope_of[node] = scope
        return scope

    def class_of(self, function: ScopeNode) -> ClassInfo | None:
        if isinstance(function, cst.FunctionDef) and function in self.index.class_of:
            return self.index.classes[self.index.class_of[function]]
        return None

    def occurrences(self, name: str, scope: ScopeNode) -> list[cst.Name]:
        return list(self.index.names[scope].get(name, []))

    def self_attribute_occurrences(self, class_name: str, attribute: str) -> list[cst.Attribute]:
        return list(self.index.self_attributes[class_name].get(attribute, []))

    def class_attribute_inits(self, class_name: str, attribute: str) -> Value | None:
        """Join of what plain assignments `self.<attribute> = ...` in the class store."""
        result: Value | None = None
        for occurrence in self.self_attribute_occurrences(class_name, attribute):
            assign = self.parent(self.parent(occurrence) or occurrence)
            if (
                isinstance(assign, cst.Assign)
                and any(t.target is occurrence for t in assign.targets)
                and not _mentions(self, assign.value, occurrence)
            ):
                stored = self.value_of(assign.value)
                result = stored if result is None else result.join(stored)
        return result

    def module_calls(self, info: ClassInfo | None) -> list[cst.Call]:
        """Calls of instances of the nn.Module class `info` (`model(x)` runs its forward)."""
        if info is None or not self.is_module_class(info.name):
            return []
        return self._module_calls.get(info.name, [])

    @cached_property
    def _module_calls(self) -> dict[str, list[cst.Call]]:
        calls: dict[str, list[cst.Call]] = {}
        for node in self.index.of_types(cst.Call):
            if isinstance(node, cst.Call) and self.statement_of(node) is not None:
                callee = self.value_of(node.func)
                if callee.kind is Kind.MODULE and callee.cls is not None:
                    calls.setdefault(callee.cls, []).append(node)
        return calls

    def is_module_class(self, class_name: str, seen: frozenset[str] = frozenset()) -> bool:
        info = self.index.classes.get(class_name)
        if info is None or class_name in seen:
            return False
        for base in info.bases:
            name = self.qualified_name(base)
            if name in ("torch.nn.Module", "torch.nn.modules.module.Module"):
                return True
            if isinstance(base, cst.Name) and self.is_module_class(base.value, seen | {class_name}):
                return True
        return False

    def function_named(self, callee: Value) -> cst.FunctionDef | None:
        if callee.kind is Kind.FUNCTION and callee.cls is not None:
            return self.index.functions.get(callee.cls)
        return None

    def grad_disabled_by_decorator(self, function: cst.FunctionDef) -> bool:
        for decorator in function.decorators:
            expression = decorator.decorator
            callee = expression.func if isinstance(expression, cst.Call) else expression
            if torch_api.disables_grad(self.qualified_name(callee)):
                return True
        return False

    # -- interpretation ---------------------------------------------------------------
    def is_load(self, node: cst.CSTNode) -> bool:
        """Whether the name or attribute `node` is read (rather than stored to) there."""
        child, parent = node, self.parent(node)
        while type(parent) in _UNPACKING:
            child, parent = parent, self.parent(parent)
        kind = type(parent)
        if kind in _STORING:
            return False
        if kind in _TARGET_HOLDERS:
            return parent.target is not child  # type: ignore[union-attr]
        return True

    def bindings(self, scope: ScopeNode) -> ScopeBindings:
        """Reaching bindings of `scope`'s names, computed once per scope."""
        if scope not in self._bindings:
            self._bindings[scope] = scope_bindings(scope, self._named_expressions)
        return self._bindings[scope]

    @cached_property
    def _named_expressions(self) -> NamedExpressions:
        return NamedExpressions(self.index)

    @cached_property
    def training(self) -> TrainingSteps:
        """Which loops and functions reach a backward or optimizer step."""
        return TrainingSteps(self)

    def loop_reaches_step(self, loop: Loop) -> bool:
        """Whether a backward or optimizer step runs between two iterations of `loop`."""
        return self.training.loop_reaches_step(loop, self.scope_of(loop))

    @cached_property
    def backward_calls(self) -> list[cst.Call]:
        """Every `x.backward(...)` call in the file."""
        return [
            call
            for call in self.index.calls_by_name.get("backward", [])
            if isinstance(call.func, cst.Attribute)
        ]

    def _index_backward_calls(self) -> dict[str, list[cst.Call]]:
        """`x.backward(...)` calls by the name of the root they differentiate."""
        by_root: dict[str, list[cst.Call]] = {}
        for call in self.backward_calls:
            root = backward_root(call.func.value)  # type: ignore[attr-defined]
            if root is not None:
                by_root.setdefault(root, []).append(call)
        return by_root

    def _backward_evidence(self, name: str, assignment: cst.CSTNode) -> str | None:
        """Whether a backward runs on what `assignment` stored into `name`: a call later in
        the same block, before any rebinding of `name`. "scalar" for a plain `.backward()`
        (which only works on one-element tensors), "tensor" when a gradient is passed."""
        calls = self._backward_by_root.get(name)
        line = self.parent(assignment)
        block = self.parent(line) if line is not None else None
        if not calls or block is None:
            return None
        start, end = self.index.start, self.index.end
        scope = self.scope_of(assignment)
        limit = end[block]
        for occurrence in self.index.names[scope].get(name, []):
            if start[occurrence] >= end[assignment] and not self.is_load(occurrence):
                limit = min(limit, start[occurrence])
        for call in calls:
            if end[assignment] <= start[call] < limit and self.contains(block, call):
                return "tensor" if call.args else "scalar"
        return None

    def _interpreter(self, scope: ScopeNode, grad: bool) -> Interpreter:
        return Interpreter(
            lambda node: qualify(node, self.aliases),
            self._call_value,
            self._global_lookup(scope),
            self._backward_evidence,
            grad,
        )

    def _global_lookup(self, scope: ScopeNode):
        module_env = self.facts[self.module].final_env if self.module in self.facts else {}
        class_info = self.class_of(scope)

        def lookup(name: str) -> Value:
            if name.startswith("self.") and class_info is not None:
                known = self._class_env.get(class_info.name, {}).get(name)
                return known if known is not None else UNKNOWN
            if name in module_env:
                return module_env[name]
            if name in self.index.functions:
                return Value(Grad.FREE, Kind.FUNCTION, cls=name)
            if name in self.index.classes:
                return Value(Grad.FREE, Kind.CLASS, cls=name)
            return UNKNOWN

        return lookup

    def _interpret_all(self) -> None:
        # Constructors first, so that `self.rnn` is known to be a GRU wherever a forward is
        # followed; they run again below with the arguments their callers pass.
        for info in self.index.classes.values():
            if "__init__" in info.methods:
                init = info.methods["__init__"]
                self._interpret_scope(init, self._parameter_env(init), True)
        self._interpret_scope(self.module, {}, True)
        for function in self._callers_first():
            grad = not self.grad_disabled_by_decorator(function)
            self._interpret_scope(
                function,
                self._parameter_env(function),
                grad and not self._called_only_without_grad(function),
            )

    def _called_only_without_grad(self, function: cst.FunctionDef) -> bool:
        """Whether every call of `function` in the file runs under `no_grad` (a helper of an
        `@torch.no_grad()` update method). Callers come first, so their modes are known."""
        calls = self.index.calls_by_name.get(function.name.value, [])
        statements = [self.statement_of(call) for call in calls]
        return bool(statements) and all(
            statement is not None and not self._grad_enabled.get(statement, True)
            for statement in statements
        )

    def _interpret_scope(self, scope: ScopeNode, env: Env, grad: bool) -> None:
        interpreter = self._interpreter(scope, grad)
        facts = interpreter.run(
            scope.body.body if isinstance(scope, cst.FunctionDef) else scope.body, env
        )
        self.facts[scope] = facts
        self._env_before.update(facts.env_before)
        self._grad_enabled.update(facts.grad_enabled)
        self._loop_entry.update(facts.loop_entry)
        info = self.class_of(scope)
        if info is not None:
            class_env = self._class_env.setdefault(info.name, {})
            constructor = isinstance(scope, cst.FunctionDef) and scope.name.value == "__init__"
            for key, value in facts.final_env.items():
                if key.startswith("self."):
                    known = class_env.get(key)
                    class_env[key] = value if known is None or constructor else known.join(value)

    def _callers_first(self) -> list[cst.FunctionDef]:
        """Functions ordered so that, cycles aside, every caller comes before its callees;
        `__init__` methods come before the other methods of their class."""
        functions = [n for n in self.index.enclosing_function if isinstance(n, cst.FunctionDef)]
        callers: dict[cst.FunctionDef, set[ScopeNode]] = {}
        for function in functions:
            calls = self.index.calls_by_name.get(function.name.value, [])
            callers[function] = {self.scope_of(call) for call in calls} - {function}
        ordered: list[cst.FunctionDef] = []
        done: set[ScopeNode] = {self.module}
        pending = sorted(functions, key=lambda f: f.name.value != "__init__")
        while pending:
            ready = next((f for f in pending if callers[f] <= done), pending[0])
            pending.remove(ready)
            ordered.append(ready)
            done.add(ready)
        return ordered

    def _parameter_env(self, function: cst.FunctionDef) -> Env:
        env: Env = {}
        info = self.class_of(function)
        params = list(function.params.posonly_params) + list(function.params.params)
        if info is not None and params:
            kind = Kind.MODULE if self.is_module_class(info.name) else Kind.OBJECT
            env[params[0].name.value] = Value(Grad.FREE, kind, cls=info.name)
            env.update(self._class_env.get(info.name, {}))
            params = params[1:]
        calls = self._call_args.get(function, [])
        for position, param in enumerate(params):
            value: Value | None = None
            for args in calls:
                passed = args[position] if position < len(args) else UNKNOWN
                value = passed if value is None else value.join(passed)
            env[param.name.value] = value if value is not None else UNKNOWN
        return env

    def _call_value(
        self, node: cst.Call, callee: Value, args: list[Value], grad: bool, method: str | None
    ) -> Value | None:
        if callee.kind is Kind.CLASS and callee.cls is not None:
            kind = Kind.MODULE if self.is_module_class(callee.cls) else Kind.OBJECT
            init = self.index.classes[callee.cls].methods.get("__init__")
            if init is not None and not any(arg.star for arg in node.args):
                positional = [
                    value for arg, value in zip(node.args, args, strict=True) if not arg.keyword
                ]
                self._call_args.setdefault(init, []).append(positional)
            return Value(Grad.FREE, kind, cls=callee.cls)
        function: cst.FunctionDef | None
        receiver: Value | None = None
        if method is not None:
            info = self.index.classes.get(callee.cls or "")
            function = info.methods.get(method) if info else None
            receiver = callee
        else:
            function = self.function_named(callee)
        if function is None or any(arg.star for arg in node.args):
            return None
        positional = [
            value for arg, value in zip(node.args, args, strict=True) if arg.keyword is None
        ]
        self._call_args.setdefault(function, []).append(positional)
        key = (function, receiver, tuple(args), grad)
        if key in self._summaries:
            return self._summaries[key]
        if key in self._in_progress or len(self._in_progress) >= _CALL_DEPTH:
            return UNKNOWN
        self._in_progress.add(key)
        try:
            env = self._parameter_env(function)
            params = list(function.params.posonly_params) + list(function.params.params)
            if receiver is not None:
                params = params[1:]
            for param, value in zip(params, positional, strict=False):
                env[param.name.value] = value
            for arg, value in zip(node.args, args, strict=False):
                if arg.keyword is not None:
                    env[arg.keyword.value] = value
            inner_grad = grad and not self.grad_disabled_by_decorator(function)
            facts = self._interpreter(function, inner_grad).run(function.body.body, env)
            result = facts.returned if facts.returned is not None else UNKNOWN
        finally:
            self._in_progress.discard(key)
        self._summaries[key] = result
        return result


def _mentions(analysis: FileAnalysis, expression: cst.CSTNode, attribute: cst.Attribute) -> bool:
    """Whether `expression` reads the same `self.x` as `attribute` (`self.x = self.x + ...`)."""
    wanted = target_key(attribute)
    return any(
        isinstance(node, cst.Attribute) and target_key(node) == wanted
        for node in analysis.descendants(expression)
    )
