"""`codemods/cst_speedups.py`: LibCST without the node validation and the Python-level hash
gradfix does not need. The tree must be the very tree LibCST builds, and what the speedups
assume of LibCST must still hold for the installed version."""

from __future__ import annotations

import inspect
from pathlib import Path

import libcst as cst
import pytest

from codemods import cst_speedups

REPO_ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(
    path
    for folder in ("tests/fixtures", "examples", "codemods")
    for path in (REPO_ROOT / folder).rglob("*.py")
)


def test_parsing_without_validation_builds_the_same_tree() -> None:
    assert len(SOURCES) > 100
    for path in SOURCES:
        source = path.read_bytes()
        fast = cst_speedups.parse_module(source)
        assert fast.deep_equals(cst.parse_module(source)), path
        assert fast.bytes == source, path


def test_nodes_built_after_a_parse_are_validated() -> None:
    cst_speedups.parse_module(b"x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not an identifier")


def test_a_parse_error_leaves_validation_on() -> None:
    with pytest.raises(cst.ParserSyntaxError):
        cst_speedups.parse_module(b"def (:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("1x")


def test_libcst_validates_only_in_the_post_init_of_its_base_class() -> None:
    # What `parse_module` swaps out is all the validation there is, for every node class.
    assert "self._validate()" in inspect.getsource(cst_speedups._VALIDATING_POST_INIT)
    assert [k for k in cst_speedups.NODE_CLASSES if "__post_init__" in k.__dict__] == [cst.CSTNode]


def test_nodes_hash_by_identity_in_c() -> None:
    assert all(kind.__hash__ is object.__hash__ for kind in cst_speedups.NODE_CLASSES)
    first, second = cst.Name("x"), cst.Name("x")
    assert first.deep_equals(second)
    assert len({first: 1, second: 2}) == 2  # equal only when identical, as before
