"""GF001's advice for an evaluation pass: a loop over batches that takes no training step
also gets "run it under `torch.no_grad()`", the fix users reach for; a loop that is part of a
training step, or a logging loop over values handed in, does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemods.pipeline import RunOptions, process_source

FIXTURES = Path(__file__).parent / "fixtures" / "GF001"
NO_GRAD_ADVICE = "running it under `with torch.no_grad():`"


def _messages(case: str) -> list[str]:
    source = (FIXTURES / case / "before.py").read_bytes()
    result = process_source(source, RunOptions(select=frozenset({"GF001"})))
    assert result.findings, case
    return [finding.message for finding in result.findings]


@pytest.mark.parametrize(
    "case",
    ["validation_without_no_grad", "returned_to_unseen_caller", "inline_criterion_append_item"],
)
def test_evaluation_loop_gets_no_grad_advice(case: str) -> None:
    assert all(NO_GRAD_ADVICE in message for message in _messages(case))


@pytest.mark.parametrize(
    "case", ["loss_dict_items_running_sums", "loss_dict_items_meter_update", "augassign_float_item"]
)
def test_training_or_logging_loop_gets_none(case: str) -> None:
    assert not any(NO_GRAD_ADVICE in message for message in _messages(case))
