"""Notebooks as Colab and VS Code write them, and as courses leave them: metadata tables that
are null or missing, other kernels' languages, shell escapes continued over several lines, and
exercise cells that do not parse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from codemods.commands import app
from codemods.notebooks import process_notebook, read
from codemods.pipeline import RunOptions

FIX = RunOptions(frozenset({"GF001", "GF002", "GF003", "GF004"}), fix=True)
CHECK = RunOptions(FIX.select)

SETUP = (
    "import torch\nfrom torch import nn\n\nmodel = nn.Linear(4, 1)\ncriterion = nn.MSELoss()\n"
    "x, y = torch.randn(8, 4), torch.randn(8, 1)"
)
LOOP = (
    "running_loss = 0.0\nfor step in range(3):\n    loss = criterion(model(x), y)\n"
    "    loss.backward()\n    running_loss += loss"
)
BUG, FIXED = "running_loss += loss", "running_loss += loss.item()"

COLAB_METADATA = {
    "colab": {"provenance": [], "gpuType": "T4"},
    "kernelspec": {"name": "python3", "display_name": "Python 3"},
    "language_info": {"name": "python"},
    "accelerator": "GPU",
}
VSCODE_METADATA = {
    "kernelspec": {"display_name": ".venv", "language": "python", "name": "python3"},
    "language_info": {
        "codemirror_mode": {"name": "ipython", "version": 3},
        "file_extension": ".py",
        "mimetype": "text/x-python",
        "name": "python",
        "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3",
        "version": "3.11.7",
    },
    "vscode": {
        "interpreter": {"hash": "31f2aee4e71d21fbe5cf8b01ff0e069b9275f58929596ceb00d14d90e3e16cd6"}
    },
}


def _lines(source: str) -> list[str]:
    return source.splitlines(keepends=True)


def colab(*sources: str, metadata: Any = None) -> bytes:
    """As Colab saves a notebook: nbformat 4.0, its own key order, two-space indent, cell ids
    in the cell metadata, no newline at the end of the file."""
    cells = [
        {
            "cell_type": "code",
            "source": _lines(source),
            "metadata": {"id": f"c{i}Xy9"},
            "execution_count": None,
            "outputs": [],
        }
        for i, source in enumerate(sources)
    ]
    document = {
        "nbformat": 4,
        "nbformat_minor": 0,
        "metadata": COLAB_METADATA if metadata is None else metadata,
        "cells": cells,
    }
    return json.dumps(document, indent=2, ensure_ascii=False).encode()


def vscode(*sources: str, metadata: Any = None) -> bytes:
    """As VS Code saves a notebook: sorted keys, one-space indent, cell ids, final newline."""
    cells = [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": f"a1b2c3d{i}",
            "metadata": {},
            "outputs": [],
            "source": _lines(source),
        }
        for i, source in enumerate(sources)
    ]
    document = {
        "cells": cells,
        "metadata": VSCODE_METADATA if metadata is None else metadata,
        "nbformat": 4,
        "nbformat_minor": 2,
    }
    return (json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def fixed(source: bytes) -> bytes:
    """The notebook with only the accumulation fixed, every other byte as it was."""
    return source.replace(BUG.encode(), FIXED.encode())


# --- metadata --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "metadata",
    [
        {**VSCODE_METADATA, "kernelspec": None},
        {"kernelspec": None, "language_info": None},
        {"kernelspec": {"display_name": "Python 3", "name": "python3"}},  # no language given
        None,  # Colab's
    ],
)
def test_python_notebooks_whatever_their_metadata_are_fixed(metadata: Any) -> None:
    for write in (colab, vscode):
        source = write(SETUP, LOOP, metadata=metadata)
        result = process_notebook(source, FIX)
        assert result.error is None
        assert result.new_source == fixed(source)


@pytest.mark.parametrize(
    "metadata",
    [
        # An IJulia notebook never run: a kernelspec, no language_info.
        {"kernelspec": {"display_name": "Julia 1.9.3", "language": "julia", "name": "julia-1.9"}},
        {"kernelspec": None, "language_info": {"name": "R"}},
    ],
)
def test_notebooks_in_other_languages_are_skipped(metadata: dict[str, Any]) -> None:
    # Python-looking code, so that analysing it as Python would find the bug.
    source = vscode(SETUP, LOOP, metadata=metadata)
    result = process_notebook(source, FIX)
    assert (result.error, result.findings, result.new_source) == (None, [], None)


# --- shell escapes and magics continued with a backslash ------------------------------------

SHELL = (
    "!python3 infer.py --model x \\\n"
    "    --task y \\\n"
    "    --out z\n"
    "%pip install -q torch \\\n"
    "  torchvision\n"
    "files = !ls \\\n"
    "  data/\n"
    "print(files)"
)


def test_continued_shell_and_magic_lines_are_one_ipython_line() -> None:
    nb = read(colab(SHELL))
    assert nb.code == "pass\n#\n#\npass\n#\npass\n#\nprint(files)\n"
    assert [line.number for line in nb.lines if line.ipython] == [1, 2, 3, 4, 5, 6, 7]


def test_a_colab_notebook_with_a_continued_shell_escape_is_fixed() -> None:
    source = colab(SETUP, SHELL, LOOP)
    result = process_notebook(source, FIX)
    assert result.error is None
    (finding,) = result.fixed
    assert (finding.cell, finding.line) == (3, 5)
    assert result.new_source == fixed(source)


# --- cells that do not parse -----------------------------------------------------------------


def test_a_cell_that_does_not_parse_is_reported_and_the_others_are_fixed() -> None:
    source = colab(SETUP, "# Exercise: plot the loss\nplt.plot(", LOOP)
    result = process_notebook(source, FIX)
    assert result.error == "cell 2:2:9: parse error: '(' was never closed"
    (finding,) = result.fixed
    assert (finding.cell, finding.line, finding.tier.value) == (3, 5, "safe")
    assert result.new_source == fixed(source)  # the broken cell too is kept byte for byte


def test_what_a_cell_that_does_not_parse_would_define_is_unknown() -> None:
    # The exercise redefines `criterion`: with no backward on it, the evaluation loop's loss is
    # no longer proven attached (a `loss.backward()` would prove it again).
    evaluation = (
        "running_loss = 0.0\nfor x, y in loader:\n    loss = criterion(model(x), y)\n"
        "    running_loss += loss"
    )
    source = vscode(SETUP, "criterion = # TODO", evaluation)
    result = process_notebook(source, FIX)
    assert result.error == "cell 2:1:13: parse error: invalid syntax"
    (finding,) = result.findings
    assert finding.tier.value == "unsafe" and result.new_source is None


def test_what_a_cell_that_does_not_parse_would_do_with_a_value_is_unknown() -> None:
    # The unfinished cell may use the total as a tensor: `.item()` is no longer proven right.
    source = vscode(SETUP, LOOP, "print(running_loss.item(")
    (finding,) = process_notebook(source, CHECK).findings
    assert finding.tier.value == "unsafe"
    nb = read(source)
    placeholder = nb.without(nb.syntax_errors()).code.splitlines()[-1]
    assert placeholder == (
        "_gradfix_unparsed_cell(running_loss); running_loss = _gradfix_unparsed_cell()"
    )


def test_every_cell_that_does_not_parse_is_named() -> None:
    source = colab(SETUP, "a = (", LOOP, "b = ]", "c = }")
    result = process_notebook(source, CHECK)
    assert result.error is not None
    assert result.error.startswith("cell 2:1:5: parse error: '(' was never closed; cells 4, 5 ")
    assert result.error.endswith("do not parse either")
    assert process_notebook(colab("a = (", "b = ]"), CHECK).error == (
        "cell 1:1:5: parse error: '(' was never closed; cell 2 does not parse either"
    )


# --- through the engine and the command line -------------------------------------------------


def gradfix(*args: str) -> Any:
    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        runner = CliRunner()
    return runner.invoke(app, [*args, "-j", "1"])


def test_gradfix_reports_the_cell_that_does_not_parse_and_fixes_the_others(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    source = colab(SETUP, "optimizer = # TODO", LOOP)
    Path("course.ipynb").write_bytes(source)
    error = (
        "course.ipynb:cell 2:1:13: parse error: invalid syntax (the cell was skipped; fix the "
        "syntax error, or exclude the file with --exclude)"
    )
    for _ in range(2):  # the second time from the cache
        check = gradfix("check", "course.ipynb")
        assert check.exit_code == 2
        assert check.stdout.splitlines()[:2] == [
            error,
            f"course.ipynb:cell 3:5:5: GF001 [*] {read_message(source)}",
        ]
    fix = gradfix("fix", "course.ipynb")
    assert fix.exit_code == 2 and fix.stdout.splitlines()[0] == error
    assert "Fixed 1 finding in 1 file: GF001 x1." in fix.stdout
    assert Path("course.ipynb").read_bytes() == fixed(source)


def read_message(source: bytes) -> str:
    (finding,) = process_notebook(source, CHECK).findings
    return finding.message


def test_imports_of_a_cell_that_awaits_are_kept_out_of_the_placeholders() -> None:
    nb = read(vscode("import torch\nawait asyncio.sleep(0)", "x = torch.zeros(("))
    placeholder = nb.without(nb.syntax_errors()).code.splitlines()[-1]
    # not `torch`: the first cell imports it
    assert placeholder == "_gradfix_unparsed_cell(x); x = _gradfix_unparsed_cell()"
