"""The hooks of .pre-commit-hooks.yaml, run by pre-commit itself (`pre-commit try-repo`) on a
temporary git repository holding a buggy training script.

pre-commit installs gradfix from a git repository into an environment of its own, so the
working tree (committed or not) is copied into a temporary repository and committed there.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pre_commit") is None, reason="pre-commit is not installed"
)

ROOT = Path(__file__).resolve().parents[1]
NOT_COPIED = (".git", "__pycache__", "*.egg-info", "build", "dist", ".*_cache", ".venv")
TRAIN = """\
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
GIT_IDENTITY = ["-c", "user.name=gradfix tests", "-c", "user.email=tests@gradfix.invalid"]


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", *GIT_IDENTITY, "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def commit_all(repo: Path) -> None:
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "snapshot")


@pytest.fixture(scope="module")
def hooks_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This working tree, committed in a repository of its own."""
    repo = tmp_path_factory.mktemp("hooks") / "gradfix"
    shutil.copytree(ROOT, repo, ignore=shutil.ignore_patterns(*NOT_COPIED))
    commit_all(repo)
    return repo


def try_repo(hooks_repo: Path, project: Path, hook: str) -> subprocess.CompletedProcess:
    """`pre-commit try-repo`, which installs gradfix into an environment of a temporary store
    of its own (PRE_COMMIT_HOME only keeps the user's store out of it)."""
    env = {**os.environ, "PRE_COMMIT_HOME": str(project.parent / "home"), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hooks_repo), hook, "--all-files"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def buggy_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    commit_all(project)
    return project


def test_fix_hook_rewrites_the_file_and_fails(hooks_repo: Path, tmp_path: Path) -> None:
    project = buggy_project(tmp_path)
    run = try_repo(hooks_repo, project, "gradfix")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "files were modified by this hook" in run.stdout
    assert (project / "train.py").read_text() == TRAIN.replace(
        "total_loss += loss\n", "total_loss += loss.item()\n"
    )
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=project, capture_output=True, text=True, check=True
    )
    assert status.stdout == " M train.py\n"  # .gradfix_cache/ keeps itself out of git


def test_check_hook_reports_the_finding_and_fails(hooks_repo: Path, tmp_path: Path) -> None:
    project = buggy_project(tmp_path)
    run = try_repo(hooks_repo, project, "gradfix-check")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "train.py:13:5: GF001 [*] " in run.stdout
    assert (project / "train.py").read_text() == TRAIN
