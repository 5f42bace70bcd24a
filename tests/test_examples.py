"""The bundled examples the README opens with: each raises its RuntimeError as shipped, and
runs clean once `gradfix fix` has rewritten it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codemods.pipeline import RunOptions, process_source
from codemods.rules import RULES

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


def _run(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=script.parent,
    )


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_example_fails_before_and_runs_after_fix(example: Path, tmp_path: Path) -> None:
    before = _run(shutil.copy(example, tmp_path / "before.py"))
    assert before.returncode != 0 and "RuntimeError" in before.stderr, before.stderr

    result = process_source(example.read_bytes(), RunOptions(frozenset(RULES), fix=True))
    assert result.new_source is not None and not result.error
    fixed = tmp_path / "after.py"
    fixed.write_bytes(result.new_source)
    after = _run(fixed)
    assert after.returncode == 0, after.stderr
