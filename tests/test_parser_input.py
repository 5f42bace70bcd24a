"""`pipeline.parser_input`: CPython's parser is given the decoded text instead of the bytes only
where the two give the same tree, and the same verdict, as the bytes would."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

from codemods.pipeline import RunOptions, parser_input, process_source, source_text
from codemods.rules import RULES

FIXTURES = Path(__file__).parent / "fixtures"
ANALYSED = "import torch\nx = torch.randn(3, requires_grad=True)\ny = x.exp()\ny.add_(1)\n"


def _gate_text(source: bytes) -> str:
    return source.decode("utf-8", errors="replace")


def _tree(code: str | bytes) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.dump(ast.parse(code), include_attributes=True)


@pytest.mark.parametrize(
    "source",
    [
        b"x = 1\n",
        "s = 'caf\u00e9'\n# \u00e9\u00e8\n".encode(),
        b"\xef\xbb\xbfx = 1\n",  # a BOM
        b"# -*- coding: utf-8 -*-\nx = '\xc3\xa9'\n",
        b"x = 1\r\ny = 2\r\n",
        b"x = 1\ry = 2\r",
    ],
)
def test_utf8_sources_are_read_as_text_with_the_same_tree(source: bytes) -> None:
    for text in (_gate_text(source), source_text(source)):
        given = parser_input(source, text)
        assert isinstance(given, str)
        assert _tree(given) == _tree(source)


@pytest.mark.parametrize(
    "source",
    [
        b"# -*- coding: latin-1 -*-\nx = '\xe9'\n",  # another encoding declared
        b"x = '\xe9'\n",  # not UTF-8: the parser refuses it
        b"\xef\xbb\xbf# coding: latin-1\nx = 1\n",  # a BOM and another declaration: refused
        b"# coding: no-such-codec\nx = 1\n",  # a declaration the parser rejects
        "x = '\ufffd'\n".encode(),  # the replacement character itself: bytes, to be sure
    ],
)
def test_other_sources_are_read_as_bytes(source: bytes) -> None:
    for text in (_gate_text(source), source_text(source)):
        assert parser_input(source, text) is source


def test_a_file_the_parser_refuses_for_its_bytes_is_still_reported() -> None:
    options = RunOptions(select=frozenset(RULES))
    for source in (
        ANALYSED.encode() + b"z = '\xe9'\n",  # analysed, not UTF-8
        b"x = '\xe9'\n",  # stopped by the text gate, not UTF-8
        b"\xef\xbb\xbf# coding: latin-1\n" + ANALYSED.encode(),
    ):
        assert process_source(source, options).error is not None


def test_every_fixture_gives_the_same_tree_from_its_text() -> None:
    for path in sorted(FIXTURES.rglob("*.py")):
        source = path.read_bytes()
        given = parser_input(source, source_text(source))
        assert _tree(given) == _tree(source), path
