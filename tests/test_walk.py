from __future__ import annotations

import os
from pathlib import Path

import pytest

from codemods.walk import (
    IgnoreFile,
    PathNotFoundError,
    UnreadableIgnoreFile,
    UnreadablePatterns,
    python_files,
    write_roots,
)


def make(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def rel(root: Path, files: list[Path]) -> list[str]:
    return [f.relative_to(root).as_posix() for f in files]


def test_walks_in_sorted_order_and_only_python_files(tmp_path: Path) -> None:
    make(tmp_path, "b.py", "a.py", "pkg/z.py", "pkg/sub/m.py", "notes.txt", "pkg/data.json")
    assert rel(tmp_path, python_files([tmp_path])) == ["a.py", "b.py", "pkg/sub/m.py", "pkg/z.py"]


def test_keeps_the_path_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make(tmp_path, "src/a.py")
    monkeypatch.chdir(tmp_path)
    assert python_files([Path("src")]) == [Path("src/a.py")]


def test_skips_tool_directories_and_virtualenvs(tmp_path: Path) -> None:
    make(
        tmp_path,
        "keep.py",
        ".git/hook.py",
        "__pycache__/c.py",
        "build/b.py",
        "dist/d.py",
        "node_modules/n.py",
        ".venv/lib/v.py",
        "venv/lib/v.py",
        ".tox/t.py",
        ".gradfix_cache/g.py",
        "myenv/lib/site.py",
        "env/ok.py",
    )
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    assert rel(tmp_path, python_files([tmp_path])) == ["env/ok.py", "keep.py"]


def test_explicit_paths_are_always_processed(tmp_path: Path) -> None:
    make(tmp_path, "build/b.py", "build/gen/c.py", "ignored.py", "script")
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    explicit = [tmp_path / "build", tmp_path / "ignored.py", tmp_path / "script"]
    assert rel(tmp_path, python_files(explicit)) == [
        "build/b.py",
        "build/gen/c.py",
        "ignored.py",
        "script",
    ]


def test_gitignore_nested_and_negated(tmp_path: Path) -> None:
    make(
        tmp_path,
        "a.py",
        "gen_a.py",
        "out/x.py",
        "pkg/gen_keep.py",
        "pkg/local.py",
        "pkg/deep/local.py",
        "pkg/deep/other.py",
    )
    (tmp_path / ".gitignore").write_text("gen_*.py\nout/\n")
    (tmp_path / "pkg" / ".gitignore").write_text("!gen_keep.py\n/local.py\n")
    assert rel(tmp_path, python_files([tmp_path])) == [
        "a.py",
        "pkg/deep/local.py",
        "pkg/deep/other.py",
        "pkg/gen_keep.py",
    ]


def test_gitignore_of_parent_directories_inside_a_git_work_tree(tmp_path: Path) -> None:
    make(tmp_path, "src/a.py", "src/skip_me.py")
    (tmp_path / ".gitignore").write_text("skip_me.py\n")
    assert rel(tmp_path, python_files([tmp_path / "src"])) == ["src/a.py", "src/skip_me.py"]
    (tmp_path / ".git").mkdir()
    assert rel(tmp_path, python_files([tmp_path / "src"])) == ["src/a.py"]


# Patterns git reads as matching nothing, which the matcher cannot compile: a reversed range,
# a trailing backslash, NUL bytes.
UNREADABLE = ["[z-a].py", "tail\\", "\0\0/$)[[:alpha:]]"]


def test_a_gitignore_pattern_the_matcher_cannot_read_matches_nothing(tmp_path: Path) -> None:
    make(tmp_path, "a.py", "skip.py", "z.py")
    (tmp_path / ".gitignore").write_text("\n".join([*UNREADABLE, "skip.py", "!nothing"]) + "\n")
    assert rel(tmp_path, python_files([tmp_path])) == ["a.py", "z.py"]


def test_a_gitignore_of_thousands_of_patterns_is_honoured(tmp_path: Path) -> None:
    # RE2's default budget held about 1,600 such patterns as one set.
    make(tmp_path, "keep.py", "gen/x/file1999_a.py")
    patterns = [f"gen{i}/**/file{i}*.py" for i in range(2000)] + ["gen/**/file1999*.py"]
    (tmp_path / ".gitignore").write_text("\n".join(patterns) + "\n")
    assert rel(tmp_path, python_files([tmp_path])) == ["keep.py"]


def test_a_gitignore_too_large_once_its_unreadable_patterns_are_dropped_is_refused(
    tmp_path: Path,
) -> None:
    make(tmp_path, "a.py")
    patterns = ["[z-a]", *(f"dir{i}/**/file{i}*.py" for i in range(16_000))]
    (tmp_path / ".gitignore").write_text("\n".join(patterns) + "\n")
    with pytest.raises(UnreadableIgnoreFile, match="16,000 patterns, more than gradfix matches"):
        python_files([tmp_path])


def test_unreadable_patterns_are_all_named() -> None:
    with pytest.raises(UnreadablePatterns) as info:
        IgnoreFile.from_lines("/", ["ok.py", *UNREADABLE, "!also_ok"])
    assert list(info.value.reasons) == UNREADABLE
    assert info.value.reasons["[z-a].py"] == "bad character range z-a"


def test_exclude_patterns_are_gitignore_style(tmp_path: Path) -> None:
    make(tmp_path, "a.py", "x_pb2.py", "gen/g.py", "sub/gen/h.py", "sub/only/o.py")
    excludes = [IgnoreFile.from_lines(tmp_path, ["*_pb2.py", "/gen/", "sub/only"])]
    assert rel(tmp_path, python_files([tmp_path], excludes)) == ["a.py", "sub/gen/h.py"]


def test_exclude_patterns_apply_relative_to_a_root_outside_their_base(tmp_path: Path) -> None:
    make(tmp_path, "project/gen/g.py", "project/a.py")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    excludes = [IgnoreFile.from_lines(elsewhere, ["/gen/"])]
    project = tmp_path / "project"
    assert rel(project, python_files([project], excludes)) == ["a.py"]


def test_patterns_apply_under_their_base_only(tmp_path: Path) -> None:
    # `gen` and `gen2` share the characters of a prefix, not a directory.
    make(tmp_path, "gen/skip.py", "gen2/skip.py")
    ignore_file = IgnoreFile.from_lines(tmp_path / "gen", ["skip.py"])
    assert ignore_file.decide(str(tmp_path.resolve() / "gen" / "skip.py"), is_dir=False)
    assert ignore_file.decide(str(tmp_path.resolve() / "gen2" / "skip.py"), is_dir=False) is None


def test_patterns_relative_to_the_root_directory() -> None:
    ignore_file = IgnoreFile.from_lines(Path("/"), ["/tmp/"])
    assert ignore_file.decide("/tmp", is_dir=True)
    assert ignore_file.decide("/usr/tmp", is_dir=True) is None


def test_a_path_given_with_dot_and_slash_is_kept_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make(tmp_path, "src/pkg/a.py")
    monkeypatch.chdir(tmp_path)
    assert python_files([Path("./src/")]) == [Path("src/pkg/a.py")]
    assert str(python_files([Path(".")])[0]) == "src/pkg/a.py"


def test_each_file_once(tmp_path: Path) -> None:
    make(tmp_path, "a.py", "b.py")
    files = python_files([tmp_path / "b.py", tmp_path, tmp_path / "a.py"])
    assert rel(tmp_path, files) == ["b.py", "a.py"]


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PathNotFoundError, match=r"nope\.py: no such file or directory"):
        python_files([tmp_path / "nope.py"])


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links here")
def test_symlinked_directories_are_not_followed(tmp_path: Path) -> None:
    make(tmp_path, "real/a.py")
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    assert rel(tmp_path, python_files([tmp_path])) == ["real/a.py"]


def test_a_symlink_loop_is_listed_for_the_engine_to_report(tmp_path: Path) -> None:
    make(tmp_path, "c.py")
    (tmp_path / "a.py").symlink_to(tmp_path / "b.py")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
    assert rel(tmp_path, python_files([tmp_path])) == ["a.py", "b.py", "c.py"]


def test_write_roots_are_the_real_paths_given(tmp_path: Path) -> None:
    make(tmp_path, "real/a.py")
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    assert write_roots([tmp_path / "link", tmp_path / "real" / "a.py"]) == (
        (tmp_path / "real").resolve(),
        (tmp_path / "real" / "a.py").resolve(),
    )


def test_a_gitignore_as_large_as_gits_limit_is_not_read(tmp_path: Path) -> None:
    make(tmp_path, "skip.py")
    gitignore = tmp_path / ".gitignore"
    gitignore.write_text("skip.py\n")
    assert python_files([tmp_path]) == []
    os.truncate(gitignore, 100 * 1024 * 1024)  # sparse: its size, not its bytes
    assert rel(tmp_path, python_files([tmp_path])) == ["skip.py"]
