"""Helpers for the tests that run gradfix as a real command on hand-made trees: the installed
console script, a training script with one safe fix, and process inspection through /proc."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

# A loss accumulated across iterations and printed: GF001 rewrites `+= loss` to
# `+= loss.item()`, a safe fix that makes the file longer.
BUGGY = """import torch
from torch import nn

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
total_loss = 0
for step in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    total_loss += loss
print(total_loss / 3)
"""
FIXED = BUGGY.replace("total_loss += loss\n", "total_loss += loss.item()\n")


def gradfix_command() -> list[str]:
    """The console script, as a user runs it: not `python -m`, which would itself put the
    current directory on the import path."""
    script = Path(sys.executable).with_name("gradfix")
    return [str(script if script.exists() else shutil.which("gradfix"))]


def run_gradfix(
    args: Sequence[str], cwd: Path, timeout: float = 120, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*gradfix_command(), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ.copy(),
        **kwargs,  # type: ignore[arg-type]
    )


def start_gradfix(args: Sequence[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*gradfix_command(), *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
        preexec_fn=_sigint_as_in_a_terminal,
    )


def _sigint_as_in_a_terminal() -> None:
    # A pytest run as a shell's background job passes SIGINT ignored to its children, and
    # Python then leaves it ignored: the Ctrl-C tests would send a signal nobody receives.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def descendants(pid: int) -> set[int]:
    """The live processes below `pid` (Linux)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_bytes().rpartition(b")")[2].split()
            except OSError:
                continue
            if fields[0] != b"Z":
                parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except OSError:
        return False
    return state != b"Z"
