"""The warm path: answering for an unchanged file from its metadata, before reading it.

A rerun over an unchanged repository would still read and hash every file to find its content
cache entry. This index, one per project cache and gradfix build, maps each file's absolute
path (with the rules and the unsafe-fixes flag) and its metadata (device, inode, size,
modification and change times, to the nanosecond) to the entry found for it last time; a file
whose metadata matches is not even opened.

It lives in the user's cache home, not in the project, and the whole index is signed with the
user's key: a checkout cannot forge it, and nothing in it can be copied from another machine.
Metadata cannot be forged either: the change time is set by the kernel on every change, so a
different file under the same path never matches. A file changed within the clock's
resolution of its last write could keep identical metadata, so files changed in the last
seconds before their read are not recorded.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codemods import ownfiles
from codemods.cache import Entry, ResultCache, decode_entry, encode_entry, valid_entry

INDEX_DIR = "index"
RACY_SECONDS = 2.0
MAX_RECORDS = 200_000  # beyond this, an index keeps only the files of the latest run
MAX_INDEX_BYTES = 256 * 1024 * 1024

Signature = tuple[int, ...]
NOTHING_FOUND = encode_entry(Entry())


def signature(path: Path) -> Signature | None:
    """The metadata that identifies this version of a regular file; None for anything else."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


@dataclass
class WarmIndex:
    folder: Path
    name: str
    key: bytes
    records: dict[str, Any]
    seen: set[str] = field(default_factory=set)
    rule_lists: dict[frozenset[str], str] = field(default_factory=dict)
    changed: bool = False

    @classmethod
    def open(cls, cache: ResultCache) -> WarmIndex | None:
        """The index of `cache`'s entries; None when the user's cache home is unusable."""
        if cache.key is None:
            return None
        try:
            folder = ownfiles.private_folder(ownfiles.cache_home() / INDEX_DIR)
            with ownfiles.folder(folder) as handle:
                name = hashlib.sha256(
                    f"{cache.salt}\0{os.path.abspath(cache.directory)}".encode()
                ).hexdigest()
                data = ownfiles.read_in(handle, name, MAX_INDEX_BYTES)
        except OSError:
            return None
        index = cls(folder, name, cache.key, {})
        if data is not None:
            signed, _, payload = data.partition(b"\n")
            with contextlib.suppress(ValueError):
                if hmac.compare_digest(bytes.fromhex(signed.decode()), index._sign(payload)):
                    records = json.loads(payload)
                    index.records = records if isinstance(records, dict) else {}
        return index

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self.key, self.name.encode() + b"\0" + payload, hashlib.sha256).digest()

    def _record_key(self, path: Path, select: frozenset[str], unsafe_fixes: bool) -> str:
        rules = self.rule_lists.get(select)
        if rules is None:  # one or a few rule sets per run: spelled once each
            rules = self.rule_lists[select] = ",".join(sorted(select))
        return f"{os.path.abspath(path)}\0{rules}\0{unsafe_fixes:d}"

    def lookup(
        self, path: Path, select: frozenset[str], unsafe_fixes: bool, metadata: Signature
    ) -> Entry | None:
        """The entry recorded for the file at `path` with this metadata, if any."""
        key = self._record_key(path, select, unsafe_fixes)
        self.seen.add(key)
        record = self.records.get(key)
        if not isinstance(record, list) or len(record) != 2 or record[0] != list(metadata):
            return None
        if record[1] == NOTHING_FOUND:  # most files: no need to decode anything
            return Entry()
        entry = decode_entry(record[1])
        return entry if entry is not None and valid_entry(entry, select, None) else None

    def record(
        self,
        path: Path,
        select: frozenset[str],
        unsafe_fixes: bool,
        metadata: Signature,
        entry: Entry,
    ) -> None:
        """Remember `entry` for the file with this metadata, unless its change is too recent
        to tell from a change after the read."""
        if time.time_ns() - max(metadata[3:]) < RACY_SECONDS * 1e9:
            return
        key = self._record_key(path, select, unsafe_fixes)
        self.seen.add(key)
        self.records[key] = [list(metadata), encode_entry(entry)]
        self.changed = True

    def save(self) -> None:
        """Write the index back, best effort: an index that cannot be written costs speed."""
        if not self.changed:
            return
        if len(self.records) > MAX_RECORDS:
            self.records = {key: self.records[key] for key in self.seen if key in self.records}
        payload = json.dumps(self.records, separators=(",", ":")).encode()
        with contextlib.suppress(OSError), ownfiles.folder(self.folder) as handle:
            ownfiles.write_in(
                handle, self.name, self._sign(payload).hex().encode() + b"\n" + payload
            )
