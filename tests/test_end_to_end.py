"""The command line with the real pipeline and GF001 on a training loop it surely fixes:
encodings, line endings, suppressions, stdin and the worker pool, byte for byte."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from codemods.commands import app

if TYPE_CHECKING:
    from typer.testing import Result

TRAIN = b"""\
import torch
from torch import nn
model = nn.Linear(4, 1)
criterion = nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
total_loss = 0.0
for step in range(3):
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    loss = criterion(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    total_loss += loss
print(total_loss)
"""
BUG, FIXED = b"total_loss += loss\n", b"total_loss += loss.item()\n"
TRAIN_FIXED = TRAIN.replace(BUG, FIXED)


@pytest.fixture(autouse=True)
def in_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)


def gradfix(*args: str, input: bytes | None = None) -> Result:
    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        runner = CliRunner()
    return runner.invoke(app, list(args), input=input)


def test_check_fix_then_clean() -> None:
    Path("train.py").write_bytes(TRAIN)
    check = gradfix("check")
    assert check.exit_code == 1
    assert check.stdout.startswith("train.py:13:5: GF001 [*] ")
    assert "loss.item()" in check.stdout.splitlines()[0]  # the message says what to do

    fix = gradfix("fix")
    assert fix.exit_code == 0, fix.output
    assert Path("train.py").read_bytes() == TRAIN_FIXED
    assert gradfix("check").exit_code == 0
    assert gradfix("fix", "--diff").exit_code == 0


def test_diff() -> None:
    Path("train.py").write_bytes(TRAIN)
    result = gradfix("fix", "--diff")
    assert result.exit_code == 1
    assert Path("train.py").read_bytes() == TRAIN
    lines = result.stdout.splitlines()
    assert lines[0].startswith("# train.py:13: GF001 ")
    assert lines[1:3] == ["--- train.py", "+++ train.py"]
    assert "-    total_loss += loss\n+    total_loss += loss.item()\n" in result.stdout


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("crlf", TRAIN.replace(b"\n", b"\r\n")),
        ("latin1", b"# -*- coding: latin-1 -*-\nname = '\xe9t\xe9'\n" + TRAIN),
        ("bom", b"\xef\xbb\xbf" + TRAIN),
        ("no-final-newline", TRAIN.rstrip(b"\n")),
    ],
)
def test_bytes_survive_except_the_edit(name: str, source: bytes) -> None:
    path = Path(f"{name}.py")
    path.write_bytes(source)
    result = gradfix("fix", str(path))
    assert result.exit_code == 0, result.output
    eol = b"\r\n" if name == "crlf" else b"\n"
    assert path.read_bytes() == source.replace(BUG.replace(b"\n", eol), FIXED.replace(b"\n", eol))


@pytest.mark.parametrize(
    "comment", ["# gradfix: ignore", "# gradfix: ignore[GF001]", "# noqa: GF001"]
)
def test_suppression_comments(comment: str) -> None:
    source = TRAIN.replace(BUG, BUG.rstrip(b"\n") + f"  {comment}\n".encode())
    Path("train.py").write_bytes(source)
    assert gradfix("check").exit_code == 0
    assert gradfix("fix").exit_code == 0
    assert Path("train.py").read_bytes() == source


def test_suppressing_another_rule_does_not_hide_the_finding() -> None:
    Path("train.py").write_bytes(TRAIN.replace(BUG, b"total_loss += loss  # noqa: GF002\n"))
    assert gradfix("check").exit_code == 1


def test_syntax_error_beside_good_files() -> None:
    Path("a.py").write_bytes(TRAIN)
    Path("b.py").write_bytes(TRAIN.replace(b"for step in range(3):", b"for step in range(3)"))
    Path("c.py").write_bytes(TRAIN)
    result = gradfix("fix")
    assert result.exit_code == 2
    assert Path("a.py").read_bytes() == Path("c.py").read_bytes() == TRAIN_FIXED
    (error,) = [line for line in result.stdout.splitlines() if line.startswith("b.py:")]
    assert ": parse error: " in error and "fix the syntax error" in error


def test_stdin() -> None:
    fixed = gradfix("fix", "-", "--stdin-filename", "train.py", input=TRAIN)
    assert fixed.exit_code == 0
    assert fixed.stdout_bytes == TRAIN_FIXED
    check = gradfix("check", "-", input=TRAIN)
    assert check.exit_code == 1 and check.stdout.startswith("-:13:5: GF001")


def test_worker_pool(tmp_path: Path) -> None:
    for i in range(40):
        (tmp_path / f"train_{i:02}.py").write_bytes(TRAIN if i % 2 else b"x = 1\n")
    result = gradfix("fix", "--jobs", "2")
    assert result.exit_code == 0, result.output
    assert "Fixed 20 findings in 20 files: GF001 x20." in result.stdout
    for i in range(1, 40, 2):
        assert (tmp_path / f"train_{i:02}.py").read_bytes() == TRAIN_FIXED
