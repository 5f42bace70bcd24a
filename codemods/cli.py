"""The `gradfix` console script's entry point.

It imports next to nothing itself: the commands (and with them typer and rich) are loaded
inside `main`, so that Ctrl-C at any moment after start-up, while they load included, ends the
run quietly with exit status 130; an exception gradfix did not expect ends it with its traceback
and exit status 2.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import traceback
from typing import NoReturn

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a run stopped by Ctrl-C
EXIT_INTERNAL_ERROR = 2  # `commands.EXIT_ERROR`, which a failed import of `commands` cannot give


def main() -> None:
    try:
        from codemods.commands import app

        # What the imports made lives as long as the process: out of the cyclic collector's
        # reach, no collection during the run walks it again (a warm rerun spent a tenth of
        # its time there); likewise what the run made, for the collection at exit.
        gc.freeze()
        try:
            app()
        finally:
            gc.freeze()
    except BaseException as error:
        if _interrupted(error):
            # The user asked to stop: a second Ctrl-C during clean-up must not print a traceback.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            _exit_at_once(EXIT_INTERRUPTED)
        if isinstance(error, SystemExit):
            raise
        # A bug of gradfix's own: exit status 2, as documented, and never 1, which a CI job
        # would read as "findings".
        traceback.print_exc()
        print(
            f"gradfix: internal error: {type(error).__name__}: {error}; this is a bug in "
            "gradfix: please report it with the traceback above",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_INTERNAL_ERROR) from None


def _exit_at_once(status: int) -> NoReturn:
    """End the process without the interpreter's shutdown. That shutdown joins the worker
    pool's threads and runs its exit handlers, which, racing the workers' own end on a loaded
    machine, print "Exception ignored" tracebacks about closed pipes. A stopped run has nothing
    left to finish: a file being written over is written before Ctrl-C takes effect
    (`workers.uninterruptible`), and the workers end with their parent."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def _interrupted(error: BaseException) -> bool:
    """Whether `error` is Ctrl-C, or was caused by it: a KeyboardInterrupt raised while a class
    body is being set up reaches us wrapped ("Error calling __set_name__")."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
