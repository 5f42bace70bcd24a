"""The warm index: an unchanged file is answered from its metadata without being read; any
change, even one that keeps the size and the modification time, is seen; a forged index is
ignored."""

from __future__ import annotations

import json
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


SOURCE = [
    "import torch.nn as nn\n",
    "model = nn.Linear(4, 1)\n",
    "total = 0\n",
    "for x, y in loader:\n",
    "    loss = nn.functional.mse_loss(model(x), y)\n",
    "    loss.backward()\n",
    "    total += loss\n",
]
CELL = {
    "cell_type": "code",
    "execution_count": None,
    "metadata": {},
    "outputs": [],
    "source": SOURCE,
}
KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}
# As Jupyter writes it, so that a fix can be located in the file's own JSON text.
NOTEBOOK = json.dumps(
    {"cells": [CELL], "metadata": {"kernelspec": KERNEL}, "nbformat": 4, "nbformat_minor": 5},
    indent=1,
)


def test_a_notebook_with_a_fixable_finding_is_answered_warm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A notebook's finding carries its edit in cell coordinates and one in the file's JSON
    # text, which has no cell: both must pass the entry's checks, or every rerun parses it.
    monkeypatch.setattr(warm, "RACY_SECONDS", 0)
    path = tmp_path / "train.ipynb"
    path.write_text(NOTEBOOK + "\n")
    tasks = [FileTask(path, frozenset({"GF001"}), ResultCache(tmp_path / CACHE_DIR, "test"))]
    (cold,) = check(tasks)
    assert [f.rule for f in cold.findings] == ["GF001"] and cold.findings[0].file_edit is not None
    ran: list[FileTask] = []
    run = engine.run
    monkeypatch.setattr(
        engine, "run", lambda missed, *a, **k: ran.extend(missed) or run(missed, *a, **k)
    )
    assert check(tasks) == [cold]
    assert ran == []
    path.touch()  # the content cache answers when the metadata changed
    assert check(tasks) == [cold]
    assert ran == []
