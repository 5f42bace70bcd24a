"""Whether gradfix's cost grows linearly with a file's length (a script, not a test).

    python bench/length.py [--sizes 250 500 1000 2000 4000] [--repeat 3]

Two series of generated training loops, each run through the whole pipeline in this process
(all rules, as `gradfix check` runs them; then as `gradfix fix`, which also parses with LibCST
and writes the fix the loop's `total += loss` gets):

- `chain`: N chained reassignments `x = x * 1.0` inside the loop body;
- `elif`: one `if`/`elif` chain of N branches inside the loop body;
- `calls`: N module functions, each calling the one defined before it (the order in which
  callers run before their callees is found from the last one back), the last one called in
  the loop body.

It prints, per series and size, the best of `--repeat` runs and the time per line: linear
growth keeps that last column flat. Times are CPU seconds of this process
(`time.process_time`): other load on the machine counts little.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from codemods.pipeline import RunOptions, process_source
from codemods.rules import RULES

IMPORTS = """import torch
from torch import nn

"""
HEAD = (
    IMPORTS
    + """model = nn.Linear(4, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
total = 0.0
for step in range(3):
    x = model(torch.randn(2, 4))
"""
)
TAIL = """    loss = x.pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    total += loss
print(total)
"""


def chain(size: int) -> str:
    return HEAD + "    x = x * 1.0\n" * size + TAIL


def elif_chain(size: int) -> str:
    branches = ["    if step == 0:\n        x = x * 1.0\n"]
    branches += [f"    elif step == {i}:\n        x = x * {i}.0\n" for i in range(1, size)]
    return HEAD + "".join(branches) + TAIL


def calls(size: int) -> str:
    functions = ["def f0(x):\n    return x\n\n"]
    functions += [f"def f{i}(x):\n    return f{i - 1}(x) * 1.0\n\n" for i in range(1, size)]
    body = f"    x = f{size - 1}(x)\n"
    return IMPORTS + "".join(functions) + HEAD.removeprefix(IMPORTS) + body + TAIL


SERIES: dict[str, Callable[[int], str]] = {"chain": chain, "elif": elif_chain, "calls": calls}


def best_time(source: bytes, options: RunOptions, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        result = process_source(source, options)
        best = min(best, time.process_time() - started)
        assert result.error is None and result.findings, "the generated loop must be reported"
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000, 2000, 4000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    select = frozenset(RULES)
    modes = {"check": RunOptions(select), "fix": RunOptions(select, fix=True)}
    print(f"{'series':<8} {'mode':<6} {'N':>6} {'lines':>7} {'seconds':>9} {'us/line':>9}")
    for name, make in SERIES.items():
        for size in args.sizes:
            source = make(size).encode()
            lines = source.count(b"\n")
            for mode, options in modes.items():
                seconds = best_time(source, options, args.repeat)
                print(
                    f"{name:<8} {mode:<6} {size:>6} {lines:>7} {seconds:>9.3f} "
                    f"{seconds / lines * 1e6:>9.1f}"
                )


if __name__ == "__main__":
    main()
