"""A checked tree is hostile (docs/threat-model.md): it must never run code, never lead a write
out of itself, never stall or crash the run. Real `gradfix` processes on real trees."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest
from hostile import BUGGY, FIXED, alive, descendants, run_gradfix, start_gradfix

SHADOWS = ("multiprocessing", "libcst", "codemods", "typer", "encodings_extra", "concurrent")


def plant_shadowing_packages(tree: Path, marker: Path) -> None:
    """Packages named like what gradfix and its workers import, each leaving a mark when run."""
    for name in SHADOWS:
        package = tree / name
        package.mkdir()
        (package / "__init__.py").write_text(
            f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n"
        )


def test_checking_never_imports_from_the_tree(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    marker = tmp_path / "ran"
    plant_shadowing_packages(tree, marker)
    for i in range(24):  # enough for worker processes (16 files per worker)
        (tree / f"m{i:02}.py").write_text(f"value = {i}\n")
    for args in (["check", "-j", "2", "--no-cache", "."], ["fix", "-j", "2", "."]):
        result = run_gradfix(args, cwd=tree)
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        assert not marker.exists(), marker.read_text()


def test_a_link_out_of_the_tree_is_checked_but_never_written(tmp_path: Path) -> None:
    outside = tmp_path / "outside" / "victim.py"
    outside.parent.mkdir()
    outside.write_text(BUGGY)
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a_link.py").symlink_to(outside)
    (tree / "inner.py").write_text(BUGGY)
    (tree / "sub" / "to_inner.py").symlink_to(tree / "inner.py")  # inside: may be written

    result = run_gradfix(["fix", "--no-cache", "tree"], cwd=tmp_path)
    assert result.returncode == 2
    assert outside.read_text() == BUGGY
    assert "tree/a_link.py:1:1: not fixed: it is a link to" in result.stdout
    assert "outside the paths given on the command line" in result.stdout
    assert "tree/a_link.py:12:5: GF001" in result.stdout  # still checked
    assert (tree / "inner.py").read_text() == FIXED

    named = run_gradfix(["fix", "--no-cache", str(outside.parent)], cwd=tmp_path)
    assert named.returncode == 0 and outside.read_text() == FIXED


def test_a_symlink_loop_is_reported_and_the_rest_processed(tmp_path: Path) -> None:
    (tmp_path / "a.py").symlink_to(tmp_path / "b.py")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
    (tmp_path / "c.py").write_text(BUGGY)
    result = run_gradfix(["check", "--no-cache", "."], cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "a.py:1:1: read error: a symbolic link that leads to itself" in result.stdout
    assert "c.py:12:5: GF001" in result.stdout


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    (tmp_path / "c.py").write_text(BUGGY)
    for extra in ([], ["--no-cache"]):
        result = run_gradfix(["check", *extra, "pipe.py", "/dev/zero", "c.py"], tmp_path, 60)
        assert result.returncode == 2, result.stderr
        lines = result.stdout.splitlines()
        assert any(line.startswith("pipe.py:1:1: skipped: not a regular file") for line in lines)
        assert any(line.startswith("/dev/zero:1:1: skipped: not a regular file") for line in lines)
        assert "c.py:12:5: GF001" in result.stdout


def test_workers_end_with_a_killed_gradfix(tmp_path: Path) -> None:
    for i in range(80):
        (tmp_path / f"m{i:02}.py").write_text(BUGGY + f"# {i}\n" + "x = 1\n" * 400)
    process = start_gradfix(["fix", "-j", "2", "--no-cache", "."], tmp_path)
    try:
        deadline = time.monotonic() + 30
        while len(descendants(process.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)  # the fork server and its workers
        children = descendants(process.pid)
        assert len(children) >= 3
        time.sleep(0.3)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in children if alive(pid)]
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


@pytest.mark.parametrize("delay", [0.1, 0.4, 1.2])
def test_ctrl_c_exits_130_quietly_at_any_moment(tmp_path: Path, delay: float) -> None:
    # Still running when the last delay is up, however fast the machine: a check of these
    # files takes tens of seconds, and the signal stops it within one.
    for i in range(3000):
        (tmp_path / f"m{i:04}.py").write_text(BUGGY + "x = 1\n" * 600)
    process = start_gradfix(["check", "-j", "2", "--no-cache", "."], tmp_path)
    time.sleep(delay)
    assert process.poll() is None, "the run ended before Ctrl-C: give it more files"
    children = descendants(process.pid)
    # What a terminal does: the signal goes to the whole foreground process group.
    for pid in {process.pid, *children}:
        with contextlib.suppress(ProcessLookupError):  # a worker that just ended
            os.kill(pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in children if alive(pid)]


def test_a_gitignore_is_read_as_git_reads_it(tmp_path: Path) -> None:
    # git (2.32 and later) never follows a `.gitignore` that is a symbolic link and reads only
    # regular files: one linked to /dev/zero, or a FIFO, must neither exhaust nor stall the walk.
    patterns = tmp_path / "patterns"
    patterns.write_text("skip.py\n")
    for name, make in (
        ("zero", lambda link: link.symlink_to("/dev/zero")),
        ("linked", lambda link: link.symlink_to(patterns)),
        ("fifo", os.mkfifo),
    ):
        tree = tmp_path / name
        tree.mkdir()
        make(tree / ".gitignore")
        (tree / "skip.py").write_text(BUGGY)
        result = run_gradfix(["check", "--no-cache", "."], tree, 60)
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        assert "skip.py:12:5: GF001" in result.stdout
    (tmp_path / "read" / ".gitignore").parent.mkdir()
    (tmp_path / "read" / ".gitignore").write_text("skip.py\n")
    (tmp_path / "read" / "skip.py").write_text(BUGGY)
    assert run_gradfix(["check", "--no-cache", "."], tmp_path / "read").returncode == 0


@pytest.mark.parametrize("source", [".gitignore", "pyproject.toml"])
def test_a_pattern_built_to_backtrack_does_not_stall_the_walk(tmp_path: Path, source: str) -> None:
    # Python's `re` takes hours to fail this pattern on a long name (deaf to Ctrl-C all along);
    # RE2 matches in time linear in the path.
    pattern = "*a" * 14 + "*b"
    if source == ".gitignore":
        (tmp_path / ".gitignore").write_text(pattern + "\n")
    else:
        (tmp_path / "pyproject.toml").write_text(f'[tool.gradfix]\nexclude = ["{pattern}"]\n')
    (tmp_path / ("a" * 60 + ".py")).write_text(BUGGY)
    result = run_gradfix(["check", "--no-cache", "."], tmp_path, 60)
    assert result.returncode == 1, result.stderr
    assert "a" * 60 + ".py:12:5: GF001" in result.stdout


def test_a_pyproject_built_to_break_its_reader_is_a_settings_error(tmp_path: Path) -> None:
    # Python's TOML reader recurses into nested arrays and tables and refuses integers of over
    # 4,300 digits: those failures are the file's, reported as such, never a crash (whose
    # traceback and status 1 a CI job would read as findings).
    for name, value in (
        ("arrays", "[" * 100_000 + "]" * 100_000),
        ("tables", "{a = " * 100_000 + "1" + "}" * 100_000),
        ("digits", "1" * 5000),
    ):
        tree = tmp_path / name
        tree.mkdir()
        (tree / "pyproject.toml").write_text(f"[tool.gradfix]\nexclude = {value}\n")
        (tree / "train.py").write_text(BUGGY)
        result = run_gradfix(["check", "--no-cache", "."], tree, 60)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert f"{tree / 'pyproject.toml'}: unreadable TOML: " in result.stderr


def test_a_gitignore_pattern_the_matcher_cannot_read_neither_crashes_nor_prints(
    tmp_path: Path,
) -> None:
    # git reads `[z-a]` (a reversed range), a trailing backslash or NUL bytes as a pattern that
    # matches nothing; `[[a]` made Python's `re` print a FutureWarning (a possible nested set).
    (tmp_path / ".gitignore").write_bytes(b"[z-a]\ntail\\\n\0\0/$)\nskip.py\n[[a]kip.py\n")
    for name in ("skip.py", "[kip.py", "train.py"):
        (tmp_path / name).write_text(BUGGY)
    result = run_gradfix(["check", "--no-cache", "."], tmp_path, 60)
    assert result.returncode == 1 and result.stderr == "", result.stderr
    assert "train.py:12:5: GF001" in result.stdout and "Scanned 1 file." in result.stdout


def test_a_gitignore_too_large_for_the_matcher_is_refused_by_name(tmp_path: Path) -> None:
    # More patterns than RE2 holds as one set, each readable: refused (status 2), never a
    # crash, never a walk that checks what the file ignores.
    patterns = "".join(f"dir{i}/**/file{i}*.py\n" for i in range(40_000))
    (tmp_path / ".gitignore").write_text(patterns)
    (tmp_path / "train.py").write_text(BUGGY)
    result = run_gradfix(["check", "--no-cache", "."], tmp_path, 120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr == (
        f"gradfix: error: {tmp_path / '.gitignore'}: 40,000 patterns, more than gradfix matches "
        "at once; exclude its directory (--exclude) or check a narrower path\n"
    )


def test_an_error_naming_a_folder_of_the_tree_prints_no_control_characters(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "evil\x1b]0;owned\x07"
    folder.mkdir()
    (folder / "pyproject.toml").write_text("[tool.gradfix\n")  # invalid TOML: names its path
    result = run_gradfix(["check", "--no-cache", folder.name], tmp_path)
    assert result.returncode == 2 and "evil\\x1b]0;owned\\x07" in result.stderr, result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
