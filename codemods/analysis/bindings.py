"""Reaching bindings: for each statement of a scope, which bindings of each name (`x`, or
`self.x` inside methods) may have produced the value it holds there.

A classic reaching-definitions pass over the syntax tree, run in program order: a binding
kills the earlier ones of the same name, branches join by union, and loop bodies run until
nothing changes, so a binding made later in a loop body also reaches the top of the body (it
is carried from the previous iteration; `ScopeBindings.carried` tells those apart). Control
flow that leaves early (`return`, `break`, `continue`, `raise`) is not modelled, which only
ever adds bindings that cannot reach: the sets over-approximate, never miss.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

import libcst as cst

from codemods.analysis.index import Index
from codemods.analysis.interpreter import target_key
from codemods.cst_speedups import node_classes

_SMALL_STATEMENTS = node_classes(cst.BaseSmallStatement)

ReachingEnv = dict[str, frozenset["Binding"]]


class BindingKind(Enum):
    ASSIGN = "assign"  # `x = value`, `x: T = value`, `(x := value)`, `a, b = value`
    AUGMENTED = "augmented"  # `x += value`: the new value is the operator on old and value
    LOOP_TARGET = "loop target"  # `for x in value`: value is the iterable
    PARAMETER = "parameter"  # a parameter of the function
    OTHER = "other"  # with-as, except-as, import, def, class, del, global: not followed


@dataclass(frozen=True, eq=False)
class Binding:
    """One place that binds a name. Compared by identity: one object per binding site."""

    key: str  # the name, or `self.<attribute>`
    kind: BindingKind
    statement: cst.CSTNode  # the binding statement (the `For` for a loop target)
    target: cst.CSTNode  # the bound Name/Attribute (the Param for a parameter)
    value: cst.BaseExpression | None = None  # the assigned expression or iterable
    # where the name sits in a destructuring target: `a, (b, c) = v` binds `c` at (1, 1)
    path: tuple[int, ...] = ()


@dataclass
class ScopeBindings:
    """The reaching bindings of one scope, keyed by statement (the statement nodes
    `FileAnalysis.statement_of` returns: small statements and compound statements)."""

    before: dict[cst.CSTNode, ReachingEnv] = field(default_factory=dict)
    order: dict[cst.CSTNode, int] = field(default_factory=dict)  # program order of statements
    final: ReachingEnv = field(default_factory=dict)  # what reaches the end of the scope

    def reaching(self, key: str, statement: cst.CSTNode) -> frozenset[Binding] | None:
        """The bindings of `key` that may reach `statement`; None when the statement is not
        one of this scope's, empty when nothing in the scope binds `key` before it."""
        env = self.before.get(statement)
        if env is None:
            return None
        return env.get(key, frozenset())

    def carried(self, binding: Binding, statement: cst.CSTNode) -> bool:
        """Whether `binding` can reach `statement` only around a loop's back edge: it does not
        come before `statement` in program order, so it was made by a previous iteration."""
        return self.order.get(binding.statement, -1) >= self.order.get(statement, -1)


class NamedExpressions:
    """The file's `:=` expressions, found under a statement through the index's positions (a
    LibCST visitor over every statement would cost a seventh of the analysis)."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self.nodes = index.of_types(cst.NamedExpr)
        self.starts = [index.start[node] for node in self.nodes]

    def under(self, node: cst.CSTNode) -> list[cst.NamedExpr]:
        """The `:=` in `node`, in source order, but not in a function or lambda inside it."""
        if not self.nodes:
            return []
        first = bisect_left(self.starts, self.index.start[node])
        last = bisect_left(self.starts, self.index.end[node])
        return [
            found  # type: ignore[misc]
            for found in self.nodes[first:last]
            if not self._in_inner_scope(found, node)
        ]

    def _in_inner_scope(self, found: cst.CSTNode, node: cst.CSTNode) -> bool:
        parent = self.index.parents.get(found)
        while parent is not None and parent is not node:
            if isinstance(parent, (cst.FunctionDef, cst.Lambda)):
                return True
            parent = self.index.parents.get(parent)
        return False


def scope_bindings(
    scope: cst.Module | cst.FunctionDef, named_expressions: NamedExpressions
) -> ScopeBindings:
    """The reaching bindings of `scope`."""
    walker = _Walker(named_expressions)
    env: ReachingEnv = {}
    if isinstance(scope, cst.FunctionDef):
        params = scope.params
        every = [
            *params.posonly_params,
            *params.params,
            *params.kwonly_params,
            *(p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)),
        ]
        for param in every:
            binding = walker.binding(param, param.name.value, BindingKind.PARAMETER, scope)
            env[param.name.value] = frozenset({binding})
        body: Sequence[cst.CSTNode] = scope.body.body
    else:
        body = scope.body
    walker.result.final = walker.block(body, env)
    return walker.result


def _join(left: ReachingEnv, right: ReachingEnv) -> ReachingEnv:
    joined = dict(left)
    for key, bindings in right.items():
        joined[key] = joined.get(key, frozenset()) | bindings
    return joined


class _Walker:
    def __init__(self, named_expressions: NamedExpressions) -> None:
        self.named_expressions = named_expressions
        self.result = ScopeBindings()
        self._bindings: dict[tuple[int, str, BindingKind], Binding] = {}

    def binding(
        self,
        target: cst.CSTNode,
        key: str,
        kind: BindingKind,
        statement: cst.CSTNode,
        value: cst.BaseExpression | None = None,
        path: tuple[int, ...] = (),
    ) -> Binding:
        """The one Binding object for this site, so that loop passes reach a fixpoint."""
        memo = (id(target), key, kind)
        if memo not in self._bindings:
            self._bindings[memo] = Binding(key, kind, statement, target, value, path)
        return self._bindings[memo]

    def block(self, statements: Sequence[cst.CSTNode], env: ReachingEnv) -> ReachingEnv:
        for statement in statements:
            env = self.statement(statement, env)
        return env

    def statement(self, node: cst.CSTNode, env: ReachingEnv) -> ReachingEnv:
        self.result.before[node] = env
        self.result.order.setdefault(node, len(self.result.order))
        kind = type(node)  # the commonest first, by class: `isinstance` goes through the ABC
        if kind in _SMALL_STATEMENTS:
            env = self.small_statement(node, env)
            return self.walrus_bindings(node, env, node)
        if kind is cst.SimpleStatementLine:
            return self.block(node.body, env)  # type: ignore[attr-defined]
        if isinstance(node, (cst.If, cst.While)):
            env = self.walrus_bindings(node.test, env, node)
        if isinstance(node, cst.If):
            taken = self.block(node.body.body, env)
            other = self.statement(node.orelse, env) if node.orelse is not None else env
            return _join(taken, other)
        if isinstance(node, cst.Else):
            return self.block(node.body.body, env)
        if isinstance(node, (cst.For, cst.While)):
            return self.loop(node, env)
        if isinstance(node, cst.With):
            for item in node.items:
                if item.asname is not None:
                    env = self.bind(item.asname.name, None, BindingKind.OTHER, node, env)
            return self.block(node.body.body, env)
        if isinstance(node, cst.Try):
            return self.try_statement(node, env)
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return self.bind(node.name, None, BindingKind.OTHER, node, env)
        env = self.small_statement(node, env)
        return self.walrus_bindings(node, env, node)

    def small_statement(self, node: cst.CSTNode, env: ReachingEnv) -> ReachingEnv:
        kind = type(node)  # final classes: `is`, not the ABC's check
        if kind is cst.Expr:
            return env
        if kind is cst.Assign:
            for target in node.targets:  # type: ignore[attr-defined]
                env = self.bind(target.target, node.value, BindingKind.ASSIGN, node, env)  # type: ignore[attr-defined]
            return env
        if kind is cst.AnnAssign and node.value is not None:  # type: ignore[attr-defined]
            return self.bind(node.target, node.value, BindingKind.ASSIGN, node, env)  # type: ignore[attr-defined]
        if kind is cst.AugAssign:
            return self.bind(node.target, node.value, BindingKind.AUGMENTED, node, env)  # type: ignore[attr-defined]
        if (kind is cst.Import or kind is cst.ImportFrom) and not isinstance(
            node.names,  # type: ignore[attr-defined]
            cst.ImportStar,
        ):
            for alias in node.names:
                bound = alias.asname.name if alias.asname is not None else alias.name
                while isinstance(bound, cst.Attribute):  # `import a.b` binds `a`
                    bound = bound.value
                env = self.bind(bound, None, BindingKind.OTHER, node, env)
            return env
        if isinstance(node, cst.Del):
            return self.bind(node.target, None, BindingKind.OTHER, node, env)
        if isinstance(node, (cst.Global, cst.Nonlocal)):
            for item in node.names:
                env = self.bind(item.name, None, BindingKind.OTHER, node, env)
        return env

    def loop(self, node: cst.For | cst.While, env: ReachingEnv) -> ReachingEnv:
        current = env
        while True:
            start = current
            if isinstance(node, cst.For):
                start = self.bind(node.target, node.iter, BindingKind.LOOP_TARGET, node, start)
            widened = _join(current, self.block(node.body.body, start))
            if widened == current:
                break
            current = widened
        if node.orelse is not None:
            current = self.block(node.orelse.body.body, current)
        return current

    def try_statement(self, node: cst.Try, env: ReachingEnv) -> ReachingEnv:
        merged = _join(env, self.block(node.body.body, env))
        for handler in node.handlers:
            start = merged
            if handler.name is not None:
                start = self.bind(handler.name.name, None, BindingKind.OTHER, handler, merged)
            merged = _join(merged, self.block(handler.body.body, start))
        if node.orelse is not None:
            merged = _join(merged, self.block(node.orelse.body.body, merged))
        if node.finalbody is not None:
            merged = self.block(node.finalbody.body.body, merged)
        return merged

    def walrus_bindings(
        self, node: cst.CSTNode, env: ReachingEnv, statement: cst.CSTNode
    ) -> ReachingEnv:
        """`(x := value)` in a small statement or an `if` / `while` test binds `x`."""
        for walrus in self.named_expressions.under(node):
            env = self.bind(walrus.target, walrus.value, BindingKind.ASSIGN, statement, env)
        return env

    def bind(
        self,
        target: cst.BaseExpression,
        value: cst.BaseExpression | None,
        kind: BindingKind,
        statement: cst.CSTNode,
        env: ReachingEnv,
        path: tuple[int, ...] = (),
    ) -> ReachingEnv:
        key = target_key(target)
        if key is not None:
            binding = self.binding(target, key, kind, statement, value, path)
            return {**env, key: frozenset({binding})}
        if isinstance(target, (cst.Tuple, cst.List)):
            for position, element in enumerate(target.elements):
                if isinstance(element, cst.StarredElement):
                    env = self.bind(element.value, None, BindingKind.OTHER, statement, env)
                else:
                    element_path = (*path, position)
                    env = self.bind(element.value, value, kind, statement, env, element_path)
        return env  # stores into `d[k]` or `obj.attr` bind no name
