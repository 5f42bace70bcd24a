"""Writing a file in one step, so that a crash or a concurrent reader never sees half of it."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes) -> None:
    """Replace (or create) the file's content in one step: a temporary file beside it, then a
    rename. An existing file keeps its permission bits; symbolic links are followed, not
    replaced."""
    real = Path(os.path.realpath(path))
    mode = stat.S_IMODE(real.stat().st_mode) if real.exists() else None
    fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".gradfix")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
