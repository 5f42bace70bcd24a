"""Imported only by the fork server, which preloads it (`workers.pool_context`) before it forks
any worker; what it sets here, the workers start with.

- Workers ignore Ctrl-C from their very first instruction. Ctrl-C reaches every process in the
  terminal's process group; gradfix itself stops its workers.
- A worker that fails while starting because gradfix is gone (stopped by Ctrl-C, or killed:
  what it was to receive from gradfix has vanished) ends quietly. With gradfix still running,
  the failure is printed as before, and gradfix reports the files that worker would have done.
"""

from __future__ import annotations

import os
import signal
import sys
from types import TracebackType

from codemods import workers

GRADFIX = os.getppid()  # the fork server's parent: the gradfix process


def _report_unless_orphaned(
    kind: type[BaseException], error: BaseException, traceback: TracebackType | None
) -> None:
    if workers.alive(GRADFIX):
        sys.__excepthook__(kind, error, traceback)


signal.signal(signal.SIGINT, signal.SIG_IGN)
sys.excepthook = _report_unless_orphaned
