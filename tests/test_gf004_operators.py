"""GF004 on an augmented assignment whose operator has no arithmetic twin (`|=`, `<<=`): the
out-of-place form is not offered, the clone is (it used to crash the file's analysis)."""

from __future__ import annotations

from codemods.pipeline import RunOptions, process_source

SOURCE = b"""import torch
x = torch.randint(0, 4, (4,)).float().requires_grad_()
z = torch.sigmoid(x)
z |= 1
w = x * 1
w += 1
z.sum().backward()
"""


def test_a_bitwise_write_gets_the_clone() -> None:
    result = process_source(SOURCE, RunOptions(frozenset({"GF004"}), fix=True))
    assert result.error is None
    assert [(f.rule, f.line, f.tier.value) for f in result.findings] == [("GF004", 4, "safe")]
    assert result.new_source is not None
    assert b"z = torch.sigmoid(x).clone()\n" in result.new_source
