"""One pass over the tree that indexes what the analyses look up: each node's parent, the
scopes (module, functions, methods), classes, and where names and `self.x` attributes occur."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from itertools import repeat
from operator import attrgetter

import libcst as cst

from codemods.analysis.imports import dotted_name
from codemods.cst_speedups import NODE_CLASSES

ScopeNode = cst.Module | cst.FunctionDef


@dataclass
class ClassInfo:
    name: str
    node: cst.ClassDef
    bases: list[cst.BaseExpression]
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)


@dataclass
class Index:
    parents: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)
    # Pre-order position of each node, and the position after its last descendant: `a`
    # contains `b` when start[a] <= start[b] and end[b] <= end[a]; source order is start order.
    order: list[cst.CSTNode] = field(default_factory=list)  # every node, in source order
    start: dict[cst.CSTNode, int] = field(default_factory=dict)
    end: dict[cst.CSTNode, int] = field(default_factory=dict)
    scope_of: dict[cst.CSTNode, ScopeNode] = field(default_factory=dict)  # for Name/Attribute
    # scope -> name -> its Name nodes in that scope (nested functions not included)
    names: dict[ScopeNode, dict[str, list[cst.Name]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    # class name -> attribute -> `self.<attribute>` nodes in that class's methods
    self_attributes: dict[str, dict[str, list[cst.Attribute]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    functions: dict[str, cst.FunctionDef] = field(default_factory=dict)  # module level
    class_of: dict[cst.FunctionDef, str] = field(default_factory=dict)  # method -> class name
    enclosing_function: dict[cst.FunctionDef, ScopeNode] = field(default_factory=dict)
    # callee name (function name, or method name for `x.name(...)`) -> calls
    calls_by_name: dict[str, list[cst.Call]] = field(default_factory=lambda: defaultdict(list))
    # node class -> its nodes, in source order (`of_types`)
    by_type: dict[type, list[cst.CSTNode]] = field(default_factory=lambda: defaultdict(list))

    def of_types(self, *kinds: type[cst.CSTNode]) -> list[cst.CSTNode]:
        """The nodes of these (concrete) classes, in source order: what a rule looking for a
        few kinds of statements reads instead of every node of the file."""
        if len(kinds) == 1:
            return self.by_type.get(kinds[0], [])
        nodes = [node for kind in kinds for node in self.by_type.get(kind, [])]
        nodes.sort(key=self.start.__getitem__)
        return nodes


# Fields that hold only whitespace and punctuation: the index never needs their nodes.
_SKIPPED_FIELD_PREFIXES = ("whitespace", "leading_lines", "lines_after_decorators", "lpar", "rpar")
_SKIPPED_FIELDS = frozenset(
    {
        "comma",
        "semicolon",
        "header",
        "footer",
        "equal",
        "colon",
        "dot",
        "star",
        "asynchronous",
        "newline",
        "trailing_whitespace",
        "indent",
        "arrow",
    }
)
# Field types that hold text, never a node (`Name.value`, `Integer.value`).
_TEXT_TYPES = frozenset({str, str | None})  # equal to `Optional[str]`, as LibCST writes it
# Per node class: what reads the fields that may hold nodes, as a tuple, in source order
# (`_children_of` gives it for a node's class).
_CHILD_GETTERS: dict[type, Callable[[cst.CSTNode], tuple[object, ...]]] = {}


def _children_of(node: cst.CSTNode) -> Callable[[cst.CSTNode], tuple[object, ...]]:
    kind = type(node)
    getter = _CHILD_GETTERS.get(kind)
    if getter is None:
        names = tuple(
            f.name
            for f in fields(node)
            if not f.name.startswith(_SKIPPED_FIELD_PREFIXES)
            and f.name not in _SKIPPED_FIELDS
            and f.type not in _TEXT_TYPES
        )
        if isinstance(node, cst.FunctionDef):  # decorators come first in the source
            names = ("decorators", *(n for n in names if n != "decorators"))
        elif isinstance(node, cst.IfExp):  # `body if test else orelse`
            names = ("body", "test", "orelse")
        if len(names) == 1:
            getter = _one_field(names[0])
        else:
            getter = attrgetter(*names) if names else _no_fields
        _CHILD_GETTERS[kind] = getter
    return getter


def _one_field(name: str) -> Callable[[cst.CSTNode], tuple[object, ...]]:
    read = attrgetter(name)
    return lambda node: (read(node),)


def _no_fields(node: cst.CSTNode) -> tuple[object, ...]:
    return ()


class _Indexer:
    """Walks the tree by its dataclass fields: several times faster than a LibCST visitor,
    which rebuilds every node it passes."""

    def __init__(self, module: cst.Module) -> None:
        self.index = Index()
        self.scopes: list[ScopeNode] = [module]
        self.classes: list[ClassInfo | None] = [None]

    def walk(self, root: cst.Module) -> None:
        """Pre-order, iteratively: deeply nested expressions must not hit the recursion limit.
        Positions and parents are kept in lists while walking and made dicts at the end (in C):
        a model library has millions of nodes, and only scopes need a step on the way out."""
        index = self.index
        order = index.order
        by_type = index.by_type
        parent_positions: list[int] = []
        # (node, its parent's position), or (None, what was entered) to leave a scope.
        pending: list[tuple[cst.CSTNode | None, int | str]] = [(root, -1)]
        while pending:
            node, parent_position = pending.pop()
            if node is None:
                if parent_position == "function":
                    self.scopes.pop()
                self.classes.pop()
                continue
            position = len(order)
            order.append(node)
            parent_positions.append(parent_position)  # type: ignore[arg-type]
            kind = type(node)
            by_type[kind].append(node)
            if kind in _ENTERED:
                parent = order[parent_position] if parent_position >= 0 else None  # type: ignore[index,operator]
                grandparent = None
                if kind is cst.FunctionDef and parent is not None:
                    above = parent_positions[parent_position]  # type: ignore[index]
                    grandparent = order[above] if above >= 0 else None
                entered = self.enter(node, parent, grandparent)
                if entered is not None:
                    pending.append((None, entered))
            getter = _CHILD_GETTERS.get(kind) or _children_of(node)
            if getter is _no_fields:
                continue  # a name, a number, a string: no node below
            children: list[cst.CSTNode] = []
            for child in getter(node):
                child_kind = type(child)
                if child_kind is list or child_kind is tuple:
                    children.extend(child)  # LibCST's sequence fields hold only nodes
                elif child_kind in NODE_CLASSES:
                    children.append(child)  # type: ignore[arg-type]
            children.reverse()
            pending.extend(zip(children, repeat(position)))
        # A node's subtree ends where its last descendant's does: children come after parents.
        ends = list(range(1, len(order) + 1))
        for position in range(len(order) - 1, 0, -1):
            parent = parent_positions[position]
            if ends[parent] < ends[position]:
                ends[parent] = ends[position]
        index.start = dict(zip(order, range(len(order)), strict=True))
        index.end = dict(zip(order, ends, strict=True))
        parents = [order[position] for position in parent_positions[1:]]
        index.parents = dict(zip(order[1:], parents, strict=True))

    def enter(
        self, node: cst.CSTNode, parent: cst.CSTNode | None, grandparent: cst.CSTNode | None
    ) -> str | None:
        # `type(...) is`: LibCST's node classes are final, and `isinstance` on their ABC
        # metaclass costs several times more over the millions of nodes of a model library.
        scope = self.scopes[-1]
        kind = type(node)
        if kind is cst.Name:
            if _is_variable(node, parent):  # type: ignore[arg-type]
                self.index.scope_of[node] = scope
                self.index.names[scope][node.value].append(node)  # type: ignore[attr-defined]
        elif kind is cst.Attribute:
            self.index.scope_of[node] = scope
            owner = self.classes[-1]
            if owner is not None and dotted_name(node.value) == "self":  # type: ignore[attr-defined]
                self.index.self_attributes[owner.name][node.attr.value].append(node)  # type: ignore[attr-defined]
        elif kind is cst.Call:
            callee = node.func  # type: ignore[attr-defined]
            if type(callee) is cst.Name:
                self.index.calls_by_name[callee.value].append(node)
            elif type(callee) is cst.Attribute:
                self.index.calls_by_name[callee.attr.value].append(node)
        elif kind is not cst.FunctionDef and kind is not cst.ClassDef:
            return None
        elif isinstance(node, cst.FunctionDef):
            self.index.enclosing_function[node] = scope
            owner = self.classes[-1]
            if owner is not None and grandparent is owner.node:  # in the class's body
                owner.methods.setdefault(node.name.value, node)
                self.index.class_of[node] = owner.name
            elif isinstance(scope, cst.Module) and owner is None:
                self.index.functions.setdefault(node.name.value, node)
            self.scopes.append(node)
            self.classes.append(owner)
            return "function"
        elif isinstance(node, cst.ClassDef):
            info = ClassInfo(node.name.value, node, [arg.value for arg in node.bases])
            self.index.classes.setdefault(info.name, info)
            self.classes.append(info)
            return "class"
        return None


_DEFINING = frozenset({cst.FunctionDef, cst.ClassDef, cst.Param, cst.ImportAlias})
_ENTERED = frozenset({cst.Name, cst.Attribute, cst.Call, cst.FunctionDef, cst.ClassDef})


def _is_variable(name: cst.Name, parent: cst.CSTNode | None) -> bool:
    """Whether `name` names a variable (not an attribute, keyword, or definition's name)."""
    kind = type(parent)
    if kind is cst.Attribute or kind is cst.Arg:
        return parent.value is name  # type: ignore[union-attr]
    return kind not in _DEFINING


def build_index(module: cst.Module) -> Index:
    indexer = _Indexer(module)
    indexer.walk(module)
    return indexer.index
