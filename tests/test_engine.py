from __future__ import annotations

import ast
import contextlib
import gc
import os
import stat
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from engine_fakes import chunk_that_kills_its_worker, install

from codemods import engine, pipeline
from codemods.analysis import FileAnalysis
from codemods.engine import ErrorKind, FileTask, Mode, process_bytes, process_file, run
from codemods.rules import RULES

ALL = frozenset({"GF001", "GF002", "GF003"})


@pytest.fixture(autouse=True)
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch)


def tasks(*paths: Path) -> list[FileTask]:
    return [FileTask(path, ALL) for path in paths]


def test_check_reports_and_writes_nothing(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_text("x = BUG_SAFE\ny = BUG_REPORT\n")
    (result,) = run(tasks(a), Mode.CHECK, jobs=1)
    assert [(f.rule, f.line, f.column) for f in result.findings] == [
        ("GF001", 1, 5),
        ("GF003", 2, 5),
    ]
    assert not result.changed and result.error is None
    assert a.read_text() == "x = BUG_SAFE\ny = BUG_REPORT\n"


def test_fix_writes_and_reports_what_is_left(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_text("x = BUG_SAFE\n\ny = BUG_UNSAFE\n")
    (result,) = run(tasks(a), Mode.FIX, jobs=1)
    assert a.read_text() == "x = OK_SAFE\n\ny = BUG_UNSAFE\n"
    assert result.changed
    assert [f.rule for f in result.fixed] == ["GF001"]
    assert [f.rule for f in result.findings] == ["GF002"]
    assert result.source is None and result.new_source is None  # nothing shipped back

    (result,) = run(tasks(a), Mode.FIX, unsafe_fixes=True, jobs=1)
    assert a.read_text() == "x = OK_SAFE\n\ny = OK_UNSAFE\n"
    assert result.findings == ()


def test_diff_mode_writes_nothing_and_returns_both_versions(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_bytes(b"x = BUG_SAFE\n")
    (result,) = run(tasks(a), Mode.DIFF, jobs=1)
    assert a.read_bytes() == b"x = BUG_SAFE\n"
    assert result.changed
    assert result.source == b"x = BUG_SAFE\n"
    assert result.new_source == b"x = OK_SAFE\n"


def test_unchanged_files_are_not_rewritten(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_text("x = BUG_REPORT\n")
    before = a.stat()
    (result,) = run(tasks(a), Mode.FIX, jobs=1)
    assert not result.changed
    after = a.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_atomic_write_keeps_the_mode_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_text("x = BUG_SAFE\n")
    a.chmod(0o751)
    run_results = list(run(tasks(a), Mode.FIX, jobs=1))
    assert run_results[0].changed
    assert stat.S_IMODE(a.stat().st_mode) == 0o751
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links here")
def test_fix_through_a_symlink_rewrites_the_target(tmp_path: Path) -> None:
    target = tmp_path / "real.py"
    target.write_text("x = BUG_SAFE\n")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    list(run(tasks(link), Mode.FIX, jobs=1))
    assert link.is_symlink()
    assert target.read_text() == "x = OK_SAFE\n"


def test_write_failure_is_reported_and_the_file_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = tmp_path / "a.py"
    a.write_text("x = BUG_SAFE\n")

    def refuse(fd: int, data: bytes, offset: int) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "pwrite", refuse)
    (result,) = run(tasks(a), Mode.FIX, jobs=1)
    assert result.error is not None and result.error.kind is ErrorKind.WRITE
    assert "Permission denied" in result.error.message
    assert a.read_text() == "x = BUG_SAFE\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]


def test_an_exception_only_affects_its_file(tmp_path: Path) -> None:
    files = []
    for name, body in [("a.py", "BUG_SAFE\n"), ("b.py", "CRASH_ME\n"), ("c.py", "BUG_SAFE\n")]:
        (tmp_path / name).write_text(body)
        files.append(tmp_path / name)
    results = list(run(tasks(*files), Mode.FIX, jobs=1))
    assert [r.path.name for r in results] == ["a.py", "b.py", "c.py"]
    crashed = results[1].error
    assert crashed is not None and crashed.kind is ErrorKind.INTERNAL
    assert "RuntimeError: boom" in crashed.message
    assert "left unchanged" in crashed.message
    assert (tmp_path / "a.py").read_text() == "OK_SAFE\n"
    assert (tmp_path / "c.py").read_text() == "OK_SAFE\n"


def test_parse_errors_carry_their_position(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_text("SYNTAX_ERROR\n")
    (result,) = run(tasks(a), Mode.CHECK, jobs=1)
    assert result.error == engine.FileError(ErrorKind.PARSE, "expected ':'", 3, 7)


def test_unreadable_file_is_an_error(tmp_path: Path) -> None:
    result = process_file(FileTask(tmp_path / "gone.py", ALL), Mode.CHECK)
    assert result.error is not None and result.error.kind is ErrorKind.READ


def test_fixed_code_that_does_not_parse_is_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = tmp_path / "a.py"
    a.write_text("x = BUG_SAFE\n")
    original = pipeline.process_source

    def broken_fix(source: bytes, options: pipeline.RunOptions) -> pipeline.SourceResult:
        result = original(source, options)
        if result.new_source is not None:
            result.new_source += b"SYNTAX_ERROR\n"
        return result

    monkeypatch.setattr(pipeline, "process_source", broken_fix)
    (result,) = run(tasks(a), Mode.FIX, jobs=1)
    assert result.error is not None and result.error.kind is ErrorKind.INTERNAL
    assert "would not parse" in result.error.message
    assert a.read_text() == "x = BUG_SAFE\n"


def test_process_bytes_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "stdin.py"
    result = process_bytes(path, b"BUG_SAFE\n", ALL, Mode.FIX)
    assert result.new_source == b"OK_SAFE\n"
    assert not path.exists()


def test_selection_is_per_file(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_text("BUG_SAFE\nBUG_REPORT\n")
    (result,) = run([FileTask(a, frozenset({"GF003"}))], Mode.CHECK, jobs=1)
    assert [f.rule for f in result.findings] == ["GF003"]


def test_worker_pool_keeps_the_input_order(tmp_path: Path) -> None:
    # Workers run the real pipeline, which these plain files give nothing to report.
    files = []
    for i in reversed(range(40)):
        path = tmp_path / f"m{i:02}.py"
        path.write_text(f"value = {i}\n")
        files.append(path)
    results = list(run(tasks(*files), Mode.FIX, jobs=2))
    assert [r.path for r in results] == files
    assert all(r.error is None and not r.changed for r in results)


def test_a_dead_worker_costs_only_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "_process_chunk", chunk_that_kills_its_worker)
    files = []
    for i in range(40):
        path = tmp_path / (f"kill{i:02}.py" if i == 17 else f"m{i:02}.py")
        path.write_text(f"value = {i}\n")
        files.append(path)
    results = list(run(tasks(*files), Mode.CHECK, jobs=2))
    assert [r.path for r in results] == files
    failed = [r for r in results if r.error is not None]
    assert [r.path.name for r in failed] == ["kill17.py"]
    assert failed[0].error is not None and "worker process died" in failed[0].error.message


def test_chunks_keep_the_order_and_shrink_to_single_files_at_the_end() -> None:
    tasks = [FileTask(Path(f"f{i}.py"), frozenset()) for i in range(1000)]
    chunks = engine._chunks(tasks, 2)
    assert [task for chunk in chunks for task in chunk] == tasks
    sizes = [len(chunk) for chunk in chunks]
    assert sizes[0] == engine.MAX_CHUNK and sizes[-1] == 1
    assert sizes == sorted(sizes, reverse=True)


def test_a_run_ends_its_pool_as_a_finished_run_not_as_an_interrupted_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run_cached` takes one result per file and must then let `run` end: closed while it
    still holds its pool, `run` would end the workers as after Ctrl-C (killed, and the pool's
    thread left running into Python's exit)."""
    ended_by: list[BaseException | None] = []

    @contextlib.contextmanager
    def pool(size: int, budget: object) -> Iterator[ThreadPoolExecutor]:
        with ThreadPoolExecutor(size) as executor:
            try:
                yield executor
            except BaseException as exc:
                ended_by.append(exc)
                raise
            ended_by.append(None)

    monkeypatch.setattr(engine, "_pool", pool)
    for i in range(40):
        (tmp_path / f"m{i:02}.py").write_text("x = 1\n")
    tasks = [FileTask(path, frozenset()) for path in sorted(tmp_path.glob("*.py"))]
    results = list(engine.run_cached(tasks, Mode.CHECK, jobs=2))
    assert len(results) == 40 and ended_by == [None]


def test_an_analysed_files_tree_is_freed_by_reference_counting() -> None:
    """No reference cycle holds the tree or the analysis once it is released: the cyclic
    collector would have to traverse all of it, for every file (it once did, through a
    self-calling closure of the index)."""
    source = (Path(__file__).resolve().parents[1] / "examples" / "train.py").read_bytes()
    tree = ast.parse(source)
    classes = [weakref.ref(node) for node in ast.walk(tree) if type(node) is ast.ClassDef]
    gc.disable()
    try:
        analysis = FileAnalysis(tree, source.decode())
        for rule in RULES.values():
            list(rule.check(analysis))
        analysis.release()
        del analysis, tree
        still_held = [ref for ref in classes if ref() is not None]
    finally:
        gc.enable()
    assert classes and still_held == []
