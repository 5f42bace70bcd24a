"""A content-hash cache of per-file results, so that a rerun over an unchanged repository costs
a read and a hash per file instead of a parse and an analysis.

An entry is a fact about bytes: "with these rules and this unsafe-fixes flag, this gradfix finds
these findings (or this parse error) in a file with these bytes, read as Python source (or as a
notebook)". Such a fact never goes stale, so nothing is ever invalidated: the key hashes the
bytes together with everything else the answer depends on (gradfix's version and own code, the
Python and LibCST versions, the rules, the flag, the kind of file), and a change to any of them
simply looks up other entries.

The folder lives in the checked project, so a checkout can ship one, and anyone can compute a
content key. Hence (docs/threat-model.md):
- each entry is signed (HMAC-SHA256, over its name and its JSON) with the user's secret key,
  kept in the user's cache home (`ownfiles.secret_key`); an entry that does not verify is a
  miss, and without a usable key there is no cache at all;
- what a verified entry says is still checked before use (`valid_entry`): known rules,
  positions inside the file, no control characters, edits that cover their finding;
- the folder is opened without following a link (a folder that is a link is refused) and
  entries are read and written relative to it, never through a link (`ownfiles`);
- entries are JSON, never pickle: reading one never runs code.
An entry that does not load (truncated, edited, of an older layout) is a miss and is
overwritten by the next store; concurrent runs never see a partial one (write, then rename).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import hmac
import json
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypeVar

from codemods import __version__, ownfiles
from codemods.findings import Edit, Finding, Tier

CACHE_DIR = ".gradfix_cache"
LAYOUT = "3"  # bump when the format of an entry changes
PARSERS = ("libcst", "nbformat")  # the distributions that read files for gradfix
MAX_ENTRY_BYTES = 16 * 1024 * 1024
GITIGNORE = b"# Created by gradfix; safe to delete.\n*\n"
RULE_CODE = re.compile(r"GF\d{3}")
# C0 and C1 control characters, DEL, but tab, line feed and carriage return.
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
PARSE_ERROR = re.compile(r"(?:cell [1-9]\d*:)?[1-9]\d*:[1-9]\d*: parse error: .*", re.DOTALL)

_T = TypeVar("_T")


@dataclass(frozen=True)
class Entry:
    """What the pipeline found in some bytes, whatever the mode it ran in."""

    findings: tuple[Finding, ...] = ()
    error: str | None = None  # the pipeline's "LINE:COL: parse error: ..." text


def _user_key() -> bytes | None:
    try:
        return ownfiles.secret_key()
    except OSError:
        return None  # no private place for a key: no cache, rather than an unsigned one


@dataclass(frozen=True, eq=False)
class ResultCache:
    """The entries under `directory`; `salt` stands for what the results depend on besides
    the bytes and the options; `key` signs them (None: the cache is off). Small and
    picklable: every task carries it to its worker. Compared by identity: a run makes one,
    and looks its warm index up for every file."""

    directory: Path
    salt: str
    key: bytes | None = field(default_factory=_user_key, repr=False)

    @classmethod
    def at(cls, root: Path) -> ResultCache:
        """The cache of the project rooted at `root` (created on the first store)."""
        return cls(root / CACHE_DIR, fingerprint())

    def _name(
        self, source: bytes, select: frozenset[str], unsafe_fixes: bool, notebook: bool
    ) -> str:
        digest = hashlib.sha256()
        for part in (self.salt, ",".join(sorted(select)), str(unsafe_fixes), str(notebook)):
            digest.update(part.encode() + b"\0")
        digest.update(source)
        return f"{digest.hexdigest()}.json"

    def _signature(self, name: str, payload: bytes) -> bytes:
        assert self.key is not None
        return hmac.new(self.key, name.encode() + b"\0" + payload, hashlib.sha256).digest()

    def load(
        self, source: bytes, select: frozenset[str], unsafe_fixes: bool, notebook: bool = False
    ) -> Entry | None:
        """The entry for these bytes and options; None when there is none, it is not signed
        with the user's key, or it is unusable."""
        if self.key is None:
            return None
        name = self._name(source, select, unsafe_fixes, notebook)
        try:
            with ownfiles.folder(self.directory) as handle:
                data = ownfiles.read_in(handle, name, MAX_ENTRY_BYTES)
        except OSError:
            return None
        if data is None:
            return None
        signature, _, payload = data.partition(b"\n")
        with contextlib.suppress(ValueError):
            if hmac.compare_digest(
                bytes.fromhex(signature.decode()), self._signature(name, payload)
            ):
                entry = decode_entry(json.loads(payload))
                if entry is not None and valid_entry(entry, select, _text(source, notebook)):
                    return entry
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
        if self.key is None:
            return
        name = self._name(source, select, unsafe_fixes, notebook)
        payload = json.dumps(encode_entry(entry)).encode()
        data = self._signature(name, payload).hex().encode() + b"\n" + payload
        with contextlib.suppress(OSError):
            self._create()
            with ownfiles.folder(self.directory) as handle:
                ownfiles.write_in(handle, name, data)

    def _create(self) -> None:
        """The directory, with a .gitignore that keeps it out of commits."""
        with contextlib.suppress(FileExistsError):
            self.directory.mkdir(parents=True)
        with ownfiles.folder(self.directory) as handle:
            if ownfiles.read_in(handle, ".gitignore", len(GITIGNORE)) != GITIGNORE:
                ownfiles.write_in(handle, ".gitignore", GITIGNORE)


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


def _text(source: bytes, notebook: bool) -> list[str] | None:
    """The file's lines, which positions are checked against; None for a notebook, whose
    positions count in cells."""
    if notebook:
        return None
    return source.decode("utf-8", errors="replace").splitlines() or [""]


def encode_entry(entry: Entry) -> dict[str, Any]:
    return {
        "findings": [_finding_data(finding) for finding in entry.findings],
        "error": entry.error,
    }


def decode_entry(data: Any) -> Entry | None:
    """The entry `data` (parsed JSON) describes; None when it is not one."""
    try:
        findings = tuple(_finding(item) for item in data["findings"])
        return _checked(Entry(findings, data["error"]))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def valid_entry(entry: Entry, select: frozenset[str], lines: list[str] | None) -> bool:
    """Whether what `entry` says could be what this gradfix reports for a file with these
    `lines` (None: unknown, as for a notebook): selected rules, positions inside the file,
    edits that cover their finding, and no control character (no terminal escape) in any
    text. Something a signed entry should always pass; it bounds what any mistake could do."""
    if entry.error is not None and not (PARSE_ERROR.fullmatch(entry.error) and _clean(entry.error)):
        return False
    return all(_valid_finding(finding, select, lines) for finding in entry.findings)


def _valid_finding(finding: Finding, select: frozenset[str], lines: list[str] | None) -> bool:
    if not RULE_CODE.fullmatch(finding.rule) or finding.rule not in select:
        return False
    if not (_clean(finding.message) and "\n" not in finding.message):
        return False
    start, end = (finding.line, finding.column), (finding.end_line, finding.end_column)
    if not _span_inside(start, end, lines):
        return False
    for edit in (finding.edit, finding.file_edit):
        if edit is None:
            continue
        if not _clean(edit.replacement):
            return False
        # The edit is in the finding's cell; a notebook's file edit, in its JSON text.
        if edit.cell != (finding.cell if edit is finding.edit else None):
            return False
        edit_start, edit_end = (
            (edit.start_line, edit.start_column),
            (edit.end_line, edit.end_column),
        )
        if edit is finding.edit and not (edit_start <= start and end <= edit_end):
            return False
        if not _span_inside(edit_start, edit_end, lines if edit is finding.edit else None):
            return False
    numbers = (finding.cell, finding.file_line, finding.file_column)
    return all(number is None or number >= 1 for number in numbers)


def _span_inside(start: tuple[int, int], end: tuple[int, int], lines: list[str] | None) -> bool:
    if min(*start, *end) < 1 or end < start:
        return False
    if lines is None:
        return True
    if end[0] > len(lines) + 1:  # a span may end at the start of the line after the last
        return False
    return all(
        line > len(lines) or column <= len(lines[line - 1]) + 1 for line, column in (start, end)
    )


def _clean(text: str) -> bool:
    """No control characters but tabs and line breaks: nothing that a terminal would act on."""
    return CONTROL.search(text) is None


def _finding_data(finding: Finding) -> dict[str, Any]:
    return {**dataclasses.asdict(finding), "tier": finding.tier.value}


def _finding(data: dict[str, Any]) -> Finding:
    edits = {
        key: None if data[key] is None else _checked(Edit(**data[key]))
        for key in ("edit", "file_edit")
    }
    return _checked(Finding(**{**data, "tier": Tier(data["tier"]), **edits}))


@functools.cache
def _field_types(cls: type) -> tuple[tuple[str, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple(
        (
            f.name,
            h if isinstance(h := hints[f.name], types.UnionType) else typing.get_origin(h) or h,
        )
        for f in dataclasses.fields(cls)
    )


def _checked(value: _T) -> _T:
    """`value`, a dataclass, once each field is of its declared type (an edited entry may
    hold anything that JSON can); raises ValueError otherwise."""
    for name, expected in _field_types(type(value)):
        field_value = getattr(value, name)
        # JSON's true and false pass for ints; no field of an entry is a flag.
        if not isinstance(field_value, expected) or isinstance(field_value, bool):
            raise ValueError(f"cache entry: `{name}` is not a {expected}")
    return value
