"""A finding's text edit (what JSON and SARIF carry) is the fix `gradfix fix` applies, also
when the fix lies outside the reported node (a `.clone()` where a tensor is bound)."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemods.findings import Edit
from codemods.pipeline import RunOptions, process_source

FIXTURES = Path(__file__).parent / "fixtures"
FIXED_CASES = sorted(path.parent for path in FIXTURES.glob("GF*/*/after.py"))
CASE_IDS = [f"{case.parent.name}/{case.name}" for case in FIXED_CASES]


def _apply(text: str, edits: list[Edit]) -> str:
    lines = text.splitlines(keepends=True)

    def offset(line: int, column: int) -> int:
        return sum(len(previous) for previous in lines[: line - 1]) + column - 1

    for edit in sorted(edits, key=lambda e: (e.start_line, e.start_column), reverse=True):
        start = offset(edit.start_line, edit.start_column)
        end = offset(edit.end_line, edit.end_column)
        text = text[:start] + edit.replacement + text[end:]
    return text


@pytest.mark.parametrize("case", FIXED_CASES, ids=CASE_IDS)
def test_edits_reproduce_the_fix(case: Path) -> None:
    source = (case / "before.py").read_bytes()
    result = process_source(source, RunOptions(select=frozenset({case.parent.name}), fix=True))
    edits = [finding.edit for finding in result.fixed if finding.edit is not None]
    assert len(edits) == len(result.fixed)
    assert result.new_source is not None
    assert _apply(source.decode(), edits) == result.new_source.decode()
