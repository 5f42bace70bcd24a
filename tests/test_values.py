"""Joins of the interpreter's abstract values (analysis/values.py)."""

from __future__ import annotations

from codemods.analysis.values import Grad, Kind, Value, container_of

LOSS_OBJECT = Value(Grad.FREE, Kind.OBJECT, cls="WeightedLoss")


def test_an_empty_list_joined_with_a_filled_one_keeps_its_elements() -> None:
    empty = container_of(Kind.LIST, [])
    filled = empty.storing(LOSS_OBJECT)
    assert empty.join(filled).element_read() == LOSS_OBJECT
    assert filled.join(empty).element_read() == LOSS_OBJECT


def test_a_list_of_unknown_elements_joined_with_a_filled_one_stays_unknown() -> None:
    unknown = Value(Grad.FREE, Kind.LIST)  # `list(xs)` of something gradfix does not follow
    filled = container_of(Kind.LIST, []).storing(LOSS_OBJECT)
    assert unknown.join(filled).element_value is None
