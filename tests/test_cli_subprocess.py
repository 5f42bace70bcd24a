"""The `gradfix` command as a real process: what only a process shows (signals, exit status)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# Python's own start-up is over, `codemods.cli` is imported; Ctrl-C arrives while the first
# import of `module` runs inside `main` (as the console script runs it).
INTERRUPTED_WHILE_IMPORTING = """
import os, signal, sys
from codemods.cli import main

# What a terminal gives: a pytest run as a shell's background job would pass SIGINT ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)

def hook(event, args):
    if event == "import" and args[0] == {module!r}:
        os.kill(os.getpid(), signal.SIGINT)

sys.addaudithook(hook)
sys.argv = ["gradfix", "check", "--no-cache", "--jobs", "1", "."]
main()
"""


@pytest.mark.parametrize("module", ["typer", "codemods.analysis", "codemods.output"])
def test_ctrl_c_while_starting_up_exits_130_quietly(tmp_path: Path, module: str) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    script = INTERRUPTED_WHILE_IMPORTING.format(module=module)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True
    )
    assert (result.returncode, result.stderr) == (130, "")


# A bug of gradfix's own, planted: reading the settings raises what nothing expects.
FAILING_UNEXPECTEDLY = """
import sys
from codemods import cli, commands

def broken(*args, **kwargs):
    raise RuntimeError("planted")

commands.load_config = broken
sys.argv = ["gradfix", "check", "--no-cache", "."]
cli.main()
"""


def test_an_unexpected_exception_exits_2_with_its_traceback(tmp_path: Path) -> None:
    # 1 means findings to a CI job: a crash must never read as that.
    result = subprocess.run(
        [sys.executable, "-c", FAILING_UNEXPECTEDLY], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" in result.stderr and "RuntimeError: planted" in result.stderr
    assert result.stderr.endswith(
        "gradfix: internal error: RuntimeError: planted; this is a bug in gradfix: please report"
        " it with the traceback above\n"
    )
