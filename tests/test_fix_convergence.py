"""One `gradfix fix` reaches what a second run would: a fix skipped because its edit overlaps
another's is applied in a further round on the rewritten file."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
import pytest

from codemods import pipeline
from codemods.analysis import FileAnalysis
from codemods.findings import Tier
from codemods.rules.base import Rule, RuleFinding

SOURCE = b"import torch\nloss = torch.nn.MSELoss()\nvalue = f(g(x))\n"


class _WrapArgument(Rule):
    """Wraps the innermost name argument: `g(x)` -> `g(keep(x))`."""

    code = "GF901"

    def may_apply(self, text: str) -> bool:
        return True

    def check(self, analysis: FileAnalysis) -> Iterator[RuleFinding]:
        for node in analysis.index.parents:
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
                arg = node.args[0].value if node.args else None
                if node.func.value == "g" and isinstance(arg, cst.Name):
                    wrapped = cst.Call(cst.Name("keep"), [cst.Arg(arg)])
                    yield RuleFinding(node, "wrap", Tier.SAFE, {arg: wrapped})


class _RenameOuter(Rule):
    """Renames the outer call, replacing the whole `f(...)` call (so it overlaps)."""

    code = "GF902"

    def may_apply(self, text: str) -> bool:
        return True

    def check(self, analysis: FileAnalysis) -> Iterator[RuleFinding]:
        for node in analysis.index.parents:
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Name)
                and (node.func.value == "f")
            ):
                yield RuleFinding(
                    node, "rename", Tier.SAFE, {node: node.with_changes(func=cst.Name("f2"))}
                )


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
            for node in analysis.index.parents:
                if isinstance(node, cst.Call):
                    wrapped = cst.Call(cst.Name("w"), [cst.Arg(node)])
                    yield RuleFinding(node, "again", Tier.SAFE, {node: wrapped})
                    yield RuleFinding(node, "again", Tier.SAFE, {node: wrapped})
                    return

    monkeypatch.setitem(pipeline.RULES, "GF903", _Forever())
    options = pipeline.RunOptions(select=frozenset({"GF903"}), fix=True)
    result = pipeline.process_source(SOURCE, options)
    assert result.new_source is not None
    assert result.new_source.count(b"w(") == 1 + pipeline.MAX_EXTRA_ROUNDS
