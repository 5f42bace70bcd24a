"""Where `gradfix check` spends its CPU time, phase by phase (a script, not a test).

    python bench/phases.py PATH ... [--every N]

Runs the pipeline's steps on every N-th `.py` file under the PATHs (default: every file), in
this process, and prints the CPU time (`time.process_time`, so other load on the machine
counts little) of each: the text gate, the syntax check of files the gate stops, the parse
and compile check of the others, the index, the rest of the shared analysis, and each rule.
Compare two checkouts by running each one's copy of this script on the same files.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from codemods import pipeline
from codemods.analysis import FileAnalysis, torch_api
from codemods.analysis.index import build_index
from codemods.rules import RULES
from codemods.walk import python_files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--every", type=int, default=1, metavar="N")
    args = parser.parse_args()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), pipeline.RECURSION_LIMIT))
    files = [path for path in python_files(args.paths) if path.suffix == ".py"][:: args.every]
    seconds: Counter[str] = Counter()
    clock = time.process_time
    for path in files:
        source = path.read_bytes()
        with pipeline.collector_paused():
            start = clock()
            text = source.decode("utf-8", errors="replace")
            rules = [RULES[code] for code in sorted(RULES)]
            evidence = torch_api.GRAPH_EVIDENCE.search(text)
            rules = [rule for rule in rules if rule.may_apply(text)] if evidence else []
            seconds["text gate"] += clock() - start
            start = clock()
            if not rules:
                pipeline.syntax_error(source)
                seconds["syntax check only"] += clock() - start
                continue
            tree, error = pipeline.checked_tree(source)
            seconds["parse and compile check"] += clock() - start
            if tree is None or error is not None:
                continue
            start = clock()
            build_index(tree)  # built again inside the analysis: timed apart, not added
            index = clock() - start
            start = clock()
            analysis = FileAnalysis(tree, pipeline.source_text(source))
            seconds["analysis: index"] += index
            seconds["analysis: the rest"] += max(clock() - start - index, 0.0)
            for rule in rules:
                start = clock()
                list(rule.check(analysis))
                seconds[f"rule {rule.code}"] += clock() - start
            analysis.release()
        gc.collect()
    total = sum(seconds.values())
    print(f"{len(files)} files, {total:.2f} s of CPU")
    for phase, spent in seconds.most_common():
        print(f"{phase:26s} {spent:7.2f} s {100 * spent / total:5.1f}%")


if __name__ == "__main__":
    main()
