"""Which of the file's functions hand back their argument detached, and which statements
rebind a name on every path: syntactic facts about values that any rule may ask.

A detaching helper (`repackage_hidden(h)`, `detach(states)` returning `[Variable(s.data) for s
in states]`) takes one parameter and every `return` gives it back out of the graph: `h.detach()`,
`h.data`, element-wise over it, a recursive call on its elements, or `None`. Its result carries
no graph whatever it is given, so the interpreter makes it FREE (`interpreter` asks
`returns_detached` before following the call).
"""

from __future__ import annotations

import ast
from dataclasses import replace

from codemods.analysis.interpreter import target_key
from codemods.analysis.values import Grad, Value

Function = ast.FunctionDef | ast.AsyncFunctionDef
_MOVING_METHODS = ("cuda", "cpu", "to")


def returns_detached(function: Function) -> bool:
    """Whether `function` takes one positional parameter and every `return` in it gives that
    parameter detached (or `None`)."""
    params = function.args
    if len(params.args) != 1 or params.posonlyargs or params.vararg or params.kwonlyargs:
        return False
    parameter = params.args[0].arg
    returns = [node for node in _own_nodes(function) if isinstance(node, ast.Return)]
    return bool(returns) and all(
        r.value is not None
        and (_is_none(r.value) or _detached_form(r.value, parameter, function.name))
        for r in returns
    )


def detached_value(value: Value) -> Value:
    """What a detaching helper gives back for `value`: the same shape, with no graph."""
    free_parts = None if value.parts is None else tuple(detached_value(p) for p in value.parts)
    return replace(
        value,
        grad=Grad.FREE,
        element=None if value.element is None else Grad.FREE,
        element_value=None if value.element_value is None else detached_value(value.element_value),
        parts=free_parts,
        entries=None,
        evidence="",
        loss=False,
        leaf=False,
        attached_on_some_path=False,
    )


def is_none_test(test: ast.expr, key: str, operator: type) -> bool:
    """`key is None` (operator `ast.Is`) or `key is not None` (`ast.IsNot`), for a name or
    `self` attribute `key`."""
    return (
        isinstance(test, ast.Compare)
        and target_key(test.left) == key
        and len(test.ops) == 1
        and type(test.ops[0]) is operator
        and _is_none(test.comparators[0])
    )


def always_rebinds(block: list[ast.stmt], key: str) -> bool:
    """Whether every path through `block` assigns `key` (`if isinstance(h, tuple): h = ...
    else: h = h.detach()` counts)."""
    return any(
        (isinstance(small, ast.Assign) and any(key in _bound(t) for t in small.targets))
        or (
            isinstance(small, ast.If)
            and always_rebinds(small.body, key)
            and always_rebinds(small.orelse, key)
        )
        for small in block
    )


def _bound(target: ast.expr) -> set[str]:
    """The keys an assignment target binds, through `out, (h, c)` unpacking."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return {key for element in target.elts for key in _bound(element)}
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    key = target_key(target)
    return set() if key is None else {key}


def _own_nodes(function: Function) -> list[ast.AST]:
    """The nodes of `function`'s body, not those of functions or classes nested in it."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return found


def _detached_form(expression: ast.expr, name: str, itself: str) -> bool:
    """`name.detach()` / `name.data` (inside `Variable(...)`, `.cuda()`, `.to(...)`), or a
    comprehension over `name` whose element is such a form of its variable or a call of the
    function `itself` on it (`tuple(repackage_hidden(v) for v in h)`)."""
    if isinstance(expression, ast.Call) and isinstance(expression.func, ast.Name):
        if expression.func.id in ("tuple", "list") and len(expression.args) == 1:
            return _detached_form(expression.args[0], name, itself)
        if expression.func.id == "Variable" and expression.args:
            return _detached_form(expression.args[0], name, itself)
        if expression.func.id == itself and len(expression.args) == 1:
            return _is_name(expression.args[0], name) and not expression.keywords
    if isinstance(expression, (ast.ListComp, ast.GeneratorExp)):
        (generator, *rest) = expression.generators
        return (
            not rest
            and not generator.ifs
            and _is_name(generator.iter, name)
            and isinstance(generator.target, ast.Name)
            and _detached_form(expression.elt, generator.target.id, itself)
        )
    if isinstance(expression, ast.Call) and isinstance(expression.func, ast.Attribute):
        if expression.func.attr == "detach":
            return _is_name(expression.func.value, name)
        if expression.func.attr in _MOVING_METHODS:
            return _detached_form(expression.func.value, name, itself)
    return (
        isinstance(expression, ast.Attribute)
        and expression.attr == "data"
        and _is_name(expression.value, name)
    )


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _is_none(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is None
