"""What autograd saves for each op, measured on a real PyTorch (GF003, GF004).

The table, `codemods/data/saved_ops.json`, is written by `tools/generate_saved_ops.py`, which
runs every op and probes it; never edit it by hand (`--check` tells when it is stale).

    {"format": 1, "torch": "2.13.0", "generated_by": "...", "ops": {KEY: ENTRY, ...}}

KEY is the name gradfix resolves in source: `torch.sigmoid`, `torch.nn.functional.relu` (qualified
functions); `Tensor.sigmoid`, `Tensor.T` (tensor methods and attributes); `operator.mul`,
`operator.neg`, `operator.getitem` (`x * y`, `-x`, basic indexing and slicing `x[0]`, `x[:, 1:]`);
`operator.iadd` (`x += y`); `torch.nn.Linear` (calling a module instance, train mode, parameters
requiring grad). A bracket suffix names a call shape that saves differently from the plain key:
`[scalar]` the second operand is a Python number (`x * 2`, `x ** 2`, `torch.pow(x, 2)`);
`[rscalar]` the first one is (`2 * x`, `2 ** x`, `2 / x`); `[dim]` a reduction given a dim
(`torch.max(x, 1)` returns (values, indices)); `[other]` `torch.max`/`min` of two tensors; `[min]`
clamp with only `min`; `[mask]` and `[tensor-index]` advanced indexing (`x[m]`; `x[i]`, `x[:, i]`).

ENTRY fields:
- "inputs": the kind of each tensor input *position*, in call order (self first for methods,
  list elements for cat/stack, the call's arguments for modules; Python numbers and other
  non-tensor arguments are not positions): "float" (may require grad), "const" (float that never
  does: batch_norm's running stats), "long" (indices, class targets), "bool" (masks).
- "patterns": {PATTERN: RECORD}. PATTERN has one character per position: "1" requires grad,
  "0" does not, "-" cannot. Patterns where nothing requires grad (no input, no parameter)
  build no graph, save nothing, and are left out. RECORD:
  - "inputs": per position, an in-place change of that input before backward() breaks it;
  - "outputs": per output (in tuple order; one value standing for every piece of
    split/chunk/unbind), an in-place change of it breaks backward (or is refused at once);
  - "second_backward_fails": a second backward() without retain_graph raises;
  - "params" (modules): parameters/buffers whose in-place update (under no_grad, as
    `optimizer.step()` does) breaks backward.
- "view_of_input": the position whose storage and version counter the output shares (a view,
  or the input itself), else null: an in-place write through either counts against both.
  Probed on contiguous inputs of the usual dtype, so it means "may alias" for ops that copy
  only sometimes (reshape, contiguous, flatten, float, to).
- "multi_output_view": the outputs are views from a multi-view function; in-place on one raises.
- "params" (modules): every parameter and buffer name probed.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from itertools import product
from typing import Any

RequiresGrad = Sequence[bool | None] | None
"""Per input position: True, False or None (unknown). None for the whole: every float input
requires grad. Positions that cannot require grad are ignored."""


@dataclass(frozen=True)
class Saving:
    """What one requires-grad pattern saves."""

    inputs: tuple[bool, ...]
    outputs: tuple[bool, ...]
    second_backward_fails: bool
    params: frozenset[str] = frozenset()


@dataclass(frozen=True)
class OpSaving:
    key: str
    input_kinds: tuple[str, ...]
    view_of_input: int | None
    multi_output_view: bool
    params: tuple[str, ...]
    patterns: Mapping[str, Saving] = field(hash=False, repr=False)

    # -- every float input requires grad ---------------------------------------------------
    @property
    def saves_output(self) -> bool:
        return self._all.outputs[0]

    @property
    def saves_inputs(self) -> tuple[bool, ...]:
        return self._all.inputs

    @property
    def saves_inputs_if_only_first_requires_grad(self) -> tuple[bool, ...] | None:
        """For ops with several float inputs: the MoCo-queue case (`feats * queue`)."""
        floats = [i for i, kind in enumerate(self.input_kinds) if kind == "float"]
        if len(floats) < 2:
            return None
        return self._one([i == floats[0] for i in range(len(self.input_kinds))]).inputs

    # -- any requires-grad knowledge: None when the answer depends on what is unknown --------
    def saves_input(self, position: int, requires_grad: RequiresGrad = None) -> bool | None:
        return _agree(s.inputs[position] for s in self._matching(requires_grad))

    def saves_output_when(self, requires_grad: RequiresGrad = None, output: int = 0) -> bool | None:
        return _agree(s.outputs[output] for s in self._matching(requires_grad))

    def saves_param(self, name: str, requires_grad: RequiresGrad = None) -> bool | None:
        return _agree(name in s.params for s in self._matching(requires_grad))

    def fails_second_backward(self, requires_grad: RequiresGrad = None) -> bool | None:
        return _agree(s.second_backward_fails for s in self._matching(requires_grad))

    @property
    def saves_anything(self) -> bool:
        """Whether some requires-grad pattern makes a graph of this op save tensors."""
        return any(
            s.second_backward_fails or any(s.inputs) or any(s.outputs) or s.params
            for s in self.patterns.values()
        )

    # -- pattern lookup ----------------------------------------------------------------------
    @property
    def _all(self) -> Saving:
        return self._one([True] * len(self.input_kinds))

    def _one(self, requires_grad: Sequence[bool]) -> Saving:
        (saving,) = self._matching(requires_grad)
        return saving

    def _matching(self, requires_grad: RequiresGrad) -> list[Saving]:
        n = len(self.input_kinds)
        known = [True] * n if requires_grad is None else list(requires_grad)
        if len(known) > n:
            raise ValueError(f"{self.key} takes {n} tensor inputs, got {len(known)}")
        known += [None] * (n - len(known))
        choices = [
            ("-",) if kind != "float" else ("1",) if rg else ("0",) if rg is False else ("1", "0")
            for kind, rg in zip(self.input_kinds, known, strict=True)
        ]
        outputs = len(next(iter(self.patterns.values())).outputs)
        nothing = Saving((False,) * n, (False,) * outputs, False)
        return [self.patterns.get("".join(p), nothing) for p in product(*choices)]


def _agree(values: Iterable[bool]) -> bool | None:
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def _op(key: str, entry: Mapping[str, Any]) -> OpSaving:
    patterns = {
        pattern: Saving(
            tuple(record["inputs"]),
            tuple(record["outputs"]),
            record["second_backward_fails"],
            frozenset(record.get("params", ())),
        )
        for pattern, record in entry["patterns"].items()
    }
    return OpSaving(
        key,
        tuple(entry["inputs"]),
        entry["view_of_input"],
        entry["multi_output_view"],
        tuple(entry.get("params", ())),
        patterns,
    )


@functools.cache
def _table() -> tuple[str, dict[str, OpSaving]]:
    path = resources.files("codemods") / "data" / "saved_ops.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    return data["torch"], {key: _op(key, entry) for key, entry in data["ops"].items()}


def op_saving(key: str) -> OpSaving | None:
    """What `key` saves; None for an op the table does not know (never rewrite on it)."""
    return _table()[1].get(key)


def saves_anything(key: str) -> bool | None:
    """Whether a graph made of this op can hold saved tensors (GF003); None if unknown."""
    op = op_saving(key)
    return None if op is None else op.saves_anything


@functools.cache
def may_save_an_input(key: str) -> bool:
    """Whether `key`, or a call shape of it (`key[scalar]`, `key[dim]`, ...), saves one of
    its inputs under some requires-grad pattern; False also for a key the table lacks."""
    return any(
        any(saving.inputs)
        for variant, op in _table()[1].items()
        if variant == key or variant.startswith(key + "[")
        for saving in op.patterns.values()
    )


def torch_version() -> str:
    """The PyTorch version the table was measured on."""
    return _table()[0]


def op_keys() -> list[str]:
    """Every op the table knows."""
    return list(_table()[1])


@functools.cache
def tensor_methods() -> frozenset[str]:
    """The tensor methods the table measured (`Tensor.sum[dim]` counts as `sum`)."""
    return frozenset(
        key[len("Tensor.") :].split("[")[0] for key in op_keys() if key.startswith("Tensor.")
    )
