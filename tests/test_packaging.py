"""What `pip install gradfix` puts in site-packages: the `codemods` package and nothing else at
the top level (a generic top-level `cli` module would collide with other distributions')."""

from __future__ import annotations

import ast
import configparser
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _build_wheel(tmp_path: Path) -> Path:
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources.
    source = tmp_path / "gradfix"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "cli.py"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "codemods", source / "codemods", ignore=shutil.ignore_patterns("__pycache__")
    )
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*command, str(source), "-w", str(tmp_path / "dist")],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("gradfix-*.whl")
    return wheel


def test_wheel_installs_no_top_level_cli_module(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = configparser.ConfigParser()
        scripts.read_string(archive.read(entry_points).decode())
    top_level = {
        name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")
    }
    assert top_level == {"codemods"}
    assert "codemods/cli.py" in names
    assert dict(scripts["console_scripts"]) == {"gradfix": "codemods.cli:main"}


def test_cli_py_runs_from_a_checkout() -> None:
    result = subprocess.run(
        [sys.executable, "cli.py", "--version"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("gradfix ")


# `ast` classes newer than the oldest Python `requires-python` admits, with the version each
# came in: code that reads one at import time fails to import there (`ast.TryStar` did).
_AST_NEWER_THAN_OLDEST = {
    "TryStar": "3.11",
    "TypeAlias": "3.12",
    "TypeVar": "3.12",
    "ParamSpec": "3.12",
    "TypeVarTuple": "3.12",
}


def test_the_code_reads_no_ast_class_the_oldest_supported_python_lacks() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.10"' in pyproject  # the table above is 3.10's
    found = []
    for path in sorted((ROOT / "codemods").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_bytes())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "ast"
                and node.attr in _AST_NEWER_THAN_OLDEST
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: ast.{node.attr}")
    assert found == [], "read them with getattr(ast, name, ...) or from index.TRY_TYPES"


def test_check_loads_libcst_and_nbformat_only_when_it_needs_them(tmp_path: Path) -> None:
    """LibCST builds fixes and nbformat reads the notebooks JSON alone cannot: a check with
    nothing to fix loads neither (importing them cost more CPU than checking many files)."""
    (tmp_path / "clean.py").write_text(
        "import torch\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n"
    )
    (tmp_path / "fixable.py").write_text(
        "import torch\ntotal = 0.0\nfor x, y in loader:\n    loss = criterion(model(x), y)\n"
        "    loss.backward()\n    total += loss\n"
    )
    script = (
        "import sys\n"
        "from codemods.cli import main\n"
        "sys.argv = ['gradfix', 'check', '--no-cache', '-j', '1', sys.argv[1]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('libcst._nodes' in sys.modules, 'nbformat' in sys.modules, file=sys.stderr)\n"
    )
    loaded = {}
    for name in ("clean.py", "fixable.py"):
        run = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / name)],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        loaded[name] = run.stderr.split()[-2:]
    assert loaded["clean.py"] == ["False", "False"]
    assert loaded["fixable.py"] == ["True", "False"]
