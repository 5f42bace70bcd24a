"""The order of the layers of an `nn.Sequential`, however the file builds it.

`nn.Sequential(a, b, c)` spells its layers; so does a list built before it (`layers = []`,
`layers.append(...)`, `layers += [...]`, `layers.extend([...])` under `if`s and in loops,
then `nn.Sequential(*layers)`), and an `nn.Sequential()` filled afterwards in the same scope
(`self.body.add_module("block1", ...)`, `seq.append(...)`). What a rule needs to know is which
layer may run right before which: an in-place layer overwrites its predecessor's output. Each
branch of an `if` and each number of loop passes is taken as possible, so a pair is one that
some path of the building code makes. A building step gradfix does not follow (`insert`, an
index store, the list passed to another function) makes the whole order unknown.
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codemods.analysis import torch_api
from codemods.analysis.interpreter import target_key

if TYPE_CHECKING:
    from codemods.analysis import FileAnalysis

# The layer before the first one: the Sequential's own input.
INPUT = None


@dataclass(frozen=True)
class Adjacent:
    """`layer` may run right after `previous` (INPUT: it is the first layer)."""

    previous: ast.expr | None
    layer: ast.expr
    # a layer built before `previous` has (or may have) parameters: `previous`'s input may
    # require grad
    parameters_before: bool


# Torch layers whose output is a new tensor computed with their weights.
_WEIGHTED_LAYERS = tuple(
    f"torch.nn.{family}"
    for family in (
        "Linear",
        "Bilinear",
        "LazyLinear",
        "Conv",
        "LazyConv",
        "BatchNorm",
        "LazyBatchNorm",
        "LayerNorm",
        "GroupNorm",
        "InstanceNorm",
        "Embedding",
    )
)
# One path's state: the last layer added (INPUT before any), whether a layer before it has
# parameters, whether one up to it does.
_State = tuple[ast.expr | None, bool, bool]
_START: frozenset[_State] = frozenset({(INPUT, False, False)})
_GROWING = frozenset({"append", "add_module", "extend"})
_LOOP_PASSES = 3
# Methods that change a list's or a Sequential's layers in ways `_grown` does not follow.
_MUTATING = _GROWING | {
    "insert",
    "pop",
    "remove",
    "clear",
    "reverse",
    "sort",
    "__setitem__",
    "__delitem__",
}


_ORDERS: weakref.WeakKeyDictionary[FileAnalysis, dict[ast.Call, list[Adjacent] | None]] = (
    weakref.WeakKeyDictionary()
)


def adjacent_layers(analysis: FileAnalysis, call: ast.Call) -> list[Adjacent] | None:
    """The pairs of layers of the `nn.Sequential` built by `call` that may run one after
    the other (see `SequentialOrder`), computed once per call."""
    orders = _ORDERS.setdefault(analysis, {})
    if call not in orders:
        orders[call] = SequentialOrder(analysis, call).adjacent()
    return orders[call]


class _Unfollowed(Exception):
    """A building step whose effect on the order gradfix does not know."""


class SequentialOrder:
    """Which layers of one `nn.Sequential` call may follow which."""

    def __init__(self, analysis: FileAnalysis, call: ast.Call) -> None:
        self.analysis = analysis
        self.call = call
        self.pairs: set[Adjacent] = set()
        self.key: str | None = None
        self.depth = 0  # how many branches and loops the walk is inside
        self.grown_in_place = False  # `seq = nn.Sequential()`, then `seq.add_module(...)`
        self.rebound_at: list[int] = []  # where the walk saw the name bound (source order)

    def adjacent(self) -> list[Adjacent] | None:
        """The pairs of layers that may run one after the other, in source order; None
        when the building code is not followed."""
        try:
            self._build()
        except _Unfollowed:
            return None
        start = self.analysis.index.start
        return sorted(self.pairs, key=lambda pair: (start[pair.layer], _position(pair, start)))

    def _build(self) -> None:
        call = self.call
        arguments = call.args
        if len(arguments) == 1 and isinstance(arguments[0], ast.Starred) and not call.keywords:
            # `nn.Sequential(*layers)`: the list as the scope builds it before this call
            self.key = target_key(arguments[0].value)
        else:
            layers = self._literal_layers(call)
            statement = self.analysis.parent(call)
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                self.key = target_key(statement.targets[0])
            self._add(_START, layers, call)
            if self.key is None:
                return  # built once, never grown
            # `self.body = nn.Sequential()`, then `self.body.add_module(...)` in this scope;
            # growing appends at the end, so the spelled layers' pairs stand in any case
            self.grown_in_place = True
            if not self._grown_anywhere():
                return
            spelled = set(self.pairs)
            try:
                self._block(self.analysis.scope_of(call).body, frozenset())
            except _Unfollowed:
                self.pairs = spelled
            return
        if self.key is None:
            raise _Unfollowed
        self._block(self.analysis.scope_of(call).body, frozenset())

    def _grown_anywhere(self) -> bool:
        """Whether the scope calls a growing method on the key (`add_module`, ...): if not,
        the spelled layers are all, and the scope need not be walked."""
        scope = self.analysis.scope_of(self.call)
        return any(
            isinstance(call.func, ast.Attribute)
            and target_key(call.func.value) == self.key
            and self.analysis.scope_of(call) is scope
            for method in _GROWING
            for call in self.analysis.index.calls_by_name.get(method, [])
        )

    def _literal_layers(self, call: ast.Call) -> list[ast.expr]:
        if call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
            raise _Unfollowed
        if len(call.args) == 1 and self._is_mapping(call.args[0]):
            raise _Unfollowed  # `nn.Sequential(OrderedDict([...]))`: not followed
        return list(call.args)

    def _is_mapping(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Dict):
            return True
        name = self.analysis.qualified_name(node.func) if isinstance(node, ast.Call) else None
        return name is not None and name.endswith("OrderedDict")

    # -- walking the building code -------------------------------------------------------
    def _block(self, statements: list[ast.stmt], states: frozenset[_State]) -> frozenset[_State]:
        for statement in statements:
            states = self._statement(statement, states)
        return states

    def _statement(self, node: ast.stmt, states: frozenset[_State]) -> frozenset[_State]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return states
        if isinstance(node, ast.If):
            return self._branches([node.body, node.orelse], states)
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            return self._loop(node, states)
        if isinstance(node, (ast.With, ast.AsyncWith)):
            return self._block(node.body, states)
        if isinstance(node, ast.Try):
            after = self._branches([node.body], states)
            handlers = [handler.body for handler in node.handlers]
            return self._branches([[], *handlers, node.orelse], after | states)
        return self._simple(node, states)

    def _branches(
        self, blocks: list[list[ast.stmt]], states: frozenset[_State]
    ) -> frozenset[_State]:
        self.depth += 1
        out: frozenset[_State] = frozenset()
        for block in blocks:
            out |= self._block(block, states)
        self.depth -= 1
        return out

    def _loop(
        self, node: ast.For | ast.AsyncFor | ast.While, states: frozenset[_State]
    ) -> frozenset[_State]:
        current = states
        for _ in range(_LOOP_PASSES):
            widened = current | self._branches([node.body], current)
            if widened == current:
                break
            current = widened
        return current | self._branches([node.orelse], current)

    def _simple(self, node: ast.stmt, states: frozenset[_State]) -> frozenset[_State]:
        if not self._mentions(node):
            return states
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and target_key(node.targets[0]) == self.key
        ):
            return self._bound(node, states)
        if (
            isinstance(node, ast.AugAssign)
            and isinstance(node.op, ast.Add)
            and target_key(node.target) == self.key
            and isinstance(node.value, (ast.List, ast.Tuple))
            and not self._mentions(node.value)
        ):
            return self._add(states, node.value.elts, node)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            grown = self._grown(node.value)
            if grown is not None:
                return self._add(states, grown, node)
        if self._only_read(node):
            return states
        raise _Unfollowed

    def _bound(self, node: ast.Assign, states: frozenset[_State]) -> frozenset[_State]:
        """`layers = [...]`, `seq = nn.Sequential(...)`: the order starts again."""
        value = node.value
        if self._mentions(value):
            raise _Unfollowed  # `layers = layers + [...]`
        if isinstance(value, (ast.List, ast.Tuple)):
            elements = value.elts
        elif (
            isinstance(value, ast.Call)
            and self.analysis.qualified_name(value.func) == "torch.nn.Sequential"
        ):
            elements = self._literal_layers(value)
        else:
            raise _Unfollowed
        if any(isinstance(element, ast.Starred) for element in elements):
            raise _Unfollowed
        if self.depth == 0 and not self.grown_in_place and self._before_call(node):
            self.pairs.clear()  # another list from here on: the earlier one's pairs are not its
        if node is not self.analysis.parent(self.call):
            self.rebound_at.append(self.analysis.index.start[node])
        return self._add(_START, elements, node)

    def _grown(self, call: ast.Call) -> list[ast.expr] | None:
        """What `key.append(x)`, `key.add_module(name, x)`, `key.extend([...])` add."""
        func = call.func
        if not (
            isinstance(func, ast.Attribute)
            and func.attr in _GROWING
            and target_key(func.value) == self.key
            and not call.keywords
            and not any(self._mentions(argument) for argument in call.args)
        ):
            return None
        arguments = call.args
        if func.attr == "append" and len(arguments) == 1:
            return [arguments[0]]
        if func.attr == "add_module" and len(arguments) == 2:
            return [arguments[1]]
        if (
            func.attr == "extend"
            and len(arguments) == 1
            and isinstance(arguments[0], (ast.List, ast.Tuple))
            and not any(isinstance(e, ast.Starred) for e in arguments[0].elts)
        ):
            return list(arguments[0].elts)
        return None

    def _only_read(self, node: ast.stmt) -> bool:
        """Whether every occurrence of the key in `node` reads it where no callee can change
        it: the Sequential built from it, `self.body(x)`, `len(layers)`."""
        for occurrence in self._occurrences(node):
            parent = self.analysis.parent(occurrence)
            if isinstance(parent, ast.Starred) and self.analysis.parent(parent) is self.call:
                continue
            if isinstance(parent, ast.Call) and parent.func is occurrence:
                continue  # the module called
            if (
                isinstance(parent, ast.Call)
                and isinstance(parent.func, ast.Name)
                and parent.func.id in ("len", "print")
            ):
                continue
            if isinstance(parent, ast.Attribute) and parent.attr not in _MUTATING:
                continue  # `model.parameters()`, `seq.to(device)`
            return False
        return True

    def _mentions(self, node: ast.AST) -> bool:
        return next(self._occurrences(node), None) is not None

    def _occurrences(self, node: ast.AST) -> Iterator[ast.expr]:
        for inner in ast.walk(node):
            if isinstance(inner, (ast.Name, ast.Attribute)) and target_key(inner) == self.key:
                yield inner

    # -- the order ---------------------------------------------------------------------
    def _add(
        self, states: frozenset[_State], layers: list[ast.expr], statement: ast.AST
    ) -> frozenset[_State]:
        """Each layer after each path's last; the pairs count when the statement may run
        before the Sequential is built (before it in the source, or in a loop around both)."""
        counts = self._before_call(statement)
        for layer in layers:
            grown: set[_State] = set()
            for alternative in _alternatives(layer):
                has = has_parameters(self.analysis, alternative)
                for previous, before, through in states:
                    if counts:
                        self.pairs.add(Adjacent(previous, alternative, before))
                    grown.add((alternative, through, through or has))
            states = frozenset(grown)
        return states

    def _before_call(self, statement: ast.AST) -> bool:
        """For a list: whether `statement` may run before `nn.Sequential(*layers)` copies it.
        For a Sequential grown in place: whether it runs after it is built, before the name
        is bound to another one."""
        index = self.analysis.index
        if self.grown_in_place:
            return statement is self.call or (
                index.start[statement] > index.start[self.call]
                and not any(
                    index.start[self.call] < at < index.start[statement] for at in self.rebound_at
                )
            )
        if statement is self.call or index.start[statement] < index.start[self.call]:
            return True
        around = self.analysis.enclosing_loops(self.call)
        return any(loop in around for loop in self.analysis.enclosing_loops(statement))


def has_parameters(analysis: FileAnalysis, layer: ast.expr) -> bool:
    """A torch module that is not one of its parameterless ones, or a module class of the
    file (a layer gradfix cannot tell counts as having none)."""
    if not isinstance(layer, ast.Call):
        return False
    name = analysis.qualified_name(layer.func) or ""
    if name.startswith("torch.nn.") and name[len("torch.nn.") :][:1].isupper():
        return name not in torch_api.PARAMETERLESS_MODULES
    return isinstance(layer.func, ast.Name) and analysis.is_module_class(layer.func.id)


def returns_new_tensor(analysis: FileAnalysis, layer: ast.expr) -> bool:
    """A torch layer that computes with its weights (`nn.Linear`, `nn.Conv2d`,
    `nn.BatchNorm1d`): its output is a tensor it makes, which nothing but the next layer
    holds. Not a parameterless one, which may hand back its input or a view of it
    (`nn.Identity`, `nn.Flatten`, dropout in eval mode), a container (an empty
    `nn.Sequential()`), nor a module class of the file."""
    if not isinstance(layer, ast.Call):
        return False
    name = analysis.qualified_name(layer.func) or ""
    return name.startswith(_WEIGHTED_LAYERS)


def _alternatives(layer: ast.expr) -> list[ast.expr]:
    """`nn.ReLU() if relu else nn.Tanh()`: either layer."""
    if isinstance(layer, ast.IfExp):
        return [*_alternatives(layer.body), *_alternatives(layer.orelse)]
    return [layer]


def _position(pair: Adjacent, start: dict[ast.AST, int]) -> int:
    return -1 if pair.previous is INPUT else start[pair.previous]


def holding_sequentials(analysis: FileAnalysis, layer: ast.expr) -> list[ast.Call] | None:
    """The `nn.Sequential` calls whose layers include the module `layer` builds: the one it
    is passed to, or those built in its scope from the list it is added to or grown with it
    (`self.body.add_module("b1", Block())`). None when `layer` is not such a layer."""
    node: ast.expr = layer
    parent = analysis.parent(node)
    while isinstance(parent, (ast.IfExp, ast.List, ast.Tuple)) and node is not getattr(
        parent, "test", None
    ):
        node, parent = parent, analysis.parent(parent)
    if isinstance(parent, ast.Call) and node in parent.args:
        if analysis.qualified_name(parent.func) == "torch.nn.Sequential":
            return [parent]
        func = parent.func
        key = target_key(func.value) if isinstance(func, ast.Attribute) else None
        if key is None or func.attr not in _GROWING:  # type: ignore[union-attr]
            return None
    elif isinstance(parent, (ast.Assign, ast.AugAssign)) and parent.value is node:
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        key = target_key(targets[0]) if len(targets) == 1 else None
        if key is None:
            return None
    else:
        return None
    scope = analysis.scope_of(layer)
    holding = [
        call
        for call in analysis.index.calls_by_name.get("Sequential", [])
        if analysis.scope_of(call) is scope
        and analysis.qualified_name(call.func) == "torch.nn.Sequential"
        and _built_under(analysis, call, key)
    ]
    return holding or None


def _built_under(analysis: FileAnalysis, call: ast.Call, key: str) -> bool:
    """`nn.Sequential(*key)`, or `key = nn.Sequential(...)`."""
    if len(call.args) == 1 and isinstance(call.args[0], ast.Starred):
        return target_key(call.args[0].value) == key
    statement = analysis.parent(call)
    return (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and target_key(statement.targets[0]) == key
    )


def positions(analysis: FileAnalysis, sequential: ast.Call, layer: ast.expr) -> set[str] | None:
    """Where `layer` may sit in `sequential`: "first" (it gets the Sequential's input),
    "inner" (the previous layer's output); None when the order is not followed."""
    adjacent = adjacent_layers(analysis, sequential)
    if adjacent is None:
        return None
    return {
        "first" if pair.previous is INPUT else "inner" for pair in adjacent if pair.layer is layer
    }


_LAYER_CLASSES: weakref.WeakKeyDictionary[FileAnalysis, frozenset[str]] = (
    weakref.WeakKeyDictionary()
)


def sequential_layer_classes(analysis: FileAnalysis) -> frozenset[str]:
    """The file's classes with an instance among the layers of an `nn.Sequential` (passed to
    it, or added with `add_module` / `append` to one the scope builds): one forward of that
    Sequential runs their `forward()` on the previous layer's output, so what each caches
    in `self` is part of that one forward's graph (the loss modules of style transfer).
    Computed once per file."""
    if analysis not in _LAYER_CLASSES:
        classes = analysis.index.classes
        found = set()
        for method in ("add_module", "append", "Sequential"):
            for call in analysis.index.calls_by_name.get(method, []):
                for layer in call.args:
                    value = analysis.value_of(layer)
                    if value.cls in classes and holding_sequentials(analysis, layer):
                        found.add(value.cls)
        _LAYER_CLASSES[analysis] = frozenset(found)
    return _LAYER_CLASSES[analysis]
