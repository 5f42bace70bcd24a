"""Run the per-file pipeline over many files, in a process pool, and write the fixes.

Workers get paths, read the bytes themselves and send back small results: the findings,
plus the bytes only where the caller needs them (a diff, or stdin). A file that makes the
pipeline raise gets an internal-error result; every other file is unaffected. Results come
back in the order of the input, whatever the number of workers.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import re
import traceback
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from codemods import notebooks, pipeline
from codemods.atomic import write_atomic
from codemods.cache import Entry, ResultCache
from codemods.findings import Finding, Tier

# Fewer files than this per worker process are not worth a worker's start-up.
MIN_FILES_PER_WORKER = 16
MAX_CHUNK = 32

REPORT_HINT = "please report this to the gradfix maintainers, with the file if you can"


class Mode(Enum):
    CHECK = "check"  # report only
    FIX = "fix"  # apply the fixes and write them
    DIFF = "diff"  # compute the fixes, write nothing, keep the bytes for a diff


class ErrorKind(str, Enum):
    PARSE = "parse error"
    READ = "read error"
    WRITE = "write error"
    INTERNAL = "internal error"


@dataclass(frozen=True)
class FileError:
    """Why a file could not be processed; `message` says what to do about it."""

    kind: ErrorKind
    message: str
    line: int = 1
    column: int = 1
    cell: int | None = None  # in a notebook: the cell (1-based) the line and column count in


@dataclass(frozen=True)
class FileTask:
    path: Path
    select: frozenset[str]  # rule codes to run on this file
    cache: ResultCache | None = None  # where results are looked up and recorded; None: nowhere


@dataclass(frozen=True)
class FileResult:
    path: Path
    # Findings left to deal with: in check mode all of them; after a fix, those the fix did
    # not resolve (positions in the rewritten file; in diff mode, in the original one).
    findings: tuple[Finding, ...] = ()
    fixed: tuple[Finding, ...] = ()  # applied, or that would be (diff): original positions
    changed: bool = False  # the file was (fix) or would be (diff) rewritten
    source: bytes | None = None  # the original bytes, for a diff of a changed file
    new_source: bytes | None = None  # the rewritten bytes, for a diff or stdin
    error: FileError | None = None


_PARSE_ERROR = re.compile(r"(?:cell (\d+):)?(\d+):(\d+): (.*)", re.DOTALL)


def _parse_error(error: str) -> FileError:
    match = _PARSE_ERROR.fullmatch(error)
    if match is None:
        return FileError(ErrorKind.PARSE, error)
    cell, line, column, message = match.groups()
    message = message.removeprefix("parse error: ")
    return FileError(
        ErrorKind.PARSE, message, int(line), int(column), None if cell is None else int(cell)
    )


def _internal_error(exc: BaseException) -> FileError:
    frames = traceback.extract_tb(exc.__traceback__)
    # Point at gradfix's own code, the likely culprit, rather than at a library it called.
    ours = [frame for frame in frames if "codemods" in Path(frame.filename).parts]
    origin = ""
    if ours or frames:
        frame = (ours or frames)[-1]
        parts = Path(frame.filename).parts
        where = "/".join(parts[parts.index("codemods") :]) if ours else parts[-1]
        origin = f" (at {where}:{frame.lineno} in {frame.name})"
    return FileError(
        ErrorKind.INTERNAL,
        f"{type(exc).__name__}: {exc}{origin}; the file was left unchanged; {REPORT_HINT}",
    )


def _without(findings: Sequence[Finding], removed: Sequence[Finding]) -> tuple[Finding, ...]:
    left = list(findings)
    for finding in removed:
        with contextlib.suppress(ValueError):
            left.remove(finding)
    return tuple(left)


def process_bytes(
    path: Path,
    source: bytes,
    select: frozenset[str],
    mode: Mode,
    unsafe_fixes: bool = False,
    *,
    write: bool = False,
    cache: ResultCache | None = None,
) -> FileResult:
    """One file's bytes through the pipeline. With `write`, a fix is written to `path`;
    otherwise the rewritten bytes are returned in `new_source`. What the pipeline finds is
    recorded in `cache`. Never raises."""
    try:
        return _process(path, source, select, mode, unsafe_fixes, write, cache)
    except notebooks.NotebookWriteError as exc:
        return FileResult(path, error=FileError(ErrorKind.WRITE, str(exc)))
    except Exception as exc:
        return FileResult(path, error=_internal_error(exc))


def _process(
    path: Path,
    source: bytes,
    select: frozenset[str],
    mode: Mode,
    unsafe: bool,
    write: bool,
    cache: ResultCache | None,
) -> FileResult:
    options = pipeline.RunOptions(select, fix=mode is not Mode.CHECK, unsafe_fixes=unsafe)
    notebook = notebooks.is_notebook(path)
    result = _analyse(source, options, cache, notebook)
    if result.error is not None:
        return FileResult(path, error=_parse_error(result.error))
    new = result.new_source
    if new is None or new == source:
        return FileResult(path, findings=tuple(result.findings))
    fixed = tuple(result.fixed)
    if mode is Mode.DIFF:
        left = _without(result.findings, fixed)
        return FileResult(path, left, fixed, changed=True, source=source, new_source=new)

    # What is left is what a check of the rewritten file finds, at its positions there.
    check = pipeline.RunOptions(select, fix=False, unsafe_fixes=unsafe)
    after = _analyse(new, check, cache, notebook)  # also caches the rewritten file's check
    if after.error is not None:
        return FileResult(
            path,
            error=FileError(
                ErrorKind.INTERNAL,
                f"the fixed code would not parse ({after.error}); the file was left "
                f"unchanged; {REPORT_HINT}",
            ),
        )
    if not write:
        return FileResult(path, tuple(after.findings), fixed, changed=True, new_source=new)
    try:
        write_atomic(path, new)
    except OSError as exc:
        return FileResult(
            path,
            error=FileError(
                ErrorKind.WRITE,
                f"cannot write the fixes: {exc}; the file was left unchanged; check its "
                "permissions and the free space",
            ),
        )
    return FileResult(path, tuple(after.findings), fixed, changed=True)


def process_file(task: FileTask, mode: Mode, unsafe_fixes: bool = False) -> FileResult:
    """Read, process and (in fix mode) rewrite one file. Never raises."""
    try:
        source = task.path.read_bytes()
    except OSError as exc:
        message = f"cannot read the file: {exc.strerror or exc}; check that it is readable"
        return FileResult(task.path, error=FileError(ErrorKind.READ, message))
    write = mode is Mode.FIX
    return process_bytes(
        task.path, source, task.select, mode, unsafe_fixes, write=write, cache=task.cache
    )


def _analyse(
    source: bytes, options: pipeline.RunOptions, cache: ResultCache | None, notebook: bool
) -> pipeline.SourceResult:
    """The pipeline's result (through `notebooks` for a notebook's bytes), its findings and
    parse error recorded in `cache`: they are what a check of these bytes reports, whether or
    not the pipeline was also asked to fix."""
    process = notebooks.process_notebook if notebook else pipeline.process_source
    result = process(source, options)
    if cache is not None:
        entry = Entry(tuple(result.findings), result.error)
        cache.store(source, options.select, options.unsafe_fixes, entry, notebook)
    return result


def _fix_applies(finding: Finding, unsafe_fixes: bool) -> bool:
    return finding.fixable and (finding.tier is Tier.SAFE or unsafe_fixes)


def cached_result(task: FileTask, mode: Mode, unsafe_fixes: bool = False) -> FileResult | None:
    """The task's result from its cache, without the pipeline, when the cache knows the
    file's bytes and (in fix and diff modes) they have no fix to apply; else None."""
    if task.cache is None:
        return None
    try:
        source = task.path.read_bytes()
    except OSError:
        return None  # processing it reports the error
    notebook = notebooks.is_notebook(task.path)
    entry = task.cache.load(source, task.select, unsafe_fixes, notebook)
    if entry is None:
        return None
    if entry.error is not None:
        return FileResult(task.path, error=_parse_error(entry.error))
    if mode is not Mode.CHECK and any(_fix_applies(f, unsafe_fixes) for f in entry.findings):
        return None
    return FileResult(task.path, findings=entry.findings)


def _process_chunk(tasks: list[FileTask], mode: Mode, unsafe_fixes: bool) -> list[FileResult]:
    return [process_file(task, mode, unsafe_fixes) for task in tasks]


def pool_context() -> multiprocessing.context.BaseContext:
    # Not "fork": the caller may have threads (torch's, in tests), and forking those can
    # deadlock. A fork server imports the pipeline once and forks ready workers from it.
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["codemods.engine"])
        return context
    return multiprocessing.get_context("spawn")


def run(
    tasks: Sequence[FileTask], mode: Mode, unsafe_fixes: bool = False, jobs: int | None = None
) -> Iterator[FileResult]:
    """Process `tasks`, yielding one result per task in their order.

    `jobs` worker processes (default: the CPU count); with one, or with too few files to be
    worth it, everything runs in this process."""
    jobs = jobs or os.cpu_count() or 1
    workers = min(jobs, math.ceil(len(tasks) / MIN_FILES_PER_WORKER))
    if workers <= 1:
        for task in tasks:
            yield process_file(task, mode, unsafe_fixes)
        return

    size = max(1, min(MAX_CHUNK, math.ceil(len(tasks) / (workers * 4))))
    chunks = [list(tasks[i : i + size]) for i in range(0, len(tasks), size)]
    done = 0
    with ProcessPoolExecutor(max_workers=workers, mp_context=pool_context()) as executor:
        futures: list[Future[list[FileResult]]] = [
            executor.submit(_process_chunk, chunk, mode, unsafe_fixes) for chunk in chunks
        ]
        try:
            for future in futures:
                try:
                    results = future.result()
                except BrokenProcessPool:
                    break
                done += len(results)
                yield from results
        finally:
            for future in futures:
                future.cancel()
    # A worker died (killed, or a crash in native code) and took every unfinished chunk with
    # it: redo those files one at a time, each alone in a worker, to single out the culprit.
    yield from _run_isolated(tasks[done:], mode, unsafe_fixes)


def run_cached(
    tasks: Sequence[FileTask], mode: Mode, unsafe_fixes: bool = False, jobs: int | None = None
) -> Iterator[FileResult]:
    """`run`, answering from the tasks' caches where they can. Only the other files are
    processed, so a rerun over unchanged files starts no worker process at all."""
    known = [cached_result(task, mode, unsafe_fixes) for task in tasks]
    missed = [task for task, result in zip(tasks, known, strict=True) if result is None]
    with contextlib.closing(run(missed, mode, unsafe_fixes, jobs)) as fresh:
        for result in known:
            yield next(fresh) if result is None else result


def _run_isolated(
    tasks: Sequence[FileTask], mode: Mode, unsafe_fixes: bool
) -> Iterator[FileResult]:
    executor: ProcessPoolExecutor | None = None
    try:
        for task in tasks:
            if executor is None:
                executor = ProcessPoolExecutor(max_workers=1, mp_context=pool_context())
            try:
                (result,) = executor.submit(_process_chunk, [task], mode, unsafe_fixes).result()
            except BrokenProcessPool as exc:
                executor.shutdown()
                executor = None
                message = (
                    f"the worker process died while processing this file ({exc}); the file was "
                    f"left unchanged; {REPORT_HINT}"
                )
                result = FileResult(task.path, error=FileError(ErrorKind.INTERNAL, message))
            yield result
    finally:
        if executor is not None:
            executor.shutdown()
