"""Imported only by the fork server, which preloads it (`workers.pool_context`) before it forks
any worker; what it sets here, the workers start with.

- Workers ignore Ctrl-C from their very first instruction, even when this fork server was
  started without Ctrl-C blocked (`workers.clean_start` blocks it). Ctrl-C reaches every
  process in the terminal's process group; gradfix itself stops its workers.
- A worker that fails while starting because gradfix is gone (stopped by Ctrl-C, or killed:
  what it was to receive from gradfix has vanished) ends quietly. With gradfix still running,
  the failure is printed as before, and gradfix reports the files that worker would have done.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from types import TracebackType

from codemods import workers

GRADFIX = os.getppid()  # the fork server's parent: the gradfix process
EXIT_GRACE_SECONDS = 2.0


def _report_unless_orphaned(
    kind: type[BaseException], error: BaseException, traceback: TracebackType | None
) -> None:
    # gradfix may still be finishing its exit (its clean-up is what removed what the worker
    # was loading): give it a moment to be gone.
    deadline = time.monotonic() + EXIT_GRACE_SECONDS
    while workers.alive(GRADFIX):
        if time.monotonic() > deadline:
            sys.__excepthook__(kind, error, traceback)
            return
        time.sleep(0.05)


signal.signal(signal.SIGINT, signal.SIG_IGN)
sys.excepthook = _report_unless_orphaned
