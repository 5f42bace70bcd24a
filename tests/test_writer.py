"""`gradfix fix` writes a file in place: it keeps its owner, group, mode, extended attributes
and hard links, leaves read-only files alone, works in read-only folders, never overwrites a
file that changed since it was read, and a kill at any moment leaves no torn file once the next
run has recovered it. Real `gradfix` processes, real files, real kills."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hostile import BUGGY, FIXED, run_gradfix, start_gradfix

from codemods import atomic

OTHER_USER = 4321  # root runs the tests: files can be given to any uid


def test_fix_keeps_owner_group_mode_xattrs_and_hard_links(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    a = tree / "a.py"
    a.write_text(BUGGY)
    a.chmod(0o640)
    if os.geteuid() == 0:
        os.chown(a, OTHER_USER, OTHER_USER)
    link = tmp_path / "elsewhere.py"
    os.link(a, link)
    try:
        os.setxattr(a, "user.gradfix-test", b"kept")
        has_xattrs = True
    except OSError:  # a file system without user attributes
        has_xattrs = False
    before = a.stat()

    result = run_gradfix(["fix", "--no-cache", "tree"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    after = a.stat()
    assert a.read_text() == FIXED and link.read_text() == FIXED
    assert (after.st_ino, after.st_nlink) == (before.st_ino, 2)
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    assert stat.S_IMODE(after.st_mode) == 0o640
    if has_xattrs:
        assert os.getxattr(a, "user.gradfix-test") == b"kept"
    assert sorted(p.name for p in tree.iterdir()) == ["a.py"]  # no temporary file left


def test_a_read_only_file_is_reported_and_left_alone(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_text(BUGGY)
    a.chmod(0o444)
    result = run_gradfix(["fix", "--no-cache", "a.py"], cwd=tmp_path)
    assert result.returncode == 2
    assert a.read_text() == BUGGY
    assert "a.py:1:1: not fixed: the file is read-only" in result.stdout
    assert "chmod u+w" in result.stdout
    assert "a.py:12:5: GF001" in result.stdout  # what would have been fixed is still reported


def test_a_writable_file_in_a_read_only_folder_is_fixed(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    a = folder / "a.py"
    a.write_text(BUGGY)
    folder.chmod(0o555)
    try:
        result = run_gradfix(["fix", "--no-cache", "locked"], cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert a.read_text() == FIXED
        # Nothing was created in the folder: the write needed no permission on it (root
        # could have created files there, so this is what shows it).
        assert [p.name for p in folder.iterdir()] == ["a.py"]
    finally:
        folder.chmod(0o755)


def test_a_file_changed_since_it_was_read_is_not_overwritten(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_text(BUGGY)
    with pytest.raises(atomic.ChangedError):
        atomic.rewrite(a, BUGGY.replace("3", "4").encode(), FIXED.encode())
    assert a.read_text() == BUGGY


def test_two_concurrent_fix_runs_fix_each_file_once(tmp_path: Path) -> None:
    count = 30
    for i in range(count):
        (tmp_path / f"m{i:02}.py").write_text(BUGGY + f"# {i}\n")
    runs = [start_gradfix(["fix", "-j", "1", "--no-cache", "."], tmp_path) for _ in range(2)]
    outputs = [run.communicate(timeout=120)[0] for run in runs]
    assert all((tmp_path / f"m{i:02}.py").read_text() == FIXED + f"# {i}\n" for i in range(count))
    # Each file was written by one run; the other found it fixed already, or saw it change
    # under it and said so.
    fixed = [re.search(r"^Fixed \d+ findings? in (\d+) files?", out, re.M) for out in outputs]
    assert sum(int(match[1]) for match in fixed if match) == count, outputs
    changed = "".join(outputs).count("changed while gradfix was working on it")
    assert changed == sum(len(re.findall(r"^m\d\d\.py:12:5: GF001", out, re.M)) for out in outputs)


KILLED_WHILE_WRITING = """
import os, signal, sys
from codemods import atomic

def half_then_die(fd, data, offset):
    os.write(fd, bytes(data[: len(data) // 2]))  # the kernel stops a write midway...
    os.kill(os.getpid(), signal.SIGKILL)  # ...when the process is killed

atomic.os.pwrite = half_then_die
from codemods.cli import main
sys.argv = ["gradfix", "fix", "--no-cache", "a.py"]
main()
"""


def test_a_kill_while_writing_is_recovered_by_the_next_run(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    original = BUGGY + "# padding\n" * 50  # longer than half the fix: the write is torn
    a.write_text(original)
    script = tmp_path.parent / f"{tmp_path.name}-killer.py"
    script.write_text(textwrap.dedent(KILLED_WHILE_WRITING))
    killed = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, timeout=60
    )
    assert killed.returncode == -signal.SIGKILL
    torn = a.read_text()
    assert torn not in (original, FIXED)  # the test really tore the file
    assert len(list(atomic.recovery_folder().iterdir())) == 1

    result = run_gradfix(["fix", "--no-cache", "a.py"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"gradfix: restored {a}" in result.stderr
    assert a.read_text() == original.replace("total_loss += loss\n", "total_loss += loss.item()\n")
    assert list(atomic.recovery_folder().iterdir()) == []


def test_kill_9_at_any_moment_leaves_every_file_whole(tmp_path: Path) -> None:
    count = 40
    originals = {}
    for i in range(count):
        text = BUGGY + f"# {i}\n" + "# padding, so that writes take a while\n" * 300
        (tmp_path / f"m{i:02}.py").write_text(text)
        originals[f"m{i:02}.py"] = text
    fixed = {
        name: text.replace("total_loss += loss\n", "total_loss += loss.item()\n")
        for name, text in originals.items()
    }
    for delay in (0.5, 0.9):
        process = start_gradfix(["fix", "-j", "2", "--no-cache", "."], tmp_path)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        time.sleep(0.5)  # the workers, left alone, are ending too
        records = len(list(atomic.recovery_folder().iterdir()))
        whole = sum(
            (tmp_path / name).read_text() in (originals[name], fixed[name]) for name in originals
        )
        assert whole + records >= count  # any torn file has its recovery record
    result = run_gradfix(["fix", "--no-cache", "."], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert all((tmp_path / name).read_text() == fixed[name] for name in originals)
    assert [p for p in tmp_path.iterdir() if p.suffix != ".py"] == []
