"""Time `gradfix check` against bare LibCST parsing and against Ruff, over the same files.

    python bench/bench.py [PATH ...] [--jobs N] [--warm]

PATHs (files or directories; default: the installed torch package) are walked as gradfix walks
them, and every tool gets the resulting list of files, with N processes (default: the CPU
count), in one run:

- `ast.parse` and `libcst.parse_module` on every file (a notebook's code cells joined, as
  gradfix parses them): bare parsing, by the parser gradfix analyses with and by the one it
  writes fixes with;
- `ruff check --select ALL --no-cache --isolated`, its output discarded (Ruff runs threads:
  `RAYON_NUM_THREADS=N`), when `ruff` is on PATH;
- `gradfix check --no-cache --format json`, as a user runs it, cold;
- how many files LibCST parsed in that check (counted by running the pipeline again, untimed,
  in this process's pool), against how many files have a fixable finding: LibCST parses only
  files with a fix to write;
- with `--warm`, a run that fills the result cache in a temporary folder, then five reruns
  answered from it (the row gives their median; a start-up of half a second swings by a
  fifth from run to run). gradfix's own modules are compiled to bytecode first, as pip does
  when it installs a package: a checkout run with PYTHONDONTWRITEBYTECODE set would compile
  them at every start;
- with `--repeat N`, ruff and the cold check N times each, which of the two goes first
  alternating, and each pair's ratios with their median: on a machine whose speed swings from
  run to run (ruff's own CPU time by half), one pair decides little.

Each row gives wall seconds and CPU seconds (this process and every process it started, the
fork server's workers included: this script adopts the processes its children leave behind, so
that it can reap them and count their time). On a machine other work loads, CPU seconds compare
the tools more steadily than wall seconds.
"""

from __future__ import annotations

import argparse
import ast
import compileall
import ctypes
import functools
import importlib.util
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import libcst

from codemods import notebooks
from codemods.pipeline import RunOptions, process_source
from codemods.rules import RULES
from codemods.walk import python_files

REPO_ROOT = Path(__file__).resolve().parents[1]
WARM_RERUNS = 5
T = TypeVar("T")
PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>
ORPHAN_WAIT_SECONDS = 10.0
RUFF = "ruff check --select ALL"


def _source(path: Path) -> bytes:
    source = path.read_bytes()
    if notebooks.is_notebook(path):
        source = notebooks.read(source).code.encode()
    return source


def _parse(path: Path, parser: Callable[[bytes], object] = libcst.parse_module) -> bool:
    try:
        parser(_source(path))
    except Exception:
        return False
    return True


_parse_ast = functools.partial(_parse, parser=ast.parse)


def _parsed_by_libcst(path: Path) -> bool:
    """Whether `gradfix check` has LibCST parse `path` (every rule, as the timed run)."""
    try:
        options = RunOptions(frozenset(RULES))
        if notebooks.is_notebook(path):
            return notebooks.process_notebook(path.read_bytes(), options).libcst_parsed
        return process_source(path.read_bytes(), options).libcst_parsed
    except Exception:
        return False


def adopt_orphans() -> None:
    """Become the parent of the processes our children leave behind (gradfix's fork server and
    its workers), so that their CPU time is counted when they are reaped (Linux only)."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1)


def _reap_orphans() -> None:
    """Wait for the adopted processes to end (a fork server ends with its gradfix)."""
    children = Path(f"/proc/self/task/{os.getpid()}/children")
    deadline = time.monotonic() + ORPHAN_WAIT_SECONDS
    while children.exists() and children.read_text().split() and time.monotonic() < deadline:
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        time.sleep(0.01)


def _cpu_seconds() -> float:
    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(run: Callable[[], T]) -> tuple[float, float, T]:
    """Wall seconds, CPU seconds (of this process and every process it started and reaped),
    and what `run` returned."""
    start, cpu = time.perf_counter(), _cpu_seconds()
    result = run()
    wall = time.perf_counter() - start
    _reap_orphans()
    return wall, _cpu_seconds() - cpu, result


def parse_all(files: list[Path], jobs: int, parse: Callable[[Path], bool] = _parse) -> int:
    """`parse` every file; how many times it said False (failed to parse)."""
    if jobs <= 1:
        return [parse(path) for path in files].count(False)
    chunk = max(1, min(32, math.ceil(len(files) / (jobs * 4))))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(parse, files, chunksize=chunk)).count(False)


def run_ruff(ruff: str, files: list[Path], jobs: int) -> None:
    command = [ruff, "check", "--select", "ALL", "--no-cache", "--isolated", "--exit-zero"]
    environment = {**os.environ, "RAYON_NUM_THREADS": str(jobs)}
    subprocess.run([*command, *map(str, files)], capture_output=True, env=environment)


def run_gradfix(files: list[Path], jobs: int, *, cache: bool = False, cwd: Path) -> list[dict]:
    """`gradfix check` with every rule: its JSON records."""
    command = [sys.executable, str(REPO_ROOT / "cli.py"), "check", "--format", "json"]
    command += ["-j", str(jobs), *([] if cache else ["--no-cache"])]
    run = subprocess.run([*command, *map(str, files)], capture_output=True, cwd=cwd)
    if run.returncode not in (0, 1, 2):
        sys.exit(f"gradfix failed ({run.returncode}):\n{run.stderr.decode()}")
    return json.loads(run.stdout)


def _default_root() -> Path:
    spec = importlib.util.find_spec("torch")  # its location, without importing it
    if spec is None or spec.origin is None:
        sys.exit("torch is not installed: give the paths to benchmark")
    return Path(spec.origin).parent


def _findings(records: list[dict]) -> list[tuple]:
    return sorted(
        (r["path"], r.get("cell") or 0, r["line"], r["column"], r["rule"], r["message"])
        for r in records
        if r["rule"] is not None
    )


Timing = tuple[float, float]  # wall seconds, CPU seconds


def _more_pairs(
    time_ruff: Callable[[], None],
    check: Callable[[], list[dict]],
    records: list[dict],
    count: int,
) -> list[tuple[Timing, Timing]]:
    """`count` more (ruff, cold check) timings, the check first in every other pair (the
    first pair, timed before, ran ruff first). Every check must find what the first did."""
    pairs = []
    for number in range(count):
        check_first = number % 2 == 0
        if check_first:
            wall, cpu, again = measure(check)
            ruff = measure(time_ruff)[:2]
        else:
            ruff = measure(time_ruff)[:2]
            wall, cpu, again = measure(check)
        if _findings(again) != _findings(records):
            sys.exit("the cold check found other findings than in its first run")
        pairs.append((ruff, (wall, cpu)))
    return pairs


def _print_pairs(pairs: list[tuple[Timing, Timing]]) -> None:
    print(f"ruff and the cold check, {len(pairs)} pairs (CPU s, then the check's ratios):")
    print(f"{'pair':>6}{'ruff CPU s':>12}{'check CPU s':>13}{'CPU x ruff':>12}{'wall x ruff':>13}")
    for number, (ruff, check) in enumerate(pairs, 1):
        cpu_ratio, wall_ratio = check[1] / ruff[1], check[0] / ruff[0]
        print(f"{number:6}{ruff[1]:12.2f}{check[1]:13.2f}{cpu_ratio:12.2f}{wall_ratio:13.2f}")
    cpu_ratios = sorted(check[1] / ruff[1] for ruff, check in pairs)
    wall_ratios = sorted(check[0] / ruff[0] for ruff, check in pairs)
    print(
        f"median CPU x ruff {statistics.median(cpu_ratios):.2f} "
        f"({cpu_ratios[0]:.2f} to {cpu_ratios[-1]:.2f}), "
        f"median wall x ruff {statistics.median(wall_ratios):.2f} "
        f"({wall_ratios[0]:.2f} to {wall_ratios[-1]:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="default: the torch package")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--warm", action="store_true", help="also time a warm-cache rerun")
    parser.add_argument(
        "--no-parsers", action="store_true", help="skip timing bare LibCST and ast parsing"
    )
    parser.add_argument(
        "--no-count", action="store_true", help="skip counting the files LibCST parses"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="time ruff and the cold check N times each, alternating which goes first",
    )
    parser.add_argument("--json", type=Path, help="write the cold check's JSON records here")
    args = parser.parse_args()
    adopt_orphans()
    paths = [path.resolve() for path in args.paths or [_default_root()]]

    files = python_files(paths)
    lines = sum(path.read_bytes().count(b"\n") for path in files)
    print(f"{len(files)} files, {lines} lines, {args.jobs} processes, load {os.getloadavg()}")

    rows: list[tuple[str, float, float]] = []
    unparsable: int | None = None
    if not args.no_parsers:
        wall, cpu, unparsable = measure(lambda: parse_all(files, args.jobs))
        rows.append(("libcst.parse_module", wall, cpu))
        rows.append(("ast.parse", *measure(lambda: parse_all(files, args.jobs, _parse_ast))[:2]))
    ruff = shutil.which("ruff")
    if ruff is not None:
        rows.append((RUFF, *measure(lambda: run_ruff(ruff, files, args.jobs))[:2]))
    with tempfile.TemporaryDirectory() as directory:
        run = functools.partial(run_gradfix, files, args.jobs, cwd=Path(directory))
        wall, cpu, records = measure(run)
        rows.append(("gradfix check --no-cache", wall, cpu))
        if args.json is not None:
            args.json.write_text(json.dumps(records, indent=1))
        if args.warm:
            compileall.compile_dir(REPO_ROOT / "codemods", quiet=1)
            rows.append(("  filling the cache", *measure(lambda: run(cache=True))[:2]))
            reruns = sorted(measure(lambda: run(cache=True))[:2] for _ in range(WARM_RERUNS))
            rows.append(("  warm cache, median", *reruns[WARM_RERUNS // 2]))
            print(f"warm reruns, wall s: {', '.join(f'{wall:.2f}' for wall, _ in reruns)}")
        if ruff is not None and args.repeat > 1:
            by_label = {label: (wall, cpu) for label, wall, cpu in rows}
            first = (by_label[RUFF], by_label["gradfix check --no-cache"])
            time_ruff = functools.partial(run_ruff, ruff, files, args.jobs)
            pairs = [first, *_more_pairs(time_ruff, run, records, args.repeat - 1)]

    by_label = {label: (wall, cpu) for label, wall, cpu in rows}
    libcst_row, ruff_row = by_label.get("libcst.parse_module"), by_label.get(RUFF)
    header = f"{'':28}{'seconds':>9}{'files/s':>9}{'x libcst':>10}{'x ruff':>8}"
    print(f"{header}{'CPU s':>9}{'CPU x ruff':>11}")
    for label, wall, cpu in rows:
        versus_libcst = f"{wall / libcst_row[0]:10.2f}" if libcst_row else f"{'-':>10}"
        versus_ruff = f"{wall / ruff_row[0]:8.2f}" if ruff_row else f"{'-':>8}"
        cpu_versus_ruff = f"{cpu / ruff_row[1]:11.2f}" if ruff_row else f"{'-':>11}"
        print(
            f"{label:28}{wall:9.2f}{len(files) / wall:9.0f}"
            f"{versus_libcst}{versus_ruff}{cpu:9.2f}{cpu_versus_ruff}"
        )
    if ruff is not None and args.repeat > 1:
        _print_pairs(pairs)
    errors = [r for r in records if r["rule"] is None]
    crashed = [r for r in errors if "internal error" in r["message"]]
    print(f"findings: {len(_findings(records))}")
    if unparsable is not None:
        print(f"files LibCST cannot parse: {unparsable}")
    print(f"files reported as errors: {len(errors)}, of which crashed the analysis: {len(crashed)}")
    for record in crashed:
        print(f"  {record['path']}: {record['message']}")
    if args.no_count:
        return
    fixable = {r["path"] for r in records if r["rule"] is not None and r.get("fix")}
    libcst_parses = len(files) - parse_all(files, args.jobs, _parsed_by_libcst)
    print(f"files LibCST parsed: {libcst_parses}; files with a fixable finding: {len(fixable)}")


if __name__ == "__main__":
    main()
