"""Notebooks: one `.ipynb` file to one Python source, and the fixed source back into the file.

A notebook runs its code cells in order, in one namespace, so gradfix analyses them as one
module: a loss defined in one cell and accumulated by a loop in another is one finding. IPython
syntax (line magics, `!shell`, `?help`, `obj?`) is not Python: each such line becomes a
placeholder line (`pass`, or a comment) in the joined source, so that every joined line still
maps to one (cell, line) and IPython lines are neither analysed nor touched; a line magic or
shell line ending in a backslash continues on the next line, as in IPython. A cell magic whose
body runs once as ordinary Python in the notebook's namespace (`%%time`, `%%capture`) keeps its
body analysed; any other cell magic (`%%bash`, `%%writefile`, ...) hides its whole cell, as
does a cell indented as a whole (IPython dedents it before running it). A code cell that does
not parse (an exercise left as `criterion = # TODO`) is reported, and replaced in the joined
source by placeholder lines after which the names it mentions are unknown; the other cells are
analysed and fixed. Only notebooks whose language is Python are read at all.

The file is read straight from its JSON when it is a plain nbformat 4 document nbformat would
read as it is, and with nbformat otherwise (so that nbformat's verdict on it stands). Writing
back changes only the sources of the edited cells. nbformat's own writer would re-indent with
one space, sort the keys, split every string into lines and drop transient metadata, so the
document is re-serialised with the `json.dumps` call that writer makes but with the file's own
indent, key order, escaping, line endings and final newline, each source kept a list of lines
or a string as it was. A file this does not reproduce byte for byte (written with other JSON
conventions) is never rewritten.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import difflib
import io
import itertools
import json
import keyword
import re
import secrets
import tokenize
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from codemods import pipeline
from codemods.findings import Edit, Finding, Tier

SUFFIX = ".ipynb"
# Cell magics whose body is Python run once in the notebook's namespace: it is analysed.
PYTHON_CELL_MAGICS = frozenset({"capture", "time"})

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_CELL_MAGIC = re.compile(r"%%(\w+)")
# None of these starts a Python statement: `%magic`, `!shell`, `?help`, the `/f a`, `,f a` and
# `;f a` autocall escapes, `x = !ls`, `x = %time f()`, and `obj?` / `obj??` on their own.
_IPYTHON_LINE = re.compile(
    r"[ \t]*(?:[%!?/,;]|[\w.,()\[\]* \t]*=[ \t]*[!%]|[\w.*\[\]]+\?\??[ \t]*(?:\r\n|\r|\n)?\Z)"
)
# Parsers honour a coding declaration on the first two lines of bytes; a cell is text.
_CODING = re.compile(r"[ \t\f]*#.*?coding[:=]")
_TOP_LEVEL_AWAIT = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT  # IPython runs `await f()` in a cell
# Every identifier but an attribute's: what a cell that does not parse may bind or use.
_NAME = re.compile(r"(?<![\w.])[^\W\d]\w*")
# Names an unparsed cell is not taken to rebind: the builtins it calls (`next`, `print`).
_BUILTINS = frozenset(dir(builtins))
_POSITION = re.compile(r"(\d+):(\d+): (.*)", re.DOTALL)
# A rule's message pointing at another line: `(line 12)`, `(`h = trunk(x)`, line 12)`.
_LINE_REFERENCE = re.compile(r"\bline (\d+)(?=\))")


class NotebookError(ValueError):
    """Not a notebook gradfix can read; the message reads `LINE:COL: parse error: what`."""


class NotebookWriteError(Exception):
    """The fixes cannot be written without reformatting the rest of the notebook's JSON."""


def is_notebook(path: Path) -> bool:
    return path.suffix.lower() == SUFFIX


@dataclass(frozen=True)
class CodeLine:
    """One line of the joined source: where it comes from, and what is analysed instead."""

    cell: int  # index among all cells, 0-based
    number: int  # 1-based line in the cell
    offset: int  # where the line starts in the cell's source
    text: str  # as in the cell, with its line end when it has one
    python: str  # in the joined source: `text` (always line-ended) or a placeholder

    @property
    def ipython(self) -> bool:
        return self.python.rstrip("\r\n") != self.text.rstrip("\r\n")


@dataclass(frozen=True)
class _Style:
    """How the file's JSON is written, as far as `json.dumps` can reproduce it."""

    indent: str | None
    ensure_ascii: bool
    newline: str
    end: str  # what follows the document, usually a newline

    @classmethod
    def of(cls, text: str) -> _Style:
        indent = re.match(r"\{\r?\n([ \t]*)", text)
        body = text.rstrip()
        newline = "\r\n" if "\r\n" in body else "\n"
        return cls(indent[1] if indent else None, text.isascii(), newline, text[len(body) :])

    def dump(self, document: dict[str, Any]) -> str:
        text = json.dumps(
            document, indent=self.indent, ensure_ascii=self.ensure_ascii, separators=(",", ": ")
        )
        return text.replace("\n", self.newline) + self.end

    def escaped(self, text: str) -> str:
        """`text` as it is written inside a JSON string of the file."""
        return json.dumps(text, ensure_ascii=self.ensure_ascii)[1:-1]


@dataclass(frozen=True)
class _Layout:
    """Where the stored pieces (list items, or the one string) of some cells' sources start in
    the file, as (line, column) of their first character."""

    style: _Style
    starts: dict[int, list[tuple[int, int]]]

    def position(self, stored: str | list[str], cell: int, offset: int) -> tuple[int, int]:
        """The file position of the character at `offset` in the cell's source."""
        pieces = stored if isinstance(stored, list) else [stored]
        *before, (piece, (line, column)) = zip(pieces, self.starts[cell], strict=True)
        for earlier, start in before:
            if offset < len(earlier):
                piece, (line, column) = earlier, start
                break
            offset -= len(earlier)
        return line, column + len(self.style.escaped(piece[:offset]))


@dataclass(frozen=True)
class Notebook:
    """A notebook as read: the file, its JSON, its cells' sources and the joined code."""

    text: str  # the file
    document: dict[str, Any]  # the JSON as written: key order, sources as lists or strings
    sources: tuple[str, ...]  # every cell's source, as nbformat reads it
    lines: tuple[CodeLine, ...]  # the joined source of the code cells, line by line
    is_python: bool  # the kernel's language is Python, or is not given

    @property
    def code(self) -> str:
        """The joined source that gradfix analyses (and that runs like the notebook)."""
        return "".join(line.python for line in self.lines)

    @cached_property
    def _starts(self) -> list[int]:
        """Where each line of the joined source starts in it, then its length."""
        return list(itertools.accumulate((len(line.python) for line in self.lines), initial=0))

    @cached_property
    def _style(self) -> _Style | None:
        """The file's JSON style; None when re-serialising does not give back the file."""
        style = _Style.of(self.text)
        return style if style.dump(self.document) == self.text else None

    def syntax_errors(self) -> dict[int, str]:
        """`LINE:COL: parse error: ...` of every code cell (by index) that does not parse on
        its own, as IPython runs it (joined, a block header at the end of one cell would take
        the next cell as its body)."""
        errors = {}
        for cell, lines in itertools.groupby(self.lines, key=lambda line: line.cell):
            code = "".join(line.python for line in lines).encode()
            error = pipeline.syntax_error(code, top_level_await=True)
            if error is not None:
                errors[cell] = error
        return errors

    def without(self, cells: Collection[int]) -> Notebook:
        """The notebook with `cells` (which do not parse) replaced by placeholder lines: the
        first binds every name the cell mentions, except imported ones and builtins (an
        exercise cell calls `next`, `print`, `len`; it does not rebind them), to what an unknown
        function returns after being given them
        (`_gradfix_unparsed_cell(a, b); a = b = _gradfix_unparsed_cell()`), the
        others are comments. The analysis then knows nothing of those names after the cell,
        and sees their earlier values go to code it cannot see, as the cell, once it runs,
        may use and rebind them; line numbers stay those of the cell."""
        imported = self._imported_names(cells)
        lines = list(self.lines)
        for cell in cells:
            indices = [i for i, line in enumerate(lines) if line.cell == cell]
            text = "".join(lines[i].python for i in indices)
            names = sorted(
                name
                for name in set(_NAME.findall(text))
                if not keyword.iskeyword(name) and name not in imported and name not in _BUILTINS
            )
            first, *rest = indices
            # The names' values go to unseen code, and come back as values of unknown origin
            # (not derived from what went in: that would make every name look attached).
            binding = (
                f"_gradfix_unparsed_cell({', '.join(names)}); "
                f"{' = '.join(names)} = _gradfix_unparsed_cell()"
            )
            python = (binding if names else "#") + _end(lines[first].text)
            lines[first] = replace(lines[first], python=python)
            for i in rest:
                lines[i] = replace(lines[i], python=_comment(lines[i].text))
        return replace(self, lines=tuple(lines))

    def _imported_names(self, broken: Collection[int]) -> set[str]:
        """The names the cells other than `broken` bind by importing: modules and what the
        analysis knows through them (`torch.no_grad`) are kept out of the placeholders."""
        names = set()
        for cell, lines in itertools.groupby(self.lines, key=lambda line: line.cell):
            if cell in broken:
                continue
            code = "".join(line.python for line in lines)
            try:
                tree = compile(code, "<cell>", "exec", ast.PyCF_ONLY_AST | _TOP_LEVEL_AWAIT)
            except (SyntaxError, ValueError):  # newer syntax than this Python's, that LibCST reads
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names.update((a.asname or a.name).split(".")[0] for a in node.names)
        return names

    def cell_error(self, error: str) -> str:
        """A `LINE:COL: ...` error of the joined source (LibCST rejects some code that Python's
        parser accepted cell by cell), in its cell's coordinates."""
        match = _POSITION.fullmatch(error)
        assert match is not None, error
        line = self.lines[min(int(match[1]), len(self.lines)) - 1]
        return f"cell {line.cell + 1}:{line.number}:{match[2]}: {match[3]}"

    def in_cells(self, findings: Sequence[Finding]) -> dict[Finding, Finding]:
        """Each finding of the joined source, in its cell's coordinates."""
        if not findings:
            return {}
        layout = self._layout({self.lines[f.line - 1].cell for f in findings})
        return {finding: self._in_cell(finding, layout) for finding in findings}

    def _in_cell(self, finding: Finding, layout: _Layout | None) -> Finding:
        # Every cell parses on its own, so a finding's node lies within one cell.
        start = self.lines[finding.line - 1]
        end = self.lines[finding.end_line - 1]
        file_line, file_column = 1, 1
        edit = self._one_cell_edit(finding.edit)
        file_edit = None
        if edit is not None and finding.tier is not Tier.REPORT:
            file_edit = self._file_edit(edit)
        if layout is not None:
            stored = self.document["cells"][start.cell]["source"]
            offset = start.offset + finding.column - 1
            file_line, file_column = layout.position(stored, start.cell, offset)
        return replace(
            finding,
            line=start.number,
            end_line=end.number,
            message=_LINE_REFERENCE.sub(self._cell_reference, finding.message),
            edit=self._cell_edit(edit),
            cell=start.cell + 1,
            file_line=file_line,
            file_column=file_column,
            file_edit=file_edit,
        )

    def _cell_reference(self, match: re.Match[str]) -> str:
        number = int(match[1])
        if not 1 <= number <= len(self.lines):
            return match[0]
        line = self.lines[number - 1]
        return f"cell {line.cell + 1}, line {line.number}"

    def _one_cell_edit(self, edit: Edit | None) -> Edit | None:
        """The edit of the joined source if it stays within one cell. One that spans cells or
        IPython lines (the finding is reported at a write, the fix is a `.clone()` where the
        tensor is bound in an earlier cell) is narrowed to the text it actually changes; None
        if that still does."""
        if edit is None:
            return None
        if not self._in_one_cell(edit):
            edit = self._narrowed(edit)
            if not self._in_one_cell(edit):
                return None
        return edit

    def _cell_edit(self, edit: Edit | None) -> Edit | None:
        """An edit of the joined source within one cell, in that cell's coordinates."""
        if edit is None:
            return None
        first, last = self.lines[edit.start_line - 1], self.lines[edit.end_line - 1]
        return Edit(
            first.number,
            edit.start_column,
            last.number,
            edit.end_column,
            edit.replacement,
            cell=first.cell + 1,
        )

    def _file_edit(self, edit: Edit) -> Edit | None:
        """An edit of the joined source within one cell as an edit of the file's own text (for
        SARIF): the notebook written with only this edit applied, against the file. None when
        the file is not one gradfix rewrites."""
        if self._style is None:
            return None
        code, starts = self.code, self._starts
        first = starts[edit.start_line - 1] + edit.start_column - 1
        last = starts[edit.end_line - 1] + edit.end_column - 1
        try:
            new = self.with_code(code[:first] + edit.replacement + code[last:])
        except RuntimeError:  # `_split` saw it reach another cell: no edit, not a crash
            return None
        return _text_edit(self.text, new.decode("utf-8"))

    def _in_one_cell(self, edit: Edit) -> bool:
        span = self.lines[edit.start_line - 1 : edit.end_line]
        cells = {line.cell for line in span}
        return (
            edit.end_line <= len(self.lines)
            and len(cells) == 1
            and not any(line.ipython for line in span)
        )

    def _narrowed(self, edit: Edit) -> Edit:
        """The edit without the leading and trailing text it leaves as it is."""
        code, starts = self.code, self._starts
        first = starts[edit.start_line - 1] + edit.start_column - 1
        last = starts[edit.end_line - 1] + edit.end_column - 1
        old, new = code[first:last], edit.replacement
        head = _common_prefix(old, new)
        tail = _common_prefix(old[head:][::-1], new[head:][::-1])

        def position(offset: int) -> tuple[int, int]:
            line = bisect.bisect_right(starts, offset) - 1
            return line + 1, offset - starts[line] + 1

        return Edit(*position(first + head), *position(last - tail), new[head : len(new) - tail])

    def _layout(self, cells: Iterable[int]) -> _Layout | None:
        """Where the sources of `cells` lie in the file, found by writing the document with
        each stored piece replaced by a marker (one line each, as the piece was); None when
        the file is not laid out as `json.dumps` writes it."""
        style = self._style
        if style is None:
            return None
        token = secrets.token_hex(8)
        probe = list(self.document["cells"])
        for cell in cells:
            stored = probe[cell]["source"]
            if isinstance(stored, list):
                marks: str | list[str] = [f"{token}:{cell}:{k}" for k in range(len(stored))]
            else:
                marks = f"{token}:{cell}:0"
            probe[cell] = {**probe[cell], "source": marks}
        text = style.dump({**self.document, "cells": probe})
        starts: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for match in re.finditer(rf"{token}:(\d+):\d+", text):
            line_start = text.rfind("\n", 0, match.start()) + 1
            line = text.count("\n", 0, match.start()) + 1
            starts[int(match[1])].append((line, match.start() - line_start + 1))
        return _Layout(style, starts)

    def with_code(self, code: str) -> bytes:
        """The notebook with the fixed joined source `code` split back into its cells: only
        the sources of the cells it changes differ, IPython lines restored as they were."""
        style = self._style
        if style is None:
            raise NotebookWriteError(
                "cannot write the fixes without reformatting the whole notebook: its JSON is "
                "not laid out the way Jupyter, VS Code and nbformat write notebooks; the file "
                "was left unchanged; save it once from Jupyter, then run gradfix again"
            )
        cells = list(self.document["cells"])
        for cell, source in self._split(code).items():
            cells[cell] = {**cells[cell], "source": _stored(cells[cell]["source"], source)}
        return style.dump({**self.document, "cells": cells}).encode("utf-8")

    def _split(self, code: str) -> dict[int, str]:
        """The new source of each cell `code` changes. Lines are matched to the joined source
        they replace; lines a fix inserts between two cells go to the earlier one."""
        old = [line.python for line in self.lines]
        new = _LINE.findall(code)
        pieces: dict[int, list[str]] = defaultdict(list)
        touched: set[int] = set()
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                for line in self.lines[i1:i2]:
                    pieces[line.cell].append(_ended(line.text))
                continue
            replaced = self.lines[i1:i2]
            owners = {line.cell for line in replaced} or {self.lines[max(i1 - 1, 0)].cell}
            if len(owners) > 1 or any(line.ipython for line in replaced):
                raise RuntimeError("a fix changed more than one cell, or an IPython line")
            (cell,) = owners
            pieces[cell].extend(new[j1:j2])
            touched.add(cell)
        changed = {}
        for cell in sorted(touched):
            source = "".join(pieces[cell])
            if not self.sources[cell].endswith(("\n", "\r")) and source.endswith("\n"):
                source = source[:-1]  # the joined source ended the cell's last line
            if source != self.sources[cell]:
                changed[cell] = source
        return changed


def read(source: bytes) -> Notebook:
    """The notebook in `source`; raises NotebookError when it is not one gradfix reads."""
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotebookError(f"1:1: parse error: not a notebook: {error}") from error
    try:
        document = json.loads(text)
    except ValueError:
        document = None  # nbformat says why
    plain = _plain_v4(document)
    if plain is None:
        return _read_with_nbformat(text)
    cells, metadata = plain
    sources = tuple(_joined(cell.get("source", "")) for cell in cells)
    code = [i for i, cell in enumerate(cells) if cell.get("cell_type") == "code"]
    return Notebook(
        text,
        document,
        sources,
        tuple(_code_lines(code, sources)),
        _language(metadata).lower().startswith(("python", "ipython")),
    )


def _plain_v4(document: Any) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """The cells and metadata of an nbformat 4 document that nbformat's reader would read
    without a complaint (every cell a table with its metadata, sources, outputs and
    attachments of the types nbformat joins), read straight from its JSON: nbformat would
    copy every table into its own node type first. None for anything else, which nbformat
    then reads (and rejects) itself."""
    if type(document) is not dict or type(document.get("nbformat")) is not int:
        return None
    cells, metadata = document.get("cells"), document.get("metadata")
    if document["nbformat"] != 4 or type(cells) is not list or type(metadata) is not dict:
        return None
    for cell in cells:
        if type(cell) is not dict or type(cell.get("metadata")) is not dict:
            return None
        if not _text(cell.get("source", "")):
            return None
        attachments = cell.get("attachments", {})
        if type(attachments) is not dict or any(type(a) is not dict for a in attachments.values()):
            return None
        outputs = cell.get("outputs", []) if cell.get("cell_type") == "code" else []
        if type(outputs) is not list:
            return None
        for output in outputs:
            if type(output) is not dict or type(output.get("data", {})) is not dict:
                return None
            if not _text(output.get("text", "")):
                return None
    return cells, metadata


def _text(value: Any) -> bool:
    """A string, or a list of them (nbformat's way of storing one by lines)."""
    return type(value) is str or (type(value) is list and all(type(v) is str for v in value))


def _joined(source: str | list[str]) -> str:
    return source if type(source) is str else "".join(source)


def _read_with_nbformat(text: str) -> Notebook:
    # Imported here: most notebooks are read straight from their JSON, and nbformat (with
    # the JSON Schema validator it loads) costs more to import than checking many files.
    import nbformat.reader

    try:
        model = nbformat.reader.reads(text)
    except nbformat.reader.NotJSONError as error:
        cause = error.__cause__
        if isinstance(cause, json.JSONDecodeError):
            where = f"{cause.lineno}:{cause.colno}"
            raise NotebookError(f"{where}: parse error: not a notebook: {cause.msg}") from error
        raise NotebookError(f"1:1: parse error: not a notebook: {error}") from error
    except (nbformat.ValidationError, nbformat.NBFormatError) as error:
        raise NotebookError(f"1:1: parse error: not a notebook: {error}") from error
    except (AttributeError, KeyError, TypeError) as error:
        # nbformat's reader takes the JSON's shape on trust: `[]`, or a source list holding a
        # number, fails inside it. The file is not a notebook, and gradfix has no bug to report.
        raise NotebookError(
            f"1:1: parse error: not a notebook: {type(error).__name__}: {error}"
        ) from error
    version = model.get("nbformat")
    if not isinstance(version, int):
        raise NotebookError("1:1: parse error: not a notebook: it has no `nbformat` version")
    if version != 4:
        raise NotebookError(
            f"1:1: parse error: nbformat {version} notebook; gradfix reads nbformat 4 "
            "(upgrade it with `jupyter nbconvert --to notebook --nbformat 4 --inplace`)"
        )
    cells = model.get("cells", [])
    sources = tuple(cell.get("source", "") for cell in cells)
    if not all(isinstance(source, str) for source in sources):
        raise NotebookError("1:1: parse error: not a notebook: a cell's source is not text")
    code = [i for i, cell in enumerate(cells) if cell.get("cell_type") == "code"]
    return Notebook(
        text,
        json.loads(text),
        sources,
        tuple(_code_lines(code, sources)),
        _language(model.get("metadata")).lower().startswith(("python", "ipython")),
    )


def _language(metadata: Any) -> str:
    """The notebook's language: what its kernel reported (`language_info.name`), else what
    its kernelspec declares, else what its kernelspec's name says (`python3`, a conda
    environment's `conda-env-torch-py`: Python; `julia-1.10`, `ir`: not), else Python. Tools
    write either table as null or leave keys out (`"kernelspec": null`; a Julia notebook never
    run has a kernelspec only, sometimes with no `language`)."""
    tables = metadata if isinstance(metadata, dict) else {}
    for table, key in (("language_info", "name"), ("kernelspec", "language")):
        section = tables.get(table)
        value = section.get(key) if isinstance(section, dict) else None
        if isinstance(value, str) and value.strip():
            return value
    kernelspec = tables.get("kernelspec")
    name = kernelspec.get("name") if isinstance(kernelspec, dict) else None
    if isinstance(name, str) and name.strip() and not _PYTHON_KERNEL.search(name.strip()):
        return name
    return "python"


# Kernel names of Python kernels: ipykernel's `python3`, and the names environment managers
# give them (`pytorch`, `py39`, nb_conda_kernels' `conda-env-NAME-py`).
_PYTHON_KERNEL = re.compile(r"^(i?python|py)|[-_.]py\d*$", re.IGNORECASE)


def _stored(stored: str | list[str], source: str) -> str | list[str]:
    """`source` stored the way `stored` was: a string; a list of its lines (nbformat's way);
    or a list split otherwise (sphinx-gallery writes a whole cell as one item), where only the
    items the edit reaches change (an insertion between two goes to the earlier one)."""
    if isinstance(stored, str):
        return source
    old = "".join(stored)
    if stored == old.splitlines(True):
        return source.splitlines(True)
    same_start = _common_prefix(old, source)
    same_end = _common_prefix(old[same_start:][::-1], source[same_start:][::-1])
    changed_end = len(old) - same_end
    ends = list(itertools.accumulate(map(len, stored)))
    if same_start < changed_end:
        first = bisect.bisect_right(ends, same_start)
    else:
        first = bisect.bisect_left(ends, same_start)
    last = max(first, bisect.bisect_left(ends, changed_end))
    start, end = ends[first] - len(stored[first]), len(source) - (len(old) - ends[last])
    edited = [source[start:end]] if start < end else []
    return [*stored[:first], *edited, *stored[last + 1 :]]


def _code_lines(code_cells: Iterable[int], sources: Sequence[str]) -> Iterator[CodeLine]:
    for cell in code_cells:
        texts = _LINE.findall(sources[cell])
        offset = 0
        for number, (text, python) in enumerate(zip(texts, _python_lines(texts), strict=True), 1):
            if number <= 2 and _CODING.match(python):  # read as bytes, it would decode the rest
                python = _comment(text)
            yield CodeLine(cell, number, offset, text, python)
            offset += len(text)


def _python_lines(texts: Sequence[str]) -> list[str]:
    """The cell's lines as gradfix analyses them: IPython lines become placeholders."""
    first = next((index for index, text in enumerate(texts) if text.strip()), None)
    if first is None:
        return [_ended(text) for text in texts]
    magic = _CELL_MAGIC.match(texts[first])
    if texts[first][0] in " \t" or (magic and magic[1] not in PYTHON_CELL_MAGICS):
        return [_comment(text) for text in texts]
    lines = [_ended(text) for text in texts]
    continued = False  # the line before is an IPython line that ends in a backslash
    for index, text in enumerate(texts):
        if magic and index == first:
            lines[index] = _comment(text)
            continue
        if continued:  # IPython runs it as part of that line (`!cmd --a x \` then `--b y`)
            lines[index] = _comment(text)
        elif _IPYTHON_LINE.match(text) and _starts_statement("".join(lines[:index])):
            indent = text[: len(text) - len(text.lstrip(" \t"))]
            lines[index] = indent + "pass" + _end(text)
        else:
            continue
        continued = text.rstrip("\r\n").endswith("\\")
    return lines


def _starts_statement(before: str) -> bool:
    """Whether the line after `before` starts a statement: not inside a bracket, a string or
    a backslash continuation (`% x` continuing a formatted string is Python's modulo)."""
    try:
        for _ in tokenize.generate_tokens(io.StringIO(before).readline):
            pass
    except (tokenize.TokenError, SyntaxError):
        return False
    return True


def _common_prefix(a: str, b: str) -> int:
    """How many leading characters `a` and `b` share: a binary search over slices, whose
    comparisons run in C (a loop over characters took seconds on large notebooks)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _text_edit(old: str, new: str) -> Edit:
    """The smallest edit that turns `old` into `new` (what lies between their common prefix
    and suffix), never starting or ending between the CR and the LF of a line end. Lines count
    LFs, columns count code points, as `file_line` and `file_column` do."""
    head = _common_prefix(old, new)
    if head and old[head - 1 : head + 1] == "\r\n":
        head -= 1
    tail = _common_prefix(old[head:][::-1], new[head:][::-1])
    end = len(old) - tail
    if tail and old[end - 1 : end + 1] == "\r\n":
        tail -= 1
        end += 1

    def position(offset: int) -> tuple[int, int]:
        return old.count("\n", 0, offset) + 1, offset - (old.rfind("\n", 0, offset) + 1) + 1

    return Edit(*position(head), *position(end), new[head : len(new) - tail])


def _end(text: str) -> str:
    return text[len(text.rstrip("\r\n")) :] or "\n"


def _ended(text: str) -> str:
    return text.rstrip("\r\n") + _end(text)


def _comment(text: str) -> str:
    return "#" + _end(text)


def process_notebook(source: bytes, options: pipeline.RunOptions) -> pipeline.SourceResult:
    """`pipeline.process_source` for a notebook's bytes: findings and parse errors in cell
    coordinates, and the rewritten notebook as `new_source`."""
    try:
        notebook = read(source)
    except NotebookError as error:
        return pipeline.SourceResult(error=str(error))
    if not notebook.is_python:
        return pipeline.SourceResult()
    broken = notebook.syntax_errors()
    if broken:
        notebook = notebook.without(broken)
    result = pipeline.process_source(notebook.code.encode("utf-8"), options, notebook=True)
    if result.error is not None:
        return replace(result, error=notebook.cell_error(result.error))
    cells = notebook.in_cells(result.findings)
    new_source = None
    if result.new_source is not None:
        new_source = notebook.with_code(result.new_source.decode("utf-8"))
    return pipeline.SourceResult(
        findings=[cells[finding] for finding in result.findings],
        fixed=[cells[finding] for finding in result.fixed],
        new_source=new_source,
        error=_cells_error(broken) if broken else None,
        parsed=result.parsed,
        libcst_parsed=result.libcst_parsed,
    )


def _cells_error(errors: Mapping[int, str]) -> str:
    """`cell N:LINE:COL: parse error: ...` for the first cell that does not parse, naming the
    others that do not either."""
    (first, error), *others = sorted(errors.items())
    text = f"cell {first + 1}:{error}"
    if others:
        numbers = ", ".join(str(cell + 1) for cell, _ in others)
        text += f"; {'cells' if len(others) > 1 else 'cell'} {numbers} "
        text += f"{'do' if len(others) > 1 else 'does'} not parse either"
    return text
