"""The shared per-file analysis every rule reads: built once per parsed file.

`FileAnalysis` indexes the tree, then interprets each scope (module first, then functions in
callers-before-callees order so that parameters take the values their callers pass) and
answers the questions rules ask: what is known of this expression here, which loops enclose
this statement, in which grad mode does it run, where else does this name occur.
"""

from __future__ import annotations

import ast
import heapq
import io
import tokenize
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from codemods.analysis import torch_api
from codemods.analysis.bindings import NamedExpressions, ScopeBindings, scope_bindings
from codemods.analysis.detaching import detached_value, returns_detached
from codemods.analysis.imports import dotted_name, import_aliases, qualify
from codemods.analysis.index import (
    FUNCTION_TYPES,
    LOOP_TYPES,
    ClassInfo,
    Index,
    Loop,
    ScopeNode,
    build_index,
)
from codemods.analysis.interpreter import (
    Env,
    Interpreter,
    ScopeFacts,
    backward_holder,
    backward_root,
    joined_grad,
    rebound,
    super_class,
    target_key,
)
from codemods.analysis.positions import Point, SourceLines, SourcePositions, Span
from codemods.analysis.syntax import has_star
from codemods.analysis.training import TrainingSteps
from codemods.analysis.values import UNKNOWN, Grad, Kind, Value
from codemods.analysis.weights import ModuleWeights

if TYPE_CHECKING:
    from codemods.analysis.flows import Flow

__all__ = ["FileAnalysis", "Grad", "Kind", "Value"]

_CALL_DEPTH = 3
_NOT_ASKED = object()  # `qualified_name`'s memo: a node not looked up yet
# By `type(...) in`: these walks run for every question.
_SCOPE_TYPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.Module})
_LOOP_TYPES = frozenset(LOOP_TYPES)
Function = ast.FunctionDef | ast.AsyncFunctionDef
# Whitespace a parenthesised expression may have inside its parentheses.
_SPACE = " \t\f\r\n\\"
_COMPREHENSION_TYPES = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
Comprehension = ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp


class FileAnalysis:
    def __init__(self, tree: ast.Module, source: str, index: Index | None = None) -> None:
        """`index`: the tree's, when the caller built it already (the syntax check reads it)."""
        self.module = tree
        self.source: str = source
        self._lines = SourceLines(source)
        self.index: Index = index if index is not None else build_index(tree)
        self.aliases = import_aliases(tree)
        self._qualified: dict[ast.AST, str | None] = {}
        # Each node's scope, remembered as `scope_of` is asked (a file asks it of one `Name`
        # or `Attribute` in twenty-five, so the index's walk does not record it).
        self._scopes: dict[ast.AST, ScopeNode] = {}
        self.facts: dict[ScopeNode, ScopeFacts] = {}
        self._env_before: dict[ast.AST, Env] = {}
        self._grad_enabled: dict[ast.AST, bool] = {}
        self._loop_entry: dict[ast.AST, Env] = {}
        # What each positional parameter of each function received, joined over the calls
        # the interpreter followed so far, in their order (kept as it grows: joining every
        # call again for each call made the many calls of one helper quadratic).
        self._passed_to: dict[Function, list[Value]] = {}
        # the grad modes the calls of each function the interpreter followed ran in
        self._call_grads: dict[Function, set[bool]] = {}
        # The classes of the objects each method of the file is called on (`model.step()` on
        # a subclass instance runs the base's method with `self` of the subclass).
        self._receiver_classes: dict[Function, set[str | None]] = {}
        self._summaries: dict[tuple[object, ...], Value] = {}
        self._in_progress: set[tuple[object, ...]] = set()
        self._truncated = 0  # calls answered UNKNOWN for depth or recursion
        # Bumped whenever anything a run reads that a run can change does change: what calls
        # passed, their grad modes and receivers, summaries, class attributes, scope facts.
        self._state_version = 0
        # A run cut short by the depth limit or a cycle, by its call, the calls in progress
        # around it and the state version it started and ended at (`_call_value`).
        self._cut_short: dict[tuple[object, ...], Value] = {}
        self._class_env: dict[str, Env] = {}
        self._class_env_version = 0  # bumped whenever an attribute's known value changes
        self._class_body_names_of: dict[str, frozenset[str]] = {}
        self._lineages: dict[str, tuple[str, ...]] = {}
        self._passed_parameters: dict[Function, tuple[ast.arg, ...]] = {}
        self._calls_of_function: dict[Function, list[ast.Call]] = {}
        self._decorations: dict[tuple[Function, str], bool] = {}
        self._instance_kinds: dict[str, Kind] = {}
        # `obj.x` read outside `obj`'s class -> the class `obj` holds an instance of
        self._holder_classes: dict[ast.Attribute, str | None] = {}
        # Asked for every call and parameter of a method: the answers never change.
        self._derived_from: dict[tuple[str, Callable[[str | None], bool]], bool] = {}
        self._readers: dict[tuple[str | None, bool], Interpreter] = {}
        self._values_of: dict[ast.AST, Value] = {}
        self._interpreted = False  # every scope has run: module and class facts are final
        self._bindings: dict[ScopeNode, ScopeBindings] = {}
        self._enclosing_loops: dict[ast.AST, tuple[Loop, ...]] = {}
        # (variable, scope) -> where values stored into it go (`flows.follow_target`)
        self.variable_flows: dict[tuple[str, ScopeNode], Flow] = {}
        self._backward_by_root = self._index_backward_calls()
        # the names some backward runs on, or on a value they hold (`out` of `out["loss"]`)
        self._backward_names = {root.removesuffix("[]") for root in self._backward_by_root}
        self._interpret_all()
        self._interpreted = True

    def release(self) -> None:
        """Drop everything the analysis holds. Its parts link back to it (the interpreters'
        callbacks, the training steps), so without this the cyclic garbage collector, not
        reference counting, frees the file's tree, after traversing all of it."""
        self.__dict__.clear()

    # -- questions rules ask ------------------------------------------------------------
    def offset(self, point: Point) -> int:
        """The index in `source` of a position (1-based line, 0-based character column)."""
        return self._lines.offset(point.line, point.column)

    @cached_property
    def lines(self) -> list[str]:
        """The source's lines, without their line breaks, as CPython counts them."""
        return [self._lines.text(line) for line in range(1, len(self._lines) + 1)]

    def qualified_name(self, node: ast.AST) -> str | None:
        # Remembered by node: the interpreter asks again for each call each time it runs a
        # body, and rules and provenance ask again.
        name = self._qualified.get(node, _NOT_ASKED)  # one lookup: None is an answer
        if name is _NOT_ASKED:
            name = self._qualified[node] = qualify(node, self.aliases)
        return name  # type: ignore[return-value]

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.index.parents.get(node)

    def ancestors_within(
        self, node: ast.AST, boundary: ast.AST | tuple[type[ast.AST], ...]
    ) -> Iterator[ast.AST]:
        """The ancestors of `node`, nearest first, below `boundary`: an ancestor, or the kinds
        of node (loops, functions) at the first of which the walk stops."""
        parents = self.index.parents
        current = parents.get(node)
        if isinstance(boundary, tuple):
            while current is not None and not isinstance(current, boundary):
                yield current
                current = parents.get(current)
        else:
            while current is not None and current is not boundary:
                yield current
                current = parents.get(current)

    def block_of(self, statement: ast.AST) -> list[ast.stmt]:
        """The statement list that holds `statement` (a function's or loop's `body`, an
        `orelse`, the module's body, ...): `getattr(parent, field)`."""
        parent = self.index.parents.get(statement)
        if parent is None:
            return [statement] if isinstance(statement, ast.stmt) else []
        held = getattr(parent, self.index.field[statement])
        return held if type(held) is list else [held]

    def statement_of(self, node: ast.AST) -> ast.AST | None:
        """The innermost interpreted statement that contains `node`."""
        current: ast.AST | None = node
        while current is not None and current not in self._env_before:
            current = self.index.parents.get(current)
        return current

    def value_of(self, expression: ast.AST) -> Value:
        """What is known of `expression` just before its statement runs."""
        known = self._values_of.get(expression)
        if known is not None:
            return known
        statement = self.statement_of(expression)
        if statement is None:
            return UNKNOWN
        grad = self._grad_enabled[statement]
        scope = self.scope_of(statement)
        info = self.class_of(scope)
        # Reading a value leaves the interpreter's facts alone, so one interpreter per class
        # and grad mode answers every question asked once the scopes have run.
        key = (info.name if info is not None else None, grad)
        interpreter = self._readers.get(key)
        if interpreter is None:
            interpreter = self._interpreter(scope, grad)
            if self._interpreted:
                self._readers[key] = interpreter
        env = self._env_before[statement]
        if statement in self._holding_comprehensions:
            for comprehension, generators in self._comprehensions_around(expression, statement):
                bound = comprehension.generators[:generators]
                env = interpreter.generators_bound(bound, env, grad)
        value = interpreter.value(expression, env, grad)
        if self._interpreted:  # rules ask again and again, and the facts are now final
            self._values_of[expression] = value
        return value

    @cached_property
    def _holding_comprehensions(self) -> set[ast.AST]:
        """The statements with a comprehension inside (each statement around one)."""
        found: set[ast.AST] = set()
        parents = self.index.parents
        for node in self.index.of_types(*_COMPREHENSION_TYPES):
            current = parents.get(node)
            while current is not None and current not in found:
                if isinstance(current, ast.stmt):
                    found.add(current)
                current = parents.get(current)
        return found

    def comprehensions_around(self, node: ast.AST) -> list[Comprehension]:
        """The comprehensions of `node`'s statement that may run `node` more than once (it is
        in their element, key, value, a condition, or an iterable past the first), outermost
        first."""
        statement = self.statement_of(node)
        if statement is None:
            return []
        return [
            comprehension
            for comprehension, generators in self._comprehensions_around(node, statement)
            if generators > 0
        ]

    def _comprehensions_around(
        self, expression: ast.AST, statement: ast.AST
    ) -> list[tuple[Comprehension, int]]:
        """The comprehensions of `statement` around `expression`, outermost first, each with
        how many of its generators bind names `expression` sees (`m` in `{k: m(x) for k, m
        in self.items()}`): all of them for its element, those before a generator for that
        generator's iterable, up to and with it for its target and conditions."""
        found: list[tuple[Comprehension, int]] = []
        parents = self.index.parents
        child, node = expression, parents.get(expression)
        while node is not None and child is not statement:
            if isinstance(node, _COMPREHENSION_TYPES):
                generators = len(node.generators)
                if isinstance(child, ast.comprehension):
                    position = node.generators.index(child)
                    generators = position if self._in_iterable(child, expression) else position + 1
                found.append((node, generators))
            child, node = node, parents.get(node)
        found.reverse()
        return found

    def _in_iterable(self, generator: ast.comprehension, node: ast.AST) -> bool:
        while node is not generator:
            if node is generator.iter:
                return True
            node = self.index.parents[node]
        return False

    def env_before(self, statement: ast.AST) -> Env:
        return self._env_before.get(statement, {})

    def grad_enabled(self, node: ast.AST) -> bool:
        statement = self.statement_of(node)
        return statement is not None and self._grad_enabled[statement]

    def loop_entry(self, loop: Loop) -> Env:
        """The environment flowing into `loop` from before it (its first iteration)."""
        return self._loop_entry.get(loop, {})

    def enclosing_loops(self, node: ast.AST) -> list[Loop]:
        """Loops around `node` in its own function, innermost first. A node in a loop's
        `for` target or iterable (or its `else`) is not inside that loop's iterations."""
        return list(self._loops_around(node))

    def _loops_around(self, node: ast.AST) -> tuple[Loop, ...]:
        """`enclosing_loops`, remembered for every node on the way up, so that asking about
        each statement of a deeply nested block (an `elif` chain) costs linear time."""
        known = self._enclosing_loops
        parents = self.index.parents
        fields = self.index.field
        path: list[ast.AST] = []
        current: ast.AST | None = node
        while current is not None and current not in known:
            parent = parents.get(current)
            if parent is None or type(parent) in _SCOPE_TYPES:
                known[current] = ()
                break
            path.append(current)
            current = parent
        for child in reversed(path):
            parent = parents[child]
            outer = known[parent]
            if type(parent) in _LOOP_TYPES and fields[child] == "body":
                known[child] = (parent, *outer)  # type: ignore[assignment]
            else:
                known[child] = outer
        return known[node]

    def contains(self, outer: ast.AST, inner: ast.AST) -> bool:
        start, end = self.index.start, self.index.end
        return start[outer] <= start[inner] and end[inner] <= end[outer]

    def exclusive_branches(self, a: ast.AST, b: ast.AST) -> bool:
        """Whether `a` and `b` sit in different branches of one `if` (never both run)."""
        ancestors: dict[ast.AST, ast.AST] = {}  # ancestor -> its child on the way to `a`
        child, current = a, self.parent(a)
        while current is not None:
            ancestors[current] = child
            child, current = current, self.parent(current)
        child, current = b, self.parent(b)
        while current is not None and current not in ancestors:
            child, current = current, self.parent(current)
        if not isinstance(current, ast.If):
            return False
        branch_a, branch_b = ancestors[current], child
        if branch_a is branch_b:
            return False
        # a branch is the If's `body` or its `orelse` (an `elif` is an If in the `orelse`)
        field_a, field_b = self.index.field[branch_a], self.index.field[branch_b]
        return field_a != field_b and "test" not in (field_a, field_b)

    @cached_property
    def positions(self) -> Mapping[ast.AST, Span]:
        """Where each node is in the source (0-based character columns), located when first
        asked (`SourcePositions`)."""
        return SourcePositions(self.module, self._lines, self.index)

    def code_of(self, node: ast.AST, limit: int | None = None) -> str:
        """`node`'s source on one line, for messages; cut to `limit` characters. An
        expression's own parentheses are part of its code, as they were of LibCST's."""
        first, last = self._code_bounds(node)
        code = " ".join(self.source[first:last].split())
        if limit is not None and len(code) > limit:
            return code[: limit - 3] + "..."
        return code

    def parenthesized(self, node: ast.AST) -> bool:
        """Whether the source wraps exactly this expression in its own parentheses: `(a + b)`
        in `total += (a + b)`, not the call's parentheses in `f(a + b)`, nor a tuple's own
        (which `ast` counts in the tuple's range)."""
        if not isinstance(node, ast.expr):
            return False
        span = self.positions[node]
        lines = self._lines
        first = lines.offset(span.start.line, span.start.column)
        return self._parenthesized_bounds(node)[0] != first

    def _code_bounds(self, node: ast.AST) -> tuple[int, int]:
        """The offsets in the source of `node`'s code as LibCST's `code_for_node` gave it:
        with its own parentheses, without those of the call a lone generator argument shares
        (`sum(x for x in xs)`), with a definition's decorators, with the comment that ends a
        compound statement's last line."""
        first, last = self._parenthesized_bounds(node)
        source = self.source
        kind = type(node)
        if kind is ast.GeneratorExp:
            if source.startswith("(", first) and first == self._owner_parenthesis(node):
                return first + 1, last - 1
        elif isinstance(node, ast.stmt) and hasattr(node, "body"):
            decorators = getattr(node, "decorator_list", None)
            if decorators:
                at = _skip_back(source, self._parenthesized_bounds(decorators[0])[0])
                if source.startswith("@", at - 1):
                    first = at - 1
            end = last
            while end < len(source) and source[end] in " \t\f\\":
                end += 1
            if source.startswith("#", end):
                ends = [at for at in (source.find("\n", end), source.find("\r", end)) if at >= 0]
                last = min(ends) if ends else len(source)
        return first, last

    def _parenthesized_bounds(self, node: ast.AST) -> tuple[int, int]:
        """The offsets in the source of `node`'s code with its own parentheses around it."""
        span = self.positions[node]
        lines = self._lines
        first = lines.offset(span.start.line, span.start.column)
        last = lines.offset(span.end.line, span.end.column)
        if not isinstance(node, ast.expr):
            return first, last
        parent = self.index.parents.get(node)
        if type(parent) is ast.JoinedStr or (
            type(parent) is ast.FormattedValue and self.index.field[node] == "format_spec"
        ):
            return first, last  # an f-string's parts: no parentheses of their own
        source = self.source
        # the parentheses of the call (or class) whose first argument `node` is
        opening = self._owner_parenthesis(node)
        while True:
            before = _skip_back(source, first)
            if before <= 0 or source[before - 1] != "(" or before - 1 == opening:
                return first, last
            after = _skip_forward(source, last)
            if after >= len(source) or source[after] != ")":
                return first, last
            first, last = before - 1, after + 1

    def _owner_parenthesis(self, node: ast.AST) -> int:
        """The offset of the opening parenthesis of the call or class definition that takes
        `node` as an argument or base, or -1."""
        parent = self.index.parents.get(node)
        if type(parent) is ast.keyword:
            return -1  # `f(k=(a))`: after `=`
        if type(parent) is ast.Starred:
            return -1
        if type(parent) is ast.Call:
            if self.index.field[node] == "func":
                return -1
            start = self._parenthesized_bounds(parent.func)[1]  # type: ignore[attr-defined]
        elif type(parent) is ast.ClassDef:
            if self.index.field[node] not in ("bases", "keywords"):
                return -1
            where = self.positions[parent]
            start = self._lines.offset(where.start.line, where.start.column)
            start = self.source.index(parent.name, start + len("class")) + len(parent.name)  # type: ignore[attr-defined]
        else:
            return -1
        opening = _skip_forward(self.source, start)
        return opening if self.source.startswith("(", opening) else -1

    def attached_operands(
        self,
        expression: ast.expr,
        skip: Callable[[ast.expr], bool] = lambda _: False,
        proven_only: bool = False,
    ) -> list[ast.expr]:
        """The smallest graph-attached parts of an arithmetic expression, the ones a fix takes
        out of the graph: `loss` in `loss * n`, both losses in `l1 + 0.5 * l2`, a whole
        parenthesised sum. `skip` leaves out parts (the accumulator itself); `proven_only`
        leaves out values attached by naming convention only."""
        if skip(expression):
            return []
        wanted = (Grad.ATTACHED,) if proven_only else (Grad.ATTACHED, Grad.LIKELY)

        def attached(part: ast.expr) -> bool:
            return self.value_of(part).grad in wanted

        if self.parenthesized(expression) and attached(expression):
            return [expression]
        if isinstance(expression, ast.BinOp):
            return self.attached_operands(expression.left, skip, proven_only) + (
                self.attached_operands(expression.right, skip, proven_only)
            )
        if isinstance(expression, ast.UnaryOp):
            return self.attached_operands(expression.operand, skip, proven_only)
        if isinstance(expression, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) and (
            attached(expression)
        ):
            return [expression]
        return []

    def assigns(self, name: str) -> bool:
        """Whether some scope of the file stores into the variable `name`."""
        return self._stores(name) > 0

    def _stores(self, name: str) -> int:
        """How many times the file's scopes store into the variable `name`."""
        return sum(
            type(node.ctx) is ast.Store
            for names in self.index.names.values()
            for node in names.get(name, ())
        )

    def descendants(self, node: ast.AST) -> list[ast.AST]:
        """`node` and every node inside it, in source order (the shared context and operator
        instances excepted). Prefer this to `ast.walk`, which gives no source order."""
        return self.index.order[self.index.start[node] : self.index.end[node]]

    def scope_of(self, node: ast.AST) -> ScopeNode:
        """The function (or the module) whose body `node` is in; remembered for every node
        on the way up, so that deep nesting costs linear time."""
        known = self._scopes
        scope = known.get(node)
        if scope is not None:
            return scope
        parents = self.index.parents
        path: list[ast.AST] = []
        current = node
        while True:
            path.append(current)
            parent = parents.get(current)
            if parent is None:
                scope = self.module
                break
            if type(parent) in _SCOPE_TYPES:
                scope = parent  # type: ignore[assignment]
                break
            scope = known.get(parent)
            if scope is not None:
                break
            current = parent
        for walked in path:
            known[walked] = scope  # type: ignore[assignment]
        return scope  # type: ignore[return-value]

    def class_of(self, function: ScopeNode) -> ClassInfo | None:
        # `index.class_of` holds methods only: no type test needed (asked at every call)
        name = self.index.class_of.get(function)  # type: ignore[arg-type]
        return None if name is None else self.index.classes[name]

    def occurrences(self, name: str, scope: ScopeNode) -> list[ast.Name]:
        return list(self.index.names[scope].get(name, []))

    def self_attribute_occurrences(self, class_name: str, attribute: str) -> list[ast.Attribute]:
        return list(self.index.self_attributes[class_name].get(attribute, []))

    def held_attribute_occurrences(self, class_name: str, attribute: str) -> list[ast.Attribute]:
        """`obj.<attribute>` where `obj` is not `self` but holds an instance of `class_name`
        (`self.loss_sum.total`, `model.meter.preds`): its attribute read where it is held."""
        held = self._holder_classes
        found: list[ast.Attribute] = []
        for node in self._attributes_by_name.get(attribute, []):
            if node not in held:  # each receiver read once per file, whatever is asked
                held[node] = self.value_of(node.value).cls
            if held[node] == class_name:
                found.append(node)
        return found

    @cached_property
    def _attributes_by_name(self) -> dict[str, list[ast.Attribute]]:
        by_name: dict[str, list[ast.Attribute]] = {}
        for node in self.index.of_types(ast.Attribute):
            assert isinstance(node, ast.Attribute)
            if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                by_name.setdefault(node.attr, []).append(node)
        return by_name

    def class_attribute_inits(self, class_name: str, attribute: str) -> Value | None:
        """Join of what plain assignments `self.<attribute> = ...` in the class store."""
        result: Value | None = None
        for occurrence in self.self_attribute_occurrences(class_name, attribute):
            assign = self.parent(occurrence)
            if (
                isinstance(assign, ast.Assign)
                and any(target is occurrence for target in assign.targets)
                and not _mentions(self, assign.value, occurrence)
            ):
                stored = self.value_of(assign.value)
                result = stored if result is None else result.join(stored)
        return result

    def module_calls(self, info: ClassInfo | None) -> list[ast.Call]:
        """Calls of instances of the nn.Module class `info` (`model(x)` runs its forward)."""
        if info is None or not self.is_module_class(info.name):
            return []
        return self._module_calls.get(info.name, [])

    def calls_of_mixed_modules(self) -> list[ast.Call]:
        """Calls of a module whose class is not one (`for m in models.values(): m(x)` over
        modules of several classes): any of those classes' instances may run there."""
        return self._module_calls.get(None, [])

    @cached_property
    def _module_calls(self) -> dict[str | None, list[ast.Call]]:
        calls: dict[str | None, list[ast.Call]] = {}
        for node in self.index.of_types(ast.Call):
            if isinstance(node, ast.Call):
                # A call outside the interpreted statements is left out without asking where
                # it stands: its callee, in the same statement, is then UNKNOWN.
                callee = self.value_of(node.func)
                if callee.kind is not Kind.MODULE:
                    continue
                for name in _entry_classes(node, callee) or [callee.cls]:
                    calls.setdefault(name, []).append(node)
        return calls

    def module_collection(self, iterable: ast.expr) -> Value | None:
        """What `iterable` goes over the entries of, when that is an `nn.ModuleDict`,
        `nn.ModuleList` or a subclass: `metrics.items()`, `self.values()`, `self.heads`,
        `enumerate(self.heads)`. Each entry then comes once."""
        while (
            isinstance(iterable, ast.Call)
            and dotted_name(iterable.func) == "enumerate"
            and len(iterable.args) == 1
        ):
            iterable = iterable.args[0]
        if (
            isinstance(iterable, ast.Call)
            and isinstance(iterable.func, ast.Attribute)
            and iterable.func.attr in ("items", "values")
            and not iterable.args
        ):
            iterable = iterable.func.value
        collection = self.value_of(iterable)
        if (
            collection.kind is Kind.MODULE
            and collection.cls is not None
            and self.is_module_collection(collection.cls)
        ):
            return collection
        return None

    def calls_running_forward(self, info: ClassInfo | None) -> list[ast.Call]:
        """Calls that run the forward of the nn.Module class `info`: calls of its instances,
        of an `nn.Sequential(...)` built with one among its layers, and of any module of the
        file whose `forward` makes such a call (`net(x)` running `self.net = nn.Sequential(
        nn.Linear(...), Leaky(...))`). Not argument-for-parameter calls: see `module_calls`."""
        if info is None or not self.is_module_class(info.name):
            return []
        return self._forward_runs.get(info.name, [])

    @cached_property
    def _forward_runs(self) -> dict[str, list[ast.Call]]:
        runs: dict[str, list[ast.Call]] = {
            name: list(calls) for name, calls in self._module_calls.items() if name is not None
        }
        for node in self.index.of_types(ast.Call):
            assert isinstance(node, ast.Call)
            if self.statement_of(node) is None or self.value_of(node.func).cls != (
                "torch.nn.Sequential"
            ):
                continue
            from codemods.analysis.provenance import Provenance  # provenance imports this module

            built = Provenance(self).module_constructor(node.func)
            for layer in built.args if built is not None else ():
                made = self.value_of(layer)
                if made.kind is Kind.MODULE and made.cls in self.index.classes:
                    runs.setdefault(made.cls, []).append(node)
        # A module whose forward runs another's is itself a way to run it: to a fixed point,
        # each pass adding at most one level of nesting.
        for _ in range(len(self.index.classes)):
            grew = False
            for inner, calls in list(runs.items()):
                owners = {self.index.class_of.get(self.scope_of(call)) for call in calls}
                for name in owners - {None, inner}:
                    outer = self.index.classes[name]  # type: ignore[index]
                    if not self._in_forward(calls, outer):
                        continue
                    for call in runs.get(outer.name, []):
                        if call not in calls:
                            calls.append(call)
                            grew = True
            if not grew:
                break
        return runs

    def _in_forward(self, calls: list[ast.Call], outer: ClassInfo) -> bool:
        forward = outer.methods.get("forward")
        return forward is not None and any(self.scope_of(call) is forward for call in calls)

    def lineage(self, class_name: str) -> Sequence[str]:
        """The class and the file's own classes it derives from, nearest first."""
        known = self._lineages.get(class_name)
        if known is None:
            known = self._lineages[class_name] = tuple(self._bases_of(class_name))
        return known

    def _bases_of(self, class_name: str) -> list[str]:
        found: list[str] = []
        pending = [class_name]
        while pending:
            name = pending.pop(0)
            info = self.index.classes.get(name)
            if info is None or name in found:
                continue
            found.append(name)
            pending.extend(base.id for base in info.bases if isinstance(base, ast.Name))
        return found

    def class_family(self, class_name: str) -> list[str]:
        """The class, the file's classes it derives from, then those deriving from it: the
        classes whose methods may run on one object of it."""
        derived = (name for name in self.class_and_subclasses(class_name) if name != class_name)
        return [*self.lineage(class_name), *derived]

    def class_and_subclasses(self, class_name: str) -> list[str]:
        """The class and the file's classes deriving from it, in the order of
        `index.classes`: those whose lineage holds it."""
        return self._class_and_subclasses.get(class_name, [])

    @cached_property
    def method_names(self) -> frozenset[str]:
        """The names of the methods of the file's classes (inherited ones included): a call
        `obj.name(...)` with any other name runs none of them, whatever `obj` holds."""
        return frozenset(name for info in self.index.classes.values() for name in info.methods)

    @cached_property
    def _class_and_subclasses(self) -> dict[str, list[str]]:
        # In one pass, rather than going over every class for each class asked about.
        members: dict[str, list[str]] = {name: [] for name in self.index.classes}
        for name in self.index.classes:
            for owner in self.lineage(name):
                members[owner].append(name)
        return members

    def is_module_class(self, class_name: str) -> bool:
        return self._derives_from(class_name, _is_module_base)

    def is_lightning_module(self, class_name: str) -> bool:
        """A class of the file deriving from Lightning's `LightningModule`."""
        return self._derives_from(class_name, _is_lightning_module)

    def is_module_collection(self, class_name: str) -> bool:
        """`nn.ModuleDict`, `nn.ModuleList`, or a class of the file deriving from one: going
        over its entries runs each once."""
        if _is_module_collection(class_name):
            return True
        return class_name in self.index.classes and self._derives_from(
            class_name, _is_module_collection
        )

    def is_optimizer_class(self, class_name: str) -> bool:
        """A class of the file that subclasses a torch optimizer (`class SAM(Optimizer)`)."""
        return self._derives_from(class_name, _is_optimizer_base)

    def _is_named_tuple(self, class_name: str) -> bool:
        return self._derives_from(class_name, _is_named_tuple_base)

    def instance_kind(self, class_name: str) -> Kind:
        """What an instance of the file's own class is: a module, an optimizer, an object.
        Remembered: asked for every instance made, and the class's bases never change."""
        kind = self._instance_kinds.get(class_name)
        if kind is None:
            if self.is_module_class(class_name):
                kind = Kind.MODULE
            else:
                kind = Kind.OPTIMIZER if self.is_optimizer_class(class_name) else Kind.OBJECT
            self._instance_kinds[class_name] = kind
        return kind

    def instance(self, class_name: str, kind: Kind | None = None) -> Value:
        """An instance of the file's class `class_name`, knowing the file's classes it
        derives from; `kind`: what the receiver of a method is taken for, when not its
        class's `instance_kind` (`cls` of a classmethod)."""
        # A new object each time: `_interpret_scope` tells a rebound attribute from one only
        # read by identity (`self.conv = Conv(...)` in a subclass, as its base also does).
        bases = tuple(self.lineage(class_name)[1:])
        if kind is None:
            kind = self.instance_kind(class_name)
        return Value(Grad.FREE, kind, cls=class_name, bases=bases)

    def _derives_from(self, class_name: str, is_base: Callable[[str | None], bool]) -> bool:
        """Whether the class, or one of the file's classes it derives from, names a base
        `is_base` accepts (`torch.nn.Module`, `torch.optim.Optimizer`, ...)."""
        key = (class_name, is_base)
        known = self._derived_from.get(key)
        if known is None:
            known = self._derived_from[key] = any(
                is_base(self.qualified_name(base))
                for owner in self.lineage(class_name)
                for base in self.index.classes[owner].bases
            )
        return known

    def function_named(self, callee: Value) -> Function | None:
        if callee.kind is Kind.FUNCTION and callee.cls is not None:
            return self.index.functions.get(callee.cls)
        return None

    @cached_property
    def detaching_helpers(self) -> dict[str, Function]:
        """The file's functions that return their one argument detached (`repackage_hidden`),
        by name, in source order."""
        return {
            name: function
            for name, function in self.index.functions.items()
            if returns_detached(function)
        }

    def returns_detached(self, call: ast.Call) -> bool:
        """Whether `call` runs one of the file's detaching helpers on one argument."""
        return (
            isinstance(call.func, ast.Name)
            and call.func.id in self.detaching_helpers
            and len(call.args) == 1
            and not call.keywords
            and not has_star(call)
        )

    def grad_disabled_by_decorator(self, function: Function) -> bool:
        for expression in function.decorator_list:
            callee = expression.func if isinstance(expression, ast.Call) else expression
            if torch_api.disables_grad(self.qualified_name(callee)):
                return True
        return False

    # -- interpretation ---------------------------------------------------------------
    def is_load(self, node: ast.AST) -> bool:
        """Whether the name or attribute `node` is read (rather than stored to) there: its
        context is not `Store`. As before the port, a `del x` counts as a read, and so does
        the target of `(x := value)`."""
        if type(getattr(node, "ctx", None)) is not ast.Store:
            return True
        return type(self.index.parents.get(node)) is ast.NamedExpr

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

    @cached_property
    def weights(self) -> ModuleWeights:
        """Which of the file's module classes compute without weights."""
        return ModuleWeights(self)

    def loop_reaches_step(self, loop: Loop) -> bool:
        """Whether a backward or optimizer step runs between two iterations of `loop`."""
        return self.training.loop_reaches_step(loop, self.scope_of(loop))

    @cached_property
    def backward_calls(self) -> list[ast.Call]:
        """Every `x.backward(...)` call in the file."""
        return [
            call
            for call in self.index.calls_by_name.get("backward", [])
            if isinstance(call.func, ast.Attribute)
        ]

    def _index_backward_calls(self) -> dict[str, list[ast.Call]]:
        """`x.backward(...)` calls by the name of the root they differentiate."""
        by_root: dict[str, list[ast.Call]] = {}
        for call in self.backward_calls:
            root = backward_root(call.func.value)  # type: ignore[attr-defined]
            if root is not None:
                by_root.setdefault(root, []).append(call)
            holder = backward_holder(call.func.value)  # type: ignore[attr-defined]
            if holder is not None:
                by_root.setdefault(f"{holder}[]", []).append(call)
        return by_root

    def _backward_evidence(self, name: str, assignment: ast.AST) -> str | None:
        """Whether a backward runs on what `assignment` stored into `name`: a call later in
        the same block, before any rebinding of `name`. "scalar" for a plain `.backward()`
        (which only works on one-element tensors), "tensor" when a gradient is passed,
        "element" when it runs on a value `name` holds (`out["loss"].backward()`)."""
        if name not in self._backward_names:
            return None  # asked at every assignment: most names have no backward at all
        found = self._backward_after(name, self._backward_by_root.get(name), assignment)
        if found is None and self._backward_after(
            name, self._backward_by_root.get(f"{name}[]"), assignment
        ):
            return "element"
        return found

    def _backward_after(
        self, name: str, calls: list[ast.Call] | None, assignment: ast.AST
    ) -> str | None:
        if not calls:
            return None
        statement: ast.AST | None = assignment
        while statement is not None and not isinstance(statement, ast.stmt):
            statement = self.parent(statement)
        if statement is None or self.parent(statement) is None:
            return None
        block = self.block_of(statement)  # the statements of the block, in source order
        start, end = self.index.start, self.index.end
        scope = self.scope_of(assignment)
        block_start, limit = start[block[0]], end[block[-1]]
        for occurrence in self.index.names[scope].get(name, []):
            if start[occurrence] >= end[assignment] and not self.is_load(occurrence):
                limit = min(limit, start[occurrence])
        for call in calls:
            if end[assignment] <= start[call] < limit and block_start <= start[call]:
                return "tensor" if call.args or call.keywords else "scalar"
        return None

    def _interpreter(self, scope: ScopeNode, grad: bool) -> Interpreter:
        return Interpreter(
            self.qualified_name,
            self._call_value,
            self._global_lookup(scope),
            self._backward_evidence,
            self.integer_constants,
            self._member_value,
            grad,
            self._class_body_names(scope),
            self._holds_modules(scope),
        )

    def _holds_modules(self, scope: ScopeNode) -> bool:
        """Whether `scope` is a method of a subclass of `nn.ModuleDict`."""
        info = self.class_of(scope)
        return info is not None and self._derives_from(info.name, _is_module_dict)

    def _class_body_names(self, scope: ScopeNode) -> frozenset[str]:
        """The names the class bodies of `scope`'s class and its bases in the file bind:
        class attributes (`drop = None`), methods and properties."""
        info = self.class_of(scope)
        if info is None:
            return frozenset()
        known = self._class_body_names_of.get(info.name)
        if known is not None:
            return known
        names: set[str] = set()
        for owner in self.lineage(info.name):
            for statement in self.index.classes[owner].node.body:
                if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(statement.name)
                    continue
                for node in self.descendants(statement):  # the index's slice: no `ast.walk`
                    if type(node) is ast.Name and type(node.ctx) is ast.Store:  # type: ignore[attr-defined]
                        names.add(node.id)  # type: ignore[attr-defined]
        known = self._class_body_names_of[info.name] = frozenset(names)
        return known

    def _member_value(self, class_name: str, attribute: str) -> Value:
        for owner in self.lineage(class_name):
            known = self._class_env.get(owner, {}).get(f"self.{attribute}")
            if known is not None:
                return known
        return UNKNOWN

    @cached_property
    def integer_constants(self) -> dict[str, int]:
        """Module names bound once, to an integer literal (`T_MAX = 5`, `N, T = 4, 5`)."""
        constants: dict[str, int] = {}
        for statement in self.module.body:
            if type(statement) is not ast.Assign or len(statement.targets) != 1:
                continue
            target, value = statement.targets[0], statement.value
            pairs = [(target, value)]
            if type(target) is ast.Tuple and type(value) is ast.Tuple:
                pairs = list(zip(target.elts, value.elts, strict=False))
            for name, literal in pairs:
                if (
                    type(name) is ast.Name
                    and type(literal) is ast.Constant
                    and type(literal.value) is int
                ):
                    constants[name.id] = literal.value
        return {name: number for name, number in constants.items() if self._stores(name) == 1}

    def _global_lookup(self, scope: ScopeNode):
        module_env = self.facts[self.module].final_env if self.module in self.facts else {}
        class_info = self.class_of(scope)

        def lookup(name: str) -> Value:
            if name.startswith("self.") and class_info is not None:
                for owner in self.lineage(class_info.name):
                    known = self._class_env.get(owner, {}).get(name)
                    if known is not None:
                        return known
                return UNKNOWN
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
        # What that pass passed on is not yet known (`super().__init__(net, printer)` with
        # parameters no caller filled): every call is interpreted again below.
        self._passed_to.clear()
        self._call_grads.clear()
        self._receiver_classes.clear()
        self._state_version += 1
        self._interpret_scope(self.module, {}, True)
        ordered = self._callers_first()
        interpreted_with: dict[Function, tuple[tuple[Value, ...], bool]] = {}
        for function in ordered:
            grad = self._calling_grad(function)
            passed = self._passed(function)  # before the scope runs: it may call itself
            self._interpret_scope(function, self._parameter_env(function), grad)
            interpreted_with[function] = (passed, grad)
        # A method called through an instance (`m(preds, target)` runs `Metric.forward`) has
        # callers the order above cannot see by name; once, it runs again with what they
        # passed, and in the grad mode they called it in, when that differs. Attributes of
        # `self` that later methods bound do not count: rerunning every `forward` of a model
        # library for them doubled the analysis and changed no finding.
        for function in ordered:
            if self._calls_of(function):
                continue
            grad = self._calling_grad(function)
            # The environment is built only to run the scope: most compare equal.
            if (self._passed(function), grad) != interpreted_with[function]:
                self._interpret_scope(function, self._parameter_env(function), grad)

    def _passed(self, function: Function) -> tuple[Value, ...]:
        """What `function`'s callers pass its positional parameters: the values
        `_parameter_env` binds them to (it binds them last, so nothing overrides them)."""
        passed = self._passed_to.get(function)
        if passed is None:
            return (UNKNOWN,) * len(self.passed_parameters(function))
        return tuple(passed)

    def _calling_grad(self, function: Function) -> bool:
        """Whether grad is enabled in `function` as its callers run it: not when a decorator
        disables it, nor when every call of it runs under `no_grad` (by name, or as the
        interpreter followed them: `with torch.no_grad(): self.metrics(logits, y)` runs each
        metric's `forward`)."""
        modes = self._call_grads.get(function, set())
        return (
            not self.grad_disabled_by_decorator(function)
            and not self._called_only_without_grad(function)
            and modes != {False}
        )

    def _called_only_without_grad(self, function: Function) -> bool:
        """Whether every call of `function` in the file runs under `no_grad` (a helper of an
        `@torch.no_grad()` update method). Callers come first, so their modes are known."""
        calls = self.index.calls_by_name.get(function.name, [])
        statements = [self.statement_of(call) for call in calls]
        return bool(statements) and all(
            statement is not None and not self._grad_enabled.get(statement, True)
            for statement in statements
        )

    def _interpret_scope(self, scope: ScopeNode, env: Env, grad: bool) -> None:
        interpreter = self._interpreter(scope, grad)
        facts = interpreter.run(scope.body, env)
        self.facts[scope] = facts
        self._state_version += 1  # the module's facts are what later runs read of globals
        self._env_before.update(facts.env_before)
        self._grad_enabled.update(facts.grad_enabled)
        self._loop_entry.update(facts.loop_entry)
        info = self.class_of(scope)
        if info is not None:
            class_env = self._class_env.setdefault(info.name, {})
            constructor = isinstance(scope, FUNCTION_TYPES) and scope.name == "__init__"
            final_env = facts.final_env
            # An attribute the scope only read (a base class's, set by the base's own
            # constructor) stays its owner's to record: only keys it rebound count.
            for key in rebound(env, final_env):
                if key.startswith("self."):
                    value = final_env[key]
                    known = class_env.get(key)
                    fills = known is not None and _empty_dict(known) and value.kind is Kind.DICT
                    new = value if known is None or constructor or fills else known.join(value)
                    if new != known:
                        class_env[key] = new
                        self._class_env_version += 1
                        self._state_version += 1

    def _callers_first(self) -> list[Function]:
        """Functions ordered so that, cycles aside, every caller comes before its callees;
        `__init__` methods come before the other methods of their class."""
        functions = [n for n in self.index.enclosing_function if isinstance(n, FUNCTION_TYPES)]
        owners: dict[Function, list[ClassInfo]] = {}  # the classes that have each method
        for info in self.index.classes.values():
            for method in info.methods.values():
                owners.setdefault(method, []).append(info)
        callers: dict[Function, set[ScopeNode]] = {}
        for function in functions:
            calls = self._calls_of(function)
            callers[function] = {self.scope_of(call) for call in calls} - {function}
            if function.name != "__init__":
                # A method reads what the constructors of the classes it runs on bind.
                callers[function] |= {
                    info.methods["__init__"]
                    for info in owners.get(function, [])
                    if "__init__" in info.methods and info.methods["__init__"] is not function
                }
        # Each step takes the first function, in this order, whose callers are all done, or
        # the first one left when none is (a cycle). Found with heaps of positions and a
        # count of the callers not done, not by scanning the functions left at each step:
        # that made a file of many functions quadratic.
        pending = sorted(functions, key=lambda f: f.name != "__init__")
        waiting: dict[ScopeNode, int] = {}  # function -> how many of its callers are not done
        callees: dict[ScopeNode, list[int]] = {}  # caller -> positions of the functions it calls
        ready: list[int] = []
        for position, function in enumerate(pending):
            waiting[function] = len(callers[function] - {self.module})
            for caller in callers[function] - {self.module}:
                callees.setdefault(caller, []).append(position)
            if not waiting[function]:
                ready.append(position)
        left = list(range(len(pending)))  # a heap: every position not taken yet
        taken = [False] * len(pending)
        ordered: list[Function] = []
        while len(ordered) < len(pending):
            while ready and taken[ready[0]]:
                heapq.heappop(ready)
            while taken[left[0]]:
                heapq.heappop(left)
            position = ready[0] if ready else left[0]
            taken[position] = True
            function = pending[position]
            ordered.append(function)
            for callee in callees.get(function, ()):
                waiting[pending[callee]] -= 1
                if not waiting[pending[callee]]:
                    heapq.heappush(ready, callee)
        return ordered

    def _calls_of(self, function: Function) -> list[ast.Call]:
        """The calls that may run `function`, by name; a constructor runs on a call of its
        class or of a subclass (`Collection(metrics)`), or on a subclass's
        `super().__init__(...)`, not on every `__init__` call of the file. Remembered: a
        constructor's goes over every class and every `__init__` call, and the index that
        answers never changes."""
        known = self._calls_of_function.get(function)
        if known is None:
            known = self._calls_of_function[function] = self._find_calls_of(function)
        return known

    def _find_calls_of(self, function: Function) -> list[ast.Call]:
        info = self.class_of(function)
        if function.name != "__init__" or info is None:
            return self.index.calls_by_name.get(function.name, [])
        subclasses = self.class_and_subclasses(info.name)
        calls = [call for name in subclasses for call in self.index.calls_by_name.get(name, [])]
        for call, caller in self._init_calls:
            if caller is not None and caller != info.name and caller in subclasses:
                calls.append(call)
        return calls

    @cached_property
    def _init_calls(self) -> list[tuple[ast.Call, str | None]]:
        """Every `__init__` call of the file with the class of the method it is in (None
        outside a class), found once for all constructors."""
        calls = self.index.calls_by_name.get("__init__", [])
        found = [(call, self.class_of(self.scope_of(call))) for call in calls]
        return [(call, info.name if info is not None else None) for call, info in found]

    def _parameter_env(self, function: Function) -> Env:
        env: Env = {}
        info = self.class_of(function)
        params = self.passed_parameters(function)
        if info is not None and not self._decorated(function, "staticmethod"):
            receiver = (function.args.posonlyargs or function.args.args)[:1]
            by_class = self._decorated(function, "classmethod")
            kind = Kind.CLASS if by_class else self.instance_kind(info.name)
            own = self._receiver_class(function, info.name)
            for param in receiver:
                env[param.arg] = self.instance(own, kind)
            for owner in reversed(self.lineage(own)):  # a subclass's binding wins
                env.update(self._class_env.get(owner, {}))
        passed = self._passed_to.get(function)
        for position, param in enumerate(params):
            env[param.arg] = passed[position] if passed is not None else UNKNOWN
        return env

    def _record_call(self, function: Function, positional: list[Value]) -> None:
        """Joins what a call passes `function` positionally into what its parameters receive;
        a parameter the call leaves to its default receives UNKNOWN."""
        count = len(self.passed_parameters(function))
        given = positional[:count] + [UNKNOWN] * (count - len(positional))
        passed = self._passed_to.get(function)
        if passed is None:
            self._passed_to[function] = given
            self._state_version += 1
        else:
            joined = [old.join(new) for old, new in zip(passed, given, strict=True)]
            if joined != passed:
                self._passed_to[function] = joined
                self._state_version += 1

    def _overrides_value(
        self, node: ast.Call, class_name: str, args: list[Value], grad: bool, method: str
    ) -> Value | None:
        """A method the class leaves to its subclasses (`self.score(...)` in a base `Metric`
        whose subclasses each define `score`): what any of the file's overrides returns,
        None when the file defines none."""
        result: Value | None = None
        for subclass in self._classes_with_method.get(method, ()):
            if class_name not in self.lineage(subclass.name):
                continue
            value = self._call_value(node, self.instance(subclass.name), args, grad, method)
            if value is None:
                return None
            result = value if result is None else result.join(value)
        return result

    @cached_property
    def _classes_with_method(self) -> dict[str, list[ClassInfo]]:
        """The file's classes that have each method (their own or inherited), in the order
        of `index.classes`: `_overrides_value` asks for every call of a method of `self`."""
        found: dict[str, list[ClassInfo]] = {}
        for info in self.index.classes.values():
            for method in info.methods:
                found.setdefault(method, []).append(info)
        return found

    def _receiver_class(self, function: Function, defining: str) -> str:
        """The class `self` has in `function`, a method of `defining`: the one subclass of the
        file every call in the file runs it on (so `self.create_log()` runs that subclass's
        override), else `defining` itself."""
        seen = self._receiver_classes.get(function, set())
        if len(seen) == 1:
            (only,) = seen
            if only is not None and only != defining and defining in self.lineage(only):
                return only
        return defining

    def _decorated(self, function: Function, decorator: str) -> bool:
        """Whether `function` is decorated `@staticmethod` / `@classmethod`. Remembered: asked
        for every call into a method, and the decorators never change."""
        key = (function, decorator)
        known = self._decorations.get(key)
        if known is None:
            known = self._decorations[key] = any(
                dotted_name(d) == decorator for d in function.decorator_list
            )
        return known

    def passed_parameters(self, function: Function) -> tuple[ast.arg, ...]:
        """The positional parameters a call's arguments fill: a method's without its `self`
        (or `cls`), a `@staticmethod`'s all. Remembered: the interpreter asks at every call."""
        known = self._passed_parameters.get(function)
        if known is None:
            params = (*function.args.posonlyargs, *function.args.args)
            static = self._decorated(function, "staticmethod")
            if self.class_of(function) is not None and not static:
                params = params[1:]
            known = self._passed_parameters[function] = params
        return known

    def _call_value(
        self, node: ast.Call, callee: Value, args: list[Value], grad: bool, method: str | None
    ) -> Value | None:
        """`args`: the values of `node`'s positional arguments, then of its keyword arguments
        (`interpreter.argument_values`)."""
        if callee.kind is Kind.CLASS and method == "apply":
            if callee.cls is None or not self._derives_from(callee.cls, _is_autograd_function):
                return None
            inputs = joined_grad(args)  # attached in, attached out
            return Value(inputs if grad else Grad.FREE, Kind.TENSOR)
        if (
            callee.kind is Kind.CLASS
            and callee.cls is not None
            and self._is_named_tuple(callee.cls)
        ):
            # `LIFState(z=z, v=v, i=i)`: a tuple of what it is given, that knows its class
            return Value(Grad.FREE, Kind.TUPLE, element=joined_grad(args), cls=callee.cls)
        if callee.kind is Kind.CLASS and callee.cls is not None:
            init = self.index.classes[callee.cls].methods.get("__init__")
            if init is not None and not has_star(node):
                self._record_call(init, args[: len(node.args)])
            return self.instance(callee.cls)
        if method is not None and _entry_classes(node, callee):
            result: Value | None = None
            for name in callee.classes:
                value = self._call_value(node, self.instance(name), args, grad, method)
                if value is None:
                    return None
                result = value if result is None else result.join(value)
            return result
        function: Function | None
        receiver: Value | None = None
        if method is None and callee.kind is Kind.OBJECT and callee.cls is not None:
            method = "__call__"  # `loss_fn(pred, y)` on an instance of the file's own class
        if method is not None:
            info = self.index.classes.get(callee.cls or "")
            function = info.methods.get(method) if info else None
            receiver = callee
            named = super_class(node.func) if isinstance(node.func, ast.Attribute) else None
            if named is not None:  # `super().__init__(...)`: the nearest base's method
                bases = self.lineage(named or callee.cls or "")[1:]
                found = (self.index.classes[base].methods.get(method) for base in bases)
                function = next((candidate for candidate in found if candidate), None)
        else:
            function = self.function_named(callee)
        if function is None and receiver is not None and named is None and info is not None:
            return self._overrides_value(node, info.name, args, grad, method)  # type: ignore[arg-type]
        if function is None or has_star(node):
            return None
        positional = args[: len(node.args)]
        self._record_call(function, positional)
        grads = self._call_grads.setdefault(function, set())
        if grad not in grads:
            grads.add(grad)
            self._state_version += 1
        if receiver is not None and self.class_of(function) is not None:
            classes = self._receiver_classes.setdefault(function, set())
            if receiver.cls not in classes:
                classes.add(receiver.cls)
                self._state_version += 1
        if receiver is None and len(args) == 1 and function.name in self.detaching_helpers:
            return detached_value(args[0])  # whatever it is given, it hands back no graph
        # What a method returns depends on its object's attributes too: a summary made
        # before the constructor saw its arguments is not reused after.
        key = (function, receiver, tuple(args), grad, self._class_env_version)
        summary = self._summaries.get(key)  # one lookup: the key hashes every value in it
        if summary is not None:
            return summary
        if key in self._in_progress or len(self._in_progress) >= _CALL_DEPTH:
            self._truncated += 1
            return UNKNOWN
        # A run is a function of its call, the calls in progress (where it is cut short) and
        # the state it reads. A cut-short run that changed no state, asked again in the same
        # state (a loop's next pass, the other branch), gives the same answer: it is not run
        # again (`_format_py_obj` of a test helper calls itself in loops).
        context = (key, frozenset(self._in_progress), self._state_version)
        cut_short = self._cut_short.get(context)
        if cut_short is not None:
            self._truncated += 1  # still cut short: the caller's answer is not complete
            return cut_short
        truncated_before = self._truncated
        state_before = self._state_version
        self._in_progress.add(key)
        try:
            env = self._parameter_env(function)
            params = self.passed_parameters(function)
            for param, value in zip(params, positional, strict=False):
                env[param.arg] = value
            for keyword, value in zip(node.keywords, args[len(node.args) :], strict=False):
                if keyword.arg is not None:
                    env[keyword.arg] = value
            inner_grad = grad and not self.grad_disabled_by_decorator(function)
            facts = self._interpreter(function, inner_grad).run(function.body, env)
            result = facts.returned if facts.returned is not None else UNKNOWN
        finally:
            self._in_progress.discard(key)
        if self._truncated == truncated_before:
            # Only a complete answer is kept: one cut short by the depth limit (or a cycle)
            # would stand for the same call made from a shallower caller.
            self._summaries[key] = result
            self._state_version += 1
        elif self._state_version == state_before:
            self._cut_short[context] = result
        return result


def _empty_dict(value: Value) -> bool:
    """`{}` as a constructor binds it (`self.meters = {}`): a method that fills it
    (`self.meters[name] = Meter()`) tells all it may hold; joining would forget the entries."""
    return value.kind is Kind.DICT and value.element is None and value.entries == ()


def _mentions(analysis: FileAnalysis, expression: ast.AST, attribute: ast.Attribute) -> bool:
    """Whether `expression` reads the same `self.x` as `attribute` (`self.x = self.x + ...`)."""
    wanted = target_key(attribute)
    return any(
        isinstance(node, ast.Attribute) and target_key(node) == wanted
        for node in analysis.descendants(expression)
    )


def _skip_back(source: str, offset: int) -> int:
    """The offset just after the last character before `offset` that is not whitespace, a
    line continuation or a comment."""
    while offset > 0:
        character = source[offset - 1]
        if character in _SPACE:
            offset -= 1
            if character == "\n" or character == "\r":
                offset = _before_comment(source, offset)
            continue
        break
    return offset


def _before_comment(source: str, offset: int) -> int:
    """`offset` ends a line (before its line break): where the line's comment starts, if the
    line has one, else `offset`."""
    line_start = max(source.rfind("\n", 0, offset), source.rfind("\r", 0, offset)) + 1
    line = source[line_start:offset]
    if "#" not in line:
        return offset
    try:
        for token in tokenize.generate_tokens(io.StringIO(line).readline):
            if token.type == tokenize.COMMENT:
                return line_start + token.start[1]
    except (tokenize.TokenError, SyntaxError):
        pass
    return offset


def _skip_forward(source: str, offset: int) -> int:
    """The offset of the first character from `offset` on that is not whitespace, a line
    continuation or a comment."""
    length = len(source)
    while offset < length:
        character = source[offset]
        if character in _SPACE:
            offset += 1
        elif character == "#":
            ends = [at for at in (source.find("\n", offset), source.find("\r", offset)) if at >= 0]
            offset = min(ends) if ends else length
        else:
            break
    return offset


def _is_module_base(name: str | None) -> bool:
    return name in _MODULE_BASES


# Subclassing these makes a module: calling an instance runs its `forward`.
_MODULE_BASES = frozenset(
    {
        "torch.nn.Module",
        "torch.nn.modules.module.Module",
        "torch.nn.ModuleDict",
    }
)


def _is_module_dict(name: str | None) -> bool:
    return name == "torch.nn.ModuleDict"


def _entry_classes(call: ast.Call, callee: Value) -> tuple[str, ...]:
    """The classes whose forward `call` runs when it calls an instance of one of several
    (`metric(out, y)` for an entry of a collection of modules of several classes). Not a
    method of what holds them: `metrics.items()` reads as an entry only by a fallback."""
    return () if isinstance(call.func, ast.Attribute) else callee.classes


def _is_lightning_module(name: str | None) -> bool:
    return name in torch_api.LIGHTNING_MODULES


def _is_module_collection(name: str | None) -> bool:
    return name in ("torch.nn.ModuleDict", "torch.nn.ModuleList")


def _is_optimizer_base(name: str | None) -> bool:
    return name is not None and name.startswith("torch.optim.") and "lr_scheduler" not in name


def _is_autograd_function(name: str | None) -> bool:
    return name in ("torch.autograd.Function", "torch.autograd.function.Function")


def _is_named_tuple_base(name: str | None) -> bool:
    return name in ("typing.NamedTuple", "typing_extensions.NamedTuple")
