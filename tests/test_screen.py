"""The `ast` screens (codemods/screen.py) and the compile check in front of LibCST.

A screen must be a necessary condition of its rule: over every fixture, the findings are the
same with and without the screens. Files CPython refuses to compile are reported as parse errors
and never rewritten, even when LibCST parses them.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import nbformat
import pytest

from codemods import screen
from codemods.findings import Finding
from codemods.notebooks import process_notebook
from codemods.pipeline import RunOptions, SourceResult, process_source, syntax_error
from codemods.rules import RULES

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted(
    path
    for folder in ("tests/fixtures", "examples")
    for pattern in ("*.py", "*.ipynb")
    for path in (REPO_ROOT / folder).rglob(pattern)
)
ALL = RunOptions(frozenset(RULES), fix=True, unsafe_fixes=True)


def _run(path: Path) -> SourceResult:
    process = process_notebook if path.suffix == ".ipynb" else process_source
    return process(path.read_bytes(), ALL)


def _summary(result: SourceResult) -> tuple[list[Finding], bytes | None, str | None]:
    return result.findings, result.new_source, result.error


def test_screens_change_no_finding_or_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    screened = {path: _summary(_run(path)) for path in SAMPLES}
    monkeypatch.setattr(screen, "ENABLED", False)
    differ = [p.relative_to(REPO_ROOT) for p in SAMPLES if _summary(_run(p)) != screened[p]]
    assert not differ
    assert sum(bool(findings) for findings, _, _ in screened.values()) > 50  # not vacuous


MODEL = """\
import torch.nn as nn

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        states = ()
        for layer in self.layers:
            x = layer(x)
            states = states + (x,)
        return x, states
"""

TRAINING = """\
import torch.nn as nn

model = nn.Linear(4, 1)
total = 0
for x, y in loader:
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    total += loss
"""


def _wanted(source: str) -> set[str]:
    return {rule.code for rule in screen.rules_wanted(source.encode(), source, [*RULES.values()])}


def test_a_model_definition_needs_no_rule() -> None:
    # Its loop sums in a forward and never reaches a backward or an optimizer step.
    assert _wanted(MODEL) == set()


def test_a_training_loop_keeps_accumulation_and_carry_rules() -> None:
    assert _wanted(TRAINING) == set(RULES)


def test_a_scheduler_step_is_no_training_step() -> None:
    sampling = "for t in timesteps:\n    latents = scheduler.step(noise, t, latents)\n"
    assert "GF002" not in _wanted(sampling)
    assert "GF002" in _wanted(sampling.replace("scheduler", "optimizer"))


def test_two_backward_calls_in_the_file() -> None:
    one = "def f(a):\n    a.backward()\n"
    assert "GF003" not in _wanted(one)
    assert "GF003" in _wanted(one.replace("a.backward()", "a.backward()\n    b.backward()"))
    # A function that backpropagates and its caller that backpropagates again may pair.
    assert "GF003" in _wanted(one + "\ndef g(b):\n    f(b)\n    b.backward()\n")
    assert "GF003" in _wanted("for loss in losses:\n    loss.backward()\n")
    assert "GF003" in _wanted("from torch.autograd import grad as g\n")


@pytest.mark.parametrize(
    ("line", "writes"),
    [
        ("nn.init.normal_(layer.weight)", False),  # an imported function, not a tensor method
        ("layer.weight.normal_()", True),
        ("x.requires_grad_()", False),
        ("y = F.relu(x, inplace=True)", True),
        ("act = nn.ReLU(True)", True),
        ("y = torch.sigmoid(x, out=buffer)", True),
        ("mask[0] = 1", True),
    ],
)
def test_gf004_needs_an_in_place_write(line: str, writes: bool) -> None:
    source = f"import torch\nfrom torch import nn\nimport torch.nn.functional as F\n{line}\n"
    assert ("GF004" in _wanted(source)) is writes


def test_disabled_screen_wants_every_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(screen, "ENABLED", False)
    assert _wanted(MODEL) == set(RULES)


# Each parses with LibCST; CPython refuses to compile every one.
NESTED_BLOCKS = "".join("    " * depth + "for i in x:\n" for depth in range(21)) + "    " * 21
REFUSED = {
    "nul byte": TRAINING.replace("total = 0", "total = 0  # \0"),
    "21 nested blocks": TRAINING + NESTED_BLOCKS + "total += loss\n",
    "nested parentheses": TRAINING + "y = " + "(" * 201 + "1" + ")" * 201 + "\n",
    "return outside a function": TRAINING + "return total\n",
}


@pytest.mark.parametrize("source", REFUSED.values(), ids=REFUSED.keys())
def test_a_file_python_refuses_is_reported_and_not_fixed(source: str) -> None:
    result = process_source(source.encode(), ALL)
    assert result.error is not None and "parse error" in result.error
    assert result.new_source is None and not result.findings


def test_a_fixable_file_is_fixed_when_python_compiles_it() -> None:
    result = process_source(TRAINING.encode(), ALL)
    assert result.error is None and result.new_source is not None


def test_top_level_await_is_allowed_only_in_notebooks() -> None:
    assert syntax_error(b"await x\n") is not None
    assert syntax_error(b"await x\n", top_level_await=True) is None


def _notebook(*cells: str) -> bytes:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(cell) for cell in cells]
    notebook.metadata["kernelspec"] = {"name": "python3", "language": "python"}
    return nbformat.writes(notebook).encode()


@pytest.mark.parametrize(
    "cell", ["await asyncio.sleep(0)", "from __future__ import print_function"]
)
def test_a_notebook_compiles_cell_by_cell(cell: str) -> None:
    # IPython compiles each cell on its own: both are fine after the first cell.
    result = process_notebook(_notebook("import asyncio", cell, TRAINING), ALL)
    assert result.error is None and result.findings


def test_the_compilers_warnings_are_not_printed() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert syntax_error(b"x = 1\nprint(x is 1)\n") is None


def test_a_notebook_cell_python_refuses_is_reported_in_its_cell() -> None:
    result = process_notebook(_notebook(TRAINING, NESTED_BLOCKS.strip() + " pass"), ALL)
    assert result.error is not None and result.error.startswith("cell 2:21:")
    assert "nested blocks" in result.error


def test_syntax_newer_than_the_running_python_is_left_to_libcst() -> None:
    # PEP 695 generics (3.12): LibCST's grammar knows them, so this is no broken file.
    source = TRAINING.encode() + b"def first[T](items: list[T]) -> T:\n    return items[0]\n"
    if sys.version_info < (3, 12):
        assert syntax_error(source) is None
    assert process_source(source, ALL).new_source is not None
