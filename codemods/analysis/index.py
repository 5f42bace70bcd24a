"""One pass over the tree that indexes what the analyses look up: each node's parent, the
scopes (module, functions, methods), classes, and where names and `self.x` attributes occur."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

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


class _Indexer(cst.CSTVisitor):
    def __init__(self, module: cst.Module) -> None:
        self.index = Index()
        self.scopes: list[ScopeNode] = [module]
        self.stack: list[cst.CSTNode] = []
        self.classes: list[ClassInfo | None] = [None]

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.stack:
            self.index.parents[node] = self.stack[-1]
        self.index.start[node] = len(self.index.start)
        self.stack.append(node)
        scope = self.scopes[-1]
        if isinstance(node, cst.Name) and _is_variable(node, self.index.parents.get(node)):
            self.index.scope_of[node] = scope
            self.index.names[scope][node.value].append(node)
        elif isinstance(node, cst.Attribute):
            self.index.scope_of[node] = scope
            owner = self.classes[-1]
            if owner is not None and dotted_name(node.value) == "self":
                self.index.self_attributes[owner.name][node.attr.value].append(node)
        elif isinstance(node, cst.Call):
            callee = node.func
            if isinstance(callee, cst.Name):
                self.index.calls_by_name[callee.value].append(node)
            elif isinstance(callee, cst.Attribute):
                self.index.calls_by_name[callee.attr.value].append(node)
        elif isinstance(node, cst.FunctionDef):
            self.index.enclosing_function[node] = scope
            owner = self.classes[-1]
            block = self.index.parents.get(node)
            if owner is not None and self.index.parents.get(block) is owner.node:
                owner.methods.setdefault(node.name.value, node)
                self.index.class_of[node] = owner.name
            elif isinstance(scope, cst.Module) and owner is None:
                self.index.functions.setdefault(node.name.value, node)
            self.scopes.append(node)
            self.classes.append(self.classes[-1] if owner is not None else None)
        elif isinstance(node, cst.ClassDef):
            info = ClassInfo(node.name.value, node, [arg.value for arg in node.bases])
            self.index.classes.setdefault(info.name, info)
            self.classes.append(info)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.index.end[original_node] = len(self.index.start)
        self.stack.pop()
        if isinstance(original_node, cst.FunctionDef):
            self.scopes.pop()
            self.classes.pop()
        elif isinstance(original_node, cst.ClassDef):
            self.classes.pop()


def _is_variable(name: cst.Name, parent: cst.CSTNode | None) -> bool:
    """Whether `name` names a variable (not an attribute, keyword, or definition's name)."""
    if isinstance(parent, cst.Attribute):
        return parent.value is name
    if isinstance(parent, cst.Arg):
        return parent.value is name
    return not isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Param, cst.ImportAlias))


def build_index(module: cst.Module) -> Index:
    indexer = _Indexer(module)
    module.visit(indexer)
    return indexer.index
