"""Notebooks (codemods/notebooks.py): a notebook to one Python source and back, byte for byte,
and the wiring around it: the walk, the engine, the output formats, the command line. The rule
fixtures in tests/fixtures/*/notebook_* are checked by test_fixtures.py like the scripts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from typer.testing import CliRunner

from codemods import notebooks, pipeline
from codemods.commands import app
from codemods.engine import ErrorKind, FileTask, Mode, process_file
from codemods.findings import Finding
from codemods.notebooks import NotebookWriteError, process_notebook, read
from codemods.output import text_lines
from codemods.pipeline import RunOptions, SourceResult
from codemods.walk import python_files

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE_NOTEBOOKS = sorted(FIXTURES.glob("GF*/*/*.ipynb"))
FIXED_CASES = sorted(path.parent for path in FIXTURES.glob("GF*/*/after.ipynb"))
MAGICS_CASE = FIXTURES / "GF001" / "notebook_magics_and_outputs"
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


def notebook(*sources: str, language: str = "python") -> nbformat.NotebookNode:
    """A markdown cell, then one code cell per source (so code cell N is cell N + 1)."""
    cells = [new_markdown_cell("# Training ✨ (résumé)", id="title")]
    cells += [new_code_cell(source, id=f"code-{i}") for i, source in enumerate(sources, 1)]
    return new_notebook(cells=cells, metadata={"language_info": {"name": language}})


def written(nb: nbformat.NotebookNode) -> bytes:
    """As Jupyter saves it (nbformat.write adds the final newline)."""
    return (nbformat.writes(nb) + "\n").encode()


TRAINING = written(notebook(SETUP, LOOP))


def _reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _reversed_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_keys(item) for item in value]
    return value


def _sources_as_strings(value: Any) -> Any:
    for cell in value["cells"]:
        cell["source"] = "".join(cell["source"])
    return value


def _sources_as_one_item(value: Any) -> Any:
    for cell in value["cells"]:
        cell["source"] = ["".join(cell["source"])]
    return value


def _loop_in_two_items(value: Any) -> Any:
    lines = value["cells"][2]["source"]
    value["cells"][2]["source"] = ["".join(lines[:2]), "".join(lines[2:])]
    return value


def restyled(
    source: bytes,
    indent: int | str | None = 1,
    transform: Callable[[Any], Any] = lambda value: value,
    ascii_only: bool = False,
    newline: str = "\n",
    end: str = "\n",
) -> bytes:
    """The notebook in another JSON style, as other tools write them."""
    document = transform(json.loads(source))
    text = json.dumps(document, indent=indent, ensure_ascii=ascii_only, separators=(",", ": "))
    return (text.replace("\n", newline) + end).encode()


STYLES = {
    "jupyter": {},
    "indent 2, keys unsorted (Colab)": {"indent": 2, "transform": _reversed_keys},
    "indent 4": {"indent": 4},
    "tabs": {"indent": "\t"},
    "CRLF": {"newline": "\r\n"},
    "ASCII escapes": {"ascii_only": True},
    "no final newline": {"end": ""},
    "sources as strings": {"transform": _sources_as_strings},
    "a source in one list item (sphinx-gallery)": {"transform": _sources_as_one_item},
}


def _changed_lines(before: bytes, after: bytes) -> list[tuple[str, str]]:
    old, new = before.splitlines(), after.splitlines()
    assert len(old) == len(new)
    return [(a.decode(), b.decode()) for a, b in zip(old, new, strict=True) if a != b]


# --- round trip -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", FIXTURE_NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_an_unedited_notebook_is_written_back_byte_for_byte(path: Path) -> None:
    source = path.read_bytes()
    nb = read(source)
    assert nb.with_code(nb.code) == source


@pytest.mark.parametrize("style", STYLES.values(), ids=list(STYLES))
def test_a_fix_changes_only_the_edited_line_whatever_the_json_style(style: dict) -> None:
    source = restyled(TRAINING, **style)
    nb = read(source)
    assert nb.with_code(nb.code) == source
    result = process_notebook(source, FIX)
    assert result.new_source is not None
    ((old, new),) = _changed_lines(source, result.new_source)
    assert BUG in old and FIXED in new
    assert old.replace(BUG, FIXED) == new


def test_list_items_the_edit_does_not_reach_are_kept() -> None:
    source = restyled(TRAINING, transform=_loop_in_two_items)
    result = process_notebook(source, FIX)
    assert result.new_source is not None
    first, second = json.loads(source)["cells"][2]["source"]
    stored = json.loads(result.new_source)["cells"][2]["source"]
    assert stored == [first, second.replace(BUG, FIXED)]


def test_outputs_metadata_ids_and_counts_survive_a_fix() -> None:
    before = (MAGICS_CASE / "before.ipynb").read_bytes()
    result = process_notebook(before, FIX)
    assert result.new_source is not None
    old, new = nbformat.reads(before.decode(), 4), nbformat.reads(result.new_source.decode(), 4)
    assert (old.nbformat, old.nbformat_minor, old.metadata) == (
        new.nbformat,
        new.nbformat_minor,
        new.metadata,
    )
    for index, (a, b) in enumerate(zip(old.cells, new.cells, strict=True)):
        assert {**a, "source": ""} == {**b, "source": ""}, f"cell {index + 1}"
        assert (a.source == b.source) == (index != 5)
    assert new.cells[5].source == old.cells[5].source.replace(BUG, FIXED)
    assert any(output.output_type == "display_data" for output in new.cells[7].outputs)


def test_nbformat_writers_choices_are_what_the_fixtures_use() -> None:
    # The fixtures are written by nbformat: that is the style most notebooks have.
    nb = read((MAGICS_CASE / "before.ipynb").read_bytes())
    assert nb.text.startswith('{\n "cells": [\n  {\n')
    assert "✨" in nb.text and nb.text.endswith("}\n")


# --- IPython syntax -------------------------------------------------------------------------

IPYTHON_CELL = """\
%matplotlib inline
!pip install torch
files = !ls
model?
?model
%time y = model(x)
for step in range(2):
    !echo {step}
    %time out = model(x)
message = ("loss %.3f"
           % 0.5)
doc = '''
%not a magic inside a string
'''
??model"""
IPYTHON_CELL_AS_PYTHON = """\
pass
pass
pass
pass
pass
pass
for step in range(2):
    pass
    pass
message = ("loss %.3f"
           % 0.5)
doc = '''
%not a magic inside a string
'''
pass
"""


def test_ipython_lines_become_placeholders_of_the_same_line() -> None:
    nb = read(written(notebook(IPYTHON_CELL)))
    assert nb.code == IPYTHON_CELL_AS_PYTHON
    assert [(line.cell, line.number) for line in nb.lines] == [(1, n) for n in range(1, 16)]
    assert [line.number for line in nb.lines if line.ipython] == [1, 2, 3, 4, 5, 6, 8, 9, 15]


def test_cell_magics_hide_their_cell_unless_the_body_is_python() -> None:
    nb = read(
        written(
            notebook(
                "%%time\nx = 1",
                "%%capture log\ny = 2",
                "%%bash\necho hi\n  ls",
                "  indented = 'IPython dedents a cell indented as a whole'",
            )
        )
    )
    assert nb.code == "#\nx = 1\n#\ny = 2\n#\n#\n#\n#\n"


def test_magic_lines_are_restored_byte_for_byte_around_a_fix() -> None:
    before = (MAGICS_CASE / "before.ipynb").read_bytes()
    result = process_notebook(before, FIX)
    assert result.new_source == (MAGICS_CASE / "after.ipynb").read_bytes()
    old_loop = read(before).sources[5].splitlines()
    new_loop = read(result.new_source).sources[5].splitlines()
    changed = [(a, b) for a, b in zip(old_loop, new_loop, strict=True) if a != b]
    assert changed == [("        " + BUG, "        " + FIXED)]
    assert old_loop[0] == "%%time" and old_loop[4:6] == new_loop[4:6]


def test_a_coding_declaration_does_not_change_how_the_cells_are_read() -> None:
    nb = notebook("# -*- coding: latin-1 -*-\n" + SETUP, LOOP + "\nprint('résumé', running_loss)")
    result = process_notebook(written(nb), FIX)
    assert result.new_source is not None
    assert read(result.new_source).sources[2].endswith(f"{FIXED}\nprint('résumé', running_loss)")


# --- positions -------------------------------------------------------------------------------


def test_findings_are_in_cell_coordinates_and_point_into_the_file() -> None:
    for source in (TRAINING, restyled(TRAINING, 2, _sources_as_strings, ascii_only=True)):
        (finding,) = process_notebook(source, CHECK).findings
        assert (finding.cell, finding.line, finding.column) == (3, 5, 5)
        assert finding.edit is not None and finding.edit.cell == 3
        assert (finding.edit.start_line, finding.edit.start_column) == (5, 5)
        file_line = source.decode().splitlines()[finding.file_line - 1]
        assert file_line[finding.file_column - 1 :].startswith(BUG)


def test_line_references_in_messages_name_the_cell() -> None:
    path = FIXTURES / "GF003" / "notebook_forward_and_backward_cells" / "before.ipynb"
    (finding,) = process_notebook(path.read_bytes(), CHECK).findings
    assert "(`features = trunk(x)`, cell 4, line 5)" in finding.message
    assert "`cls_loss.backward()` (cell 6, line 3)" in finding.message


def _apply(source: str, finding: Finding) -> str:
    edit = finding.edit
    assert edit is not None
    lines = source.splitlines(keepends=True)

    def offset(line: int, column: int) -> int:
        return sum(len(text) for text in lines[: line - 1]) + column - 1

    start, end = offset(edit.start_line, edit.start_column), offset(edit.end_line, edit.end_column)
    return source[:start] + edit.replacement + source[end:]


@pytest.mark.parametrize("case", FIXED_CASES, ids=lambda case: f"{case.parent.name}/{case.name}")
def test_the_json_edits_reproduce_the_fix_in_their_cells(case: Path) -> None:
    before = (case / "before.ipynb").read_bytes()
    result = process_notebook(before, RunOptions(frozenset({case.parent.name}), fix=True))
    sources = list(read(before).sources)
    for finding in result.fixed:
        assert finding.edit is not None and finding.edit.cell is not None
        index = finding.edit.cell - 1
        sources[index] = _apply(sources[index], finding)
    assert sources == list(read((case / "after.ipynb").read_bytes()).sources)


def test_crlf_line_ends_inside_a_cell_are_kept() -> None:
    source = written(notebook(SETUP.replace("\n", "\r\n"), LOOP.replace("\n", "\r\n")))
    result = process_notebook(source, FIX)
    assert result.new_source is not None
    assert read(result.new_source).sources[2] == LOOP.replace("\n", "\r\n").replace(BUG, FIXED)


def test_lines_a_fix_inserts_go_to_their_cell_or_the_earlier_one() -> None:
    nb = read(written(notebook("a = 1\nb = 2", "c = 3")))
    inside = nb.with_code("a = 1\nextra = 0\nb = 2\nc = 3\n")
    assert read(inside).sources[1:] == ("a = 1\nextra = 0\nb = 2", "c = 3")
    between = nb.with_code("a = 1\nb = 2\nextra = 0\nc = 3\n")
    assert read(between).sources[1:] == ("a = 1\nb = 2\nextra = 0", "c = 3")


def test_a_fix_never_rewrites_an_ipython_line() -> None:
    nb = read(written(notebook("%time a = 1\nb = 2")))
    with pytest.raises(RuntimeError, match="IPython line"):
        nb.with_code("a = 1\nb = 2\n")


# --- errors ----------------------------------------------------------------------------------


def test_a_syntax_error_is_reported_in_its_cell(tmp_path: Path) -> None:
    path = tmp_path / "broken.ipynb"
    path.write_bytes(written(notebook(SETUP, "for step in range(3)\n    pass", LOOP)))
    result = process_file(FileTask(path, FIX.select), Mode.CHECK)
    assert result.error is not None and result.error.kind is ErrorKind.PARSE
    assert (result.error.cell, result.error.line, result.error.column) == (3, 1, 21)
    line, *_ = text_lines([result], unsafe_fixes=False)  # then the other cells' findings
    assert line.startswith(f"{path}:cell 3:1:21: parse error: expected ':'")


def test_each_cell_must_parse_on_its_own_as_ipython_runs_it() -> None:
    # Joined, the next cell would be the loop's body; IPython runs the first cell alone.
    result = process_notebook(written(notebook(SETUP + "\nfor step in range(3):", "    x")), CHECK)
    assert result.error is not None and result.error.startswith("cell 2:7:")


@pytest.mark.parametrize(
    ("source", "error"),
    [
        (b'{"cells": [}', "1:12: parse error: not a notebook: Expecting value"),
        (b'{"nbformat": 3, "nbformat_minor": 0, "worksheets": []}', "nbformat 3 notebook"),
        (b"\xff\xfe", "1:1: parse error: not a notebook: 'utf-8' codec"),
        # JSON whose shape nbformat's reader takes on trust: not notebooks, not gradfix's bugs
        (b"[]", "1:1: parse error: not a notebook: AttributeError: "),
        (
            b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": ["x = 1", 5]}]}',
            "1:1: parse error: not a notebook: TypeError: sequence item 1",
        ),
        (b'{"nbformat_minor": 5, "cells": []}', "not a notebook: it has no `nbformat` version"),
        (b'{"nbformat": 4, "cells": 5}', "not a notebook: TypeError: 'int' object is not iterable"),
    ],
)
def test_what_is_not_a_notebook_is_a_parse_error(source: bytes, error: str) -> None:
    result = process_notebook(source, CHECK)
    assert result.error is not None and error in result.error


def test_a_parse_error_of_the_joined_source_is_given_in_its_cell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def libcst_says_no(source: bytes, options: RunOptions, notebook: bool = False) -> SourceResult:
        return SourceResult(error="8:3: parse error: no")

    monkeypatch.setattr(pipeline, "process_source", libcst_says_no)
    assert process_notebook(TRAINING, CHECK).error == "cell 3:2:3: parse error: no"


def test_notebooks_of_other_languages_are_left_alone() -> None:
    source = written(notebook("x <- c(1, 2)\nprint(x)", language="R"))
    result = process_notebook(source, FIX)
    assert (result.error, result.findings, result.new_source) == (None, [], None)


@pytest.mark.parametrize(
    ("kernel", "is_python"),
    [("julia-1.10", False), ("ir", False), ("python3", True), ("conda-env-torch-py", True)],
)
def test_a_kernelspec_name_alone_decides_the_language(kernel: str, is_python: bool) -> None:
    """Python's training loop under a kernelspec naming the kernel only, as a Julia
    notebook never run has it: rewritten only under a Python kernel's name."""
    nb = notebook(SETUP, LOOP)
    nb.metadata = {"kernelspec": {"name": kernel, "display_name": kernel}}
    result = process_notebook(written(nb), FIX)
    assert (result.new_source is not None) is is_python
    assert bool(result.findings) is is_python


def test_json_that_cannot_be_written_back_as_it_was_is_never_rewritten(tmp_path: Path) -> None:
    nb = notebook(SETUP, LOOP)
    nb.metadata["lr"] = 1e-05
    source = written(nb).replace(b"1e-05", b"0.00001")  # how JavaScript writes it
    (finding,) = process_notebook(source, CHECK).findings
    assert (finding.cell, finding.file_line, finding.file_column) == (3, 1, 1)
    with pytest.raises(NotebookWriteError):
        process_notebook(source, FIX)
    path = tmp_path / "js.ipynb"
    path.write_bytes(source)
    result = process_file(FileTask(path, FIX.select), Mode.FIX)
    assert result.error is not None and result.error.kind is ErrorKind.WRITE
    assert "left unchanged" in result.error.message and path.read_bytes() == source


# --- wiring: walk, command line, formats -----------------------------------------------------


def test_the_walk_takes_notebooks_and_skips_checkpoints(tmp_path: Path) -> None:
    for name in ("a.py", "b.ipynb", ".ipynb_checkpoints/b-checkpoint.ipynb", "c.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    files = python_files([tmp_path])
    assert [path.relative_to(tmp_path).as_posix() for path in files] == ["a.py", "b.ipynb"]


def gradfix(*args: str, input: bytes | None = None) -> Any:
    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        runner = CliRunner()
    return runner.invoke(app, [*args, "--no-cache", "-j", "1"], input=input)


@pytest.fixture
def project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "train.ipynb"
    path.write_bytes(TRAINING)
    return path


def test_check_reports_cells(project: Path) -> None:
    result = gradfix("check", "train.ipynb")
    assert result.exit_code == 1
    assert result.stdout.startswith("train.ipynb:cell 3:5:5: GF001 [*] `running_loss`")


def test_json_names_the_cell_of_findings_and_edits(project: Path) -> None:
    (record,) = json.loads(gradfix("check", "--format", "json", "train.ipynb").stdout)
    assert (record["path"], record["cell"], record["line"], record["column"]) == (
        "train.ipynb",
        3,
        5,
        5,
    )
    (edit,) = record["fix"]["edits"]
    assert edit["cell"] == 3 and edit["replacement"] == FIXED


def test_github_and_sarif_point_at_the_line_of_the_file(project: Path) -> None:
    (finding,) = process_notebook(TRAINING, CHECK).findings
    (annotation,) = gradfix("check", "--format", "github", "train.ipynb").stdout.splitlines()
    assert annotation.startswith(
        f"::warning file=train.ipynb,line={finding.file_line},col={finding.file_column},"
        "title=GF001 (cell 3%3A5%3A5)::"
    )
    log = json.loads(gradfix("check", "--format", "sarif", "train.ipynb").stdout)
    (result,) = log["runs"][0]["results"]
    (location,) = result["locations"]
    region = location["physicalLocation"]["region"]
    assert region == {"startLine": finding.file_line, "startColumn": finding.file_column}
    assert location["logicalLocations"] == [{"name": "cell 3"}]
    assert result["properties"]["cell"] == 3
    ((change,),) = [fix["artifactChanges"] for fix in result["fixes"]]
    (replacement,) = change["replacements"]
    assert replacement["insertedContent"]["text"] == ".item()"
    assert replacement["deletedRegion"]["startLine"] == finding.file_line


def test_diff_shows_the_cells_not_the_json(project: Path) -> None:
    result = gradfix("fix", "--diff", "train.ipynb")
    assert result.exit_code == 1
    assert "--- train.ipynb:cell 3\n+++ train.ipynb:cell 3\n" in result.stdout
    assert f"-    {BUG}\n+    {FIXED}\n" in result.stdout
    assert '"source"' not in result.stdout and project.read_bytes() == TRAINING


def test_fix_rewrites_the_notebook_and_stdin_too(project: Path) -> None:
    expected = TRAINING.replace(BUG.encode(), FIXED.encode())
    piped = gradfix("fix", "-", "--stdin-filename", "train.ipynb", input=TRAINING)
    assert piped.stdout_bytes == expected
    assert gradfix("fix", "train.ipynb").exit_code == 0
    assert project.read_bytes() == expected


NOTEBOOK_FILES = sorted((Path(__file__).parent / "fixtures").rglob("*.ipynb"))


def _odd_shapes() -> dict[str, str]:
    """Documents nbformat reads (or rejects) that the direct reading must match."""
    cell = {"cell_type": "code", "metadata": {}, "source": ["x = 1\n", "y = 2"], "outputs": []}
    base = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]}
    shapes = {
        "lines": base,
        "string source": {**base, "cells": [{**cell, "source": "x = 1\n"}]},
        "stream output as lines": {
            **base,
            "cells": [{**cell, "outputs": [{"output_type": "stream", "text": ["a\n", "b"]}]}],
        },
        "a cell without metadata": {**base, "cells": [{"cell_type": "code", "source": "x"}]},
        "no metadata": {key: value for key, value in base.items() if key != "metadata"},
        "a number as source": {**base, "cells": [{**cell, "source": 3}]},
        "nbformat 4.0": {**base, "nbformat": 4.0},
        "nbformat 3": {**base, "nbformat": 3},
        "a list": [base],
        "kernel language": {**base, "metadata": {"kernelspec": {"language": "julia"}}},
    }
    return {name: json.dumps(document) for name, document in shapes.items()}


def _as_read(text: str, reader: Callable[[str], Any]) -> object:
    try:
        notebook = reader(text)
    except Exception as error:  # the same error, in the same words
        return type(error), str(error)
    return notebook.sources, notebook.lines, notebook.is_python, notebook.document


@pytest.mark.parametrize(
    "text",
    [*(path.read_text() for path in NOTEBOOK_FILES), *_odd_shapes().values()],
    ids=[*(path.parent.name + "/" + path.name for path in NOTEBOOK_FILES), *_odd_shapes()],
)
def test_reading_the_json_directly_gives_what_nbformat_gives(text: str) -> None:
    direct = _as_read(text, lambda text: read(text.encode()))
    assert direct == _as_read(text, notebooks._read_with_nbformat)
