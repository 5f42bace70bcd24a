"""Worker processes and per-file budgets: how gradfix runs code it does not control the cost of.

- Workers start with a clean import path. The fork server, the resource tracker and (where there
  is no fork server) spawned workers are launched as `python -c ...`, which puts the current
  directory, the checked tree, first on `sys.path`: a `multiprocessing/` package committed to
  the tree would run. They are launched with PYTHONSAFEPATH=1 (Python 3.11+), and from an
  empty folder besides on 3.10, which lacks it.
- Workers end with their parent: on Linux the kernel kills them when the fork server (which
  exits when gradfix does) dies; everywhere, a watchdog thread ends a worker whose gradfix
  process is gone. Workers ignore Ctrl-C: it reaches the whole process group, and gradfix
  itself stops them.
- Each file gets a time budget (a timer signal in the thread that runs the file: the main
  thread of a worker or of gradfix) and, in a worker, a memory budget (an address-space limit,
  after which allocations fail with MemoryError). Running out of either skips the file.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import resource
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing import forkserver, resource_tracker

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
WATCH_SECONDS = 0.5


class BudgetExceeded(BaseException):
    """A file ran out of its time. A BaseException, so that no `except Exception` on the way
    (in gradfix or a library) mistakes it for a failure of its own and carries on."""


@dataclass(frozen=True)
class Budget:
    """What one file may cost: seconds of wall-clock time, and bytes of memory (in a worker
    process, on top of what the worker uses when it starts)."""

    seconds: float = 60.0
    memory: int = 2 * 1024**3


def pool_context() -> multiprocessing.context.BaseContext:
    # Not "fork": the caller may have threads (torch's, in tests), and forking those can
    # deadlock. A fork server imports the pipeline once (notebooks loads it) and forks ready
    # workers from it.
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        preload = ["codemods.forkserver_init", "codemods.engine", "codemods.notebooks"]
        context.set_forkserver_preload(preload)
        return context
    return multiprocessing.get_context("spawn")


@contextlib.contextmanager
def clean_start(context: multiprocessing.context.BaseContext) -> Iterator[None]:
    """While active, the Python processes that multiprocessing starts do not put the current
    directory on their import path. A fork server is started here (with it, the resource
    tracker) with Ctrl-C blocked: it and every worker it forks never see Ctrl-C, not even
    while they load their modules; gradfix stops them itself."""
    saved = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        if context.get_start_method() == "forkserver":
            with _launch_folder():
                # Started first and on its own: starting, it unblocks Ctrl-C in this process.
                resource_tracker.ensure_running()
                with _ctrl_c_blocked():
                    forkserver.ensure_running()
        yield
    finally:
        if saved is None:
            del os.environ["PYTHONSAFEPATH"]
        else:
            os.environ["PYTHONSAFEPATH"] = saved


@contextlib.contextmanager
def _ctrl_c_blocked() -> Iterator[None]:
    """Ctrl-C waits until the block ends; processes started in it inherit the block."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextlib.contextmanager
def _launch_folder() -> Iterator[None]:
    """Where the fork server starts: anywhere on Python 3.11+, whose safe-path mode keeps the
    current directory off its import path; on 3.10, which lacks it, an empty folder."""
    if sys.version_info >= (3, 11):
        yield
        return
    previous = os.getcwd()
    with tempfile.TemporaryDirectory() as empty:
        os.chdir(empty)
        try:
            yield
        finally:
            os.chdir(previous)


def start_worker(parent: int, budget: Budget) -> None:
    """The initializer of every worker process: `parent` is gradfix's process id."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    threading.Thread(target=_watch, args=(parent,), daemon=True, name="gradfix-watch").start()
    with contextlib.suppress(ValueError, OSError):
        limit = _address_space() + budget.memory
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))


def _watch(parent: int) -> None:
    while alive(parent):
        time.sleep(WATCH_SECONDS)
    os._exit(1)


def alive(pid: int) -> bool:
    """Whether the process `pid` runs (a dead one not yet reaped by its parent does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # The state follows the command name in parentheses; Z: dead, not yet reaped.
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (macOS): ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _address_space() -> int:
    """The bytes of address space this process uses now (Linux); raises OSError elsewhere."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * resource.getpagesize()


@contextlib.contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Raise BudgetExceeded in this thread once `seconds` have passed. Only the main thread
    receives signals: elsewhere there is no time budget."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise BudgetExceeded

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def uninterruptible() -> Iterator[None]:
    """A block that must finish once it starts (writing a file over): the time budget stops
    applying (an alarm already due goes off here, before the block), and Ctrl-C takes effect
    only when the block ends. Python runs signal handlers in the main thread only, so in any
    other thread there is nothing to defer."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, 0)
    # Blocking the signal would not do: the kernel gives it to another thread (rich's progress
    # display has one), whose handler still interrupts this one. Record it instead.
    pressed: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pressed and callable(previous):
            previous(signal.SIGINT, None)
        elif pressed and previous == signal.SIG_DFL:
            signal.raise_signal(signal.SIGINT)
