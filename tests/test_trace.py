"""`gradfix trace`: each rule's trace case run in a real subprocess under CPU torch, its finding,
its line and the fixed file; the script's own exceptions; no torch needed outside `trace`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codemods.commands import app

CASES = Path(__file__).parent / "trace_cases"
ROOT = Path(__file__).resolve().parent.parent
# The rule, the line the finding is reported at, and (GF003) the other line it names.
EXPECTED = {
    "GF001": (14, None),  # total += loss
    "GF002": (11, None),  # out, hidden = rnn(x, hidden)
    "GF003": (13, "line 14"),  # loss_a.backward(), then loss_b.backward()
    "GF004": (9, "line 8"),  # gate[gate < 0.3] = 0.0, after sigmoid saved gate
}

_GRADFIX = "import sys; from codemods.cli import main; sys.argv[0] = 'gradfix'; main()"

pytest.importorskip("torch")


def _trace(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", _GRADFIX, "trace", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=240,
    )


@pytest.mark.parametrize("rule", sorted(EXPECTED))
def test_trace_fixes_each_rule(rule: str, tmp_path: Path) -> None:
    shutil.copy(CASES / rule / "before.py", tmp_path / "before.py")
    completed = _trace("--fix", "before.py", cwd=tmp_path)
    line, _ = EXPECTED[rule]
    assert completed.returncode == 1, completed.stderr
    assert f"before.py:{line}: {rule} fixed" in completed.stdout, completed.stdout
    fixed = (tmp_path / "before.py").read_text(encoding="utf-8")
    assert fixed == (CASES / rule / "after.py").read_text(encoding="utf-8")


def test_an_embedding_renorm_is_fixed_where_the_weight_was_saved(tmp_path: Path) -> None:
    # The lookup (line 12) writes the weight inside the op; the fix clones it at the matmul
    # that saved it (line 11), as the nn.Embedding documentation advises.
    case = CASES / "GF004_embedding_max_norm"
    shutil.copy(case / "before.py", tmp_path / "train.py")
    completed = _trace("--fix", "train.py", cwd=tmp_path)
    assert "train.py:11: GF004 fixed" in completed.stdout, completed.stdout + completed.stderr
    assert (tmp_path / "train.py").read_bytes() == (case / "after.py").read_bytes()


def test_trace_fix_keeps_crlf_line_endings(tmp_path: Path) -> None:
    case = CASES / "GF004"
    crlf = (case / "before.py").read_bytes().replace(b"\n", b"\r\n")
    (tmp_path / "train.py").write_bytes(crlf)
    completed = _trace("--fix", "train.py", cwd=tmp_path)
    assert completed.returncode == 1, completed.stderr
    expected = (case / "after.py").read_bytes().replace(b"\n", b"\r\n")
    assert (tmp_path / "train.py").read_bytes() == expected


def _findings(completed: subprocess.CompletedProcess[str]) -> list[tuple[str, int, str]]:
    return [(f["rule"], f["line"], f["tier"]) for f in json.loads(completed.stdout)]


def test_a_value_a_store_computes_is_read_where_it_went(tmp_path: Path) -> None:
    # `self.predictions.append(self.net(X))` (line 15) stores a value no name holds before
    # the statement runs: the list's last item is read once it ran. Outputs, not one number:
    # GF002, a report (nothing proves the list is only kept). Its twin stores them detached.
    case = CASES / "GF002_kept_output"
    shutil.copy(case / "before.py", tmp_path / "before.py")
    completed = _trace("--format", "json", "before.py", cwd=tmp_path)
    assert completed.returncode == 1, completed.stderr
    assert _findings(completed) == [("GF002", 15, "report")]
    shutil.copy(case / "twin.py", tmp_path / "twin.py")
    completed = _trace("--format", "json", "twin.py", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert _findings(completed) == []


def test_state_an_object_keeps_across_steps_is_reported_where_it_is_read(tmp_path: Path) -> None:
    # The decoder's state object keeps `h.unsqueeze(0)` (line 24) from one chunk to the next;
    # line 19 reads it back after the step whose backward freed it. GF002, a report (reset or
    # detach where a step ends, by hand), not GF003's reuse after a step. The twin detaches.
    case = CASES / "GF002_decoder_state"
    for name in ("before.py", "twin.py"):
        shutil.copy(case / name, tmp_path / name)
    completed = _trace("--format", "json", "before.py", cwd=tmp_path)
    assert _findings(completed) == [("GF002", 19, "report")], completed.stderr
    assert "DecoderState.hidden" in json.loads(completed.stdout)[0]["message"]
    completed = _trace("--format", "json", "twin.py", cwd=tmp_path)
    assert (completed.returncode, _findings(completed)) == (0, []), completed.stderr


# State kept across steps whose fix `trace` can only report, each at the line the fix
# changes (and, in the message, the line that stores the state); `--fix` leaves the file as
# it is, and the twin, which resets or detaches the state, is silent.
REPORTED_WHERE_THE_FIX_GOES = [
    # `self.state` (line 17) is carried from one batch to the next, but the same line also
    # reads it at each time step of a batch: `.detach()` there would cut the graph inside the
    # batch. Reported before the statement whose generator runs the time steps (line 27).
    pytest.param("GF002_object_state", 27, "line 17", id="recurrence-inside-a-step"),
    # The neuron keeps `self.mem` (line 16) across batches; the loop over time steps in
    # `run_steps` (line 22) reads it within each batch, while `train`'s loop also runs the
    # backward: the reset goes before line 22.
    pytest.param("GF002_time_loop_state", 22, "line 16", id="time-loop-state"),
    # `state.detach()` runs `tensor = tensor.detach()` (line 13) after each backward: the
    # detached copy rebinds the loop's name and is dropped, and the next chunk reads the
    # attached `state.h` at line 21. Reported at line 13, not at the read.
    pytest.param("GF002_detach_rebinds_name", 13, "", id="detach-rebinds-a-name"),
]


@pytest.mark.parametrize(("case_name", "line", "mentions"), REPORTED_WHERE_THE_FIX_GOES)
def test_state_kept_across_steps_is_reported_where_the_fix_goes(
    case_name: str, line: int, mentions: str, tmp_path: Path
) -> None:
    case = CASES / case_name
    for name in ("before.py", "twin.py"):
        shutil.copy(case / name, tmp_path / name)
    completed = _trace("--fix", "--format", "json", "before.py", cwd=tmp_path)
    assert _findings(completed) == [("GF002", line, "report")], completed.stderr
    assert mentions in json.loads(completed.stdout)[0]["message"]
    assert (tmp_path / "before.py").read_bytes() == (case / "before.py").read_bytes()
    completed = _trace("--format", "json", "twin.py", cwd=tmp_path)
    assert (completed.returncode, _findings(completed)) == (0, []), completed.stderr


def test_a_metric_summed_from_the_output_is_detached_where_the_output_enters(
    tmp_path: Path,
) -> None:
    # The running metric (line 13) sums values computed from `out` after the backward: no
    # backward goes through the sum, so it is no loss (GF002, not GF001), and the fix detaches
    # `out` where it is passed in (line 33). The twin sums the loss itself: GF001 at its sum.
    case = CASES / "GF002_metric_fed_output"
    for name in ("before.py", "twin.py"):
        shutil.copy(case / name, tmp_path / name)
    completed = _trace("--fix", "before.py", cwd=tmp_path)
    assert "before.py:33: GF002 fixed" in completed.stdout, completed.stdout + completed.stderr
    assert (tmp_path / "before.py").read_bytes() == (case / "after.py").read_bytes()
    completed = _trace("--format", "json", "twin.py", cwd=tmp_path)
    assert [(rule, line) for rule, line, _ in _findings(completed)] == [("GF001", 33)]


# Findings fixed where the fix goes, each reported at that line; the twin, written the right
# way, is silent.
FIXED_WHERE_THE_FIX_GOES = [
    # `self.total += gather(value)` (line 16) adds a value the statement computes into an
    # attribute: the attribute names what holds the graph, and the sum is detached there.
    pytest.param("GF001_attribute_sum_of_call", "GF001", 16, id="attribute-sum-of-a-call"),
    # A meter sums entries of the criterion's dict (line 20): each is one number a backward
    # went through, a loss term, not the model's output passed to a metric.
    pytest.param("GF001_meter_fed_loss_terms", "GF001", 20, id="meter-fed-loss-terms"),
    # Two ReLU(inplace=True) layers: the head's (line 9) writes an output nothing saved; the
    # block's (line 21, built under an if, run from an add_module Sequential) writes the input
    # the skip layer saved. Only the block's is made out of place.
    pytest.param(
        "GF004_module_called_by_attribute", "GF004", 21, id="constructor-of-the-module-called"
    ),
    # A queue written under no_grad (line 19) that a matmul saved (line 12): cloned there.
    pytest.param("GF004_write_into_a_saved_buffer", "GF004", 12, id="clone-where-saved"),
]


@pytest.mark.parametrize(("case_name", "rule", "line"), FIXED_WHERE_THE_FIX_GOES)
def test_a_finding_is_fixed_and_reported_where_its_fix_goes(
    case_name: str, rule: str, line: int, tmp_path: Path
) -> None:
    case = CASES / case_name
    for name in ("before.py", "twin.py"):
        shutil.copy(case / name, tmp_path / name)
    completed = _trace("--fix", "before.py", cwd=tmp_path)
    output = completed.stdout + completed.stderr
    assert f"before.py:{line}: {rule} fixed" in completed.stdout, output
    assert (tmp_path / "before.py").read_bytes() == (case / "after.py").read_bytes()
    completed = _trace("--format", "json", "twin.py", cwd=tmp_path)
    assert (completed.returncode, _findings(completed)) == (0, []), completed.stderr


def test_an_epoch_runs_on_to_its_validation_before_the_trace_stops(tmp_path: Path) -> None:
    # Three optimizer steps end the first epoch's batch loop; the validation after it sums
    # graph-attached losses into a dict (line 8). With the default `--steps 3`, the run goes
    # on through that tail to the next epoch's first step (4 in all), sees the sums kept, and
    # fixes the line with `.item()` (the after file, which is also the twin: no finding).
    case = CASES / "GF001_validation_tail"
    for name in ("before.py", "twin.py"):
        shutil.copy(case / name, tmp_path / name)
    completed = _trace("--fix", "before.py", cwd=tmp_path)
    assert "before.py:8: GF001 fixed" in completed.stdout, completed.stdout + completed.stderr
    assert "stopped after 4 optimizer steps" in completed.stderr
    assert (tmp_path / "before.py").read_bytes() == (case / "after.py").read_bytes()
    completed = _trace("--format", "json", "twin.py", cwd=tmp_path)
    assert (completed.returncode, _findings(completed)) == (0, []), completed.stderr


def test_every_in_place_write_the_failing_graph_saved_is_fixed(tmp_path: Path) -> None:
    # Backward stops at the first changed tensor it unpacks; both `/=` lines (6, 7) change
    # tensors the loss's graph saved, and both are fixed in one run. The write at line 10
    # changes what a graph no backward goes through saved: left alone.
    case = CASES / "GF004_two_writes"
    shutil.copy(case / "before.py", tmp_path / "before.py")
    completed = _trace("--fix", "before.py", cwd=tmp_path)
    for line in (6, 7):
        assert f"before.py:{line}: GF004 fixed" in completed.stdout, completed.stdout
    assert "before.py:10" not in completed.stdout
    assert (tmp_path / "before.py").read_bytes() == (case / "after.py").read_bytes()


@pytest.mark.parametrize(
    ("prefix", "shift"),
    [
        pytest.param(b"\xef\xbb\xbf", 0, id="bom"),
        pytest.param(b"# -*- coding: latin-1 -*-\n# caf\xe9\n", 2, id="latin-1"),
    ],
)
def test_trace_reads_and_fixes_a_file_as_python_decodes_it(
    prefix: bytes, shift: int, tmp_path: Path
) -> None:
    # The kept loss is found at its store (the line tracer reads the file's bytes as Python
    # does) and fixed in the file's own encoding, its BOM or declaration kept.
    case = CASES / "GF001_kept_list"
    (tmp_path / "train.py").write_bytes(prefix + (case / "before.py").read_bytes())
    completed = _trace("--fix", "train.py", cwd=tmp_path)
    assert f"train.py:{15 + shift}: GF001 fixed" in completed.stdout, completed.stderr
    expected = prefix + (case / "after.py").read_bytes()
    assert (tmp_path / "train.py").read_bytes() == expected


def test_trace_fix_is_idempotent(tmp_path: Path) -> None:
    shutil.copy(CASES / "GF003" / "after.py", tmp_path / "train.py")
    completed = _trace("--fix", "train.py", cwd=tmp_path)  # the fixed script runs clean
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert (tmp_path / "train.py").read_bytes() == (CASES / "GF003" / "after.py").read_bytes()


def test_trace_json_names_the_lines_without_changing_the_file(tmp_path: Path) -> None:
    for rule in ("GF003",):
        shutil.copy(CASES / rule / "before.py", tmp_path / f"{rule}.py")
        completed = _trace("--format", "json", f"{rule}.py", cwd=tmp_path)
        assert completed.returncode == 1, completed.stderr
        (finding,) = json.loads(completed.stdout)
        line, other = EXPECTED[rule]
        assert (finding["rule"], finding["line"], finding["tier"]) == (rule, line, "confirmed")
        assert other in finding["message"]
        assert finding["fix"]["edits"]
        before = (CASES / rule / "before.py").read_bytes()
        assert (tmp_path / f"{rule}.py").read_bytes() == before


# Failures whose cause decides the rule, each reported (no one edit is right) at the line the
# fix changes; the twin, written the right way, has no finding.
CAUSES = {
    # a critic step before the actor loss's backward, whose graph saved the critic's weights
    "GF004_step_before_backward": ("GF004", 20, "line 23"),
    # a generator output of an earlier step read into each later generator step's graph
    "GF002_updated_after_read": ("GF002", 12, "line 9"),
    # a loss backpropagated twice through one wrapper method (and nn.Embedding's padding_idx
    # initialisation, an in-place write under no_grad, traced on the way)
    "GF003_duplicate_through_wrapper": ("GF003", 21, "line 20"),
    # a D loss built from the same D(fake) as the G loss, before the G step: reported where
    # it takes in the graph the G backward freed
    "GF003_joined_before_step": ("GF003", 15, "line 17"),
}


@pytest.mark.parametrize("case", sorted(CAUSES))
def test_a_failure_is_reported_by_its_cause_at_the_line_to_change(
    case: str, tmp_path: Path
) -> None:
    rule, line, other = CAUSES[case]
    for script in ("before.py", "twin.py"):
        shutil.copy(CASES / case / script, tmp_path / script)
    completed = _trace("--format", "json", "before.py", cwd=tmp_path)
    assert completed.returncode == 1, completed.stderr
    (finding,) = json.loads(completed.stdout)
    assert (finding["rule"], finding["line"], finding["tier"]) == (rule, line, "report")
    assert other in finding["message"]
    _trace("--fix", "before.py", cwd=tmp_path)
    assert (tmp_path / "before.py").read_bytes() == (CASES / case / "before.py").read_bytes()
    twin = _trace("--format", "json", "twin.py", cwd=tmp_path)
    assert twin.returncode == 0 and json.loads(twin.stdout) == [], twin.stdout + twin.stderr


def test_a_tensor_read_once_after_a_step_is_a_step_between_two_backward_passes(
    tmp_path: Path,
) -> None:
    # Unlike the generator loop of GF002_updated_after_read, no code reads `X` again in a
    # later step: the step between its two backward passes is the bug (GF003).
    shutil.copy(CASES / "GF002_updated_after_read" / "read_once.py", tmp_path / "train.py")
    completed = _trace("--format", "json", "train.py", cwd=tmp_path)
    assert _findings(completed) == [("GF003", 13, "report")]


def test_a_tensor_of_an_earlier_step_does_not_make_a_second_backward_a_report(
    tmp_path: Path,
) -> None:
    # `mu` was made before the critic's step, but no step runs between the two backward
    # passes over it: retain_graph=True on the first is the fix. With a step between them
    # (the twin), it is a report.
    case = CASES / "GF003_no_step_between"
    for script in ("before.py", "twin.py"):
        shutil.copy(case / script, tmp_path / script)
    completed = _trace("--fix", "before.py", cwd=tmp_path)
    assert "before.py:20: GF003 fixed" in completed.stdout, completed.stdout + completed.stderr
    assert (tmp_path / "before.py").read_bytes() == (case / "after.py").read_bytes()
    twin = _trace("--format", "json", "twin.py", cwd=tmp_path)
    assert _findings(twin) == [("GF003", 22, "report")]


def test_an_exception_of_the_scripts_own_is_reported_as_such(tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("import torch\nraise ValueError('bad config')\n", encoding="utf-8")
    completed = _trace("broken.py", cwd=tmp_path)
    assert completed.returncode == 2
    assert "exception of its own" in completed.stderr
    assert "ValueError: bad config" in completed.stderr


def test_without_torch_one_line_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "torch" else real_find_spec(name, *args),
    )
    result = CliRunner().invoke(app, ["trace", "train.py"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "pip install torch" in lines[0]


def test_check_and_the_cli_never_import_torch() -> None:
    code = (
        "import sys; from codemods.commands import app; from codemods import pipeline; "
        "pipeline.process_source(b'import torch\\nloss.backward()\\n', "
        "pipeline.RunOptions(select=frozenset({'GF003'}))); "
        "print('torch' in sys.modules)"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert completed.stdout.strip() == "False", completed.stderr
