"""Small questions about call syntax that several analyses and rules ask."""

from __future__ import annotations

import libcst as cst


def keyword_argument(call: cst.Call, name: str) -> cst.BaseExpression | None:
    """The value passed as `name=...` in `call`, if any."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def is_false(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"
