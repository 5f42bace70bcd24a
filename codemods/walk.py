"""Expand the PATHS given on the command line into the Python files and notebooks to process.

Directories are walked in sorted order. Walked entries skip version-control and tool
directories, virtualenvs, anything a `.gitignore` ignores (nested ones too, each relative to
its own directory) and anything an exclude pattern matches. A path named explicitly is
always processed, whatever the defaults say about it.
"""

from __future__ import annotations

import os
import re
import stat
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec

SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "build",
        "dist",
        "node_modules",
        "__pycache__",
        ".gradfix_cache",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".ipynb_checkpoints",
    }
)
SUFFIXES = (".py", ".ipynb")  # Python files and Jupyter notebooks
GITIGNORE_MAX_BYTES = 100 * 1024 * 1024  # git skips a pattern file this large or larger
# Ignore and exclude patterns come from the checked tree, so they are matched by RE2, in time
# linear in the path: Python's `re` backtracks, and a pattern such as `*a*a*a*a*a*a*a*a*b`
# against a long file name kept the walk busy for hours, deaf to Ctrl-C.
MATCHER = "re2"
# RE2's memory budget for one ignore file's patterns, matched as one set: its default (8 MiB)
# held about 1,600 glob patterns; this holds about 13,000. A file with more than the matcher
# holds is refused, by name; past MAX_PATTERNS without trying (RE2 then logs to stderr).
MATCHER_MEMORY = 64 * 1024 * 1024
MAX_PATTERNS = 20_000


class PathNotFoundError(Exception):
    """A path given on the command line does not exist."""


class UnreadableIgnoreFile(Exception):
    """A `.gitignore` the walk cannot honour; the message names it and what to do."""


class TooManyPatterns(ValueError):
    """More patterns than the matcher holds at once, each of them readable."""


class UnreadablePatterns(ValueError):
    """Patterns the matcher cannot compile (`[z-a]`, a trailing backslash, a NUL byte), each
    with why."""

    def __init__(self, reasons: dict[str, str]) -> None:
        super().__init__(f"cannot read the pattern {next(iter(reasons))!r}")
        self.reasons = reasons


@dataclass(frozen=True)
class IgnoreFile:
    """The patterns of one ignore file (or exclude list), relative to `base`.

    `ignored` answers git's question; `mentioned` is the same patterns with negations turned
    positive, so a path `mentioned` but not `ignored` was re-included by a `!pattern`, which
    overrides what the ignore files of parent directories say.
    """

    base: str  # the real path of the directory the patterns are relative to
    ignored: pathspec.PathSpec
    mentioned: pathspec.PathSpec

    @classmethod
    def from_lines(cls, base: Path | str, lines: Iterable[str]) -> IgnoreFile:
        """Raises UnreadablePatterns, naming every pattern the matcher cannot compile, or
        TooManyPatterns."""
        lines = [line.rstrip("\r\n") for line in lines]
        count = sum(1 for line in lines if line.strip() and not line.startswith("#"))
        if count > MAX_PATTERNS:
            raise TooManyPatterns(f"{count:,} patterns, more than gradfix matches at once")
        try:
            ignored, mentioned = _compiled(lines)
        except _pattern_errors():
            reasons = {}
            for line in lines:
                try:
                    _compiled([line])
                except _pattern_errors() as error:
                    # `re`'s message without its position, which counts in pathspec's regex
                    reasons[line] = getattr(error, "msg", None) or str(error)
            if not reasons:
                raise TooManyPatterns(
                    f"{count:,} patterns, more than gradfix matches at once"
                ) from None
            raise UnreadablePatterns(reasons) from None
        return cls(os.path.realpath(base), ignored, mentioned)

    def rebase(self, base: str) -> IgnoreFile:
        return IgnoreFile(base, self.ignored, self.mentioned)

    def decide(self, path: str, is_dir: bool) -> bool | None:
        """True: ignored; False: explicitly re-included; None: no pattern applies. `path` is
        a real path, as `base` is: one lies under the other when it starts with it."""
        prefix = self.base.rstrip("/") + "/"  # "/" itself as a base: every absolute path
        if not path.startswith(prefix):
            return None
        rel = path[len(prefix) :]
        if is_dir:
            rel += "/"
        if self.ignored.match_file(rel):
            return True
        return False if self.mentioned.match_file(rel) else None


def _compiled(lines: list[str]) -> tuple[pathspec.PathSpec, pathspec.PathSpec]:
    """`IgnoreFile.ignored` and `IgnoreFile.mentioned` for these patterns."""
    import pathspec  # here, not at the top: most runs have no ignore file to compile
    from pathspec._backends.re2 import _base  # where pathspec keeps the RE2 options it uses

    _base.RE2_OPTIONS.max_mem = MATCHER_MEMORY
    positive = [line[1:] if line.startswith("!") else line for line in lines]
    with warnings.catch_warnings():  # `re`'s FutureWarnings about `[[` are not the user's
        warnings.simplefilter("ignore")
        return (
            pathspec.GitIgnoreSpec.from_lines(lines, backend=MATCHER),
            pathspec.GitIgnoreSpec.from_lines(positive, backend=MATCHER),
        )


def _pattern_errors() -> tuple[type[Exception], ...]:
    """What compiling a pattern raises for one it cannot read: pathspec's own verdict (a
    ValueError), Python's `re`, which pathspec compiles each pattern with, and RE2."""
    import re2  # loaded with the matcher

    return (ValueError, re.error, re2.error)


def _decide(stack: Sequence[IgnoreFile], path: str, is_dir: bool) -> bool:
    # The innermost ignore file with an opinion wins, as in git.
    for ignore_file in reversed(stack):
        decision = ignore_file.decide(path, is_dir)
        if decision is not None:
            return decision
    return False


def _read_gitignore(directory: str) -> IgnoreFile | None:
    """The directory's `.gitignore`, read as git (2.32 and later) reads one: never through a
    symbolic link, only a regular file, none larger than git's limit. The tree is untrusted:
    a `.gitignore` linked to /dev/zero or to a FIFO must neither exhaust nor stall the walk."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(os.path.join(directory, ".gitignore"), flags)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size >= GITIGNORE_MAX_BYTES:
            return None
        data = file.read(GITIGNORE_MAX_BYTES)
    lines = data.decode("utf-8", errors="replace").splitlines()
    try:
        return _as_git_reads(directory, lines)
    except TooManyPatterns as error:
        path = os.path.join(directory, ".gitignore")
        raise UnreadableIgnoreFile(
            f"{path}: {error}; exclude its directory (--exclude) or check a narrower path"
        ) from None


def _as_git_reads(directory: str, lines: list[str]) -> IgnoreFile:
    try:
        return IgnoreFile.from_lines(directory, lines)
    except UnreadablePatterns as error:
        # git reads such a pattern as one that matches nothing (`[z-a]` has no character in
        # its range), and says nothing: the other patterns still apply.
        readable = [line for line in lines if line not in error.reasons]
        return IgnoreFile.from_lines(directory, readable)


def _parent_gitignores(directory: Path) -> list[IgnoreFile]:
    """The .gitignore files of the (resolved) `directory`'s parents, outermost first, up to
    the root of the git work tree it lies in; none when it is not in one."""
    parents = list(directory.parents)
    for depth, parent in enumerate(parents):
        if (parent / ".git").exists():
            found = (_read_gitignore(str(p)) for p in reversed(parents[: depth + 1]))
            return [ignore_file for ignore_file in found if ignore_file is not None]
    return []


def _is_virtualenv(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "pyvenv.cfg"))


def _walk(
    directory: str, real: str, stack: list[IgnoreFile], excludes: Sequence[IgnoreFile]
) -> Iterator[tuple[Path, str]]:
    """Yield the files under `directory` (as given), each with its real path; `real` is the
    directory's resolved path, which the ignore patterns are matched against. Paths are
    joined as strings and a `Path` made only for a file yielded: pathlib's joins were most
    of a warm rerun's walk."""
    own = _read_gitignore(real)
    if own is not None:
        stack = [*stack, own]
    try:
        entries = sorted(os.scandir(real), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        real_path = entry.path  # `real` joined with the entry's name
        if entry.is_dir(follow_symlinks=False):
            if (
                entry.name in SKIPPED_DIRS
                or _is_virtualenv(real_path)
                or _decide(stack, real_path, is_dir=True)
                or _decide(excludes, real_path, is_dir=True)
            ):
                continue
            yield from _walk(os.path.join(directory, entry.name), real_path, stack, excludes)
        elif (
            entry.name.endswith(SUFFIXES)
            and _is_file(entry)
            and not _decide(stack, real_path, is_dir=False)
            and not _decide(excludes, real_path, is_dir=False)
        ):
            # Folders are never followed through links, so only a link's real path differs.
            linked = entry.is_symlink()
            file = Path(os.path.join(directory, entry.name))
            yield file, os.path.realpath(real_path) if linked else real_path


def _is_file(entry: os.DirEntry[str]) -> bool:
    """Whether the entry is a file, or a link gradfix cannot follow (a loop, say): that one
    is taken too, for the engine to report when it fails to read it."""
    try:
        return entry.is_file()
    except OSError:
        return True


def write_roots(paths: Sequence[Path]) -> tuple[Path, ...]:
    """The real paths of the paths given on the command line: a fix is written only to a file
    whose real path lies under one of them (a symbolic link in the tree cannot lead a write
    out of it)."""
    return tuple(Path(os.path.realpath(path)) for path in paths)


def python_files(paths: Sequence[Path], excludes: Sequence[IgnoreFile] = ()) -> list[Path]:
    """The files to process under `paths`, in a deterministic order, each once.

    A file named in `paths` is always included; directories are walked. Raises
    PathNotFoundError for a path that does not exist.
    """
    files: list[Path] = []
    seen: set[str] = set()  # real paths
    real_folders: dict[str, str] = {}
    for path in paths:
        try:
            # One look at the path answers both questions for all but links: folder, and link.
            mode = os.lstat(path).st_mode
            linked = stat.S_ISLNK(mode)
            if linked:
                mode = os.stat(path).st_mode
        except OSError:
            raise PathNotFoundError(f"{path}: no such file or directory") from None
        if stat.S_ISDIR(mode):
            real = path.resolve()
            # Exclude patterns are relative to where they were given; a directory outside
            # that place gets them relative to itself.
            rebased = [e if real.is_relative_to(e.base) else e.rebase(str(real)) for e in excludes]
            found: Iterable[tuple[Path, str]] = _walk(
                str(path), str(real), _parent_gitignores(real), rebased
            )
        else:
            found = [(path, _real_file_path(path, linked, real_folders))]
        for file, key in found:
            if key not in seen:
                seen.add(key)
                files.append(file)
    return files


def _real_file_path(path: Path, linked: bool, real_folders: dict[str, str]) -> str:
    """`os.path.realpath(path)` (unlike `resolve`, fine with link loops), resolving each folder
    once: the files of one folder, named one by one on the command line, share it."""
    folder, name = os.path.split(path)
    if name in ("", ".", "..") or linked:
        return os.path.realpath(path)
    return os.path.join(_real_folder(folder or os.curdir, real_folders), name)


def _real_folder(folder: str, real_folders: dict[str, str]) -> str:
    """`os.path.realpath(folder)`, from its parent's when the folder itself is no link: the
    folders named on a command line share their parents, each looked at once."""
    real = real_folders.get(folder)
    if real is None:
        parent, name = os.path.split(folder)
        if name in ("", ".", "..") or not parent or os.path.islink(folder):
            real = os.path.realpath(folder)
        else:
            real = os.path.join(_real_folder(parent, real_folders), name)
        real_folders[folder] = real
    return real
