"""`FileAnalysis.positions` (`ast`'s positions in characters) must locate, for every node a fix
may replace, its LibCST twin (`codemods.rewrite.CstFile`), whatever the file's layout: the
analysis reads `ast`, and the fix is written on LibCST's tree by those positions."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from codemods.analysis import FileAnalysis
from codemods.pipeline import source_text
from codemods.rewrite import CstFile

REPO_ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(
    path
    for folder in ("tests/fixtures", "examples", "codemods")
    for path in (REPO_ROOT / folder).rglob("*.py")
)
LAYOUTS = {
    "crlf, header, semicolons, continuation": (
        "# header\r\n\r\nimport torch\r\nx = 1; y = 2\r\ndef f(a,\r\n      b):\r\n"
        "    return a \\\r\n        + b\r\n"
    ),
    "form feeds, decorators, footer": (
        "\f\nimport torch\n\n\f\nclass A:\n    @dec\n    def g(self):\n        pass\n# footer\n"
    ),
    "no final newline": "x = 1\ny = (\n  2)",
    "tabs and a trailing comment": "if x:\n\tpass\nelse:\n\tq = [i\n for i in y]\n# end",
    "lone carriage return": "x = 1\r\ny = 2\rz = 3\n",
    "wide characters": "s = 'résumé ✨'; t = f(s) + g('日本')\nu = (a + b) * c\n",
    "latin-1 declared": "# -*- coding: latin-1 -*-\nx = 'caf\xe9'; y = x.upper()\n",
    "bom": "\ufeffx = (1, 2)\ny = sum(v for v in x)\n",
}
# What fixes replace: expressions and simple statements.
REPLACEABLE = (
    ast.Name,
    ast.Attribute,
    ast.Call,
    ast.Subscript,
    ast.BinOp,
    ast.Constant,
    ast.Assign,
    ast.AugAssign,
    ast.Expr,
)


def _check(source: bytes) -> None:
    text = source_text(source)
    analysis = FileAnalysis(ast.parse(source), text)
    cst_file = CstFile.parse(source)
    try:
        for node in analysis.index.order:
            if not isinstance(node, REPLACEABLE) or isinstance(node, ast.JoinedStr):
                continue
            if isinstance(node, ast.Constant) and analysis.parent(node).__class__ in (
                ast.JoinedStr,
                ast.FormattedValue,
            ):
                continue
            where = analysis.positions[node]
            twin = cst_file.twin(node, where)
            if where.start.line != where.end.line:
                continue  # LibCST indents a lone node's continuation lines anew
            if isinstance(twin, cst.BaseSmallStatement):
                bare = twin.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            else:
                bare = twin.with_changes(lpar=[], rpar=[])
            code = cst_file.module.code_for_node(bare)
            assert code.strip() == ast.get_source_segment(text, node), (node, where)
    finally:
        analysis.release()


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(REPO_ROOT)))
def test_every_replaceable_node_has_its_libcst_twin_in_the_projects_files(path: Path) -> None:
    _check(path.read_bytes())


@pytest.mark.parametrize("source", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_every_replaceable_node_has_its_libcst_twin_whatever_the_layout(source: str) -> None:
    encoding = "latin-1" if "latin-1" in source else "utf-8"
    _check(source.encode(encoding))
