"""Where nodes are in the source, in characters: what LibCST's `PositionProvider` gave.

`ast` records each expression's and statement's `lineno`/`end_lineno` (1-based) and
`col_offset`/`end_col_offset` in UTF-8 bytes of the line; a `Span` holds the same range with
0-based CHARACTER columns, as LibCST's `CodeRange` did (`.start.line`, `.start.column`,
`.end.line`, `.end.column`). Lines are counted as CPython counts them (`\\r\\n`, `\\r` and `\\n`
end a line; a form feed does not). Spans are computed when first asked. A node `ast` gives no
position (`arguments`, `comprehension`, `withitem`, `match_case`) spans its positioned
descendants; the module spans the whole text.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate, count, repeat
from operator import add
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codemods.analysis.index import Index

_NEWLINE = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Point:
    line: int  # 1-based
    column: int  # 0-based, in characters


@dataclass(frozen=True)
class Span:
    start: Point
    end: Point


class SourceLines:
    """The text's lines, and the conversions between `ast`'s byte columns and characters."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._encoded: dict[int, bytes] = {}

    # Found when first asked: most analysed files have no finding, and no position is asked.
    @cached_property
    def _breaks(self) -> tuple[list[int], list[int]]:
        """Where each line starts and ends (offsets in `source`); the BOM, if the text kept
        one, is not part of the first line for `ast`."""
        source = self.source
        if "\r" in source:
            breaks = [match.span() for match in _NEWLINE.finditer(source)]
            starts = [0, *(end for _, end in breaks)]
            ends = [*(start for start, _ in breaks), len(source)]
        else:
            # `\n` only (the common case), in C: line i ends after the lengths of lines 0..i
            # and i line breaks; the next starts one past it. The last ends at the text's end.
            lengths = accumulate(map(len, source.split("\n")))
            ends = list(map(add, lengths, count()))
            starts = [0, *map(add, ends[:-1], repeat(1))]
        if source.startswith("\ufeff"):
            starts[0] = 1
        return starts, ends

    @property
    def starts(self) -> list[int]:
        return self._breaks[0]

    @property
    def ends(self) -> list[int]:
        return self._breaks[1]

    def __len__(self) -> int:
        return len(self.starts)

    def text(self, line: int) -> str:
        """Line `line` (1-based), without its line break."""
        return self.source[self.starts[line - 1] : self.ends[line - 1]]

    def column(self, line: int, byte_column: int) -> int:
        """The character column of `byte_column` on `line`."""
        if line < 1 or line > len(self.starts):
            return byte_column
        start = self.starts[line - 1]
        end = self.ends[line - 1]
        if byte_column <= 0:
            return 0
        text = self.source[start:end]
        if text.isascii():
            return byte_column
        encoded = self._encoded.get(line)
        if encoded is None:
            encoded = self._encoded[line] = text.encode("utf-8", "surrogatepass")
        return len(encoded[:byte_column].decode("utf-8", "replace"))

    def offset(self, line: int, column: int) -> int:
        """The index in the text of a (1-based line, 0-based character column) position."""
        return self.starts[line - 1] + column


class SourcePositions(Mapping[ast.AST, Span]):
    def __init__(self, module: ast.Module, lines: SourceLines, index: Index) -> None:
        self._module = module
        self._lines = lines
        self._index = index
        self._known: dict[ast.AST, Span] = {}

    def __getitem__(self, node: ast.AST) -> Span:
        known = self._known.get(node)
        if known is None:
            known = self._known[node] = self._locate(node)
        return known

    def __iter__(self) -> Iterator[ast.AST]:
        return iter(self._index.order)

    def __len__(self) -> int:
        return len(self._index.order)

    def _locate(self, node: ast.AST) -> Span:
        lines = self._lines
        line = getattr(node, "lineno", None)
        if line is not None and getattr(node, "end_lineno", None) is not None:
            end_line = node.end_lineno  # type: ignore[attr-defined]
            return Span(
                Point(line, lines.column(line, node.col_offset)),  # type: ignore[attr-defined]
                Point(end_line, lines.column(end_line, node.end_col_offset)),  # type: ignore[attr-defined]
            )
        if node is self._module:
            last = len(lines)
            return Span(Point(1, 0), Point(last, len(lines.text(last))))
        index = self._index
        if node not in index.start:
            raise KeyError(node)
        first: Point | None = None
        last_end: Point | None = None
        for inner in index.order[index.start[node] + 1 : index.end[node]]:
            if getattr(inner, "lineno", None) is None:
                continue
            span = self[inner]
            if first is None or (span.start.line, span.start.column) < (first.line, first.column):
                first = span.start
            if last_end is None or (span.end.line, span.end.column) > (
                last_end.line,
                last_end.column,
            ):
                last_end = span.end
        if first is None or last_end is None:
            return self._empty(node)
        return Span(first, last_end)

    def _empty(self, node: ast.AST) -> Span:
        """A node with nothing positioned inside (`def f():`'s `arguments`): an empty span,
        inside a definition's parentheses, else where its parent starts."""
        parent = self._index.parents.get(node)
        if parent is None:
            raise KeyError(node)
        where = self[parent].start
        if type(parent) in (ast.FunctionDef, ast.AsyncFunctionDef):
            lines = self._lines
            source = lines.source
            at = lines.offset(where.line, where.column)
            at = source.index(parent.name, at) + len(parent.name)  # type: ignore[attr-defined]
            at = source.find("(", at) + 1
            line = bisect_right(lines.starts, at)
            where = Point(line, at - lines.starts[line - 1])
        elif type(parent) is ast.Lambda:
            where = Point(where.line, where.column + len("lambda"))
        return Span(where, where)
