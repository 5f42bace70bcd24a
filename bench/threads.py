"""Recall of gradfix on real user bugs, the thread corpus `bench/threads/` (a script, not a test).

Each case, `bench/threads/<RULE>/<case>/`, is a small training script written in our words in
the shape of code a person posted in a public thread (its URL is in `case.toml`): `before.py`
with the bug (kind "fix") or a correct look-alike (kind "leave"), and for fix cases `after.py`,
the thread's accepted fix applied as the smallest edit. Scripts run under CPU torch in a
subprocess each, never in this process.

    python bench/threads.py                 # score gradfix: per rule and overall
    python bench/threads.py -v              # and one line per case
    python bench/threads.py --check DIR...  # check cases themselves (symptom, clean after.py)

Scoring, per case, with every rule selected:
- detected: a fix case has a finding of its rule (any tier) on before.py;
- at line: that finding's line is one the accepted fix edits (`fix_lines`);
- fixed: `gradfix fix` (safe fixes only) changed before.py, and the result runs clean (no
  error, no graph at `probe`) and prints what after.py prints;
- advised: a fix case whose accepted fix gradfix cannot write (`expect = "report"`) has a
  finding of its rule without a safe fix, whose message names the advice (`advice`);
- wrong: a safe rewrite whose result raises another error than the bug's, or runs and prints
  other numbers than after.py, or any safe rewrite of a look-alike (a result that still raises
  the bug's own error is incomplete: neither fixed nor wrong);
- left alone: a look-alike with no finding of any rule.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from codemods.findings import Tier  # noqa: E402
from codemods.pipeline import RunOptions, SourceResult, process_source  # noqa: E402

THREADS = ROOT / "bench" / "threads"
RULES = ("GF001", "GF002", "GF003", "GF004")
KINDS = ("fix", "leave")
EXPECTS = ("safe", "report")
# The advice a report should give, and the words that give it in gradfix's messages.
ADVICE = {
    "reorder": ("move the", "reorder", "after the last backward"),
    "recompute": ("recompute",),
    "detach": ("detach",),
    "no_grad": ("no_grad",),
    "restructure": ("recompute", "move the", "restructure"),
}
SYMPTOMS = ("error", "grad_fn", "none")
SCRIPT_SECONDS = 60

# Runs one script as `__main__` in a fresh interpreter, then reports as JSON on the last line
# of stdout: the exception, if any, and the path of a graph-attached tensor reachable from the
# probe expression. The script's own output comes before that line.
_RUNNER = r"""
import json, runpy, sys, traceback
script, probe = sys.argv[1], sys.argv[2]
sys.argv = [script]
report = {"error": None, "attached": None}
try:
    namespace = runpy.run_path(script, run_name="__main__")
except BaseException as exc:
    report["error"] = f"{type(exc).__name__}: {exc}"
    namespace = None
import torch
def attached(value, seen):
    stack = [("probe", value)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, torch.Tensor):
            parameter = isinstance(value, torch.nn.Parameter)
            if value.grad_fn is not None or (value.requires_grad and not parameter):
                return where
            continue
        if isinstance(value, (str, bytes, int, float, complex, bool, type(None), type)):
            continue
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, dict):
            stack.extend((f"{where}[{k!r}]", v) for k, v in value.items())
        elif isinstance(value, (list, tuple, set, frozenset)):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))
        elif isinstance(getattr(value, "__dict__", None), dict) and not callable(value):
            stack.extend((f"{where}.{k}", v) for k, v in vars(value).items())
    return None
if namespace is not None and probe:
    try:
        report["attached"] = attached(eval(probe, dict(namespace)), set())
    except BaseException as exc:
        report["error"] = f"probe {probe!r} failed: {type(exc).__name__}: {exc}"
sys.stdout.flush()
print("\n" + json.dumps(report))
"""


class CaseError(ValueError):
    """A case directory or its case.toml is malformed."""


@dataclass(frozen=True)
class ThreadCase:
    directory: Path
    rule: str
    kind: str
    source: str
    symptom: str
    error: str | None
    probe: str | None
    fix_lines: tuple[int, ...]
    expect: str | None
    advice: str | None

    @property
    def name(self) -> str:
        return f"{self.rule}/{self.directory.name}"

    @property
    def before(self) -> Path:
        return self.directory / "before.py"

    @property
    def after(self) -> Path:
        return self.directory / "after.py"


def load_case(directory: Path) -> ThreadCase:
    toml_path = directory / "case.toml"
    if not toml_path.is_file() or not (directory / "before.py").is_file():
        raise CaseError(f"{directory}: needs before.py and case.toml")
    data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    run = data.get("run", {})

    def need(ok: bool, what: str) -> None:
        if not ok:
            raise CaseError(f"{toml_path}: {what}")

    rule, kind = data.get("rule"), data.get("kind")
    need(rule == directory.parent.name, f"rule must be {directory.parent.name!r}")
    need(kind in KINDS, f"kind must be one of {KINDS}")
    need(str(data.get("source", "")).startswith("http"), "source must be the thread's URL")
    need(run.get("symptom") in SYMPTOMS, f"[run] symptom must be one of {SYMPTOMS}")
    need(run.get("symptom") != "error" or bool(run.get("error")), "symptom error needs error")
    need(run.get("symptom") != "grad_fn" or bool(run.get("probe")), "symptom grad_fn needs probe")
    if kind == "fix":
        need((directory / "after.py").is_file(), "a fix case needs after.py")
        need(data.get("expect") in EXPECTS, f"expect must be one of {EXPECTS}")
        need(bool(data.get("fix_lines")), "a fix case needs fix_lines")
        need(
            data.get("expect") != "report" or data.get("advice") in ADVICE,
            f"expect report needs advice, one of {sorted(ADVICE)}",
        )
        need(run.get("symptom") != "none", "a fix case shows a symptom")
    else:
        need(run.get("symptom") == "none", "a look-alike runs clean: symptom none")
    return ThreadCase(
        directory=directory,
        rule=rule,
        kind=kind,
        source=data["source"],
        symptom=run["symptom"],
        error=run.get("error"),
        probe=run.get("probe"),
        fix_lines=tuple(data.get("fix_lines", ())),
        expect=data.get("expect"),
        advice=data.get("advice"),
    )


def discover(paths: Iterable[Path] = ()) -> list[ThreadCase]:
    """The cases under `paths` (case or rule directories), or the whole corpus."""
    roots = list(paths) or [THREADS]
    directories: list[Path] = []
    for root in roots:
        root = root.resolve()
        if (root / "case.toml").is_file():
            directories.append(root)
        else:
            directories.extend(sorted(p.parent for p in root.rglob("case.toml")))
    return [load_case(d) for d in directories]


# --- running scripts ------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    output: str  # what the script printed
    error: str | None  # "RuntimeError: ..." when it raised
    attached: str | None  # where the probe still reaches a graph

    @property
    def clean(self) -> bool:
        return self.error is None and self.attached is None


def run_script(script: Path, probe: str | None) -> Run:
    """`script` as `__main__` in a fresh interpreter, its directory as the working directory."""
    try:
        completed = subprocess.run(
            [sys.executable, "-c", _RUNNER, str(script), probe or ""],
            capture_output=True,
            text=True,
            cwd=script.parent,
            timeout=SCRIPT_SECONDS,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
    except subprocess.TimeoutExpired:
        return Run(output="", error=f"timed out after {SCRIPT_SECONDS} s", attached=None)
    output, _, last = completed.stdout.rstrip("\n").rpartition("\n")
    try:
        report = json.loads(last)
    except json.JSONDecodeError:
        return Run(completed.stdout, f"runner failed: {completed.stderr[-400:]}", None)
    return Run(output=output, error=report["error"], attached=report["attached"])


def check_case(case: ThreadCase) -> list[str]:
    """What is wrong with the case itself: before.py must show its symptom, after.py must run
    clean, and a memory case's after.py must print what before.py prints."""
    problems = []
    before = run_script(case.before, case.probe)
    if case.symptom == "error":
        if before.error is None or case.error not in before.error:
            problems.append(f"before.py should raise {case.error!r}, got {before.error!r}")
    elif case.symptom == "grad_fn":
        if before.attached is None:
            problems.append(f"before.py holds no graph at probe {case.probe!r} ({before.error})")
    elif not before.clean:
        problems.append(f"before.py should run clean: {before.error or before.attached}")
    if case.kind == "fix":
        after = run_script(case.after, case.probe)
        if not after.clean:
            problems.append(f"after.py should run clean: {after.error or after.attached}")
        if case.symptom == "grad_fn" and after.output != before.output:
            problems.append("after.py prints other numbers than before.py")
    return problems


# --- scoring gradfix ------------------------------------------------------------------------


@dataclass
class Score:
    case: ThreadCase
    findings: list[str] = field(default_factory=list)  # "RULE:LINE:TIER message"
    detected: bool = False
    at_line: bool = False
    fixed: bool = False
    advised: bool = False
    wrong: str | None = None
    left_alone: bool = False


_ANALYSIS_LOCK = threading.Lock()  # the pipeline pauses the garbage collector per file


def _gradfix(source: bytes) -> SourceResult:
    with _ANALYSIS_LOCK:
        return process_source(source, RunOptions(select=frozenset(RULES), fix=True))


def score_case(case: ThreadCase, workdir: Path) -> Score:
    score = Score(case)
    source = case.before.read_bytes()
    result = _gradfix(source)
    if result.error:
        score.wrong = f"gradfix error: {result.error}"
        return score
    ours = [f for f in result.findings if f.rule == case.rule]
    score.findings = [f"{f.rule}:{f.line}:{f.tier.value} {f.message}" for f in result.findings]
    if case.kind == "leave":
        score.left_alone = not result.findings
        if result.new_source is not None and result.new_source != source:
            score.wrong = "rewrote a correct look-alike"
        return score
    score.detected = bool(ours)
    score.at_line = any(f.line in case.fix_lines for f in ours)
    phrases = ADVICE.get(case.advice or "", ())
    score.advised = any(
        f.tier is not Tier.SAFE and any(phrase in f.message.lower() for phrase in phrases)
        for f in ours
    )
    if result.new_source is None or result.new_source == source:
        return score
    fixed_script = workdir / case.rule / case.directory.name / "before.py"
    fixed_script.parent.mkdir(parents=True, exist_ok=True)
    fixed_script.write_bytes(result.new_source)
    score.fixed, score.wrong = judge_rewrite(case, fixed_script)
    return score


def judge_rewrite(case: ThreadCase, fixed_script: Path) -> tuple[bool, str | None]:
    """Whether the rewritten `fixed_script` runs clean and prints what after.py prints, and
    if its rewrite is wrong, why (a result that still raises the bug's own error is a right
    edit, but not every one the bug needs: incomplete, not wrong)."""
    fixed = run_script(fixed_script, case.probe)
    expected = run_script(case.after, case.probe)
    if fixed.error is not None:
        still_broken = case.symptom == "error" and case.error in fixed.error
        return False, None if still_broken else f"the fixed script raises {fixed.error}"
    if fixed.output != expected.output:
        return False, "the fixed script prints other numbers than after.py"
    return fixed.attached is None, None


def percent(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "0/0"


def print_table(scores: list[Score]) -> None:
    header = (
        "| rule | fix cases | detected | at the fix's line | fixed (safe) "
        "| report cases advised | wrong rewrites | look-alikes left alone |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for rule in (*RULES, "all"):
        chosen = [s for s in scores if rule in ("all", s.case.rule)]
        fixes = [s for s in chosen if s.case.kind == "fix"]
        reports = [s for s in fixes if s.case.expect == "report"]
        leaves = [s for s in chosen if s.case.kind == "leave"]
        print(
            f"| {rule} | {len(fixes)} | {percent(sum(s.detected for s in fixes), len(fixes))} "
            f"| {percent(sum(s.at_line for s in fixes), len(fixes))} "
            f"| {percent(sum(s.fixed for s in fixes), len(fixes))} "
            f"| {percent(sum(s.advised for s in reports), len(reports))} "
            f"| {sum(s.wrong is not None for s in chosen)} "
            f"| {percent(sum(s.left_alone for s in leaves), len(leaves))} |"
        )


def print_cases(scores: Sequence[Any], partial: str = "advised") -> None:
    """One line per case (a `Score`, or a score of `trace_threads.py`), and its findings.
    `partial`: the score's flag for a fix case not fixed but more than detected ("advised";
    `trace_threads.py`: "at_line")."""
    for s in scores:
        if s.case.kind == "leave":
            verdict = "left alone" if s.left_alone else "FLAGGED"
        elif s.fixed:
            verdict = "fixed"
        elif getattr(s, partial):
            verdict = partial.replace("_", " ")
        elif s.detected:
            verdict = "detected"
        else:
            verdict = "MISSED"
        expect = f" expect={s.case.expect}" if s.case.expect else ""
        print(f"{s.case.name}: {verdict}{expect}" + (f"  WRONG: {s.wrong}" if s.wrong else ""))
        for finding in s.findings:
            print(f"    {finding.splitlines()[0][:160]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="case or rule directories")
    parser.add_argument("--check", action="store_true", help="check the cases, not gradfix")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    try:
        cases = discover(args.paths)
    except CaseError as exc:
        print(f"malformed case: {exc}", file=sys.stderr)
        return 2
    if args.check:
        with ThreadPoolExecutor(args.jobs) as pool:
            problems = list(pool.map(check_case, cases))
        bad = 0
        for case, found in zip(cases, problems, strict=True):
            print(f"{case.name}: {'ok' if not found else 'BROKEN'}")
            for problem in found:
                print(f"    {problem}")
            bad += bool(found)
        return 1 if bad else 0
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        scores = list(pool.map(lambda case: score_case(case, Path(tmp)), cases))
    if args.verbose:
        print_cases(scores)
        print()
    print_table(scores)
    return 0


if __name__ == "__main__":
    sys.exit(main())
