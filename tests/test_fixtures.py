"""Every fixture under tests/fixtures/<RULE>/<case>/, checked two ways.

Text: gradfix's findings on before.py, its rewrite (safe fixes only) against after.py (or
before.py when the case is left alone), and idempotence.
Torch: before.py shows the declared symptom, after.py runs clean without it, and training
semantics are unchanged (`same_result`). Set GRADFIX_STANDALONE=1 to also run every script with
`python <script>` in a subprocess.
Notebook cases (before.ipynb, after.ipynb) get the same tests: the text ones on the notebook
files, byte for byte, the torch ones on their code cells joined.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from torch_harness import (
    SCALAR_WARNING,
    Case,
    ScriptRun,
    case_id,
    discover_case_dirs,
    find_attached,
    line_count,
    load_case,
    parse_finding,
    python_code,
    run_script,
    script_of,
    state_difference,
)

if TYPE_CHECKING:
    from codemods.pipeline import SourceResult

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# Parametrized by directory and loaded per test, so that a malformed case.toml fails that
# case's tests instead of the collection of the whole module.
CASE_DIRS = discover_case_dirs()
case_params = pytest.mark.parametrize(
    "case", CASE_DIRS, ids=[case_id(d) for d in CASE_DIRS], indirect=True
)


@pytest.fixture
def case(request: pytest.FixtureRequest) -> Case:
    return load_case(request.param)


def _process(case: Case, source: bytes, *, fix: bool, unsafe_fixes: bool = False) -> SourceResult:
    # Imported here so that a broken pipeline fails the text tests, not the torch tests.
    from codemods.notebooks import process_notebook
    from codemods.pipeline import RunOptions, process_source

    options = RunOptions(select=frozenset({case.rule}), fix=fix, unsafe_fixes=unsafe_fixes)
    process = process_notebook if case.is_notebook else process_source
    result = process(source, options)
    assert result.error is None, result.error
    return result


def _keys(findings: list) -> list[str]:
    return sorted(
        f"{f.rule}:{'' if f.cell is None else f'cell {f.cell}:'}{f.line}:"
        f"{getattr(f.tier, 'value', f.tier)}"
        for f in findings
    )


def test_fixtures_exist() -> None:
    assert CASE_DIRS, "no fixtures found"


# --- fixture sanity --------------------------------------------------------------------------


@case_params
def test_fixture_is_well_formed(case: Case) -> None:
    before = case.before_path.read_bytes()
    for finding in case.findings:
        rule, cell, line, _tier = parse_finding(finding)
        assert rule == case.rule, f"{finding} listed under {case.rule}"
        n_lines = line_count(case.before_path, cell)
        where = case.before_path.name if cell is None else f"its cell {cell}"
        assert 1 <= line <= n_lines, f"{finding}: {where} has {n_lines} lines of code"
    has_safe = "safe" in case.tiers()
    after, before_name = case.after_path, case.before_path.name
    if after is not None:
        assert after.read_bytes() != before, f"{after.name} identical to {before_name}: delete it"
        assert has_safe, f"{after.name} exists but no finding is tier 'safe'"
    else:
        assert not has_safe, "a 'safe' finding is applied by `fix`: add the after file"
    for path in (case.before_path, after, case.reference_path):
        if path is not None:
            compile(python_code(path), str(path), "exec")
    if case.reference_path is not None:
        reference = case.reference_path.read_bytes()
        assert reference != case.expected_source(), "the reference is the fixed script: delete it"


# --- text: findings and rewrites ---------------------------------------------------------------


@case_params
def test_findings(case: Case) -> None:
    result = _process(case, case.before_path.read_bytes(), fix=False)
    assert _keys(result.findings) == list(case.findings)
    assert result.new_source is None, "check mode must not rewrite"


@case_params
def test_fix(case: Case) -> None:
    before = case.before_path.read_bytes()
    result = _process(case, before, fix=True)
    new_source = before if result.new_source is None else result.new_source
    assert new_source.decode() == case.expected_source().decode()
    assert new_source == case.expected_source()  # and byte for byte (line ends, a notebook's JSON)
    assert _keys(result.findings) == list(case.findings)
    safe = [finding for finding in case.findings if finding.endswith(":safe")]
    assert _keys(result.fixed) == sorted([*safe, *case.fixed_later])


@case_params
def test_fix_is_idempotent(case: Case) -> None:
    expected = case.expected_source()
    result = _process(case, expected, fix=True)
    assert result.new_source in (None, expected), "a second `fix` changed the output again"


@case_params
def test_unsafe_fixes_flag(case: Case) -> None:
    if "unsafe" in case.tiers():
        pytest.skip("has unsafe findings: their --unsafe-fixes rewrite is not pinned by a fixture")
    before = case.before_path.read_bytes()
    result = _process(case, before, fix=True, unsafe_fixes=True)
    new_source = before if result.new_source is None else result.new_source
    assert new_source.decode() == case.expected_source().decode()


# --- torch: the scripts' behaviour ---------------------------------------------------------


def _run(path: Path, workdir: Path) -> ScriptRun:
    # No time limit: a loaded CI machine may take many seconds for torch's first run.
    return run_script(path, workdir)


@case_params
def test_torch_behaviour(case: Case, tmp_path: Path) -> None:
    before = _run(case.before_path, tmp_path / "before")
    if case.symptom == "error":
        assert isinstance(before.exception, RuntimeError), (
            f"before.py should raise RuntimeError, got:\n{before.traceback or 'no exception'}"
        )
        assert case.error is not None
        assert case.error in str(before.exception)
    else:
        before.check_clean()
    if case.symptom == "grad_fn":
        assert case.probe is not None
        leak = find_attached(before.evaluate(case.probe), case.probe)
        assert leak is not None, f"before.py: nothing graph-attached reachable from {case.probe}"

    fixed = before  # left alone: after.py == before.py, already run
    if case.after_path is not None:
        fixed = _run(case.after_path, tmp_path / "after")
        fixed.check_clean()
        if case.probe is not None:
            leak = find_attached(fixed.evaluate(case.probe), case.probe)
            assert leak is None, f"after.py still holds a graph-attached tensor at {leak}"
        scalar_warnings = [w for w in fixed.warnings if SCALAR_WARNING in w]
        assert not scalar_warnings, f"after.py converts a requires-grad tensor: {scalar_warnings}"
    if case.same_result is None:
        return
    if case.reference_path is not None:
        # The hand-written correct version: needed when before.py raises, and when the
        # rewrite is not itself the obvious correct form.
        expected, what = _run(case.reference_path, tmp_path / "reference"), "reference.py"
        expected.check_clean()
    elif case.after_path is not None:
        expected, what = before, "before.py"
    else:
        return
    diff = state_difference(
        expected.evaluate(case.same_result),
        fixed.evaluate(case.same_result),
        case.same_result,
        close=case.reference_path is not None,
    )
    assert diff is None, f"the fixed script's training result differs from {what}: {diff}"


@pytest.mark.skipif(
    os.environ.get("GRADFIX_STANDALONE") != "1", reason="set GRADFIX_STANDALONE=1 to run"
)
@case_params
def test_scripts_run_standalone(case: Case, tmp_path: Path) -> None:
    optional = (case.after_path, case.reference_path)
    scripts = [case.before_path] + [path for path in optional if path is not None]
    for script in scripts:
        proc = subprocess.run(
            [sys.executable, str(script_of(script, tmp_path))],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if case.symptom == "error" and script == case.before_path:
            assert proc.returncode != 0
            assert case.error is not None
            assert case.error in proc.stderr
        else:
            assert proc.returncode == 0, proc.stderr
