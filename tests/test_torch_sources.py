"""Robustness on real code: every rule over the installed torch package's sources."""

from __future__ import annotations

import os
from pathlib import Path

import libcst
import pytest

from codemods.engine import ErrorKind, FileResult, FileTask, Mode, run
from codemods.rules import RULES
from codemods.walk import python_files

torch = pytest.importorskip("torch")
TORCH = Path(os.path.dirname(torch.__file__))
ALL = frozenset(RULES)


def tasks(files: list[Path]) -> list[FileTask]:
    return [FileTask(path, ALL) for path in files]


def failures(results: list[FileResult]) -> list[str]:
    return [f"{r.path}: {r.error.kind.value}: {r.error.message}" for r in results if r.error]


def libcst_parses(path: Path) -> bool:
    try:
        libcst.parse_module(path.read_bytes())
    except Exception:
        return False
    return True


def test_torch_sources(tmp_path: Path) -> None:
    files = python_files([TORCH])
    assert len(files) > 500, f"expected torch's sources under {TORCH}"
    results = list(run(tasks(files), Mode.DIFF, unsafe_fixes=True, jobs=2))
    assert [r.path for r in results] == files

    internal = [r for r in results if r.error and r.error.kind is not ErrorKind.PARSE]
    assert not internal, "\n".join(failures(internal))
    # A parse error is only acceptable where LibCST itself cannot parse the file.
    wrongly_rejected = [
        r for r in results if r.error and r.error.kind is ErrorKind.PARSE and libcst_parses(r.path)
    ]
    assert not wrongly_rejected, "\n".join(failures(wrongly_rejected))

    changed = [r for r in results if r.changed]
    copies = []
    for i, result in enumerate(changed):
        assert result.source is not None
        copy = tmp_path / f"{i:04}_{result.path.name}"
        copy.write_bytes(result.source)
        copies.append(copy)
    fixed = list(run(tasks(copies), Mode.FIX, unsafe_fixes=True, jobs=2))
    assert not failures(fixed), "\n".join(failures(fixed))
    for result, copy, fix in zip(changed, copies, fixed, strict=True):
        assert fix.changed, f"{result.path}: the diff run changed it, the fix run did not"
        assert copy.read_bytes() == result.new_source, f"{result.path}: fix and diff differ"
        libcst.parse_module(copy.read_bytes())

    again = list(run(tasks(copies), Mode.FIX, unsafe_fixes=True, jobs=2))
    assert not failures(again), "\n".join(failures(again))
    not_idempotent = [str(r.path) for r in again if r.changed]
    assert not not_idempotent, "a second fix run changed: " + ", ".join(not_idempotent)
