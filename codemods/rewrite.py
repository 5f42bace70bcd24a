"""Writing fixes: LibCST parses only the statements a fix rewrites.

The analysis and the rules read Python's `ast` tree; a fix names the `ast` nodes it replaces
and, for each, a `Rewrite` that builds the LibCST node taking its place. `SourceEditor` takes
the statement that holds each replaced node (a simple statement: an assignment, a call, a
`return`), parses that statement's text alone with LibCST, locates the replaced node's LibCST
twin there by its source range (LibCST's `PositionProvider` and `ast` both leave an
expression's own parentheses out of its range) and its class, applies the rewrites with one
transformer that swaps nodes by identity, and splices the statement's new text into the file's
text: every character outside the edits is kept (comments, formatting, line endings), and the
cost of a fix does not grow with the file. A node in a compound statement's header (an `if`
test, a `for` iterable) is located in the whole file parsed once (`CstFile`), which is also
how the Fixit adapters locate findings on the tree Fixit parsed.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from codemods import cst_speedups
from codemods.analysis import FileAnalysis
from codemods.analysis.positions import Point, Span
from codemods.findings import Edit
from codemods.rules.base import Rewrite

# The LibCST classes that may stand where an `ast` node of a class stands; an `ast` class
# missing here maps to the LibCST class of the same name.
_TWINS: dict[type[ast.AST], tuple[type[cst.CSTNode], ...]] = {
    ast.BinOp: (cst.BinaryOperation,),
    ast.UnaryOp: (cst.UnaryOperation,),
    ast.BoolOp: (cst.BooleanOperation,),
    ast.Compare: (cst.Comparison,),
    ast.Constant: (
        cst.Integer,
        cst.Float,
        cst.Imaginary,
        cst.SimpleString,
        cst.ConcatenatedString,
        cst.Name,  # True, False, None
        cst.Ellipsis,
    ),
    ast.JoinedStr: (cst.FormattedString, cst.ConcatenatedString),
    ast.Starred: (cst.StarredElement, cst.Arg),
    ast.NamedExpr: (cst.NamedExpr,),
    ast.AsyncFor: (cst.For,),
    ast.AsyncWith: (cst.With,),
    ast.AsyncFunctionDef: (cst.FunctionDef,),
    ast.Delete: (cst.Del,),
}


def _twins(kind: type[ast.AST]) -> tuple[type[cst.CSTNode], ...]:
    twins = _TWINS.get(kind)
    if twins is None:
        same = getattr(cst, kind.__name__, None)
        twins = (same,) if isinstance(same, type) else ()
        _TWINS[kind] = twins
    return twins


class CstFile:
    """A LibCST module, and where each of its nodes is: the whole file, or one statement's
    text (`shift` then tells where that text starts in the file)."""

    def __init__(
        self,
        module: cst.Module,
        positions: Mapping[cst.CSTNode, CodeRange],
        shift: tuple[int, int] = (1, 0),
    ) -> None:
        self.module = module
        self._first_line, self._first_column = shift
        self._at: dict[tuple[int, int, int, int], list[cst.CSTNode]] = {}
        self._starting: dict[tuple[int, int], list[cst.CSTNode]] = {}
        for node, where in positions.items():
            start, end = where.start, where.end
            self._at.setdefault((start.line, start.column, end.line, end.column), []).append(node)
            self._starting.setdefault((start.line, start.column), []).append(node)

    @classmethod
    def parse(cls, source: bytes | str, shift: tuple[int, int] = (1, 0)) -> CstFile:
        module = cst_speedups.parse_module(source)  # type: ignore[arg-type]
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        return cls(module, positions, shift)

    def twin(self, node: ast.AST, where: Span) -> cst.CSTNode:
        """The LibCST node that spells `node` (found at `where`, its range in the source)."""
        twins = _twins(type(node))
        where = self._inside(where)
        key = (where.start.line, where.start.column, where.end.line, where.end.column)
        for candidate in self._at.get(key, ()):
            if type(candidate) in twins:
                return candidate
        # `ast` counts a tuple's or a lone generator argument's own parentheses in its range,
        # and a compound statement's range ends elsewhere than LibCST's: the same start, or
        # one column inside the parentheses, and the same class, then.
        for line, column in (
            (where.start.line, where.start.column),
            (where.start.line, where.start.column + 1),
        ):
            for candidate in self._starting.get((line, column), ()):
                if type(candidate) in twins:
                    return candidate
        raise LookupError(f"no LibCST node for {type(node).__name__} at {key}")

    def _inside(self, where: Span) -> Span:
        """`where`, counted in this module's text rather than the file's."""
        if (self._first_line, self._first_column) == (1, 0):
            return where
        return Span(self._point(where.start), self._point(where.end))

    def _point(self, point: Point) -> Point:
        line = point.line - self._first_line + 1
        return Point(line, point.column - self._first_column if line == 1 else point.column)

    def rewritten(self, replacements: Mapping[cst.CSTNode, cst.CSTNode]) -> cst.Module:
        return self.module.visit(ReplaceNodes(replacements))


def cst_replacements(
    cst_file: CstFile,
    replacements: Mapping[ast.AST, Rewrite],
    positions: Mapping[ast.AST, Span],
) -> dict[cst.CSTNode, cst.CSTNode]:
    """Each replaced `ast` node's LibCST twin, and the node its rewrite builds."""
    built: dict[cst.CSTNode, cst.CSTNode] = {}
    for node, rewrite in replacements.items():
        twin = cst_file.twin(node, positions[node])
        built[twin] = rewrite(twin)
    return built


class SourceEditor:
    """One file's text, and the text each set of rewrites makes of it."""

    def __init__(self, analysis: FileAnalysis) -> None:
        self.analysis = analysis
        self.text = analysis.source
        self._statements: dict[ast.stmt, CstFile] = {}
        self._whole: CstFile | None = None

    def rewritten(self, replacements: Mapping[ast.AST, Rewrite]) -> str:
        """The file's text with every rewrite applied."""
        by_unit: dict[ast.AST, dict[ast.AST, Rewrite]] = {}
        for node, rewrite in replacements.items():
            by_unit.setdefault(self._unit_of(node), {})[node] = rewrite
        if self.analysis.module in by_unit:  # a node in a compound statement's header
            whole = self._whole_file()
            built = cst_replacements(whole, replacements, self.analysis.positions)
            return whole.rewritten(built).code
        text = self.text
        positions = self.analysis.positions
        offset = self.analysis.offset
        # Last statement first, so that each splice leaves the earlier offsets as they are.
        for unit in sorted(by_unit, key=lambda u: offset(positions[u].start), reverse=True):
            statement = self._statement(unit)  # type: ignore[arg-type]
            built = cst_replacements(statement, by_unit[unit], positions)
            where = positions[unit]
            first, last = offset(where.start), offset(where.end)
            text = text[:first] + statement.rewritten(built).code + text[last:]
        return text

    def edit(self, replacements: Mapping[ast.AST, Rewrite], spans: list[Span]) -> Edit:
        """The rewrites as one text edit over the smallest range that covers `spans` (the
        finding and every replaced node): the new text between the same bounds."""
        start = min((span.start.line, span.start.column) for span in spans)
        end = max((span.end.line, span.end.column) for span in spans)
        new = self.rewritten(replacements)
        first = self.analysis.offset(Point(*start))
        last = self.analysis.offset(Point(*end)) + len(new) - len(self.text)
        return Edit(start[0], start[1] + 1, end[0], end[1] + 1, new[first:last])

    @property
    def libcst_parsed(self) -> bool:
        return bool(self._statements) or self._whole is not None

    def _unit_of(self, node: ast.AST) -> ast.AST:
        """The simple statement holding `node` (the statement itself for one), or the module
        when that is a compound statement's header."""
        current: ast.AST | None = node
        while current is not None and not isinstance(current, ast.stmt):
            current = self.analysis.parent(current)
        if current is None or hasattr(current, "body"):
            return self.analysis.module
        return current

    def _statement(self, statement: ast.stmt) -> CstFile:
        known = self._statements.get(statement)
        if known is None:
            where = self.analysis.positions[statement]
            text = self.text[self.analysis.offset(where.start) : self.analysis.offset(where.end)]
            known = CstFile.parse(text, (where.start.line, where.start.column))
            self._statements[statement] = known
        return known

    def _whole_file(self) -> CstFile:
        if self._whole is None:
            self._whole = CstFile.parse(self.text)
        return self._whole


class ReplaceNodes(cst.CSTTransformer):
    """Swap nodes, found by identity, for their replacements."""

    def __init__(self, replacements: Mapping[cst.CSTNode, cst.CSTNode]) -> None:
        self.replacements = replacements

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        return self.replacements.get(original_node, updated_node)
