"""One pass over the tree that indexes what the analyses look up: each node's parent, the
scopes (module, functions, methods), classes, and where names and `self.x` attributes occur."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, fields

import libcst as cst

from codemods.analysis.imports import dotted_name

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
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(node: cst.CSTNode) -> tuple[str, ...]:
    kind = type(node)
    names = _CHILD_FIELDS.get(kind)
    if names is None:
        names = tuple(
            f.name
            for f in fields(node)
            if not f.name.startswith(_SKIPPED_FIELD_PREFIXES) and f.name not in _SKIPPED_FIELDS
        )
        if isinstance(node, cst.FunctionDef):  # decorators come first in the source
            names = ("decorators", *(n for n in names if n != "decorators"))
        elif isinstance(node, cst.IfExp):  # `body if test else orelse`
            names = ("body", "test", "orelse")
        _CHILD_FIELDS[kind] = names
    return names


class _Indexer:
    """Walks the tree by its dataclass fields: several times faster than a LibCST visitor,
    which rebuilds every node it passes."""

    def __init__(self, module: cst.Module) -> None:
        self.index = Index()
        self.scopes: list[ScopeNode] = [module]
        self.classes: list[ClassInfo | None] = [None]

    def walk(self, root: cst.Module) -> None:
        """Pre-order, iteratively: deeply nested expressions must not hit the recursion limit."""
        index = self.index
        pending: list[tuple[cst.CSTNode, cst.CSTNode | None, str | None, bool]] = [
            (root, None, None, False)
        ]
        while pending:
            node, parent, entered, leaving = pending.pop()
            if leaving:
                index.end[node] = len(index.order)
                if entered == "function":
                    self.scopes.pop()
                    self.classes.pop()
                elif entered == "class":
                    self.classes.pop()
                continue
            if parent is not None:
                index.parents[node] = parent
            index.start[node] = len(index.order)
            index.order.append(node)
            index.by_type[type(node)].append(node)
            entered = self.enter(node, parent)
            pending.append((node, parent, entered, True))
            children: list[cst.CSTNode] = []
            for name in _child_fields(node):
                child = getattr(node, name)
                kind = type(child)
                if kind is list or kind is tuple:
                    children.extend(item for item in child if _is_node_type(type(item)))
                elif _is_node_type(kind):
                    children.append(child)
            pending.extend((child, node, None, False) for child in reversed(children))

    def enter(self, node: cst.CSTNode, parent: cst.CSTNode | None) -> str | None:
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
            if owner is not None and self.index.parents.get(parent) is owner.node:
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
_NODE_TYPES: dict[type, bool] = {}


def _is_node_type(kind: type) -> bool:
    known = _NODE_TYPES.get(kind)
    if known is None:
        known = _NODE_TYPES[kind] = issubclass(kind, cst.CSTNode)
    return known


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
