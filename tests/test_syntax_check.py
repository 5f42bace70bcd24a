"""Errors CPython's compiler raises on code its parser accepts: gradfix reports each one as
CPython words it, at its position, whether the text gate stops the file (only the syntax
check runs) or lets it through to the analysis (the tree is parsed and its compile checked)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import refusal_harvest

from codemods.analysis.index import build_index
from codemods.analysis.refusals import CHECKED_PYTHON, compiler_may_refuse
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
    "return in a class body": "def f():\n    class A:\n        return 1\n",
    "async with in a plain function": "def f():\n    async with x:\n        pass\n",
    "async comprehension in a plain function": "def f():\n    return [x async for x in y]\n",
    "break in a loop's else": "for x in y:\n    pass\nelse:\n    break\n",
    "continue in a function in a loop": "for x in y:\n    def g():\n        continue\n",
    "starred value alone": "x = *a\n",
    "starred loop target": "for *a in b:\n    pass\n",
    "257 targets before a star": ", ".join(f"a{i}" for i in range(257)) + ", *rest = x\n",
    "repeated class keyword": "class A(metaclass=M, metaclass=N):\n    pass\n",
    "duplicate lambda parameter": "g = lambda a, *, a: a\n",
    "star parameter repeating a name": "def f(a, *a):\n    pass\n",
    "keyword repeated in a nested call": "f(g(a=1, b=2, a=3), a=4)\n",
    "walrus rebinding a comprehension variable": "y = [x := 1 for x in z]\n",
    "walrus in a comprehension in a class body": "class A:\n    y = [(z := 1) for x in w]\n",
    "walrus in a comprehension's iterable": "y = [x for x in (z := w)]\n",
    "inner loop rebinding a walrus target": "y = [i for i in w if (j := 0) for j in w]\n",
    "yield in a class body in a function": "def f():\n    class A:\n        yield 1\n",
    "yield in a default": "def f(x=(yield)):\n    pass\n",
    "yield in a generator expression": "def f():\n    return ((yield x) for x in y)\n",
    "yield from in an async function": "async def f():\n    yield from g()\n",
    "return with a value in an async generator": "async def f():\n    yield 1\n    return 2\n",
    "match binding a name twice": "match p:\n    case (x, x):\n        pass\n",
    "break in an except* block": (
        "for x in y:\n    try:\n        pass\n    except* E:\n        break\n"
    ),
    "assignment to __debug__": "__debug__ = 1\n",
    "__debug__ as a parameter": "def f(__debug__):\n    pass\n",
    "__debug__ as a keyword": "f(__debug__=1)\n",
    "__debug__ with a fullwidth letter": "__\uff44ebug__ = 1\n",
    "7 nested try blocks with finally": "".join(
        " " * i + "try:\n" + " " * (i + 1) + "pass\n" + " " * i + "except E:\n" for i in range(7)
    )
    + " " * 7
    + "pass\n"
    + "".join(" " * i + "finally:\n" + " " * (i + 1) + "pass\n" for i in reversed(range(7))),
    "a with of 21 items": "with " + ", ".join(f"a{i}" for i in range(21)) + ":\n    pass\n",
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


# The tree of a file that passes the text gate is compiled only when it holds something the
# compiler could refuse (`analysis/refusals.py`): every error above, and every one CPython's
# own test suite has, must be flagged; what model code is full of must not be.
checked_python = pytest.mark.skipif(not CHECKED_PYTHON, reason="every tree is compiled here")

# What model code is full of, which must not cost a compile.
ACCEPTED = {
    "returns in functions": "def f(x):\n    if x:\n        return 1\n    return 2\n",
    "break and continue in loop bodies": (
        "for x in y:\n    if x:\n        continue\n    while x:\n        break\n"
        "else:\n    for z in y:\n        break\n"
    ),
    "starred calls, displays, targets": "f(*a, **k)\nb = [*a, *c]\nhead, *tail = a\nt = (*a, 1)\n",
    "distinct keywords": "f(lr=1, momentum=0.9)\nclass A(B, metaclass=M):\n    pass\n",
    "a keyword or parameter name in several calls and signatures": (
        "f(a=1, **k, **j)\ng(a=f(a=2))\nclass A(metaclass=M):\n    def m(self, a, *b, **c):\n"
        "        return lambda a, b: a\n"
    ),
    "future annotations after a docstring": '"""Doc."""\nfrom __future__ import annotations\n',
    "a star import at module level": "if x:\n    from m import *\n",
    "except clauses ending in a bare one": (
        "try:\n    pass\nexcept E:\n    pass\nexcept:\n    pass\n"
    ),
    "walrus outside comprehensions": (
        "if (n := len(x)) > 1:\n    y = [n for i in x]\nclass A:\n    z = (w := 1)\n"
    ),
    "generators": "def f(x):\n    yield x\n    y = yield from g(x)\n    return y\n",
    "ten nested blocks": "".join(f"{' ' * i}for x in y:\n" for i in range(10)) + " " * 10 + "pass",
}


def _flagged(source: str) -> bool:
    tree = ast.parse(source)
    return compiler_may_refuse(tree, build_index(tree), source)


def _refused(source: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(ast.parse(source), "<file>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError):
            return True
    return False


@checked_python
@pytest.mark.parametrize("snippet", COMPILE_ONLY_ERRORS.values(), ids=COMPILE_ONLY_ERRORS)
def test_each_compile_only_error_makes_the_tree_compiled(snippet: str) -> None:
    assert _flagged(snippet)


@checked_python
@pytest.mark.parametrize("source", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_plain_code_is_not_compiled_again(source: str) -> None:
    assert not _refused(source)
    assert not _flagged(source)


@checked_python
def test_a_tree_deep_for_the_recursion_limit_is_compiled() -> None:
    """3.10 and 3.11 compile a tree within the recursion limit; 3.12 and 3.13 within a fixed
    limit of their own, under which their compile of the source never fails where the parse
    did not."""
    source = "x = " + "-" * 1_100 + "1\n"
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1_000)
    try:
        if sys.version_info[:2] <= (3, 11):
            assert _refused(source)
        assert _flagged(source)
    finally:
        sys.setrecursionlimit(limit)
    assert not _flagged("x = " + "-" * 200 + "1\n")  # under gradfix's limit of 20,000


@checked_python
def test_every_refusal_in_cpythons_test_suite_is_flagged() -> None:
    if not (refusal_harvest.TEST_SUITE / "test_syntax.py").exists():
        pytest.skip("this Python was installed without its test suite")
    result = refusal_harvest.harvest()
    assert result["refused"] > 200  # the suite was read
    assert result["missed"] == []


def _installed_beside(minor: int) -> Path | None:
    """Python 3.<minor> installed beside the Python running the tests (pyenv's versions)."""
    for folder in sorted(Path(sys.base_prefix).parent.glob(f"3.{minor}.*")):
        executable = folder / "bin" / f"python3.{minor}"
        if executable.exists() and (folder / "lib" / f"python3.{minor}" / "test").is_dir():
            return executable
    return None


@pytest.mark.parametrize("minor", [10, 11, 12, 13], ids=lambda minor: f"3.{minor}")
def test_every_refusal_in_another_checked_pythons_test_suite_is_flagged(minor: int) -> None:
    """`CHECKED_PYTHON` trusts each of these compilers as the one running the tests."""
    if sys.version_info[:2] == (3, minor):
        pytest.skip("the running Python: checked above")
    executable = _installed_beside(minor)
    if executable is None:
        pytest.skip(f"no Python 3.{minor} with its test suite beside this one")
    script = Path(refusal_harvest.__file__)
    run = subprocess.run(
        [str(executable), "-W", "ignore", str(script)], capture_output=True, text=True, check=True
    )
    result = json.loads(run.stdout)
    assert result["python"] == f"3.{minor}"
    assert result["refused"] > 200
    assert result["missed"] == []
