"""Where a stored value goes next: followed forward through names, `self` attributes,
containers, arithmetic and calls into this file's functions, until it is differentiated,
consumed as a number, needed as a tensor, or leaves what gradfix can see."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import libcst as cst

from codemods.analysis import FileAnalysis, Kind, torch_api
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
_ITERATING_BUILTINS = frozenset({"zip", "enumerate", "iter", "sorted", "list", "tuple", "set"})
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
    backward_calls: list[cst.Call] = field(default_factory=list)


def follow_target(analysis: FileAnalysis, target: cst.BaseExpression) -> Flow:
    """Where a value stored into `target` (`x`, `self.x`, `d[k]`) goes next."""
    follower = _Follower(analysis)
    uses = follower.of_target(target, depth=0)
    return Flow(uses, follower.backward_calls)


def follow_self_attribute(analysis: FileAnalysis, class_name: str, attribute: str) -> Flow:
    """Where values stored into `self.<attribute>` of `class_name` go next."""
    follower = _Follower(analysis)
    uses = follower.of_self_attribute(class_name, attribute, depth=0)
    return Flow(uses, follower.backward_calls)


def follow_expression(analysis: FileAnalysis, expression: cst.BaseExpression) -> Flow:
    """Where the value of `expression` goes."""
    follower = _Follower(analysis)
    uses = follower.of_expression(expression, depth=0)
    return Flow(uses, follower.backward_calls)


class _Follower:
    """One question's walk: remembers what it followed so that cycles end."""

    def __init__(self, analysis: FileAnalysis) -> None:
        self.analysis = analysis
        self._followed: set[object] = set()  # names and attributes already followed
        self.backward_calls: list[cst.Call] = []

    def of_name(self, name: str, scope: ScopeNode, depth: int) -> set[Use]:
        if (name, scope) in self._followed:
            return set()
        self._followed.add((name, scope))
        uses: set[Use] = set()
        for occurrence in self.analysis.occurrences(name, scope):
            if self.analysis.is_load(occurrence):
                uses |= self.of_expression(occurrence, depth + 1)
        return uses

    def of_self_attribute(self, class_name: str, attribute: str, depth: int) -> set[Use]:
        if (class_name, attribute) in self._followed:
            return set()
        self._followed.add((class_name, attribute))
        uses: set[Use] = set()
        for occurrence in self.analysis.self_attribute_occurrences(class_name, attribute):
            if self.analysis.is_load(occurrence):
                uses |= self.of_expression(occurrence, depth + 1)
        return uses

    def of_target(self, target: cst.BaseExpression, depth: int) -> set[Use]:
        """Where a value stored into `target` goes next."""
        scope = self.analysis.scope_of(target)
        if isinstance(target, cst.Name):
            return self.of_name(target.value, scope, depth)
        if isinstance(target, cst.Subscript):
            return self.of_target(target.value, depth)
        if isinstance(target, (cst.Tuple, cst.List)):
            uses: set[Use] = set()
            for element in target.elements:
                uses |= self.of_target(element.value, depth)
            return uses
        if isinstance(target, cst.StarredElement):
            return self.of_target(target.value, depth)
        key = target_key(target)
        info = self.analysis.class_of(scope)
        if key is not None and key.startswith("self.") and info is not None:
            return self.of_self_attribute(info.name, key[5:], depth)
        return {Use.UNKNOWN_CONSUMER}

    def of_expression(self, node: cst.CSTNode, depth: int = 0) -> set[Use]:
        """Where the value of the expression `node` goes."""
        if depth > _MAX_DEPTH:
            return {Use.UNKNOWN_CONSUMER}
        parent = self.analysis.parent(node)
        if parent is None:
            return set()
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return self._method_or_attribute(parent, depth)
        if isinstance(parent, cst.Arg):
            call = self.analysis.parent(parent)
            if isinstance(call, cst.Call):
                return self._argument(call, parent, depth)
            return {Use.UNKNOWN_CONSUMER}
        if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)) and self._no_grad(node):
            return {Use.NEEDS_TENSOR}
        if isinstance(
            parent,
            (
                cst.BinaryOperation,
                cst.UnaryOperation,
                cst.IfExp,
                cst.Element,
                cst.List,
                cst.Tuple,
                cst.Set,
                cst.StarredElement,
                cst.DictElement,
                cst.Dict,
            ),
        ):
            return self.of_expression(parent, depth + 1)
        if isinstance(parent, cst.Subscript):
            return self.of_expression(parent, depth + 1) if parent.value is node else set()
        if isinstance(
            parent,
            (
                cst.Comparison,
                cst.ComparisonTarget,
                cst.BooleanOperation,
                cst.If,
                cst.While,
                cst.Assert,
                cst.FormattedStringExpression,
                cst.Expr,
                cst.Index,
                cst.SubscriptElement,
                cst.Del,
            ),
        ):
            return set()
        if isinstance(parent, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)):
            return set()  # stored into (`d[k] = ...`, `d[k] += 1`): nothing flows out
        if isinstance(parent, cst.Return):
            return self._returned(node, depth)
        if isinstance(parent, (cst.Yield, cst.Await, cst.Lambda)):
            return {Use.RETURNED_UNSEEN}
        if isinstance(parent, cst.Assign) and parent.value is node:
            uses: set[Use] = set()
            for target in parent.targets:
                uses |= self.of_target(_graph_part(node, target.target), depth + 1)
            return uses
        if isinstance(parent, (cst.AugAssign, cst.AnnAssign)) and parent.value is node:
            return self.of_target(parent.target, depth + 1)
        if (
            isinstance(parent, (cst.For, cst.CompFor))
            and parent.iter is node
            and self.analysis.value_of(node).kind is Kind.DICT
        ):
            return set()  # iterating a dict gives its keys, not what it stores
        if isinstance(parent, cst.For) and parent.iter is node:
            return self.of_target(parent.target, depth + 1)
        if isinstance(parent, cst.CompFor) and parent.iter is node:
            return self._comprehension(parent, depth)
        if _element_of(parent, node):
            return self.of_expression(parent, depth + 1)  # the elements flow on
        return {Use.UNKNOWN_CONSUMER}

    # -- the cases ----------------------------------------------------------------------
    def _method_or_attribute(self, attribute: cst.Attribute, depth: int) -> set[Use]:
        name = attribute.attr.value
        call = self.analysis.parent(attribute)
        called = isinstance(call, cst.Call) and call.func is attribute
        if name == "backward":
            if isinstance(call, cst.Call):
                self.backward_calls.append(call)
            return {Use.DIFFERENTIATED}
        if called and name in _MUTATING_METHODS:
            return set()
        if called and name in _ELEMENT_METHODS:
            return self.of_expression(call, depth + 1)  # type: ignore[arg-type]
        if name in torch_api.TO_PYTHON_METHODS or (called and self._no_grad(attribute)):
            return {Use.NEEDS_TENSOR}
        result = call if called else attribute
        return {Use.NEEDS_TENSOR} | self.of_expression(result, depth + 1)  # type: ignore[arg-type]

    def _argument(self, call: cst.Call, arg: cst.Arg, depth: int) -> set[Use]:
        func = call.func
        qualified = self.analysis.qualified_name(func) or ""
        if qualified in torch_api.AUTOGRAD_FUNCTIONS or (
            isinstance(func, cst.Attribute) and func.attr.value == "backward"
        ):
            self.backward_calls.append(call)
            return {Use.DIFFERENTIATED}
        head = qualified.split(".")[0] if qualified else ""
        simple = func.value if isinstance(func, cst.Name) else None
        if simple in torch_api.NUMERIC_CONSUMERS or head in ("math", "numpy", "statistics"):
            return set()
        if isinstance(func, cst.Attribute) and func.attr.value in _MUTATING_METHODS:
            # `xs.append(v)`, `d.setdefault(k, []).append(v)`: v goes where xs (d) goes
            return self.of_target(through_setdefault(func.value), depth + 1)
        if self._dict_lookup(func):
            # `d.get(key, default)`: the key is only hashed; the default may be the result.
            return set() if call.args[0] is arg else self.of_expression(call, depth + 1)
        if simple in _ITERATING_BUILTINS and self.analysis.value_of(arg.value).kind is Kind.DICT:
            return set()  # `zip(d, ...)`, `enumerate(d)`: iterating a dict gives its keys
        if simple in torch_api.ITERABLE_REDUCERS or qualified in torch_api.COPIES:
            return self.of_expression(call, depth + 1)
        if isinstance(func, cst.Attribute) and func.attr.value in torch_api.LOGGING_METHODS:
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

    def _no_grad(self, node: cst.CSTNode) -> bool:
        """Whether `node` is evaluated with grad disabled (`with torch.no_grad():`, a
        `@torch.no_grad()` function): what an operation makes there carries no graph."""
        return self.analysis.statement_of(node) is not None and not self.analysis.grad_enabled(node)

    def _dict_lookup(self, func: cst.BaseExpression) -> bool:
        return (
            isinstance(func, cst.Attribute)
            and func.attr.value == "get"
            and self.analysis.value_of(func.value).kind is Kind.DICT
        )

    def _into_local_function(self, call: cst.Call, arg: cst.Arg, depth: int) -> set[Use] | None:
        """Follow an argument into a function of this file: its uses there, and, when the
        function returns it, the uses of the call's result."""
        callee = self.analysis.value_of(call.func)
        function = self.analysis.function_named(callee)
        if function is None or arg.keyword is not None or arg.star:
            return None
        params = list(function.params.posonly_params) + list(function.params.params)
        position = [a for a in call.args if a.keyword is None].index(arg)
        if position >= len(params):
            return None
        inner = self.of_name(params[position].name.value, function, depth + 1)
        if Use.RETURNED_UNSEEN in inner:
            inner.discard(Use.RETURNED_UNSEEN)
            inner |= self.of_expression(call, depth + 1)
        return inner

    def _returned(self, node: cst.CSTNode, depth: int) -> set[Use]:
        """A returned value goes wherever the function's callers in this file put it."""
        function = self.analysis.scope_of(node)
        if not isinstance(function, cst.FunctionDef):
            return {Use.RETURNED_UNSEEN}
        calls = [
            call
            for call in self.analysis.index.calls_by_name.get(function.name.value, [])
            if not self._tensor_method_call(call)
        ]
        if function.name.value == "forward":
            calls += self.analysis.module_calls(self.analysis.class_of(function))
        if not calls:
            return {Use.RETURNED_UNSEEN}
        uses: set[Use] = set()
        for call in calls:
            uses |= self.of_expression(call, depth + 1)
        return uses

    def _tensor_method_call(self, call: cst.Call) -> bool:
        """`x.mean()` on a proven tensor: never a call of the file's own `mean` method."""
        func = call.func
        return (
            isinstance(func, cst.Attribute)
            and self.analysis.value_of(func.value).kind is Kind.TENSOR
        )

    def _comprehension(self, comp_for: cst.CompFor, depth: int) -> set[Use]:
        """What the comprehension does with its target names (`x`, or `k, v` over
        `d.items()`); what it makes of them flows on with its result (`_element_of`)."""
        comprehension = self.analysis.parent(comp_for)
        names = _target_names(comp_for.target)
        if names is None or comprehension is None:
            return {Use.UNKNOWN_CONSUMER}
        uses: set[Use] = set()
        for target in names:
            finder = _NameFinder(target.value)
            comprehension.visit(finder)
            for occurrence in finder.found:
                if occurrence is not target:
                    uses |= self.of_expression(occurrence, depth + 1)
        return uses


def _target_names(target: cst.BaseExpression) -> list[cst.Name] | None:
    """The names a comprehension's `for` binds (`x`, `k, v`), None for other targets."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)) and all(
        isinstance(element.value, cst.Name) for element in target.elements
    ):
        return [element.value for element in target.elements]  # type: ignore[misc]
    return None


def _element_of(comprehension: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Whether `node` is what `comprehension` makes of each element (its `elt`, or a dict
    comprehension's key or value)."""
    if isinstance(comprehension, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
        return comprehension.elt is node
    if isinstance(comprehension, cst.DictComp):
        return node in (comprehension.key, comprehension.value)
    return False


def through_setdefault(receiver: cst.BaseExpression) -> cst.BaseExpression:
    """`d` for `d.setdefault(k, [])`: what an append to that result stores into."""
    if (
        isinstance(receiver, cst.Call)
        and isinstance(receiver.func, cst.Attribute)
        and receiver.func.attr.value == "setdefault"
    ):
        return receiver.func.value
    return receiver


def _graph_part(value: cst.CSTNode, target: cst.BaseExpression) -> cst.BaseExpression:
    """In `values, indices = x.topk(k)` (`sort`, `max(dim)`, ...) only `values` can carry a
    graph: the indices are integers."""
    if (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _VALUES_AND_INDICES
        and isinstance(target, (cst.Tuple, cst.List))
        and len(target.elements) == 2
    ):
        return target.elements[0].value
    return target


class _NameFinder(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        self.name = name
        self.found: list[cst.Name] = []

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.found.append(node)
