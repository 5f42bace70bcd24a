"""A content-hash cache of per-file results, so that a rerun over an unchanged repository costs
a read and a hash per file instead of a parse and an analysis.

An entry is a fact about bytes: "with these rules and this unsafe-fixes flag, this gradfix finds
these findings (or this parse error) in a file with these bytes, read as Python source (or as a
notebook)". Such a fact never goes stale, so nothing is ever invalidated: the key hashes the
bytes together with everything else the answer depends on (gradfix's version and own code, the
Python and LibCST versions, the rules, the flag, the kind of file), and a change to any of them
simply looks up other entries.

Entries are JSON, never pickle: a cache directory may come with an untrusted checkout, and
reading it must not run code. Each entry is written to a temporary file and renamed into place,
so concurrent runs never see a partial one; an entry that does not load (truncated, edited, of
an older layout) is a miss and is overwritten by the next store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import sys
import types
import typing
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypeVar

from codemods import __version__
from codemods.atomic import write_atomic
from codemods.findings import Edit, Finding, Tier

CACHE_DIR = ".gradfix_cache"
LAYOUT = "2"  # bump when the format of an entry changes
PARSERS = ("libcst", "nbformat")  # the distributions that read files for gradfix

_T = TypeVar("_T")


@dataclass(frozen=True)
class Entry:
    """What the pipeline found in some bytes, whatever the mode it ran in."""

    findings: tuple[Finding, ...] = ()
    error: str | None = None  # the pipeline's "LINE:COL: parse error: ..." text


@dataclass(frozen=True)
class ResultCache:
    """The entries under `directory`; `salt` stands for what the results depend on besides
    the bytes and the options. Small and picklable: every task carries it to its worker."""

    directory: Path
    salt: str

    @classmethod
    def at(cls, root: Path) -> ResultCache:
        """The cache of the project rooted at `root` (created on the first store)."""
        return cls(root / CACHE_DIR, fingerprint())

    def _path(
        self, source: bytes, select: frozenset[str], unsafe_fixes: bool, notebook: bool
    ) -> Path:
        digest = hashlib.sha256()
        for part in (self.salt, ",".join(sorted(select)), str(unsafe_fixes), str(notebook)):
            digest.update(part.encode() + b"\0")
        digest.update(source)
        return self.directory / f"{digest.hexdigest()}.json"

    def load(
        self, source: bytes, select: frozenset[str], unsafe_fixes: bool, notebook: bool = False
    ) -> Entry | None:
        """The entry for these bytes and options; None when there is none or it is unusable."""
        try:
            data = json.loads(self._path(source, select, unsafe_fixes, notebook).read_bytes())
            return _entry(data)
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def store(
        self,
        source: bytes,
        select: frozenset[str],
        unsafe_fixes: bool,
        entry: Entry,
        notebook: bool = False,
    ) -> None:
        """Record `entry`, best effort: a cache that cannot be written only costs speed."""
        data = {
            "findings": [_finding_data(finding) for finding in entry.findings],
            "error": entry.error,
        }
        with contextlib.suppress(OSError):
            self._create()
            path = self._path(source, select, unsafe_fixes, notebook)
            write_atomic(path, json.dumps(data).encode())

    def _create(self) -> None:
        """The directory, with a .gitignore that keeps it out of commits."""
        gitignore = self.directory / ".gitignore"
        if not gitignore.exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            write_atomic(gitignore, b"# Created by gradfix; safe to delete.\n*\n")


@functools.cache
def fingerprint() -> str:
    """What results depend on besides a file's bytes and the options: gradfix's version and its
    own code (so that an edited checkout never serves the results of the code before the edit),
    and the versions of Python, LibCST and nbformat (parse errors come from their parsers)."""
    versions = [__version__, "{}.{}".format(*sys.version_info[:2]), *map(version, PARSERS)]
    digest = hashlib.sha256("|".join([LAYOUT, *versions]).encode())
    package = Path(__file__).parent
    for path in sorted(package.rglob("*")):
        if path.suffix in {".py", ".json"}:
            digest.update(path.relative_to(package).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _finding_data(finding: Finding) -> dict[str, Any]:
    return {**dataclasses.asdict(finding), "tier": finding.tier.value}


def _entry(data: Any) -> Entry:
    findings = tuple(_finding(item) for item in data["findings"])
    return _checked(Entry(findings, data["error"]))


def _finding(data: dict[str, Any]) -> Finding:
    edits = {
        key: None if data[key] is None else _checked(Edit(**data[key]))
        for key in ("edit", "file_edit")
    }
    return _checked(Finding(**{**data, "tier": Tier(data["tier"]), **edits}))


def _checked(value: _T) -> _T:
    """`value`, a dataclass, once each field is of its declared type (an edited entry may
    hold anything that JSON can); raises ValueError otherwise."""
    hints = typing.get_type_hints(type(value))
    for field in dataclasses.fields(value):  # type: ignore[arg-type]
        hint = hints[field.name]
        expected = hint if isinstance(hint, types.UnionType) else typing.get_origin(hint) or hint
        if not isinstance(getattr(value, field.name), expected):
            raise ValueError(f"cache entry: `{field.name}` is not a {hint}")
    return value
