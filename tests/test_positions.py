"""`codemods/analysis/positions.py`: positions located one top-level statement at a time must
be LibCST's own, for every node, whatever the file's layout."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from codemods import cst_speedups
from codemods.analysis.index import build_index
from codemods.analysis.positions import SourcePositions

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
    "comments only": "# only a comment\n",
    "blank lines only": "\n\n\n",
    "tabs and a trailing comment": "if x:\n\tpass\nelse:\n\tq = [i\n for i in y]\n# end",
    "lone carriage return": "x = 1\r\ny = 2\rz = 3\n",
}


def _check(source: bytes) -> None:
    module = cst_speedups.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    index = build_index(module)
    nodes = index.order
    positions = SourcePositions(module, index.parents)
    # Asked in any order: each statement is located on its own first.
    for node in random.Random(0).sample(nodes, len(nodes)):
        assert positions[node] == expected[node], node
    assert dict(positions) == dict(expected)


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(REPO_ROOT)))
def test_positions_are_libcsts_in_the_projects_files(path: Path) -> None:
    _check(path.read_bytes())


@pytest.mark.parametrize("source", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_positions_are_libcsts_whatever_the_layout(source: str) -> None:
    _check(source.encode())
