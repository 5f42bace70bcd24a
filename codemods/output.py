"""Turn file results into what the user reads: text, JSON, GitHub annotations, SARIF, diffs,
and the closing summary."""

from __future__ import annotations

import difflib
import io
import json
import os
import re
import sys
import tokenize
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from rich.console import Console

from codemods.engine import NOTEBOOK_SUFFIX, ErrorKind, FileError, FileResult
from codemods.findings import Finding, Tier

if TYPE_CHECKING:  # the rules load LibCST, which a warm run never needs
    from codemods.rules.base import Rule

PROGRESS_MIN_FILES = 50
TIER_LABELS = {
    Tier.SAFE: "with a safe fix",
    Tier.UNSAFE: "with an unsafe fix",
    Tier.REPORT: "report-only",
    Tier.CONFIRMED: "confirmed at run time",
}
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"

PARSE_ADVICE = "the {} was skipped; fix the syntax error, or exclude the file with --exclude"


def _one_line(text: str) -> str:
    return visible(" ".join(text.split()))


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """`text` with control characters written as `\\x1b`: a file name or a line of code from
    the checked tree must not move the cursor, recolour or retitle the user's terminal."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match[0]):02x}", text)


def _sorted(findings: Sequence[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.cell or 0, f.line, f.column, f.rule))


def _where(cell: int | None, line: int, column: int | None = None) -> str:
    """`12:8`, or `cell 3:12:8` in a notebook (cells counted from 1, markdown ones too)."""
    position = str(line) if column is None else f"{line}:{column}"
    return position if cell is None else f"cell {cell}:{position}"


def error_text(error: FileError) -> str:
    """`parse error: <what> (<what to do>)`, on one line."""
    text = f"{error.kind.value}: {_one_line(error.message)}"
    if error.kind is not ErrorKind.PARSE:
        return text
    # In a notebook, only the cell that does not parse is left out of the analysis.
    return f"{text} ({PARSE_ADVICE.format('file' if error.cell is None else 'cell')})"


def fix_shown(finding: Finding, unsafe_fixes: bool) -> bool:
    """Whether the finding's fix would be applied with the current settings."""
    return finding.fixable and (finding.tier in (Tier.SAFE, Tier.CONFIRMED) or unsafe_fixes)


# --- text ---------------------------------------------------------------------------------


def text_lines(results: Sequence[FileResult], unsafe_fixes: bool) -> Iterator[str]:
    """`path:line:col: GF001 [*] message` per finding (`[*]`: fixed by `gradfix fix` with the
    current settings) and `path:line:col: parse error: ...` per file that failed; in a
    notebook, `path:cell N:line:col: ...`."""
    for result in results:
        path = visible(str(result.path))
        if result.error is not None:
            e = result.error
            yield f"{path}:{_where(e.cell, e.line, e.column)}: {error_text(e)}"
        for f in _sorted(result.findings):
            marker = " [*]" if fix_shown(f, unsafe_fixes) else ""
            where = _where(f.cell, f.line, f.column)
            yield f"{path}:{where}: {f.rule}{marker} {_one_line(f.message)}"


# --- json -----------------------------------------------------------------------------------


def _fix_json(finding: Finding) -> dict[str, Any] | None:
    if not finding.fixable or finding.edit is None:
        return None
    edit = finding.edit
    return {
        "edits": [
            {
                **_cell_json(edit.cell),
                "start": {"line": edit.start_line, "column": edit.start_column},
                "end": {"line": edit.end_line, "column": edit.end_column},
                "replacement": edit.replacement,
            }
        ]
    }


def _cell_json(cell: int | None) -> dict[str, int]:
    """`{"cell": N}` for a position in a notebook (lines then count in that cell), else {}."""
    return {} if cell is None else {"cell": cell}


def json_records(results: Sequence[FileResult]) -> list[dict[str, Any]]:
    """One object per finding; a file that failed gives one with `rule` null and `tier`
    "error"."""
    records: list[dict[str, Any]] = []
    for result in results:
        path = str(result.path)
        if result.error is not None:
            error = result.error
            records.append(
                {
                    "rule": None,
                    "path": path,
                    **_cell_json(error.cell),
                    "line": error.line,
                    "column": error.column,
                    "end_line": error.line,
                    "end_column": error.column,
                    "message": error_text(error),
                    "tier": "error",
                    "fix": None,
                }
            )
        for f in _sorted(result.findings):
            records.append(
                {
                    "rule": f.rule,
                    "path": path,
                    **_cell_json(f.cell),
                    "line": f.line,
                    "column": f.column,
                    "end_line": f.end_line,
                    "end_column": f.end_column,
                    "message": f.message,
                    "tier": f.tier.value,
                    "fix": _fix_json(f),
                }
            )
    return records


def render_json(results: Sequence[FileResult]) -> str:
    return json.dumps(valid_unicode(json_records(results)), indent=2) + "\n"


_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_unicode(data: Any) -> Any:
    """`data` (JSON-ready) with every lone surrogate in its strings replaced by U+FFFD.

    Python keeps each byte of a file name that is not UTF-8 as a lone surrogate (U+DC80 to
    U+DCFF); JSON text carrying one (`"\\udce9"`) is rejected or mangled by strict parsers, so
    JSON and SARIF name such a file with one U+FFFD per undecodable byte. SARIF URIs keep the
    exact bytes, percent-encoded."""
    if isinstance(data, str):
        return _SURROGATE.sub("\ufffd", data)
    if isinstance(data, list):
        return [valid_unicode(item) for item in data]
    if isinstance(data, dict):
        return {key: valid_unicode(value) for key, value in data.items()}
    return data


# --- GitHub Actions -------------------------------------------------------------------------


def _gh_data(text: str) -> str:
    """GitHub's escapes, then any other control character written out (`visible`): the runner
    prints the line to the job's log, whose viewer, like a terminal, obeys escape sequences."""
    return visible(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def github_lines(results: Sequence[FileResult]) -> Iterator[str]:
    """Workflow commands that GitHub shows as annotations on the pull request."""
    for result in results:
        file = _gh_property(result.path.as_posix())
        if result.error is not None:
            yield _gh_error(file, result.error)
        for f in _sorted(result.findings):
            yield _gh_warning(file, f)


def _gh_error(file: str, e: FileError) -> str:
    title = _gh_property(e.kind.value)
    message = _gh_data(error_text(e))
    if e.cell is not None:  # a line of a cell is no line of the file: annotate the file
        return f"::error file={file},title={title}::{_where(e.cell, e.line, e.column)}: {message}"
    return f"::error file={file},line={e.line},col={e.column},title={title}::{message}"


def _gh_warning(file: str, f: Finding) -> str:
    message = _gh_data(f.message)
    if f.cell is not None:  # at the line of the notebook's JSON that holds the code
        title = _gh_property(f"{f.rule} ({_where(f.cell, f.line, f.column)})")
        position = f"line={f.file_line},col={f.file_column}"
        return f"::warning file={file},{position},title={title}::{message}"
    return (
        f"::warning file={file},line={f.line},col={f.column},endLine={f.end_line},"
        f"endColumn={f.end_column},title={_gh_property(f.rule)}::{message}"
    )


# --- SARIF ----------------------------------------------------------------------------------


def _uri(path: Path) -> str:
    # From the name's bytes: one that is not UTF-8 is percent-encoded byte by byte, exactly.
    return path.as_uri() if path.is_absolute() else quote(os.fsencode(path.as_posix()))


def _region(line: int, column: int, end_line: int, end_column: int) -> dict[str, int]:
    return {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}


def _location(path: Path, region: dict[str, int]) -> dict[str, Any]:
    return {"physicalLocation": {"artifactLocation": {"uri": _uri(path)}, "region": region}}


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    help_text = (
        f"{rule.explanation}\n\nBefore:\n{rule.example_before}\n\nAfter:\n{rule.example_after}"
    )
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.explanation},
        "help": {"text": help_text},
        "defaultConfiguration": {"level": "warning"},
    }


def _cell_location(path: Path, f: Finding) -> dict[str, Any]:
    """A notebook finding's location: in the .ipynb file's own text (the JSON string holding
    the code, where code scanning shows and fingerprints it), the cell named logically."""
    region = {"startLine": f.file_line, "startColumn": f.file_column}
    location = _location(path, region)
    location["logicalLocations"] = [{"name": f"cell {f.cell}"}]
    return location


def _sarif_result(path: Path, f: Finding, index: Mapping[str, int]) -> dict[str, Any]:
    region = _region(f.line, f.column, f.end_line, f.end_column)
    result: dict[str, Any] = {
        "ruleId": f.rule,
        "level": "warning",
        "message": {"text": f.message},
        "locations": [_location(path, region) if f.cell is None else _cell_location(path, f)],
        "properties": {"tier": f.tier.value},
    }
    if f.cell is not None:
        result["properties"].update(cell=f.cell, cellRegion=region)
    if f.rule in index:
        result["ruleIndex"] = index[f.rule]
    # In a notebook, the fix as an edit of the file's JSON text, not of the cell's source.
    e = f.edit if f.cell is None else f.file_edit
    if f.fixable and e is not None:
        result["fixes"] = [
            {
                "description": {"text": f"{f.rule} fix ({f.tier.value})"},
                "artifactChanges": [
                    {
                        "artifactLocation": {"uri": _uri(path)},
                        "replacements": [
                            {
                                "deletedRegion": _region(
                                    e.start_line, e.start_column, e.end_line, e.end_column
                                ),
                                "insertedContent": {"text": e.replacement},
                            }
                        ],
                    }
                ],
            }
        ]
    return result


def _sarif_notification(path: Path, e: FileError) -> dict[str, Any]:
    if e.cell is not None:  # a line of a cell is no line of the file: name the file only
        location = {"physicalLocation": {"artifactLocation": {"uri": _uri(path)}}}
        text = f"{_where(e.cell, e.line, e.column)}: {error_text(e)}"
        return {"level": "error", "message": {"text": text}, "locations": [location]}
    region = _region(e.line, e.column, e.line, e.column)
    return {
        "level": "error",
        "message": {"text": error_text(e)},
        "locations": [_location(path, region)],
    }


def sarif_log(
    results: Sequence[FileResult], rules: Mapping[str, Rule], version: str
) -> dict[str, Any]:
    """A SARIF 2.1.0 log. Columns count Unicode code points, end columns are exclusive."""
    ordered = [rules[code] for code in sorted(rules)]
    index = {rule.code: i for i, rule in enumerate(ordered)}
    sarif_results = []
    notifications = []
    for result in results:
        if result.error is not None:
            notifications.append(_sarif_notification(result.path, result.error))
        sarif_results.extend(_sarif_result(result.path, f, index) for f in _sorted(result.findings))
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gradfix",
                        "version": version,
                        "informationUri": "https://pypi.org/project/gradfix/",
                        "rules": [_sarif_rule(rule) for rule in ordered],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": sarif_results,
                "invocations": [
                    {
                        "executionSuccessful": not notifications,
                        "toolExecutionNotifications": notifications,
                    }
                ],
            }
        ],
    }


def render_sarif(results: Sequence[FileResult], rules: Mapping[str, Rule], version: str) -> str:
    return json.dumps(valid_unicode(sarif_log(results, rules, version)), indent=2) + "\n"


# --- diff -----------------------------------------------------------------------------------


def _decode(source: bytes) -> str:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    except SyntaxError:
        encoding = "utf-8"
    return source.decode(encoding, errors="replace")


def _diff_lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def render_diff(result: FileResult) -> str:
    """The unified diff of a changed file, preceded by one `# path:line: GF001 message` line
    per finding whose fix it applies (patch tools skip such lines). A notebook gets one diff
    per changed cell, of the cell's source, under `path:cell N` headers."""
    assert result.source is not None and result.new_source is not None
    name = visible(result.path.as_posix())
    reasons = "".join(
        f"# {name}:{_where(f.cell, f.line)}: {f.rule} {_one_line(f.message)}\n"
        for f in _sorted(result.fixed)
    )
    if result.path.suffix == NOTEBOOK_SUFFIX:
        return reasons + _cells_diff(result.source, result.new_source, name)
    diff = difflib.unified_diff(
        _diff_lines(_decode(result.source)),
        _diff_lines(_decode(result.new_source)),
        fromfile=name,
        tofile=name,
    )
    return reasons + "".join(diff)


def _cells_diff(source: bytes, new_source: bytes, name: str) -> str:
    from codemods import notebooks  # nbformat and LibCST: loaded only to show a notebook diff

    before = notebooks.read(source).sources
    after = notebooks.read(new_source).sources
    return "".join(
        line
        for number, (old, new) in enumerate(zip(before, after, strict=True), 1)
        if old != new
        for line in difflib.unified_diff(
            _cell_lines(old), _cell_lines(new), f"{name}:cell {number}", f"{name}:cell {number}"
        )
    )


def _cell_lines(source: str) -> list[str]:
    # A cell's last line has no line end as a rule: no "No newline at end of file" marker.
    return [
        line if line.endswith(("\n", "\r")) else line + "\n" for line in source.splitlines(True)
    ]


# --- summary and progress -----------------------------------------------------------------


@dataclass
class Summary:
    files: int = 0
    changed: int = 0
    fixed: Counter[str] = field(default_factory=Counter)  # rule -> fixes applied
    left: Counter[Tier] = field(default_factory=Counter)  # findings left, by tier
    fixable_left: int = 0  # left findings whose fix the current settings apply
    hidden_fixes: int = 0  # left findings with an unsafe fix, withheld
    errors: int = 0

    @classmethod
    def of(cls, results: Sequence[FileResult], unsafe_fixes: bool) -> Summary:
        summary = cls(files=len(results))
        for result in results:
            summary.changed += result.changed
            summary.errors += result.error is not None
            summary.fixed.update(f.rule for f in result.fixed)
            for f in result.findings:
                summary.left[f.tier] += 1
                if fix_shown(f, unsafe_fixes):
                    summary.fixable_left += 1
                elif f.fixable:
                    summary.hidden_fixes += 1
        return summary

    @property
    def findings_left(self) -> int:
        return sum(self.left.values())


def _plural(n: int, word: str) -> str:
    """`1 file`, `2 files`, `2 hidden fixes`."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word}{'es' if word.endswith(('s', 'x', 'ch', 'sh')) else 's'}"


def summary_lines(summary: Summary, fixing: bool, diff: bool) -> list[str]:
    lines = [f"Scanned {_plural(summary.files, 'file')}."]
    if fixing:
        total = sum(summary.fixed.values())
        by_rule = ", ".join(f"{rule} x{n}" for rule, n in sorted(summary.fixed.items()))
        verb = "Would fix" if diff else "Fixed"
        files = _plural(summary.changed, "file")
        lines.append(
            f"{verb} {_plural(total, 'finding')} in {files}" + (f": {by_rule}." if total else ".")
        )
    if summary.findings_left:
        tiers = ", ".join(
            f"{summary.left[tier]} {TIER_LABELS[tier]}" for tier in Tier if summary.left[tier]
        )
        count = _plural(summary.findings_left, "finding")
        line = f"{count} left ({tiers})." if fixing else f"Found {count} ({tiers})."
        if not fixing and summary.fixable_left:
            line += f" {summary.fixable_left} fixable with `gradfix fix`."
        lines.append(line)
    elif not fixing:
        lines.append("No findings.")
    if summary.hidden_fixes:
        them = "it: it" if summary.hidden_fixes == 1 else "them: they"
        lines.append(
            f"{_plural(summary.hidden_fixes, 'hidden fix')} can be enabled with --unsafe-fixes"
            f" (review {them} may change behaviour)."
        )
    if summary.errors:
        lines.append(
            f"{_plural(summary.errors, 'file')} could not be processed in full; see the errors "
            "above."
        )
    return lines


def print_summary(console: Console, lines: Sequence[str]) -> None:
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


@contextmanager
def progress(total: int, console: Console | None = None) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr while files are processed, when stderr is a terminal and
    there are enough files to wait for; yields the function to call after each file."""
    console = console or Console(stderr=True)
    if total <= PROGRESS_MIN_FILES or not sys.stderr.isatty():
        yield lambda: None
        return
    # Imported here: a run without a terminal to draw on (CI, a warm rerun) need not load it.
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("gradfix"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("files", total=total)
        yield lambda: bar.advance(task)
