"""The result cache (.gradfix_cache/), through the command line with the stand-in pipeline of
engine_fakes, whose calls are counted: a hit must not reach the pipeline at all."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from engine_fakes import fake_process_source, install
from typer.testing import CliRunner

from codemods import cache, engine, pipeline
from codemods.cache import CACHE_DIR, Entry, ResultCache
from codemods.commands import app
from codemods.engine import FileTask, Mode
from codemods.findings import Edit, Finding, Tier

if TYPE_CHECKING:
    from typer.testing import Result

ALL = frozenset({"GF001", "GF002", "GF003"})


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[bytes]:
    """The sources the pipeline was run on."""
    install(monkeypatch)
    monkeypatch.chdir(tmp_path)
    seen: list[bytes] = []

    def counted(source: bytes, options: pipeline.RunOptions) -> pipeline.SourceResult:
        seen.append(source)
        return fake_process_source(source, options)

    monkeypatch.setattr(pipeline, "process_source", counted)
    return seen


def gradfix(*args: str) -> Result:
    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        runner = CliRunner()
    return runner.invoke(app, list(args))


def write(path: str, text: str) -> Path:
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    return file


def entries(root: Path = Path()) -> list[Path]:
    return sorted((root / CACHE_DIR).glob("*.json"))


def test_a_warm_run_gives_the_same_results_without_the_pipeline(calls: list[bytes]) -> None:
    write("a.py", "x = BUG_SAFE\ny = BUG_REPORT\n")
    write("b.py", "SYNTAX_ERROR\n")
    write("c.py", "x = 1\n")
    for output_format in ["text", "json", "sarif"]:
        cold = gradfix("check", "--format", output_format)
        calls.clear()
        warm = gradfix("check", "--format", output_format)
        assert calls == []
        assert (warm.exit_code, warm.stdout) == (cold.exit_code, cold.stdout)
    assert warm.exit_code == 2  # the parse error is remembered too
    assert len(entries()) == 3
    assert (Path(CACHE_DIR) / ".gitignore").read_text().splitlines()[-1] == "*"


def test_a_changed_file_is_analysed_again(calls: list[bytes]) -> None:
    write("a.py", "x = BUG_SAFE\n")
    write("b.py", "x = BUG_REPORT\n")
    gradfix("check")
    write("a.py", "x = 1\n")
    calls.clear()
    result = gradfix("check")
    assert calls == [b"x = 1\n"]
    assert "a.py" not in result.stdout and "b.py:1:5: GF003" in result.stdout


def test_the_rules_and_the_unsafe_flag_are_part_of_the_key(calls: list[bytes]) -> None:
    write("a.py", "x = BUG_SAFE\ny = BUG_REPORT\n")
    assert "GF003" in gradfix("check").stdout
    calls.clear()
    selected = gradfix("check", "--select", "GF001")
    assert len(calls) == 1 and "GF003" not in selected.stdout
    gradfix("check", "--unsafe-fixes")
    assert len(calls) == 2
    calls.clear()
    gradfix("check", "--select", "GF001")
    gradfix("check", "--unsafe-fixes")
    assert calls == []


def test_the_version_and_gradfix_code_are_part_of_the_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    before = cache.fingerprint()
    cache.fingerprint.cache_clear()
    monkeypatch.setattr(cache, "__version__", "999.0")
    try:
        assert cache.fingerprint() != before
    finally:
        cache.fingerprint.cache_clear()
    old = ResultCache(tmp_path, before)
    old.store(b"x", ALL, False, Entry(error="1:1: parse error: x"))
    assert old.load(b"x", ALL, False) == Entry(error="1:1: parse error: x")
    assert ResultCache(tmp_path, "another gradfix").load(b"x", ALL, False) is None


def test_every_field_of_a_finding_survives_and_notebooks_have_their_own_entries(
    tmp_path: Path,
) -> None:
    store = ResultCache(tmp_path, "test")
    edit = Edit(2, 1, 2, 5, "loss.item()", cell=3)
    finding = Finding("GF001", 2, 1, 2, 5, "m", Tier.SAFE, edit, cell=3, file_line=40)
    store.store(b"{}", ALL, False, Entry((finding,)), notebook=True)
    assert store.load(b"{}", ALL, False, notebook=True) == Entry((finding,))
    assert store.load(b"{}", ALL, False) is None  # the same bytes read as Python source


def test_no_cache_neither_reads_nor_writes(calls: list[bytes]) -> None:
    write("a.py", "x = BUG_SAFE\n")
    gradfix("check", "--no-cache")
    assert not Path(CACHE_DIR).exists()
    gradfix("check")
    # A lie only the cache tells, signed with the user's key as gradfix's own entries are.
    ResultCache.at(Path()).store(b"x = BUG_SAFE\n", ALL, False, Entry())
    assert gradfix("check").exit_code == 0
    assert gradfix("check", "--no-cache").exit_code == 1
    assert gradfix("fix", "--no-cache", "--diff").exit_code == 1


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b'{"findings": [{"rule": "GF001", "line": 1',  # cut short by a crash
        b"\x80\x81 not json",
        b'{"findings": "none"}',
        b'{"findings": [], "error": 3}',
        b'{"findings": [{"rule": "GF001", "line": "1", "column": 5, "end_line": 1,'
        b' "end_column": 14, "message": "m", "tier": "safe", "edit": null}], "error": null}',
        b'{"findings": [{"rule": "GF001", "tier": "sure"}], "error": null}',
    ],
)
def test_a_corrupt_entry_is_ignored_and_replaced(calls: list[bytes], content: bytes) -> None:
    write("a.py", "x = BUG_SAFE\n")
    expected = gradfix("check").stdout
    (entry,) = entries()
    entry.write_bytes(content)
    calls.clear()
    assert gradfix("check").stdout == expected
    assert len(calls) == 1
    calls.clear()
    assert gradfix("check").stdout == expected
    assert calls == []


def test_fix_caches_files_without_fixes_and_the_rewritten_files(calls: list[bytes]) -> None:
    write("clean.py", "x = BUG_REPORT\n")
    write("buggy.py", "x = BUG_SAFE\n")
    first = gradfix("fix")
    assert first.exit_code == 1 and Path("buggy.py").read_text() == "x = OK_SAFE\n"
    calls.clear()
    again = gradfix("fix")
    assert calls == []  # nothing left to fix anywhere: answered from the cache
    assert again.exit_code == 1 and "clean.py:1:5: GF003" in again.stdout
    assert gradfix("check").stdout.startswith("clean.py:1:5: GF003")
    assert calls == []


def test_a_cached_fixable_finding_is_still_fixed(calls: list[bytes]) -> None:
    write("a.py", "x = BUG_UNSAFE\n")
    gradfix("check")
    calls.clear()
    assert gradfix("fix").exit_code == 1  # the unsafe fix is not applied: a hit
    assert calls == []
    assert gradfix("fix", "--diff", "--unsafe-fixes").stdout.count("+x = OK_UNSAFE") == 1
    assert gradfix("fix", "--unsafe-fixes").exit_code == 0
    assert Path("a.py").read_text() == "x = OK_UNSAFE\n"


def test_the_cache_lives_beside_the_projects_pyproject(calls: list[bytes]) -> None:
    write("project/pyproject.toml", "[tool.gradfix]\n")
    write("project/src/a.py", "x = BUG_SAFE\n")
    gradfix("check", "project/src")
    assert len(entries(Path("project"))) == 1
    assert not Path(CACHE_DIR).exists()
    write("other/b.py", "x = BUG_SAFE\n")  # no settings: the current directory
    gradfix("check", "other")
    assert len(entries()) == 1


def test_an_unwritable_cache_only_costs_speed(calls: list[bytes]) -> None:
    write("a.py", "x = BUG_SAFE\n")
    Path(CACHE_DIR).write_text("not a directory")
    assert gradfix("check").exit_code == 1
    assert gradfix("check").exit_code == 1
    assert len(calls) == 2


def test_all_hits_start_no_worker(calls: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    store = ResultCache(Path(CACHE_DIR), "test")
    tasks = [FileTask(write(f"m{i:02}.py", f"x = {i}\n"), ALL, store) for i in range(40)]
    for task in tasks:
        store.store(task.path.read_bytes(), ALL, False, Entry())

    def no_pool() -> None:
        raise AssertionError("a worker pool was started")

    monkeypatch.setattr(engine, "pool_context", no_pool)
    results = list(engine.run_cached(tasks, Mode.CHECK, jobs=2))
    assert [r.path for r in results] == [t.path for t in tasks] and calls == []


def test_hits_and_misses_keep_the_input_order(calls: list[bytes]) -> None:
    store = ResultCache(Path(CACHE_DIR), "test")
    tasks = [FileTask(write(f"m{i}.py", f"x = BUG_REPORT # {i}\n"), ALL, store) for i in range(6)]
    list(engine.run_cached(tasks[::2], Mode.CHECK))
    calls.clear()
    results = list(engine.run_cached(tasks, Mode.CHECK))
    assert [r.path for r in results] == [t.path for t in tasks]
    assert len(calls) == 3 and all(r.findings for r in results)


def test_concurrent_stores_never_show_a_partial_entry(tmp_path: Path) -> None:
    store = ResultCache(tmp_path / CACHE_DIR, "test")
    source = b"x = 1\n" * 30
    entry = Entry(
        tuple(
            Finding("GF001", i, 1, i, 2, "m", Tier.SAFE, Edit(i, 1, i, 2, "y" * 10_000))
            for i in range(1, 30)
        )
    )
    seen: list[Entry | None] = []

    def hammer() -> None:
        for _ in range(20):
            store.store(source, ALL, False, entry)
            seen.append(store.load(source, ALL, False))

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [entry] * 80
    assert [p.name for p in (tmp_path / CACHE_DIR).iterdir() if p.suffix != ".json"] == [
        ".gitignore"
    ]
