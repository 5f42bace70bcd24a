"""Run the per-file pipeline over many files, in a process pool, and write the fixes.

Workers get paths, read the bytes themselves and send back small results: the findings,
plus the bytes only where the caller needs them (a diff, or stdin). A file that makes the
pipeline raise, or runs out of its time or memory budget, gets an error result; every other
file is unaffected. Results come back in the order of the input, whatever the number of
workers. Only regular files are read, and a fix is written only to a file whose real path lies
under the paths it was found from (`FileTask.roots`), in place (`atomic.rewrite`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import re
import stat
import sys
import traceback
from collections.abc import Iterator, Sequence
from concurrent.futures import BrokenExecutor, Future
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from codemods import atomic, warm, workers
from codemods.cache import Entry, ResultCache
from codemods.findings import Finding, Tier
from codemods.workers import Budget, BudgetExceeded, pool_context

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from codemods import pipeline

# Fewer files than this per worker process are not worth a worker's start-up.
MIN_FILES_PER_WORKER = 16
MAX_CHUNK = 32

DEFAULT_BUDGET = Budget()
NOTEBOOK_SUFFIX = ".ipynb"  # notebooks.SUFFIX, without loading what that module loads

REPORT_HINT = "please report this to the gradfix maintainers, with the file if you can"


class Mode(Enum):
    CHECK = "check"  # report only
    FIX = "fix"  # apply the fixes and write them
    DIFF = "diff"  # compute the fixes, write nothing, keep the bytes for a diff


class ErrorKind(str, Enum):
    PARSE = "parse error"
    READ = "read error"
    WRITE = "write error"
    NOT_FIXED = "not fixed"
    SKIPPED = "skipped"
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
    # The real paths a fix may be written under: those of the paths given on the command line
    # (`walk.write_roots`; a check, which writes nothing, leaves them out). None: the real path
    # of the folder the file was found in, so that a symbolic link never leads a write out of it.
    roots: tuple[Path, ...] | None = None


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
    advice = f"the file was left unchanged; {REPORT_HINT}"
    try:
        frames = traceback.extract_tb(exc.__traceback__)
        # Point at gradfix's own code, the likely culprit, rather than at a library it called.
        ours = [frame for frame in frames if "codemods" in Path(frame.filename).parts]
        origin = ""
        if ours or frames:
            frame = (ours or frames)[-1]
            parts = Path(frame.filename).parts
            where = "/".join(parts[parts.index("codemods") :]) if ours else parts[-1]
            origin = f" (at {where}:{frame.lineno} in {frame.name})"
        return FileError(ErrorKind.INTERNAL, f"{type(exc).__name__}: {exc}{origin}; {advice}")
    except Exception:  # describing the failure must not fail in turn
        return FileError(ErrorKind.INTERNAL, f"{type(exc).__name__}; {advice}")


def _skipped(reason: str) -> FileError:
    return FileError(ErrorKind.SKIPPED, f"{reason}; the file was left unchanged")


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
    roots: tuple[Path, ...] | None = None,
) -> FileResult:
    """One file's bytes through the pipeline. With `write`, a fix is written to `path` (which
    must still hold `source`, and lie under `roots`); otherwise the rewritten bytes are
    returned in `new_source`. What the pipeline finds is recorded in `cache`. Never raises
    but BudgetExceeded."""
    # Imported here, not above: the pipeline (the analysis and the rules) takes longer to load
    # than a warm run over thousands of files, which never needs it.
    from codemods import notebooks

    try:
        return _process(path, source, select, mode, unsafe_fixes, write, cache, roots)
    except notebooks.NotebookWriteError as exc:
        return FileResult(path, error=FileError(ErrorKind.WRITE, str(exc)))
    except RecursionError:
        reason = "nested too deeply for gradfix's analysis (Python's recursion limit)"
        return FileResult(path, error=_skipped(reason))
    except MemoryError:
        return FileResult(path, error=_skipped("out of its memory budget"))
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
    roots: tuple[Path, ...] | None,
) -> FileResult:
    from codemods import notebooks, pipeline

    options = pipeline.RunOptions(select, fix=mode is not Mode.CHECK, unsafe_fixes=unsafe)
    notebook = notebooks.is_notebook(path)
    result = _analyse(source, options, cache, notebook)
    # A parse error, alone; or, in a notebook, a cell that does not parse beside the findings
    # and fixes of the other cells (notebooks.process_notebook).
    error = None if result.error is None else _parse_error(result.error)
    new = result.new_source
    if new is None or new == source:
        return FileResult(path, findings=tuple(result.findings), error=error)
    fixed = tuple(result.fixed)
    if mode is Mode.DIFF:
        left = _without(result.findings, fixed)
        return FileResult(path, left, fixed, True, source, new, error)

    # What is left is what a check of the rewritten file finds, at its positions there.
    check = pipeline.RunOptions(select, fix=False, unsafe_fixes=unsafe)
    after = _analyse(new, check, cache, notebook)  # also caches the rewritten file's check
    if after.error != result.error:  # a notebook's broken cell is left as it was
        return FileResult(
            path,
            error=FileError(
                ErrorKind.INTERNAL,
                f"the fixed code would not parse ({after.error}); the file was left "
                f"unchanged; {REPORT_HINT}",
            ),
        )
    if not write:
        return FileResult(path, tuple(after.findings), fixed, True, new_source=new, error=error)
    refused = _write(path, source, new, roots)
    if refused is not None:
        return FileResult(path, tuple(result.findings), error=refused)
    return FileResult(path, tuple(after.findings), fixed, changed=True, error=error)


def _write(
    path: Path, source: bytes, new: bytes, roots: tuple[Path, ...] | None
) -> FileError | None:
    """Write the fix in place; what kept it from being written, if anything."""
    real = Path(os.path.realpath(path))
    allowed = roots if roots is not None else (Path(os.path.realpath(path.parent)),)
    if not any(real.is_relative_to(root) for root in allowed):
        return FileError(
            ErrorKind.NOT_FIXED,
            f"it is a link to {real}, outside the paths given on the command line, and gradfix "
            "writes only under those; to fix it, name its real path on the command line",
        )
    try:
        with workers.uninterruptible():  # never leave a half-written file behind
            atomic.rewrite(real, source, new)
    except atomic.ReadOnlyError:
        return FileError(
            ErrorKind.NOT_FIXED,
            "the file is read-only (no write permission bit), so it was left unchanged; make it "
            "writable (chmod u+w) to have it fixed",
        )
    except atomic.ChangedError:
        return FileError(
            ErrorKind.NOT_FIXED,
            "the file changed while gradfix was working on it (another program, or another "
            "gradfix run, wrote it), so the fixes were not written; run gradfix again",
        )
    except OSError as exc:
        return FileError(
            ErrorKind.WRITE,
            f"cannot write the fixes: {exc.strerror or exc}; the file was left unchanged; check "
            "its permissions, the free space and that the user's cache home "
            "(~/.cache/gradfix, where a copy is kept while a file is rewritten) is writable",
        )
    return None


class NotRegularError(OSError):
    """The path names something other than a regular file (a FIFO, a device, a folder)."""


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file at `path`. Never waits on a FIFO or reads a device:
    raises NotRegularError for anything but a regular file, OSError when it cannot be read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularError(errno.EINVAL, "not a regular file")
        # A concurrent gradfix rewriting the file in place holds an exclusive lock: never
        # read it halfway through.
        fcntl.flock(fd, fcntl.LOCK_SH)
        return file.read()


def _read_error(path: Path, exc: OSError) -> FileResult:
    if isinstance(exc, NotRegularError):
        return FileResult(
            path,
            error=_skipped(
                "not a regular file (a FIFO, a device or a socket): gradfix reads only "
                "regular files; remove it from the command line"
            ),
        )
    if exc.errno == errno.ENOENT:
        message = "no such file or directory; check the path"
    elif exc.errno == errno.ELOOP:
        message = "a symbolic link that leads to itself (a loop); fix or remove the link"
    else:
        message = f"cannot read the file: {exc.strerror or exc}; check that it is readable"
    return FileResult(path, error=FileError(ErrorKind.READ, message))


def process_file(
    task: FileTask, mode: Mode, unsafe_fixes: bool = False, budget: Budget = DEFAULT_BUDGET
) -> FileResult:
    """Read, process and (in fix mode) rewrite one file, within `budget`. Never raises."""
    try:
        source = read_regular(task.path)
    except OSError as exc:
        return _read_error(task.path, exc)
    write = mode is Mode.FIX
    try:
        with workers.time_budget(budget.seconds):
            return process_bytes(
                task.path,
                source,
                task.select,
                mode,
                unsafe_fixes,
                write=write,
                cache=task.cache,
                roots=task.roots,
            )
    except BudgetExceeded:
        return FileResult(
            task.path,
            error=_skipped(
                f"it took longer than gradfix's time budget of {budget.seconds:g} seconds per "
                "file (a generated file?); exclude it with --exclude"
            ),
        )


def _analyse(
    source: bytes, options: pipeline.RunOptions, cache: ResultCache | None, notebook: bool
) -> pipeline.SourceResult:
    """The pipeline's result (through `notebooks` for a notebook's bytes), its findings and
    parse error recorded in `cache`: they are what a check of these bytes reports, whether or
    not the pipeline was also asked to fix."""
    from codemods import notebooks, pipeline

    process = notebooks.process_notebook if notebook else pipeline.process_source
    result = process(source, options)
    if cache is not None:
        entry = Entry(tuple(result.findings), result.error)
        cache.store(source, options.select, options.unsafe_fixes, entry, notebook)
    return result


def _fix_applies(finding: Finding, unsafe_fixes: bool) -> bool:
    return finding.fixable and (finding.tier is Tier.SAFE or unsafe_fixes)


def _from_entry(task: FileTask, entry: Entry, mode: Mode, unsafe_fixes: bool) -> FileResult | None:
    """The task's result as `entry` gives it; None when there is a fix to apply."""
    if mode is not Mode.CHECK and any(_fix_applies(f, unsafe_fixes) for f in entry.findings):
        return None
    error = None if entry.error is None else _parse_error(entry.error)
    return FileResult(task.path, findings=entry.findings, error=error)


def cached_result(task: FileTask, mode: Mode, unsafe_fixes: bool = False) -> FileResult | None:
    """The task's result from its cache, without the pipeline, when the cache knows the
    file's bytes and (in fix and diff modes) they have no fix to apply; else None."""
    if task.cache is None:
        return None
    try:
        source = read_regular(task.path)
    except OSError:
        return None  # processing it reports the error
    notebook = task.path.suffix.lower() == NOTEBOOK_SUFFIX
    entry = task.cache.load(source, task.select, unsafe_fixes, notebook)
    return None if entry is None else _from_entry(task, entry, mode, unsafe_fixes)


def _process_chunk(
    tasks: list[FileTask], mode: Mode, unsafe_fixes: bool, budget: Budget
) -> list[FileResult]:
    return [process_file(task, mode, unsafe_fixes, budget) for task in tasks]


def run(
    tasks: Sequence[FileTask],
    mode: Mode,
    unsafe_fixes: bool = False,
    jobs: int | None = None,
    budget: Budget = DEFAULT_BUDGET,
) -> Iterator[FileResult]:
    """Process `tasks`, yielding one result per task in their order.

    `jobs` worker processes (default: the CPU count); with one, or with too few files to be
    worth it, everything runs in this process."""
    jobs = jobs or os.cpu_count() or 1
    workers_wanted = min(jobs, math.ceil(len(tasks) / MIN_FILES_PER_WORKER))
    if workers_wanted <= 1:
        for task in tasks:
            yield process_file(task, mode, unsafe_fixes, budget)
        return

    chunks = _chunks(tasks, workers_wanted)
    done = 0
    with _pool(workers_wanted, budget) as executor:
        futures: list[Future[list[FileResult]]] = [
            executor.submit(_process_chunk, chunk, mode, unsafe_fixes, budget) for chunk in chunks
        ]
        for future in futures:
            try:
                results = future.result()
            except BrokenExecutor:
                break
            done += len(results)
            yield from results
    # A worker died (killed, or a crash in native code) and took every unfinished chunk with
    # it: redo those files one at a time, each alone in a worker, to single out the culprit.
    yield from _run_isolated(tasks[done:], mode, unsafe_fixes, budget)


def _chunks(tasks: Sequence[FileTask], workers_wanted: int) -> list[list[FileTask]]:
    """The tasks in chunks that shrink as the work runs out: big ones cost little in messages,
    and the last, of one file each, leave no worker idle for long while another finishes."""
    chunks: list[list[FileTask]] = []
    start = 0
    while start < len(tasks):
        size = max(1, min(MAX_CHUNK, math.ceil((len(tasks) - start) / (workers_wanted * 4))))
        chunks.append(list(tasks[start : start + size]))
        start += size
    return chunks


@contextlib.contextmanager
def _pool(size: int, budget: Budget) -> Iterator[ProcessPoolExecutor]:
    """A pool of `size` workers, started with a clean import path. On a way out other than
    the end of the work (Ctrl-C, a closed generator, an error), queued work is cancelled and
    the workers are ended at once, without waiting for the files they are on."""
    # Imported here: a rerun the cache answers whole starts no worker, and the module is a
    # fiftieth of such a run.
    from concurrent.futures import ProcessPoolExecutor

    context = pool_context()
    with workers.clean_start(context):
        executor = ProcessPoolExecutor(
            max_workers=size,
            mp_context=context,
            initializer=workers.start_worker,
            initargs=(os.getpid(), budget),
        )
        try:
            yield executor
        except BaseException:
            # The executor has no public way to end its workers at once; shutdown() alone
            # waits for the chunks they are on. Their futures are left to the executor, which
            # fails them as its workers die (cancelling them here races with that).
            for process in list(getattr(executor, "_processes", {}).values()):
                with contextlib.suppress(Exception):
                    process.kill()
            executor.shutdown(wait=False)
            raise
        executor.shutdown(cancel_futures=True)  # after a dead worker: what it took with it


def run_cached(
    tasks: Sequence[FileTask],
    mode: Mode,
    unsafe_fixes: bool = False,
    jobs: int | None = None,
    budget: Budget = DEFAULT_BUDGET,
) -> Iterator[FileResult]:
    """`run`, answering from the tasks' caches where they can: first from the warm index, by
    each file's metadata, without reading it; then from the content cache. Only the other
    files are processed, so a rerun over unchanged files starts no worker process at all.
    In fix mode, files a killed run left half-written are first restored (`atomic.recover`)."""
    if mode is Mode.FIX:
        for path in atomic.recover():
            print(
                f"gradfix: restored {path} from the copy kept while a killed gradfix run was "
                "rewriting it; its fixes are applied again now",
                file=sys.stderr,
            )
    indexes: dict[ResultCache, warm.WarmIndex | None] = {}
    # Per task: its metadata when it has an index and the index did not answer for it.
    unindexed: list[warm.Signature | None] = []
    known: list[FileResult | None] = []
    for task in tasks:
        index = _index(task.cache, indexes) if task.cache is not None else None
        metadata = warm.signature(task.path) if index is not None else None
        result = None
        if index is not None and metadata is not None:
            entry = index.lookup(task.path, task.select, unsafe_fixes, metadata)
            result = None if entry is None else _from_entry(task, entry, mode, unsafe_fixes)
        unindexed.append(metadata if result is None else None)
        known.append(result if result is not None else cached_result(task, mode, unsafe_fixes))
    missed = [task for task, result in zip(tasks, known, strict=True) if result is None]
    with contextlib.closing(run(missed, mode, unsafe_fixes, jobs, budget)) as fresh:
        for task, metadata, result in zip(tasks, unindexed, known, strict=True):
            if result is None:
                result = next(fresh)
            index = indexes.get(task.cache) if task.cache is not None else None
            if index is not None and metadata is not None:
                _remember(index, task, metadata, result, unsafe_fixes)
            yield result
        # Let `run` end on its own: closed while it holds its pool, it would end the workers
        # as after Ctrl-C (killed, the pool's thread left running into Python's exit, where
        # CPython 3.11's exit hook may write to that thread's pipe as it closes: EBADF).
        next(fresh, None)
    for index in indexes.values():
        if index is not None:
            index.save()


def _index(
    cache: ResultCache | None, indexes: dict[ResultCache, warm.WarmIndex | None]
) -> warm.WarmIndex | None:
    if cache is None:
        return None
    if cache not in indexes:
        indexes[cache] = warm.WarmIndex.open(cache)
    return indexes[cache]


def _remember(
    index: warm.WarmIndex,
    task: FileTask,
    metadata: warm.Signature,
    result: FileResult,
    unsafe_fixes: bool,
) -> None:
    """Record in the warm index what a check of the file reports, when `result` says it and
    the file is still the one that was read: a result of a file that was not rewritten, with
    its findings or its parse error."""
    error = result.error
    if result.changed or (error is not None and error.kind is not ErrorKind.PARSE):
        return
    if warm.signature(task.path) != metadata:
        return
    if error is not None:
        where = f"cell {error.cell}:" if error.cell is not None else ""
        text = f"{where}{error.line}:{error.column}: parse error: {error.message}"
        entry = Entry(result.findings, text)  # a notebook's other cells have findings
    else:
        entry = Entry(result.findings)
    index.record(task.path, task.select, unsafe_fixes, metadata, entry)


def _run_isolated(
    tasks: Sequence[FileTask], mode: Mode, unsafe_fixes: bool, budget: Budget
) -> Iterator[FileResult]:
    for task in tasks:
        with _pool(1, budget) as executor:
            try:
                future = executor.submit(_process_chunk, [task], mode, unsafe_fixes, budget)
                (result,) = future.result()
            except BrokenExecutor as exc:
                message = (
                    f"the worker process died while processing this file ({exc}); the file was "
                    f"left unchanged; {REPORT_HINT}"
                )
                result = FileResult(task.path, error=FileError(ErrorKind.INTERNAL, message))
        yield result
