"""Errors CPython's compiler raises on code its parser accepts: gradfix reports each one as
CPython words it, at its position, whether the text gate stops the file (only the syntax
check runs) or lets it through to the analysis (the tree is parsed and its compile checked)."""

from __future__ import annotations

import ast
import warnings

import pytest

from codemods.pipeline import RunOptions, process_source
from codemods.rules import RULES

# Code every rule's text pre-check lets through: the analysis runs on it.
_ANALYSED_PREFIX = """\
import torch
from torch import nn

net = nn.Linear(2, 2)
total = 0
for x in torch.randn(4, 2):
    loss = net(x).sum()
    loss.backward()
    total += loss
"""
_NESTED_BLOCKS = "".join(f"{'    ' * depth}for i{depth} in r:\n" for depth in range(21))

# Each parses, and the compiler refuses it.
COMPILE_ONLY_ERRORS = {
    "return outside a function": "return 1\n",
    "yield outside a function": "yield 1\n",
    "await outside a function": "await f()\n",
    "await in a plain function": "def f():\n    await g()\n",
    "async for in a plain function": "def f():\n    async for x in y:\n        pass\n",
    "break outside a loop": "break\n",
    "continue outside a loop": "if x:\n    continue\n",
    "nonlocal at module level": "nonlocal x\n",
    "nonlocal without a binding": "def f():\n    nonlocal x\n",
    "global after use": "def f():\n    x = 1\n    global x\n",
    "duplicate parameter": "def f(a, a):\n    pass\n",
    "two starred targets": "*a, *b = c\n",
    "starred target alone": "*a = c\n",
    "late __future__ import": "x = 1\nfrom __future__ import annotations\n",
    "unknown __future__ feature": "from __future__ import braces\n",
    "import * in a function": "def f():\n    from os import *\n",
    "yield in a comprehension": "def f():\n    return [(yield x) for x in y]\n",
    "repeated keyword argument": "f(a=1, a=2)\n",
    "bare except not last": "try:\n    pass\nexcept:\n    pass\nexcept E:\n    pass\n",
    "irrefutable case not last": "match x:\n    case y:\n        pass\n    case 1:\n        pass\n",
    "too many nested blocks": _NESTED_BLOCKS + "    " * 21 + "pass\n",
}


def _compiler_says(source: bytes) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(source, "<file>", "exec", dont_inherit=True)
        except SyntaxError as error:
            return f"{error.lineno or 1}:{error.offset or 1}: parse error: {error.msg}"
    raise AssertionError("the compiler accepted it")


@pytest.mark.parametrize("snippet", COMPILE_ONLY_ERRORS.values(), ids=COMPILE_ONLY_ERRORS)
@pytest.mark.parametrize("analysed", [False, True], ids=["gated-out", "analysed"])
def test_compile_only_errors_are_reported_as_cpython_words_them(
    snippet: str, analysed: bool
) -> None:
    source = ((_ANALYSED_PREFIX if analysed else "") + snippet).encode()
    ast.parse(source)  # the parser accepts it: only the compiler refuses it
    result = process_source(source, RunOptions(select=frozenset(RULES)))
    assert result.error == _compiler_says(source)
    assert not result.parsed and not result.findings


def test_the_analysed_prefix_passes_every_rules_text_gate() -> None:
    """Otherwise the `analysed` cases above would test the gated-out path twice."""
    result = process_source(_ANALYSED_PREFIX.encode(), RunOptions(select=frozenset(RULES)))
    assert result.error is None and result.parsed
