"""A file that costs too much (time, memory, recursion) is skipped with a reason; it never holds
up the run, and the other files are processed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from engine_fakes import install
from hostile import BUGGY

from codemods import pipeline, workers
from codemods.engine import ErrorKind, FileTask, Mode, run
from codemods.workers import Budget

ALL = frozenset({"GF001", "GF002", "GF003", "GF004"})


def tasks(*paths: Path) -> list[FileTask]:
    return [FileTask(path, ALL) for path in paths]


def files(folder: Path, count: int, text: str = "value = 1\n") -> list[Path]:
    paths = [folder / f"m{i:02}.py" for i in range(count)]
    for path in paths:
        path.write_text(text)
    return paths


def broken_pipeline(failure: str):  # type: ignore[no-untyped-def]
    def process(source: bytes, options: pipeline.RunOptions) -> pipeline.SourceResult:
        if b"SLOW" in source:
            while True:
                pass
        if b"DEEP" in source:

            def down(n: int) -> int:
                return down(n + 1) + 1

            down(0)
        if b"HUGE" in source:
            raise MemoryError
        if b"UGLY" in source:

            class Unprintable(Exception):
                def __str__(self) -> str:
                    raise RuntimeError("cannot describe this")

            raise Unprintable
        return pipeline.SourceResult()

    return process


@pytest.mark.parametrize(
    ("marker", "kind", "reason"),
    [
        ("SLOW", ErrorKind.SKIPPED, "longer than gradfix's time budget of 0.3 seconds"),
        ("DEEP", ErrorKind.SKIPPED, "nested too deeply for gradfix's analysis"),
        ("HUGE", ErrorKind.SKIPPED, "out of its memory budget"),
        ("UGLY", ErrorKind.INTERNAL, "Unprintable; the file was left unchanged"),
    ],
)
def test_a_file_out_of_budget_is_skipped_and_the_rest_processed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: str, kind: ErrorKind, reason: str
) -> None:
    install(monkeypatch)
    monkeypatch.setattr(pipeline, "process_source", broken_pipeline(marker))
    bad, good = tmp_path / "bad.py", tmp_path / "good.py"
    bad.write_text(f"{marker}\n")
    good.write_text("x = 1\n")
    first, second = run(tasks(bad, good), Mode.CHECK, jobs=1, budget=Budget(seconds=0.3))
    assert first.error is not None and first.error.kind is kind
    assert reason in first.error.message
    assert second.error is None


def test_the_time_budget_holds_in_worker_processes(tmp_path: Path) -> None:
    small = files(tmp_path, 24)
    generated = tmp_path / "generated.py"
    generated.write_text(BUGGY * 400)  # takes seconds to analyse
    results = list(run(tasks(generated, *small), Mode.CHECK, jobs=2, budget=Budget(seconds=0.5)))
    error = results[0].error
    assert error is not None and error.kind is ErrorKind.SKIPPED
    assert "time budget of 0.5 seconds" in error.message
    assert all(result.error is None for result in results[1:])


MEMORY_HOG = """
import os
from codemods.workers import Budget, start_worker
start_worker(os.getppid(), Budget(memory=256 * 1024**2))
try:
    hog = bytearray(1024**3)
except MemoryError:
    print("MemoryError")
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the memory budget needs Linux's /proc")
def test_a_worker_cannot_take_more_than_its_memory_budget() -> None:
    result = subprocess.run(
        [sys.executable, "-c", MEMORY_HOG], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "MemoryError", result.stderr


def test_a_write_in_progress_is_not_cut_short_by_ctrl_c_or_the_budget() -> None:
    # Python's own handler, as an interactive run has: a shell's background job starts with
    # SIGINT ignored, and the signal sent below would then never arrive.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _write_in_progress_survives_ctrl_c_and_budget()
    finally:
        signal.signal(signal.SIGINT, previous)


def _write_in_progress_survives_ctrl_c_and_budget() -> None:
    # Another thread, as gradfix has (its progress display): the kernel may hand it Ctrl-C.
    threading.Thread(target=time.sleep, args=(1,), daemon=True).start()
    finished = []
    with pytest.raises(KeyboardInterrupt), workers.time_budget(0.05), workers.uninterruptible():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # past the budget, and Ctrl-C is pending
        finished.append(True)
    assert finished == [True]
