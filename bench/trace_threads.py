"""Recall of `gradfix trace` on the thread corpus `bench/threads/` (a script, not a test).

Each case's before.py runs under `gradfix trace --format json` in its own process, from the
case's folder; then a copy of it under `gradfix trace --fix`, and the fixed copy runs as
`bench/threads.py` runs scripts. Scoring, per case (see bench/threads.py for the corpus):
- detected: a fix case has a finding of its rule;
- at line: that finding's line is one the accepted fix edits (`fix_lines`);
- fixed: `trace --fix` changed before.py, and the result runs clean and prints what after.py
  prints (counted over the cases whose accepted fix is one edit, `expect = "safe"`, and over
  all fix cases);
- wrong: a fixed script that raises another error than the bug's, or prints other numbers
  than after.py, or any rewrite of a look-alike;
- left alone: a look-alike with no finding.

    python bench/trace_threads.py        # the table
    python bench/trace_threads.py -v     # and one line per case
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from threads import (  # noqa: E402
    RULES,
    ThreadCase,
    discover,
    judge_rewrite,
    percent,
    print_cases,
)

TRACE_SECONDS = 120
_GRADFIX = "import sys; from codemods.cli import main; sys.argv[0] = 'gradfix'; main()"


@dataclass
class TraceScore:
    case: ThreadCase
    findings: list[str] = field(default_factory=list)
    detected: bool = False
    at_line: bool = False
    fixed: bool = False
    wrong: str | None = None
    left_alone: bool = False


def gradfix_trace(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}
    return subprocess.run(
        [sys.executable, "-c", _GRADFIX, "trace", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=TRACE_SECONDS,
    )


def score_case(case: ThreadCase, workdir: Path) -> TraceScore:
    score = TraceScore(case)
    completed = gradfix_trace(["--format", "json", "before.py"], case.directory)
    try:
        findings = json.loads(completed.stdout or "[]")
    except json.JSONDecodeError:
        score.wrong = f"no JSON: {completed.stderr[-300:]}"
        return score
    score.findings = [f"{f['rule']}:{f['line']}:{f['tier']} {f['message']}" for f in findings]
    ours = [f for f in findings if f["rule"] == case.rule]
    copy = workdir / case.rule / case.directory.name
    copy.mkdir(parents=True)
    shutil.copy(case.before, copy / "before.py")
    gradfix_trace(["--fix", "before.py"], copy)
    changed = (copy / "before.py").read_bytes() != case.before.read_bytes()
    if case.kind == "leave":
        score.left_alone = not findings
        if changed:
            score.wrong = "rewrote a correct look-alike"
        return score
    score.detected = bool(ours)
    score.at_line = any(f["line"] in case.fix_lines for f in ours)
    if not changed:
        return score
    score.fixed, score.wrong = judge_rewrite(case, copy / "before.py")
    return score


def print_table(scores: list[TraceScore]) -> None:
    header = (
        "| rule | fix cases | detected | at the fix's line | one-edit cases fixed "
        "| fixed, all fix cases | wrong rewrites | look-alikes left alone |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for rule in (*RULES, "all"):
        chosen = [s for s in scores if rule in ("all", s.case.rule)]
        fixes = [s for s in chosen if s.case.kind == "fix"]
        editable = [s for s in fixes if s.case.expect == "safe"]
        leaves = [s for s in chosen if s.case.kind == "leave"]
        print(
            f"| {rule} | {len(fixes)} | {percent(sum(s.detected for s in fixes), len(fixes))} "
            f"| {percent(sum(s.at_line for s in fixes), len(fixes))} "
            f"| {percent(sum(s.fixed for s in editable), len(editable))} "
            f"| {percent(sum(s.fixed for s in fixes), len(fixes))} "
            f"| {sum(s.wrong is not None for s in chosen)} "
            f"| {percent(sum(s.left_alone for s in leaves), len(leaves))} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="case or rule directories")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    cases = discover(args.paths)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        scores = list(pool.map(lambda case: score_case(case, Path(tmp)), cases))
    if args.verbose:
        print_cases(scores, partial="at_line")
        print()
    print_table(scores)
    return 0


if __name__ == "__main__":
    sys.exit(main())
