"""Reaching bindings: for each statement of a scope, which bindings of each name (`x`, or
`self.x` inside methods) may have produced the value it holds there.

A classic reaching-definitions pass over the syntax tree, run in program order: a binding
kills the earlier ones of the same name, branches join by union, and loop bodies run until
nothing changes, so a binding made later in a loop body also reaches the top of the body (it
is carried from the previous iteration; `ScopeBindings.carried` tells those apart). A path on
which nothing in the scope binds a name leaves it holding what it held when the scope was
entered (a `self` attribute: the previous call's value); `ScopeBindings.entry_reaches` tells
where that value may still be read. Control
flow that leaves early (`return`, `break`, `continue`, `raise`) is not modelled, which only
ever adds bindings that cannot reach: the sets over-approximate, never miss.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from codemods.analysis.index import FUNCTION_TYPES, TRY_TYPES, Index, ScopeNode
from codemods.analysis.interpreter import target_key

# Statements with no statements inside them (LibCST's small statements).
_SMALL_STATEMENTS = frozenset(
    {
        ast.Expr,
        ast.Assign,
        ast.AnnAssign,
        ast.AugAssign,
        ast.Return,
        ast.Pass,
        ast.Break,
        ast.Continue,
        ast.Raise,
        ast.Assert,
        ast.Import,
        ast.ImportFrom,
        ast.Delete,
        ast.Global,
        ast.Nonlocal,
    }
)
_INNER_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)

ReachingEnv = dict[str, frozenset["Binding"]]


class BindingKind(Enum):
    ASSIGN = "assign"  # `x = value`, `x: T = value`, `(x := value)`, `a, b = value`
    AUGMENTED = "augmented"  # `x += value`: the new value is the operator on old and value
    LOOP_TARGET = "loop target"  # `for x in value`: value is the iterable
    PARAMETER = "parameter"  # a parameter of the function
    OTHER = "other"  # with-as, except-as, import, def, class, del, global: not followed

    # Members are compared by identity: hash them so too. `Enum`'s own hash is Python code
    # (it hashes the name), and the analysis hashes these in every memo key it builds.
    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Binding:
    """One place that binds a name. Compared by identity: one object per binding site."""

    key: str  # the name, or `self.<attribute>`
    kind: BindingKind
    statement: ast.AST  # the binding statement (the `For` for a loop target)
    # the bound Name/Attribute (the `arg` for a parameter; for a name `ast` spells as a string,
    # the node that holds it: the `def`/`class`, the import's `alias`, the `ExceptHandler`,
    # the `global` statement)
    target: ast.AST
    value: ast.expr | None = None  # the assigned expression or iterable
    # where the name sits in a destructuring target: `a, (b, c) = v` binds `c` at (1, 1)
    path: tuple[int, ...] = ()


# Stands, in a joined set, for "no binding of the scope on some path": the value the name held
# when the scope was entered. Never returned by `ScopeBindings.reaching`.
_ENTRY = Binding("", BindingKind.OTHER, ast.Pass(), ast.Pass())
_ENTRY_ONLY = frozenset({_ENTRY})


@dataclass
class ScopeBindings:
    """The reaching bindings of one scope, keyed by statement (the `ast.stmt` nodes
    `FileAnalysis.statement_of` returns: simple and compound statements)."""

    before: dict[ast.AST, ReachingEnv] = field(default_factory=dict)
    order: dict[ast.AST, int] = field(default_factory=dict)  # program order of statements
    final: ReachingEnv = field(default_factory=dict)  # what the scope binds, at its end

    def reaching(self, key: str, statement: ast.AST) -> frozenset[Binding] | None:
        """The bindings of `key` that may reach `statement`; None when the statement is not
        one of this scope's, empty when nothing in the scope binds `key` before it."""
        env = self.before.get(statement)
        if env is None:
            return None
        bindings = env.get(key, frozenset())
        return bindings - _ENTRY_ONLY if _ENTRY in bindings else bindings

    def entry_reaches(self, key: str, statement: ast.AST) -> bool | None:
        """Whether some path from the scope's entry reaches `statement` without binding
        `key`, so that it may still hold the value it had on entry; None when the statement is
        not one of this scope's."""
        env = self.before.get(statement)
        if env is None:
            return None
        return key not in env or _ENTRY in env[key]

    def carried(self, binding: Binding, statement: ast.AST) -> bool:
        """Whether `binding` can reach `statement` only around a loop's back edge: it does not
        come before `statement` in program order, so it was made by a previous iteration."""
        return self.order.get(binding.statement, -1) >= self.order.get(statement, -1)


class NamedExpressions:
    """The file's `:=` expressions, found under a statement through the index's positions (a
    walk over every statement would cost a seventh of the analysis)."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self.nodes = index.of_types(ast.NamedExpr)
        self.starts = [index.start[node] for node in self.nodes]

    def under(self, node: ast.AST) -> list[ast.NamedExpr]:
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

    def _in_inner_scope(self, found: ast.AST, node: ast.AST) -> bool:
        parent = self.index.parents.get(found)
        while parent is not None and parent is not node:
            if isinstance(parent, _INNER_SCOPES):
                return True
            parent = self.index.parents.get(parent)
        return False


def scope_bindings(scope: ScopeNode, named_expressions: NamedExpressions) -> ScopeBindings:
    """The reaching bindings of `scope`."""
    walker = _Walker(named_expressions)
    env: ReachingEnv = {}
    if isinstance(scope, FUNCTION_TYPES):
        params = scope.args
        every = [
            *params.posonlyargs,
            *params.args,
            *params.kwonlyargs,
            *(p for p in (params.vararg, params.kwarg) if p is not None),
        ]
        for param in every:
            binding = walker.binding(param, param.arg, BindingKind.PARAMETER, scope)
            env[param.arg] = frozenset({binding})
    body: Sequence[ast.stmt] = scope.body
    final = walker.block(body, env)
    walker.result.final = {
        key: bindings - _ENTRY_ONLY if _ENTRY in bindings else bindings
        for key, bindings in final.items()
    }
    return walker.result


def _join(left: ReachingEnv, right: ReachingEnv) -> ReachingEnv:
    """Union per name; a name bound on one side only may still hold its entry value."""
    joined = dict(left)
    for key, bindings in right.items():
        joined[key] = joined.get(key, _ENTRY_ONLY) | bindings
    for key in left.keys() - right.keys():
        joined[key] = left[key] | _ENTRY_ONLY
    return joined


class _Walker:
    def __init__(self, named_expressions: NamedExpressions) -> None:
        self.named_expressions = named_expressions
        self.result = ScopeBindings()
        self._bindings: dict[tuple[int, str, BindingKind], Binding] = {}

    def binding(
        self,
        target: ast.AST,
        key: str,
        kind: BindingKind,
        statement: ast.AST,
        value: ast.expr | None = None,
        path: tuple[int, ...] = (),
    ) -> Binding:
        """The one Binding object for this site, so that loop passes reach a fixpoint."""
        memo = (id(target), key, kind)
        if memo not in self._bindings:
            self._bindings[memo] = Binding(key, kind, statement, target, value, path)
        return self._bindings[memo]

    def block(self, statements: Sequence[ast.stmt], env: ReachingEnv) -> ReachingEnv:
        for statement in statements:
            env = self.statement(statement, env)
        return env

    def statement(self, node: ast.stmt, env: ReachingEnv) -> ReachingEnv:
        self.result.before[node] = env
        self.result.order.setdefault(node, len(self.result.order))
        kind = type(node)  # the commonest first, by class
        if kind in _SMALL_STATEMENTS:
            env = self.small_statement(node, env)
            return self.walrus_bindings(node, env, node)
        if kind is ast.If or kind is ast.While:
            env = self.walrus_bindings(node.test, env, node)  # type: ignore[attr-defined]
        if kind is ast.If:
            taken = self.block(node.body, env)  # type: ignore[attr-defined]
            other = self.block(node.orelse, env)  # type: ignore[attr-defined]
            return _join(taken, other)
        if kind is ast.For or kind is ast.AsyncFor or kind is ast.While:
            return self.loop(node, env)  # type: ignore[arg-type]
        if kind is ast.With or kind is ast.AsyncWith:
            for item in node.items:  # type: ignore[attr-defined]
                if item.optional_vars is not None:
                    env = self.bind(item.optional_vars, None, BindingKind.OTHER, node, env)
            return self.block(node.body, env)  # type: ignore[attr-defined]
        if kind in TRY_TYPES:
            return self.try_statement(node, env)  # type: ignore[arg-type]
        if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.ClassDef:
            return self.bind_name(node, node.name, node, env)  # type: ignore[attr-defined]
        env = self.small_statement(node, env)
        return self.walrus_bindings(node, env, node)

    def small_statement(self, node: ast.stmt, env: ReachingEnv) -> ReachingEnv:
        kind = type(node)
        if kind is ast.Expr:
            return env
        if kind is ast.Assign:
            for target in node.targets:  # type: ignore[attr-defined]
                env = self.bind(target, node.value, BindingKind.ASSIGN, node, env)  # type: ignore[attr-defined]
            return env
        if kind is ast.AnnAssign and node.value is not None:  # type: ignore[attr-defined]
            return self.bind(node.target, node.value, BindingKind.ASSIGN, node, env)  # type: ignore[attr-defined]
        if kind is ast.AugAssign:
            return self.bind(node.target, node.value, BindingKind.AUGMENTED, node, env)  # type: ignore[attr-defined]
        if kind is ast.Import or kind is ast.ImportFrom:
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.name == "*":
                    return env  # `from m import *`
                # `import a.b` binds `a`
                bound = alias.asname if alias.asname is not None else alias.name.split(".")[0]
                env = self.bind_name(alias, bound, node, env)
            return env
        if kind is ast.Delete:
            for target in node.targets:  # type: ignore[attr-defined]
                env = self.bind(target, None, BindingKind.OTHER, node, env)
            return env
        if kind is ast.Global or kind is ast.Nonlocal:
            for name in node.names:  # type: ignore[attr-defined]
                env = self.bind_name(node, name, node, env)
        return env

    def loop(self, node: ast.For | ast.AsyncFor | ast.While, env: ReachingEnv) -> ReachingEnv:
        current = env
        while True:
            start = current
            if type(node) is not ast.While:
                start = self.bind(node.target, node.iter, BindingKind.LOOP_TARGET, node, start)  # type: ignore[union-attr]
            widened = _join(current, self.block(node.body, start))
            if widened == current:
                break
            current = widened
        return self.block(node.orelse, current)

    def try_statement(self, node: ast.Try, env: ReachingEnv) -> ReachingEnv:
        merged = _join(env, self.block(node.body, env))
        for handler in node.handlers:
            start = merged
            if handler.name is not None:
                start = self.bind_name(handler, handler.name, handler, merged)
            merged = _join(merged, self.block(handler.body, start))
        if node.orelse:
            merged = _join(merged, self.block(node.orelse, merged))
        return self.block(node.finalbody, merged)

    def walrus_bindings(self, node: ast.AST, env: ReachingEnv, statement: ast.AST) -> ReachingEnv:
        """`(x := value)` in a simple statement or an `if` / `while` test binds `x`."""
        for walrus in self.named_expressions.under(node):
            env = self.bind(walrus.target, walrus.value, BindingKind.ASSIGN, statement, env)
        return env

    def bind_name(
        self, holder: ast.AST, name: str, statement: ast.AST, env: ReachingEnv
    ) -> ReachingEnv:
        """A name `ast` spells as a string (a `def`, an import, `except ... as name`, `global`):
        bound as OTHER, its target the node that holds it."""
        binding = self.binding(holder, name, BindingKind.OTHER, statement)
        return {**env, name: frozenset({binding})}

    def bind(
        self,
        target: ast.expr,
        value: ast.expr | None,
        kind: BindingKind,
        statement: ast.AST,
        env: ReachingEnv,
        path: tuple[int, ...] = (),
    ) -> ReachingEnv:
        key = target_key(target)
        if key is not None:
            binding = self.binding(target, key, kind, statement, value, path)
            return {**env, key: frozenset({binding})}
        if type(target) is ast.Tuple or type(target) is ast.List:
            for position, element in enumerate(target.elts):  # type: ignore[attr-defined]
                if type(element) is ast.Starred:
                    env = self.bind(element.value, None, BindingKind.OTHER, statement, env)  # type: ignore[attr-defined]
                else:
                    element_path = (*path, position)
                    env = self.bind(element, value, kind, statement, env, element_path)
        return env  # stores into `d[k]` or `obj.attr` bind no name
