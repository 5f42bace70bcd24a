"""The `gradfix` console script's entry point.

It imports next to nothing itself: the commands (and with them typer, rich and LibCST, about
half a second of imports) are loaded inside `main`, so that Ctrl-C at any moment after start-up,
while they load included, ends the run quietly with exit status 130.
"""

from __future__ import annotations

import signal
import sys

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a run stopped by Ctrl-C


def main() -> None:
    try:
        from codemods.commands import app

        app()
    except KeyboardInterrupt:
        # The user asked to stop: a second Ctrl-C during clean-up must not print a traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sys.exit(EXIT_INTERRUPTED)
