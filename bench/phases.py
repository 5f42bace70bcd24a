"""Where `gradfix check` spends its CPU time, phase by phase (a script, not a test).

    python bench/phases.py PATH ... [--every N]

Runs the pipeline's steps on every N-th `.py` file under the PATHs (default: every file), in
this process, and prints the CPU time (`time.process_time`, so other load on the machine
counts little) of each: the text gate, the syntax check of files the gate stops, the parse
of the others, their index, whether their compile check is needed and the compile when it
is, the rest of the shared analysis, and each rule.
Compare two checkouts by running each one's copy of this script on the same files.
"""

from __future__ import annotations

import argparse
import ast
import gc
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from codemods import pipeline
from codemods.analysis import FileAnalysis, torch_api
from codemods.analysis.index import build_index
from codemods.analysis.refusals import compiler_may_refuse
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
    skipped = 0
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
                pipeline.syntax_error(source, text=text)
                seconds["syntax check only"] += clock() - start
                continue
            # `pipeline.checked_tree`'s steps, timed one by one
            decoded = pipeline.source_text(source)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    tree = ast.parse(pipeline.parser_input(source, decoded))
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    continue
                seconds["parse"] += clock() - start
                start = clock()
                index = build_index(tree)
                seconds["analysis: index"] += clock() - start
                start = clock()
                needed = compiler_may_refuse(tree, index, decoded)
                seconds["compile check: needed"] += clock() - start
                skipped += not needed
                start = clock()
                try:
                    if needed:
                        compile(tree, "<file>", "exec", dont_inherit=True)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    continue
                finally:
                    seconds["compile"] += clock() - start
            start = clock()
            analysis = FileAnalysis(tree, decoded, index)
            seconds["analysis: the rest"] += clock() - start
            for rule in rules:
                start = clock()
                list(rule.check(analysis))
                seconds[f"rule {rule.code}"] += clock() - start
            analysis.release()
        gc.collect()
    total = sum(seconds.values())
    print(f"{len(files)} files, {total:.2f} s of CPU; {skipped} analysed files not compiled")
    for phase, spent in seconds.most_common():
        print(f"{phase:26s} {spent:7.2f} s {100 * spent / total:5.1f}%")


if __name__ == "__main__":
    main()
