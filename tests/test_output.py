from __future__ import annotations

import json
from pathlib import Path

from engine_fakes import FAKE_RULES

from codemods import output
from codemods.engine import ErrorKind, FileError, FileResult
from codemods.findings import Edit, Finding, Tier

SAFE = Finding(
    "GF001", 3, 5, 3, 9, "loss accumulated; use .item()", Tier.SAFE, Edit(3, 5, 3, 9, "l.item()")
)
UNSAFE = Finding(
    "GF002", 1, 1, 1, 2, "stored tensor; detach it", Tier.UNSAFE, Edit(1, 1, 1, 2, "y.detach()")
)
REPORT = Finding("GF003", 2, 1, 2, 4, "second backward, reorder", Tier.REPORT)
PARSE = FileError(ErrorKind.PARSE, "expected ':'", 4, 2)

RESULTS = [
    FileResult(Path("pkg/a.py"), findings=(SAFE, REPORT, UNSAFE)),
    FileResult(Path("pkg/bad.py"), error=PARSE),
]


def test_text_lines() -> None:
    assert list(output.text_lines(RESULTS, unsafe_fixes=False)) == [
        "pkg/a.py:1:1: GF002 stored tensor; detach it",
        "pkg/a.py:2:1: GF003 second backward, reorder",
        "pkg/a.py:3:5: GF001 [*] loss accumulated; use .item()",
        "pkg/bad.py:4:2: parse error: expected ':' (the file was skipped; fix the syntax error,"
        " or exclude the file with --exclude)",
    ]
    lines = list(output.text_lines(RESULTS, unsafe_fixes=True))
    assert lines[0] == "pkg/a.py:1:1: GF002 [*] stored tensor; detach it"


def test_json_records() -> None:
    records = json.loads(output.render_json(RESULTS))
    assert [r["rule"] for r in records] == ["GF002", "GF003", "GF001", None]
    safe = records[2]
    assert safe == {
        "rule": "GF001",
        "path": "pkg/a.py",
        "line": 3,
        "column": 5,
        "end_line": 3,
        "end_column": 9,
        "message": "loss accumulated; use .item()",
        "tier": "safe",
        "fix": {
            "edits": [
                {
                    "start": {"line": 3, "column": 5},
                    "end": {"line": 3, "column": 9},
                    "replacement": "l.item()",
                }
            ]
        },
    }
    assert records[1]["fix"] is None
    assert records[0]["tier"] == "unsafe" and records[0]["fix"] is not None
    assert records[3]["tier"] == "error" and records[3]["line"] == 4
    assert "parse error" in records[3]["message"]


def test_github_lines_escape_their_fields() -> None:
    odd = Finding("GF003", 1, 2, 1, 3, "100% wrong\nreally", Tier.REPORT)
    results = [FileResult(Path("a,b.py"), findings=(odd,)), RESULTS[1]]
    assert list(output.github_lines(results)) == [
        "::warning file=a%2Cb.py,line=1,col=2,endLine=1,endColumn=3,title=GF003::"
        "100%25 wrong%0Areally",
        "::error file=pkg/bad.py,line=4,col=2,title=parse error::parse error: expected ':' (the "
        "file was skipped; fix the syntax error, or exclude the file with --exclude)",
    ]


def test_sarif_log() -> None:
    log = json.loads(output.render_sarif(RESULTS, FAKE_RULES, "9.9"))
    assert log["version"] == "2.1.0" and "$schema" in log
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("gradfix", "9.9")
    assert [r["id"] for r in driver["rules"]] == ["GF001", "GF002", "GF003"]
    for rule in driver["rules"]:
        assert {"shortDescription", "fullDescription", "help"} <= rule.keys()
        assert rule["shortDescription"]["text"]
    results = run["results"]
    assert [r["ruleId"] for r in results] == ["GF002", "GF003", "GF001"]
    safe = results[2]
    assert safe["ruleIndex"] == 0 and safe["level"] == "warning"
    assert safe["message"]["text"] == SAFE.message
    location = safe["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "pkg/a.py"
    assert location["region"] == {"startLine": 3, "startColumn": 5, "endLine": 3, "endColumn": 9}
    (change,) = safe["fixes"][0]["artifactChanges"]
    (replacement,) = change["replacements"]
    assert replacement["deletedRegion"] == location["region"]
    assert replacement["insertedContent"] == {"text": "l.item()"}
    assert "fixes" not in results[1]
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is False
    notification = invocation["toolExecutionNotifications"][0]
    assert notification["level"] == "error"
    assert notification["locations"][0]["physicalLocation"]["region"]["startLine"] == 4


def test_sarif_uri_of_an_absolute_path(tmp_path: Path) -> None:
    path = tmp_path / "a b.py"
    log = output.sarif_log([FileResult(path, findings=(REPORT,))], FAKE_RULES, "1")
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert uri["uri"] == path.as_uri() and "%20" in uri["uri"]


def test_diff_names_the_findings_before_the_header() -> None:
    result = FileResult(
        Path("a.py"),
        fixed=(SAFE,),
        changed=True,
        source=b"a\r\nb\r\ntotal += l\r\n",
        new_source=b"a\r\nb\r\ntotal += l.item()\r\n",
    )
    text = output.render_diff(result)
    assert text.splitlines()[:3] == [
        "# a.py:3: GF001 loss accumulated; use .item()",
        "--- a.py",
        "+++ a.py",
    ]
    assert "-total += l\r\n+total += l.item()\r\n" in text


def test_diff_decodes_with_the_coding_cookie_and_marks_a_missing_newline() -> None:
    source = b"# -*- coding: latin-1 -*-\nname = '\xe9'\nx = 1"
    result = FileResult(
        Path("a.py"), fixed=(SAFE,), changed=True, source=source, new_source=source + b"\n"
    )
    text = output.render_diff(result)
    assert " name = 'é'\n" in text
    assert "-x = 1\n\\ No newline at end of file\n+x = 1\n" in text


def test_summary() -> None:
    fixed = FileResult(Path("b.py"), fixed=(SAFE, SAFE), changed=True)
    summary = output.Summary.of([*RESULTS, fixed], unsafe_fixes=False)
    assert summary.files == 3 and summary.changed == 1 and summary.errors == 1
    assert summary.hidden_fixes == 1 and summary.fixable_left == 1
    lines = output.summary_lines(summary, fixing=True, diff=False)
    assert lines == [
        "Scanned 3 files.",
        "Fixed 2 findings in 1 file: GF001 x2.",
        "3 findings left (1 with a safe fix, 1 with an unsafe fix, 1 report-only).",
        "1 hidden fix can be enabled with --unsafe-fixes (review it: it may change behaviour).",
        "1 file could not be processed in full; see the errors above.",
    ]
    check = output.summary_lines(output.Summary.of(RESULTS[:1], True), fixing=False, diff=False)
    assert check == [
        "Scanned 1 file.",
        "Found 3 findings (1 with a safe fix, 1 with an unsafe fix, 1 report-only). 2 fixable "
        "with `gradfix fix`.",
    ]
    empty = output.summary_lines(output.Summary.of([], False), fixing=False, diff=False)
    assert empty == ["Scanned 0 files.", "No findings."]


def test_summary_plurals() -> None:
    summary = output.Summary(files=4, changed=2, hidden_fixes=4, errors=2)
    summary.fixed.update({"GF001": 2})
    summary.left.update({Tier.UNSAFE: 4})
    assert output.summary_lines(summary, fixing=True, diff=True) == [
        "Scanned 4 files.",
        "Would fix 2 findings in 2 files: GF001 x2.",
        "4 findings left (4 with an unsafe fix).",
        "4 hidden fixes can be enabled with --unsafe-fixes (review them: they may change "
        "behaviour).",
        "2 files could not be processed in full; see the errors above.",
    ]


def test_text_and_github_never_write_control_characters_from_the_checked_tree() -> None:
    # A file name and a line of code quoted in a message, as a hostile tree may have them.
    finding = Finding("GF003", 1, 1, 1, 2, 'print("\x1b[2J") twice', Tier.REPORT)
    result = FileResult(Path("a\x1b]0;owned\x07.py"), findings=(finding,))
    (line,) = output.text_lines([result], unsafe_fixes=False)
    assert line == 'a\\x1b]0;owned\\x07.py:1:1: GF003 print("\\x1b[2J") twice'
    (command,) = output.github_lines([result])
    assert command == (
        "::warning file=a\\x1b]0;owned\\x07.py,line=1,col=1,endLine=1,endColumn=2,title=GF003::"
        'print("\\x1b[2J") twice'
    )
