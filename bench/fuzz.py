"""Mutate the fixtures' and thread cases' scripts and check what `gradfix fix` makes of them
(a script, not a test: random, and slow).

    python bench/fuzz.py [--seed N] [--count N]

Each try takes one `before.py` of `tests/fixtures/` or a case of `bench/threads/`, deletes,
repeats or swaps a few of its lines or renames a name in one (`loss` to `total`, ...), and
keeps the result if Python parses it. The pipeline then checks and fixes it with every rule
and unsafe fixes, as `gradfix fix --unsafe-fixes` does, and the script reports:

- an exception out of the pipeline (a crash of the analysis on code a user could write);
- a fix whose output does not parse;
- a fix that a second run changes again (`fix` must reach its fixpoint in one run).

It prints how many mutated scripts it tried, the count of each problem, and the first script
of each kind with what went wrong: a case to reduce by hand into a fixture.
"""

from __future__ import annotations

import argparse
import ast
import random
import sys
import traceback
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from codemods.pipeline import RunOptions, process_source
from codemods.rules import RULES

REPO_ROOT = Path(__file__).resolve().parents[1]
# Names the scripts use for the values the rules follow: renaming one into another makes a
# value take another's place.
NAMES = ("loss", "total", "x", "h", "self.state", "out", "optimizer", "model", "y", "hidden")


def scripts() -> list[str]:
    paths = sorted(REPO_ROOT.glob("tests/fixtures/*/*/before.py"))
    paths += sorted(REPO_ROOT.glob("bench/threads/*/*.py"))
    return [path.read_text(encoding="utf-8") for path in paths]


def mutated(source: str, rng: random.Random) -> str:
    lines = source.splitlines(keepends=True)
    for _ in range(rng.randint(1, 4)):
        if not lines:
            break
        choice, i = rng.random(), rng.randrange(len(lines))
        if choice < 0.3:
            del lines[i]
        elif choice < 0.6:
            lines.insert(rng.randrange(len(lines) + 1), lines[i])
        elif choice < 0.8:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        else:
            old, new = rng.sample(NAMES, 2)
            lines[i] = lines[i].replace(old, new)
    return "".join(lines)


def problem(source: str, options: RunOptions) -> tuple[str, str] | None:
    """What went wrong fixing `source` (a kind, and its details), if anything."""
    try:
        result = process_source(source.encode(), options)
    except Exception as error:  # the point of the script: any crash is a finding
        return f"exception {type(error).__name__}", traceback.format_exc(limit=-8)
    if result.new_source is None:
        return None
    fixed = result.new_source.decode()
    try:
        ast.parse(fixed)
    except SyntaxError as error:
        return "fix does not parse", f"{error}\n{fixed}"
    again = process_source(result.new_source, options)
    if again.new_source is not None and again.new_source != result.new_source:
        return "a second fix changes it again", f"{fixed}\n----- second run -----\n" + (
            again.new_source.decode()
        )
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=1000, help="mutations to try")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the scripts' own SyntaxWarnings
    options = RunOptions(select=frozenset(RULES), fix=True, unsafe_fixes=True)
    rng = random.Random(args.seed)
    sources = scripts()
    counts: Counter[str] = Counter()
    first: dict[str, tuple[str, str]] = {}
    tried = 0
    for _ in range(args.count):
        source = mutated(rng.choice(sources), rng)
        try:
            ast.parse(source)
        except SyntaxError:
            continue
        tried += 1
        found = problem(source, options)
        if found is not None:
            kind, details = found
            counts[kind] += 1
            first.setdefault(kind, (source, details))
    print(
        f"{tried} mutated scripts tried (seed {args.seed}): "
        + (", ".join(f"{kind}: {n}" for kind, n in counts.items()) or "no problem found")
    )
    for kind, (source, details) in first.items():
        print(f"\n===== {kind}\n{source}\n----- what went wrong -----\n{details}")


if __name__ == "__main__":
    main()
