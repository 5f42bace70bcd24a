"""One `gradfix fix` reaches what a second run would: a fix skipped because its edit overlaps
another's is applied in a further round on the rewritten file."""

from __future__ import annotations

import ast
from collections.abc import Iterator

import libcst as cst
import pytest

from codemods import pipeline
from codemods.analysis import FileAnalysis
from codemods.findings import Tier
from codemods.rules.base import Rule, RuleFinding

SOURCE = b"import torch\nloss = torch.nn.MSELoss()\nvalue = f(g(x))\n"


def _wrapped_in(function: str):
    return lambda node: cst.Call(cst.Name(function), [cst.Arg(node)])


class _WrapArgument(Rule):
    """Wraps the innermost name argument: `g(x)` -> `g(keep(x))`."""

    code = "GF901"

    def may_apply(self, text: str) -> bool:
        return True

    def check(self, analysis: FileAnalysis) -> Iterator[RuleFinding]:
        for node in analysis.index.of_types(ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "g":
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Name):
                    yield RuleFinding(node, "wrap", Tier.SAFE, {arg: _wrapped_in("keep")})


class _RenameOuter(Rule):
    """Renames the outer call, replacing the whole `f(...)` call (so it overlaps)."""

    code = "GF902"

    def may_apply(self, text: str) -> bool:
        return True

    def check(self, analysis: FileAnalysis) -> Iterator[RuleFinding]:
        for node in analysis.index.of_types(ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "f":
                rename = lambda call: call.with_changes(func=cst.Name("f2"))  # noqa: E731
                yield RuleFinding(node, "rename", Tier.SAFE, {node: rename})


@pytest.fixture
def overlapping_rules(monkeypatch: pytest.MonkeyPatch) -> frozenset[str]:
    monkeypatch.setitem(pipeline.RULES, "GF901", _WrapArgument())
    monkeypatch.setitem(pipeline.RULES, "GF902", _RenameOuter())
    return frozenset({"GF901", "GF902"})


def test_overlapping_fixes_converge_in_one_run(overlapping_rules: frozenset[str]) -> None:
    options = pipeline.RunOptions(select=overlapping_rules, fix=True)
    first = pipeline.process_source(SOURCE, options)
    assert first.new_source == b"import torch\nloss = torch.nn.MSELoss()\nvalue = f2(g(keep(x)))\n"
    assert sorted(f.rule for f in first.fixed) == ["GF901", "GF902"]
    assert pipeline.process_source(first.new_source, options).new_source is None


def test_rounds_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule that never converges (always overlapping itself) stops after the bound."""

    class _Forever(Rule):
        code = "GF903"

        def may_apply(self, text: str) -> bool:
            return True

        def check(self, analysis: FileAnalysis) -> Iterator[RuleFinding]:
            for node in analysis.index.of_types(ast.Call):
                yield RuleFinding(node, "again", Tier.SAFE, {node: _wrapped_in("w")})
                yield RuleFinding(node, "again", Tier.SAFE, {node: _wrapped_in("w")})
                return

    monkeypatch.setitem(pipeline.RULES, "GF903", _Forever())
    options = pipeline.RunOptions(select=frozenset({"GF903"}), fix=True)
    result = pipeline.process_source(SOURCE, options)
    assert result.new_source is not None
    assert result.new_source.count(b"w(") == 1 + pipeline.MAX_EXTRA_ROUNDS


def test_a_check_without_fixes_never_parses_with_libcst() -> None:
    """Findings without a fix to write need no LibCST tree; a fix does."""
    buggy = (
        b"import torch\nfrom torch import nn\nmodel = nn.Linear(4, 1)\n"
        b"opt = torch.optim.SGD(model.parameters(), lr=0.1)\ntotal = 0.0\n"
        b"for step in range(3):\n    loss = model(torch.randn(2, 4)).pow(2).mean()\n"
        b"    opt.zero_grad()\n    loss.backward()\n    opt.step()\n    total += loss\n"
    )
    clean = buggy.replace(b"total += loss", b"total += loss.item()")
    check = pipeline.RunOptions(select=frozenset({"GF001"}))
    assert not pipeline.process_source(clean, check).libcst_parsed
    found = pipeline.process_source(buggy, check)
    assert found.findings and found.libcst_parsed  # its JSON carries the fix's edit
