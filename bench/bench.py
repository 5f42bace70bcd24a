"""Time gradfix against plain LibCST parsing over the same files.

    python bench/bench.py [ROOT] [--jobs N]

ROOT defaults to the installed torch package, N to the CPU count. (a) parses every file with
`libcst.parse_module`, (b) runs `gradfix check` with all rules through the engine and an empty
result cache (cold), which it fills, both with N worker processes; (c) runs the same check
again (warm), as a rerun over an unchanged repository does: the cache answers for every file.
Files that crash the analysis are listed at the end.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import libcst

from codemods.cache import ResultCache
from codemods.engine import ErrorKind, FileTask, Mode, pool_context, run_cached
from codemods.rules import RULES
from codemods.walk import python_files


def _parse(path: Path) -> bool:
    try:
        libcst.parse_module(path.read_bytes())
    except Exception:
        return False
    return True


def time_libcst(files: list[Path], jobs: int) -> tuple[float, int]:
    """Seconds to parse every file, and how many failed to parse."""
    start = time.perf_counter()
    if jobs <= 1:
        parsed = [_parse(path) for path in files]
    else:
        chunk = max(1, min(32, math.ceil(len(files) / (jobs * 4))))
        with ProcessPoolExecutor(max_workers=jobs, mp_context=pool_context()) as pool:
            parsed = list(pool.map(_parse, files, chunksize=chunk))
    return time.perf_counter() - start, parsed.count(False)


def time_gradfix(files: list[Path], jobs: int, cache: ResultCache) -> tuple[float, list[str], int]:
    """Seconds for a check with all rules, the files that crashed it, and the findings."""
    tasks = [FileTask(path, frozenset(RULES), cache) for path in files]
    start = time.perf_counter()
    results = list(run_cached(tasks, Mode.CHECK, jobs=jobs))
    elapsed = time.perf_counter() - start
    crashed = [
        f"{r.path}: {r.error.message}"
        for r in results
        if r.error is not None and r.error.kind is ErrorKind.INTERNAL
    ]
    return elapsed, crashed, sum(len(r.findings) for r in results)


def _default_root() -> Path:
    spec = importlib.util.find_spec("torch")  # its location, without importing it
    if spec is None or spec.origin is None:
        sys.exit("torch is not installed: give the directory to benchmark")
    return Path(spec.origin).parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, help="default: the torch package")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    root = args.root or _default_root()

    files = python_files([root])
    lines = sum(path.read_bytes().count(b"\n") for path in files)
    print(f"{root}: {len(files)} files, {lines} lines, {args.jobs} processes")

    libcst_seconds, unparsable = time_libcst(files, args.jobs)
    with tempfile.TemporaryDirectory() as directory:
        cache = ResultCache.at(Path(directory))
        gradfix_seconds, crashed, findings = time_gradfix(files, args.jobs, cache)
        warm_seconds, _, warm_findings = time_gradfix(files, args.jobs, cache)

    print(f"{'':28}{'seconds':>10}{'files/s':>10}{'lines/s':>12}")
    for label, seconds in [
        ("libcst.parse_module", libcst_seconds),
        ("gradfix check (cold cache)", gradfix_seconds),
        ("gradfix check (warm cache)", warm_seconds),
    ]:
        print(f"{label:28}{seconds:10.2f}{len(files) / seconds:10.1f}{lines / seconds:12.0f}")
    print(f"ratio gradfix/libcst: {gradfix_seconds / libcst_seconds:.2f}")
    print(f"ratio warm/cold: {warm_seconds / gradfix_seconds:.3f}")
    print(f"findings: {findings} (warm: {warm_findings}); files LibCST cannot parse: {unparsable}")
    print(f"files that crashed the analysis: {len(crashed)}")
    for line in crashed:
        print(f"  {line}")


if __name__ == "__main__":
    main()
