"""The warm index: an unchanged file is answered from its metadata without being read; any
change, even one that keeps the size and the modification time, is seen; a forged index is
ignored."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from engine_fakes import install

from codemods import engine, ownfiles, warm
from codemods.cache import CACHE_DIR, ResultCache
from codemods.engine import FileResult, FileTask, Mode, run_cached

ALL = frozenset({"GF001", "GF002", "GF003"})


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files engine reads."""
    install(monkeypatch)
    monkeypatch.setattr(warm, "RACY_SECONDS", 0)  # the files below are seconds old at most
    seen: list[Path] = []
    read = engine.read_regular

    def counted(path: Path) -> bytes:
        seen.append(path)
        return read(path)

    monkeypatch.setattr(engine, "read_regular", counted)
    return seen


def make_tasks(folder: Path) -> list[FileTask]:
    cache = ResultCache(folder / CACHE_DIR, "test")
    paths = []
    for i, text in enumerate(["x = BUG_REPORT\n", "SYNTAX_ERROR\n", "x = 1\n", "x = BUG_SAFE\n"]):
        path = folder / f"m{i}.py"
        path.write_text(text)
        paths.append(path)
    return [FileTask(path, ALL, cache) for path in paths]


def check(tasks: list[FileTask]) -> list[FileResult]:
    return list(run_cached(tasks, Mode.CHECK))


def test_an_unchanged_file_is_not_even_read(tmp_path: Path, reads: list[Path]) -> None:
    tasks = make_tasks(tmp_path)
    cold = check(tasks)
    reads.clear()
    assert check(tasks) == cold
    assert reads == []
    # In fix mode, a file with a fix to apply is read and fixed; the others are not read.
    fixed = list(run_cached(tasks, Mode.FIX))
    assert set(reads) == {tasks[3].path} and fixed[3].changed


def test_a_change_that_keeps_size_and_mtime_is_seen(tmp_path: Path, reads: list[Path]) -> None:
    tasks = make_tasks(tmp_path)
    check(tasks)
    path = tasks[0].path
    before = path.stat()
    path.write_text("x = BUG_SAFE\n"[: before.st_size].ljust(before.st_size - 1) + "\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    reads.clear()
    results = check(tasks)
    assert set(reads) == {path}
    assert [f.rule for f in results[0].findings] == ["GF001"]


def test_a_forged_or_foreign_index_is_ignored(tmp_path: Path, reads: list[Path]) -> None:
    tasks = make_tasks(tmp_path)
    cold = check(tasks)
    folder = ownfiles.cache_home() / warm.INDEX_DIR
    (index,) = folder.iterdir()
    payload = index.read_bytes().partition(b"\n")[2]
    records = payload.replace(b"GF003", b"GF002")  # a different story, unsigned
    for forged in (records, b"00" * 32 + b"\n" + records):
        index.write_bytes(forged)
        reads.clear()
        assert check(tasks) == cold
        assert set(reads) == {task.path for task in tasks}  # nothing answered from the index


def test_files_changed_moments_ago_are_not_indexed(
    tmp_path: Path, reads: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(warm, "RACY_SECONDS", 60)
    tasks = make_tasks(tmp_path)
    check(tasks)
    reads.clear()
    check(tasks)
    assert set(reads) == {task.path for task in tasks}  # from the content cache, after reading
