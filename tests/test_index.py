"""The index's answers found when asked (subtree ends, fields) against the tree itself, and
`of_types` refusing a class it does not record."""

from __future__ import annotations

import ast

import pytest

from codemods.analysis.index import RECORDED_TYPES, build_index

SOURCE = """
import torch

@torch.no_grad()
def evaluate(net, batches, *extra, scale=2.0, **options):
    total = {"n": 0, **options}
    for x, y in batches:
        if x is None:
            continue
        elif y is None:
            break
        else:
            total["n"] += net(x, k=1, *extra).sum() * scale
    match total:
        case {"n": 0, **rest}:
            return rest
    return [v for v in total.values() if v] or (lambda a=1: a)()


class Trainer:
    def step(self, loss):
        self.opt.zero_grad()
        loss.backward()
        return loss.item() if loss is not None else 0.0
"""


def _expected_ends(index) -> dict[ast.AST, int]:  # type: ignore[no-untyped-def]
    """Each node's end from its descendants' positions, one node at a time."""
    ends = {node: index.start[node] + 1 for node in index.order}
    for node in reversed(index.order[1:]):
        parent = index.parents[node]
        ends[parent] = max(ends[parent], ends[node])
    return ends


def _expected_field(parent: ast.AST, node: ast.AST) -> str:
    for name, value in ast.iter_fields(parent):
        if value is node or (type(value) is list and any(item is node for item in value)):
            return name
    raise AssertionError(f"{node!r} is in no field of {parent!r}")


def test_ends_and_fields_agree_with_the_tree() -> None:
    tree = ast.parse(SOURCE)
    index = build_index(tree)
    expected = _expected_ends(index)
    # Asked outermost last, then again: what is remembered on the way down agrees too.
    for node in [*reversed(index.order), *index.order]:
        assert index.end[node] == expected[node]
    for node in index.order[1:]:
        assert index.field[node] == _expected_field(index.parents[node], node)
        assert index.field.get(node) == index.field[node]
    assert index.field.get(tree) is None
    with pytest.raises(KeyError):
        index.field[tree]  # the module has no parent
    with pytest.raises(KeyError):
        index.end[ast.Name("unseen", ast.Load())]


def test_of_types_lists_a_recorded_class_in_source_order() -> None:
    index = build_index(ast.parse(SOURCE))
    for kinds in [(ast.Call,), (ast.Constant,), (ast.For, ast.AugAssign, ast.Return)]:
        expected = [node for node in index.order if type(node) in kinds]
        assert index.of_types(*kinds) == expected
        assert expected


def test_of_types_refuses_a_class_it_does_not_record() -> None:
    index = build_index(ast.parse(SOURCE))
    assert ast.Name not in RECORDED_TYPES
    with pytest.raises(KeyError):
        index.of_types(ast.Name)
    with pytest.raises(KeyError):
        index.of_types(ast.Call, ast.Name)
