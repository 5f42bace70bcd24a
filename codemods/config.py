"""Settings: `[tool.gradfix]` in pyproject.toml, overridden by command-line flags.

    [tool.gradfix]
    select = ["GF001", "GF002"]        # rules to run (default: all)
    ignore = ["GF003"]                 # rules not to run
    exclude = ["generated/", "*_pb2.py"]   # gitignore-style, relative to this file
    unsafe-fixes = false
    [tool.gradfix.per-file-ignores]
    "tests/*" = ["GF001"]

The file used is the nearest pyproject.toml with a `[tool.gradfix]` table, looking upward from
the first path given (or the current directory).
"""

from __future__ import annotations

import os
import reprlib
import sys
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codemods.walk import IgnoreFile, TooManyPatterns, UnreadablePatterns

if sys.version_info >= (3, 11):
    import tomllib
else:  # needs `tomli; python_version < "3.11"`
    import tomli as tomllib

KEYS = ("select", "ignore", "exclude", "per-file-ignores", "unsafe-fixes")


class ConfigError(Exception):
    """Bad settings, in pyproject.toml or on the command line; the message says which."""


@dataclass(frozen=True)
class FileConfig:
    """The `[tool.gradfix]` table as written; None means the key is absent."""

    path: Path | None = None  # the pyproject.toml it came from
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    exclude: tuple[str, ...] | None = None
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    unsafe_fixes: bool | None = None


@dataclass(frozen=True)
class Settings:
    select: frozenset[str]  # after `ignore`
    excludes: tuple[IgnoreFile, ...] = ()
    unsafe_fixes: bool = False
    per_file_ignores: tuple[tuple[IgnoreFile, frozenset[str]], ...] = ()
    # The project's root: where the pyproject.toml the settings came from is, else the
    # current directory. The result cache lives there.
    root: Path = field(default_factory=Path.cwd)

    def rules_for(self, path: Path) -> frozenset[str]:
        """The rule codes to run on `path` once per-file-ignores are applied."""
        if not self.per_file_ignores:
            return self.select
        real = str(path.resolve())
        selected = self.select
        for pattern, codes in self.per_file_ignores:
            if pattern.decide(real, is_dir=False):
                selected -= codes
        return selected


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start` that has a `[tool.gradfix]` table.

    Files that never mention gradfix are passed over unparsed: a parent directory's
    pyproject.toml belongs to someone else, and its errors are none of gradfix's business."""
    try:
        start = start.resolve()
    except (OSError, RuntimeError):  # a symlink loop: the walk reports the path itself
        start = Path(os.path.abspath(start))
    directory = start if start.is_dir() else start.parent
    for candidate_dir in (directory, *directory.parents):
        candidate = candidate_dir / "pyproject.toml"
        if candidate.is_file() and _gradfix_table(candidate) is not None:
            return candidate
    return None


def _gradfix_table(pyproject: Path) -> dict[str, Any] | None:
    """The file's `[tool.gradfix]` table; None when it has none."""
    try:
        data = pyproject.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{pyproject}: cannot read: {exc.strerror or exc}") from exc
    if b"gradfix" not in data:  # no table of that name can be in it: do not parse it
        return None
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{pyproject}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x} cannot be decoded); "
            "TOML files must be UTF-8: save it as UTF-8"
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{pyproject}: invalid TOML: {exc}; fix the file") from exc
    except ValueError as exc:  # an integer of over 4,300 digits, which Python refuses to read
        reason = str(exc).split(";")[0]  # not its advice to raise the interpreter's limit
        raise ConfigError(f"{pyproject}: unreadable TOML: {reason}; fix the file") from exc
    except RecursionError as exc:  # tomllib reads nested arrays and tables recursively
        raise ConfigError(
            f"{pyproject}: unreadable TOML: arrays or tables nested too deeply; fix the file"
        ) from exc
    tool = document.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(
            f"{pyproject}: `tool` must be a table, got {reprlib.repr(tool)}; fix the file"
        )
    table = tool.get("gradfix")
    if table is not None and not isinstance(table, dict):
        raise ConfigError(
            f"{pyproject}: `tool.gradfix` must be a table, got {reprlib.repr(table)}; write the "
            "settings under a [tool.gradfix] header"
        )
    return table


def _patterns(base: Path, patterns: Sequence[str], where: str) -> IgnoreFile:
    try:
        return IgnoreFile.from_lines(base, patterns)
    except TooManyPatterns as exc:
        raise ConfigError(f"{where}: {exc}; shorten the list") from exc
    except UnreadablePatterns as exc:
        pattern, reason = next(iter(exc.reasons.items()))
        raise ConfigError(
            f"{where}: cannot read the pattern {pattern!r} ({reason}); write it in .gitignore's "
            "syntax"
        ) from exc


def _string_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where} must be a list of strings, got {value!r}")
    return tuple(value)


def load_config(start: Path) -> FileConfig:
    """Read the settings that apply to `start`; empty ones when no file has any."""
    pyproject = find_pyproject(start)
    if pyproject is None:
        return FileConfig()
    table = _gradfix_table(pyproject) or {}
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(
            f"{pyproject}: unknown key `{unknown[0]}` in [tool.gradfix]; "
            f"valid keys are: {', '.join(KEYS)}"
        )

    def where(key: str) -> str:
        return f"{pyproject}: [tool.gradfix] `{key}`"

    def optional_list(key: str) -> tuple[str, ...] | None:
        return _string_list(table[key], where(key)) if key in table else None

    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{where('per-file-ignores')} must be a table of glob = [codes]")
    unsafe = table.get("unsafe-fixes")
    if unsafe is not None and not isinstance(unsafe, bool):
        raise ConfigError(f"{where('unsafe-fixes')} must be true or false, got {unsafe!r}")
    return FileConfig(
        path=pyproject,
        select=optional_list("select"),
        ignore=optional_list("ignore"),
        exclude=optional_list("exclude"),
        per_file_ignores=tuple(
            (glob, _string_list(codes, f"{where('per-file-ignores')} entry {glob!r}"))
            for glob, codes in per_file.items()
        ),
        unsafe_fixes=unsafe,
    )


def split_codes(values: Iterable[str]) -> tuple[str, ...]:
    """`--select GF001,GF002 --select GF003` -> ("GF001", "GF002", "GF003")."""
    return tuple(code.strip() for value in values for code in value.split(",") if code.strip())


def _codes(codes: Iterable[str], known: Collection[str], where: str) -> frozenset[str]:
    result = set()
    for code in codes:
        normalized = code.strip().upper()
        if normalized not in known:
            raise ConfigError(
                f"unknown rule code `{code}` in {where}; known codes: "
                f"{', '.join(sorted(known))} (run `gradfix rules` to list them)"
            )
        result.add(normalized)
    return frozenset(result)


def resolve_settings(
    config: FileConfig,
    known: Collection[str],
    *,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    unsafe_fixes: bool | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Merge the file settings with the command-line ones (None: flag not given), which win.

    Command-line exclude patterns are relative to `cwd`, the file's to its directory."""
    cwd = cwd or Path.cwd()
    file_where = f"{config.path}: [tool.gradfix]"
    # An empty selection would run nothing and pass every check: most likely a variable that
    # expanded to nothing. An empty `ignore` ignores nothing, which hides no finding.
    if select is not None:
        if not select:
            raise ConfigError(
                "--select names no rule code; give at least one (e.g. `--select GF001`; "
                "`gradfix rules` lists them), or leave --select out to run every rule"
            )
        selected = _codes(select, known, "--select")
    elif config.select is not None:
        if not config.select:
            raise ConfigError(
                f"{file_where} `select` is empty, so no rule would run; list at least one "
                "rule code, or remove the key to run every rule"
            )
        selected = _codes(config.select, known, f"{file_where} `select`")
    else:
        selected = frozenset(known)
    if ignore is not None:
        selected -= _codes(ignore, known, "--ignore")
    elif config.ignore is not None:
        selected -= _codes(config.ignore, known, f"{file_where} `ignore`")

    root = config.path.parent if config.path is not None else cwd
    excludes: list[IgnoreFile] = []
    if exclude is not None:
        excludes.append(_patterns(cwd, exclude, "--exclude"))
    elif config.exclude is not None:
        excludes.append(_patterns(root, config.exclude, f"{file_where} `exclude`"))

    per_file_ignores = tuple(
        (
            _patterns(root, [glob], f"{file_where} `per-file-ignores`"),
            _codes(codes, known, f"{file_where} `per-file-ignores` entry {glob!r}"),
        )
        for glob, codes in config.per_file_ignores
    )
    unsafe = unsafe_fixes if unsafe_fixes is not None else bool(config.unsafe_fixes)
    return Settings(selected, tuple(excludes), unsafe, per_file_ignores, root)
