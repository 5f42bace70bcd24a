"""Small questions about call syntax and constants that several analyses and rules ask."""

from __future__ import annotations

import ast


def keyword_argument(call: ast.Call, name: str) -> ast.expr | None:
    """The value passed as `name=...` in `call`, if any."""
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return None


def has_star(call: ast.Call) -> bool:
    """Whether `call` unpacks arguments (`f(*args)`, `f(**kwargs)`)."""
    # A loop, not `any(...)` over a generator: the interpreter asks at every call.
    for arg in call.args:
        if type(arg) is ast.Starred:
            return True
    return bool(call.keywords) and any(keyword.arg is None for keyword in call.keywords)


def is_false(node: ast.AST | None) -> bool:
    return type(node) is ast.Constant and node.value is False  # type: ignore[union-attr]


def is_true(node: ast.AST | None) -> bool:
    return type(node) is ast.Constant and node.value is True  # type: ignore[union-attr]


def is_none(node: ast.AST | None) -> bool:
    return type(node) is ast.Constant and node.value is None  # type: ignore[union-attr]


def string_value(node: ast.AST | None) -> str | None:
    """The text of a string literal (implicitly concatenated parts included), or None for
    anything else (an f-string, bytes, a name)."""
    if type(node) is ast.Constant and type(node.value) is str:  # type: ignore[union-attr]
        return node.value  # type: ignore[union-attr]
    return None
