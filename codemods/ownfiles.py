"""The files gradfix keeps for itself, and how it reads and writes them without following links.

Two places hold them. The user's cache home (`$XDG_CACHE_HOME/gradfix`, else
`~/.cache/gradfix`) is trusted: gradfix creates it 0700 and uses it only while it is a real
folder owned by the user that nobody else can write. It holds the secret key that signs cache
entries, the warm-path index and the copies kept while a file is rewritten. A project's
`.gradfix_cache/` is not trusted (a checked tree can ship one): its entries are signed with the
key, and it is read and written only through a handle on the folder itself, opened without
following a link, never by path, so that no planted link can send a read or a write elsewhere.
See docs/threat-model.md.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

KEY_NAME = "key"
KEY_BYTES = 32
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Non-blocking, so that a FIFO planted under an entry's name cannot stall the open.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def cache_home() -> Path:
    """gradfix's folder in the user's cache home, created on first use.

    Raises OSError when it is not a private folder of the user's (a link, someone else's, or
    writable by others): nothing read from such a place could be trusted."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return private_folder(root / "gradfix")


def private_folder(path: Path) -> Path:
    """`path`, created 0700 if missing; raises OSError unless it is the user's own folder."""
    with contextlib.suppress(FileExistsError):
        os.makedirs(path, mode=0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise OSError(f"{path} is not a private folder of this user; gradfix does not use it")
    return path


def secret_key() -> bytes:
    """The user's secret key for signing cache entries, created atomically on first use: a
    complete key file is linked into place, so concurrent first runs agree on one key."""
    home = cache_home()
    with contextlib.suppress(FileNotFoundError):
        return _read_key(home / KEY_NAME)
    with folder(home) as handle:
        temporary = _write_temporary(handle, secrets.token_bytes(KEY_BYTES), 0o600)
        try:
            os.link(temporary, KEY_NAME, src_dir_fd=handle, dst_dir_fd=handle)
        except FileExistsError:
            pass  # another run was first: use its key
        finally:
            os.unlink(temporary, dir_fd=handle)
    return _read_key(home / KEY_NAME)


def _read_key(path: Path) -> bytes:
    fd = os.open(path, _READ_FLAGS)
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid != os.getuid()
            or info.st_mode & 0o077
            or info.st_size != KEY_BYTES
        ):
            raise OSError(f"{path} is not a private key file of this user; delete it")
        return file.read()


@contextlib.contextmanager
def folder(path: Path) -> Iterator[int]:
    """A handle on the folder `path` itself; raises OSError when it is a link or no folder."""
    handle = os.open(path, _DIR_FLAGS)
    try:
        yield handle
    finally:
        os.close(handle)


def read_in(handle: int, name: str, limit: int) -> bytes | None:
    """The bytes of the regular file `name` in the folder; None when it is missing, a link,
    anything but a regular file, or larger than `limit` bytes."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=handle)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        return file.read(limit + 1)


def write_in(handle: int, name: str, data: bytes, *, durable: bool = False) -> None:
    """Make `name` in the folder hold `data`, in one step: a new file, then a rename inside the
    folder, which replaces whatever has the name (a planted link included) without following
    it. With `durable`, the data and the rename reach the disk before this returns."""
    temporary = _write_temporary(handle, data, 0o644, durable=durable)
    try:
        os.rename(temporary, name, src_dir_fd=handle, dst_dir_fd=handle)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=handle)
        raise
    if durable:
        os.fsync(handle)


def _write_temporary(handle: int, data: bytes, mode: int, *, durable: bool = False) -> str:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        name = f".tmp-{secrets.token_hex(8)}"
        try:
            fd = os.open(name, flags, mode, dir_fd=handle)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            if durable:
                file.flush()
                os.fsync(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=handle)
        raise
    return name
