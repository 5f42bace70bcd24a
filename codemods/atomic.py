"""Rewriting a file in place, so that it keeps its identity, without ever leaving it torn.

Why in place: replacing a file by renaming a new one over it (the usual atomic write) makes a
new file. It is owned by whoever runs gradfix (root, in a container, takes other users' files),
loses extended attributes (SELinux labels, macOS quarantine, ACLs), breaks hard links, and
cannot be done in a read-only folder at all. Writing over the same inode keeps the owner, the
group, the mode, the extended attributes and every hard link, and needs only the file to be
writable. The folder's permissions do not matter.

What makes it safe against a kill at any moment: before the first byte is overwritten, the
file's original bytes are saved in a recovery record in the user's cache home (written to a
new file, flushed to disk, then renamed into place: the record is complete or absent). Only
then is the file overwritten, truncated and flushed, and the record deleted. A process killed
in between leaves the record, and the file holds the new bytes up to some point and the
original ones after it. The next `gradfix fix` (`recover`) finds the record and puts back the
original bytes of a file in exactly that state (a file edited since is left alone), so the
file is whole again before anything reads it. The records are in the user's own private
folder, never in the checked tree: a planted record would tell gradfix what to write where.

Also checked under an exclusive lock on the file: the file is still a regular file with a
write permission bit (root could write a 0444 file, but its owner asked for it to be left
alone), and it still holds the bytes the fix was computed from. Another program, or a
concurrent gradfix, may have changed it since it was read.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
from pathlib import Path

from codemods import ownfiles

RECOVERY_DIR = "recovery"
_OPEN_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class ReadOnlyError(Exception):
    """The file has no write permission bit: it is meant to stay as it is."""


class ChangedError(Exception):
    """The file no longer holds the bytes the new ones were computed from."""


def recovery_folder() -> Path:
    return ownfiles.private_folder(ownfiles.cache_home() / RECOVERY_DIR)


def rewrite(path: Path, expected: bytes, data: bytes) -> None:
    """Replace the content of the regular file at `path` (its real path: a link is refused),
    which must still be `expected`, with `data`, in place. Raises ReadOnlyError,
    ChangedError, or OSError (then the file is unchanged, or restored by `recover`)."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        if not info.st_mode & 0o222:
            raise ReadOnlyError(f"{path} is read-only")
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _read_all(fd) != expected:
            raise ChangedError(f"{path} changed since it was read")
        record = _record_name(path)
        with ownfiles.folder(recovery_folder()) as folder:
            header = {"path": os.fsdecode(path), "original": len(expected)}
            saved = json.dumps(header).encode() + b"\n" + expected + data
            ownfiles.write_in(folder, record, saved, durable=True)
            _overwrite(fd, data)
            os.unlink(record, dir_fd=folder)
    finally:
        os.close(fd)


def recover() -> list[Path]:
    """Put back the original bytes of every file a killed `rewrite` left half-written; the
    files it restored. Other records (of writes that finished or never started, of files
    deleted or edited since) are only deleted."""
    restored: list[Path] = []
    try:
        folder_path = recovery_folder()
        names = sorted(os.listdir(folder_path))
    except OSError:
        return restored  # no recovery folder: nothing was ever left to recover
    with ownfiles.folder(folder_path) as folder:
        for name in names:
            if name.startswith(".tmp-"):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=folder)  # a record that was never complete
                continue
            saved = ownfiles.read_in(folder, name, 1 << 31)
            if saved is None or not _restore(saved, restored):
                continue
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder)
    return restored


def _restore(saved: bytes, restored: list[Path]) -> bool:
    """Whether the record `saved` is dealt with (its file is whole, or restored now)."""
    header_line, _, both = saved.partition(b"\n")
    try:
        header = json.loads(header_line)
        path = Path(header["path"])
        original, new = both[: header["original"]], both[header["original"] :]
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return True  # deleted since: nothing to restore
    except (OSError, ValueError, KeyError, TypeError):
        return False  # kept for a person to look at
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _torn(_read_all(fd), original, new):
            _overwrite(fd, original)
            restored.append(path)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _torn(current: bytes, original: bytes, new: bytes) -> bool:
    """Whether `current` is what an unfinished overwrite of `original` with `new` leaves: the
    new bytes up to some point, the original ones after it, and neither file whole."""
    if current in (original, new):
        return False
    pairs = zip(current, new, strict=False)
    same = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(current), len(new)))
    return current[same:] == original[same:]


def _record_name(path: Path) -> str:
    return hashlib.sha256(os.fsencode(path)).hexdigest()


def _read_all(fd: int) -> bytes:
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _overwrite(fd: int, data: bytes) -> None:
    offset = 0
    while offset < len(data):
        offset += os.pwrite(fd, data[offset:], offset)
    os.ftruncate(fd, len(data))
    os.fsync(fd)
