"""A stand-in pipeline and rule registry, so the engine, CLI and output tests do not depend
on what the real rules detect.

Markers in the source play the bugs: `BUG_SAFE` (GF001, safe fix -> `OK_SAFE`), `BUG_UNSAFE`
(GF002, unsafe fix -> `OK_UNSAFE`), `BUG_REPORT` (GF003, report only). `SYNTAX_ERROR` makes
the file fail to parse at 3:7, and `CRASH_ME` makes the pipeline raise.
"""

from __future__ import annotations

import os

import pytest

from codemods import commands, pipeline, rules
from codemods.engine import FileResult, FileTask, Mode, process_file
from codemods.findings import Edit, Finding, Tier
from codemods.pipeline import RunOptions, SourceResult
from codemods.rules.base import Rule
from codemods.workers import Budget

MARKERS = {
    "BUG_SAFE": ("GF001", Tier.SAFE, "OK_SAFE"),
    "BUG_UNSAFE": ("GF002", Tier.UNSAFE, "OK_UNSAFE"),
    "BUG_REPORT": ("GF003", Tier.REPORT, None),
}


def fake_process_source(source: bytes, options: RunOptions) -> SourceResult:
    text = source.decode("latin-1")  # any bytes round-trip
    if "CRASH_ME" in text:
        raise RuntimeError("boom")
    if "SYNTAX_ERROR" in text:
        return SourceResult(error="3:7: parse error: expected ':'")
    lines = text.splitlines(keepends=True)
    findings = []
    for number, line in enumerate(lines, 1):
        for marker, (code, tier, replacement) in MARKERS.items():
            start = line.find(marker)
            if start < 0 or code not in options.select:
                continue
            end = start + len(marker) + 1
            edit = Edit(number, start + 1, number, end, replacement) if replacement else None
            message = f"{marker} found; replace it with {replacement or 'something else'}"
            findings.append(Finding(code, number, start + 1, number, end, message, tier, edit))
    if not options.fix:
        return SourceResult(findings, parsed=True)
    fixed = [f for f in findings if f.fixable and (f.tier is Tier.SAFE or options.unsafe_fixes)]
    for f in fixed:
        assert f.edit is not None
        marker = next(m for m, (code, _, _) in MARKERS.items() if code == f.rule)
        lines[f.line - 1] = lines[f.line - 1].replace(marker, f.edit.replacement, 1)
    new = "".join(lines).encode("latin-1")
    return SourceResult(findings, fixed, new if new != source else None, parsed=True)


class _FakeRule(Rule):
    def __init__(self, code: str, name: str) -> None:
        self.code = code  # type: ignore[misc]
        self.name = name  # type: ignore[misc]
        self.summary = f"summary of {name}"  # type: ignore[misc]
        self.explanation = f"explanation of {name}"  # type: ignore[misc]
        self.example_before = "before = 1"  # type: ignore[misc]
        self.example_after = "after = 1"  # type: ignore[misc]


FAKE_RULES = {
    code: _FakeRule(code, name)
    for code, name in [("GF001", "safe-thing"), ("GF002", "unsafe-thing"), ("GF003", "report")]
}


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Use the fakes in this process (run the engine with jobs=1 so no worker is started)."""
    monkeypatch.setattr(pipeline, "process_source", fake_process_source)
    monkeypatch.setattr(rules, "RULES", FAKE_RULES)
    monkeypatch.setattr(commands, "RULE_CODES", frozenset(FAKE_RULES))


def chunk_that_kills_its_worker(
    tasks: list[FileTask], mode: Mode, unsafe: bool, budget: Budget
) -> list[FileResult]:
    """Stands in for the engine's chunk function in worker processes (they import it from
    here): a file named `kill*.py` makes the worker die as a native crash would."""
    if any(task.path.name.startswith("kill") for task in tasks):
        os._exit(70)
    return [process_file(task, mode, unsafe, budget) for task in tasks]
