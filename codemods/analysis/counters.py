"""Loop counters: names that take a different non-negative integer in each iteration of a loop.

`for i in range(bs): f(x_all[i])` selects another row of `x_all` in every iteration, so a
write through `x_all[i]` in one iteration is never read by `x_all[i]` in another. That holds
when the only binding of `i` that reaches the read is the loop's own target, and the loop takes
the numbers of `range(...)` (non-negative start, positive step) or the count of `enumerate`:
two iterations never give the same index, nor a negative one that counts from the end.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codemods.analysis.bindings import BindingKind
from codemods.analysis.index import Loop

if TYPE_CHECKING:
    from codemods.analysis.provenance import Provenance


@dataclass(frozen=True)
class CounterSlice:
    """A subscript that selects by a loop counter at one position and takes every element at
    the others (`x[i]`, `x[:, i]`)."""

    loop: Loop
    position: int  # where the counter stands among the subscript's parts
    parts: int  # how many parts the subscript has


def counter_slice(provenance: Provenance, subscript: ast.Subscript) -> CounterSlice | None:
    """The loop whose counter `subscript` selects by, when its other parts are full slices."""
    index = subscript.slice
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    found: CounterSlice | None = None
    for position, part in enumerate(parts):
        if isinstance(part, ast.Slice) and part.lower is part.upper is part.step is None:
            continue
        loop = counted_by(provenance, part)
        if loop is None or found is not None:
            return None
        found = CounterSlice(loop, position, len(parts))
    return found


def counted_by(provenance: Provenance, node: ast.expr) -> Loop | None:
    """The loop whose every iteration gives `node` (a name) a different non-negative integer."""
    if not isinstance(node, ast.Name):
        return None
    bindings = provenance.reaching(node.id, node)
    if len(bindings) != 1:
        return None
    (binding,) = bindings
    loop = binding.statement
    if binding.kind is not BindingKind.LOOP_TARGET or not isinstance(loop, ast.For | ast.AsyncFor):
        return None
    iterable = binding.value
    if not isinstance(iterable, ast.Call) or not isinstance(iterable.func, ast.Name):
        return None
    if iterable.func.id == "range" and binding.path == () and _counts_up(iterable):
        return loop
    if iterable.func.id == "enumerate" and binding.path == (0,) and _enumerates_up(iterable):
        return loop
    return None


def _counts_up(call: ast.Call) -> bool:
    """`range(n)`, `range(1, n)`, `range(0, n, 2)`: distinct non-negative numbers."""
    if call.keywords or not 1 <= len(call.args) <= 3:
        return False
    if len(call.args) == 1:
        return not isinstance(call.args[0], ast.Starred)
    start, *step = call.args[0], *call.args[2:]
    return _non_negative(start) and all(_positive(s) for s in step)


def _enumerates_up(call: ast.Call) -> bool:
    """`enumerate(xs)`, `enumerate(xs, 1)`, `enumerate(xs, start=1)`."""
    starts = call.args[1:] + [k.value for k in call.keywords if k.arg == "start"]
    if any(isinstance(a, ast.Starred) for a in call.args) or len(call.args) > 2:
        return False
    if any(k.arg != "start" for k in call.keywords):
        return False
    return all(_non_negative(start) for start in starts)


def _non_negative(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 0


def _positive(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value > 0
