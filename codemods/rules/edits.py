"""Building the LibCST nodes fixes insert, so that they mean what they say."""

from __future__ import annotations

from codemods.lazy_libcst import cst
from codemods.rules.base import Rewrite


def method_call(expression: cst.BaseExpression, method: str) -> cst.Call:
    """`expression.method()`, parenthesising `expression` unless it is an atom: `x.detach()`,
    `f(x).detach()`, `xs[i].detach()`. Anything else (`a + b`, `a if c else b`, `-x`, `await
    x`) needs them, or the method applies to its last operand only."""
    atom = isinstance(expression, (cst.Name, cst.Attribute, cst.Call, cst.Subscript))
    if not atom and not getattr(expression, "lpar", ()):
        expression = expression.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(func=cst.Attribute(value=expression, attr=cst.Name(method)))


def calling(method: str) -> Rewrite:
    """The rewrite that follows an expression with `.method()` (`.item()`, `.detach()`)."""
    return lambda node: method_call(node, method)  # type: ignore[arg-type]
