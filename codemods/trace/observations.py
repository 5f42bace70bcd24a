"""What `gradfix trace` saw while the script ran: plain data, no torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


@dataclass(frozen=True, order=True)
class Place:
    """A line of the user's code."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"line {self.line}"


class Kind(str, Enum):
    """What was observed; each maps to one rule."""

    KEPT = "kept"  # GF001/GF002: a graph of an earlier step still held (memory)
    CARRIED = "carried"  # GF001/GF002: a graph of an earlier step read into a new one
    FREED = "freed"  # GF003: a backward reached nodes an earlier backward freed
    STATE_KEPT = "state-kept"  # GF002: an object's state read again by the next step
    DUPLICATE = "duplicate"  # GF003: the same loss backpropagated twice
    STEP_BETWEEN = "step-between"  # GF003: a parameter update between two backward passes
    REUSED_AFTER_STEP = "reused-after-step"  # GF003: a freed output read after a step
    # GF002: a tensor of an earlier step read into a new graph after a step changed weights
    # its graph saved
    UPDATED_AFTER_READ = "updated-after-read"
    INPLACE = "inplace"  # GF004: an in-place write to a tensor autograd saved
    # GF004: an optimizer step changed a weight a graph saved before its first backward
    STEP_BEFORE_BACKWARD = "step-before-backward"
    FAILED = "failed"  # GF003/GF004: the script raised the error, its cause unseen


@dataclass(frozen=True)
class Observation:
    rule: str
    kind: Kind
    place: Place  # the statement the fix changes
    message: str  # what happened, with the other lines involved
    # Facts the fix builders need: "scalar" (a one-element tensor), "number" (added to a
    # Python number), "loop" (a backward repeated by a loop).
    facts: frozenset[str] = field(default_factory=frozenset)
    raised: bool = False  # the script failed with this bug's error
