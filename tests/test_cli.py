"""The command line against the stand-in pipeline (see engine_fakes); the end-to-end tests
with the real rules are in test_end_to_end.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from engine_fakes import install
from typer.testing import CliRunner

from codemods.commands import app

if TYPE_CHECKING:
    from typer.testing import Result
from codemods import __version__


@pytest.fixture(autouse=True)
def fakes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    install(monkeypatch)
    monkeypatch.chdir(tmp_path)


def runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        return CliRunner()


def gradfix(*args: str, input: bytes | str | None = None) -> Result:
    # Few files: the engine runs in this process, where the fakes are installed.
    return runner().invoke(app, list(args), input=input)


def write(path: str, text: str) -> Path:
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    return file


# --- check ----------------------------------------------------------------------------------


def test_check_clean_exits_0() -> None:
    write("a.py", "x = 1\n")
    result = gradfix("check")
    assert result.exit_code == 0, result.output
    assert "Scanned 1 file." in result.stdout and "No findings." in result.stdout


def test_check_findings_exit_1_and_mark_safe_fixes() -> None:
    write("pkg/a.py", "x = BUG_SAFE\ny = BUG_UNSAFE\nz = BUG_REPORT\n")
    result = gradfix("check", "pkg")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        "pkg/a.py:1:5: GF001 [*] BUG_SAFE found; replace it with OK_SAFE",
        "pkg/a.py:2:5: GF002 BUG_UNSAFE found; replace it with OK_UNSAFE",
        "pkg/a.py:3:5: GF003 BUG_REPORT found; replace it with something else",
    ]
    assert "1 hidden fix can be enabled with --unsafe-fixes" in result.stdout
    assert Path("pkg/a.py").read_text() == "x = BUG_SAFE\ny = BUG_UNSAFE\nz = BUG_REPORT\n"

    unsafe = gradfix("check", "pkg", "--unsafe-fixes")
    assert "pkg/a.py:2:5: GF002 [*] BUG_UNSAFE" in unsafe.stdout
    assert "hidden fix" not in unsafe.stdout


def test_check_parse_error_beside_good_files_exits_2() -> None:
    write("a.py", "x = BUG_REPORT\n")
    write("b.py", "SYNTAX_ERROR\n")
    write("c.py", "x = BUG_REPORT\n")
    result = gradfix("check")
    assert result.exit_code == 2
    out = result.stdout
    assert "a.py:1:5: GF003" in out and "c.py:1:5: GF003" in out
    assert "b.py:3:7: parse error: expected ':' (the file was skipped; fix the syntax" in out
    assert "1 file could not be processed in full" in out


def test_select_and_ignore_flags() -> None:
    write("a.py", "BUG_SAFE\nBUG_UNSAFE\nBUG_REPORT\n")
    selected = gradfix("check", "--select", "GF001,gf003")
    assert [line.split()[1] for line in selected.stdout.splitlines()[:2]] == ["GF001", "GF003"]
    assert "GF002" not in selected.stdout
    ignored = gradfix("check", "--ignore", "GF001", "--ignore", "GF003")
    assert "GF002" in ignored.stdout and "GF001" not in ignored.stdout


def test_unknown_rule_code_is_a_usage_error() -> None:
    write("a.py", "x = 1\n")
    result = gradfix("check", "--select", "GF001,GF042")
    assert result.exit_code == 2
    assert "unknown rule code `GF042` in --select" in result.stderr


def test_missing_path_is_reported_and_the_other_paths_are_processed() -> None:
    write("a.py", "x = BUG_SAFE\n")
    write("pkg/b.py", "x = BUG_SAFE\n")
    result = gradfix("fix", "nope.py", "a.py", "gone/", "pkg")
    assert result.exit_code == 2
    assert result.stdout.splitlines()[:2] == [
        "nope.py:1:1: read error: no such file or directory; check the path (the other paths "
        "were processed)",
        "gone:1:1: read error: no such file or directory; check the path (the other paths "
        "were processed)",
    ]
    assert Path("a.py").read_text() == Path("pkg/b.py").read_text() == "x = OK_SAFE\n"
    assert "2 files could not be processed in full" in result.stdout
    alone = gradfix("check", "--format", "json", "nope.py")
    assert alone.exit_code == 2 and "no Python files found" not in alone.stderr
    assert [(r["path"], r["tier"]) for r in json.loads(alone.stdout)] == [("nope.py", "error")]


@pytest.mark.parametrize("flag", ["", ",", " "])
def test_select_naming_no_rule_is_a_usage_error(flag: str) -> None:
    write("a.py", "x = BUG_SAFE\n")
    result = gradfix("check", "--select", flag)
    assert result.exit_code == 2
    assert "--select names no rule code; give at least one" in result.stderr


def test_empty_ignore_ignores_nothing_and_overrides_the_file() -> None:
    write("pyproject.toml", "[tool.gradfix]\nignore = ['GF001']\n")
    write("a.py", "x = BUG_SAFE\n")
    assert gradfix("check").exit_code == 0
    result = gradfix("check", "--ignore", "")
    assert result.exit_code == 1 and "a.py:1:5: GF001" in result.stdout


def test_no_files_warns() -> None:
    Path("empty").mkdir()
    result = gradfix("check", "empty")
    assert result.exit_code == 0
    assert "no Python files found under empty" in result.stderr


# --- formats --------------------------------------------------------------------------------


def test_json_format_keeps_stdout_machine_readable() -> None:
    write("a.py", "x = BUG_SAFE\n")
    write("b.py", "SYNTAX_ERROR\n")
    result = gradfix("check", "--format", "json")
    assert result.exit_code == 2
    records = json.loads(result.stdout)
    assert [(r["path"], r["rule"], r["tier"]) for r in records] == [
        ("a.py", "GF001", "safe"),
        ("b.py", None, "error"),
    ]
    assert set(records[0]) == {
        "rule",
        "path",
        "line",
        "column",
        "end_line",
        "end_column",
        "message",
        "tier",
        "fix",
    }
    assert records[0]["fix"]["edits"][0]["replacement"] == "OK_SAFE"
    assert "Scanned 2 files." in result.stderr


def test_github_format() -> None:
    write("a.py", "x = BUG_REPORT\n")
    result = gradfix("check", "--format", "github")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "::warning file=a.py,line=1,col=5,endLine=1,endColumn=15,title=GF003::BUG_REPORT found; "
        "replace it with something else"
    ]


def test_sarif_format() -> None:
    write("a.py", "x = BUG_SAFE\n")
    result = gradfix("check", "--format", "sarif")
    assert result.exit_code == 1
    log = json.loads(result.stdout)
    run = log["runs"][0]
    assert run["tool"]["driver"]["version"] == __version__
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["GF001", "GF002", "GF003"]
    (finding,) = run["results"]
    assert finding["ruleId"] == "GF001" and finding["fixes"]


# --- fix ------------------------------------------------------------------------------------


def test_fix_rewrites_and_exits_0_when_nothing_is_left() -> None:
    write("a.py", "x = BUG_SAFE\n")
    result = gradfix("fix")
    assert result.exit_code == 0, result.output
    assert Path("a.py").read_text() == "x = OK_SAFE\n"
    assert "Fixed 1 finding in 1 file: GF001 x1." in result.stdout
    assert gradfix("fix", "--exit-non-zero-on-fix").exit_code == 0  # nothing more to fix


def test_fix_exit_non_zero_on_fix() -> None:
    write("a.py", "x = BUG_SAFE\n")
    assert gradfix("fix", "--exit-non-zero-on-fix").exit_code == 1
    assert Path("a.py").read_text() == "x = OK_SAFE\n"


def test_fix_exits_1_when_findings_remain() -> None:
    write("a.py", "x = BUG_SAFE\ny = BUG_UNSAFE\n")
    result = gradfix("fix")
    assert result.exit_code == 1
    assert Path("a.py").read_text() == "x = OK_SAFE\ny = BUG_UNSAFE\n"
    assert "a.py:2:5: GF002 BUG_UNSAFE" in result.stdout
    assert "1 hidden fix can be enabled with --unsafe-fixes" in result.stdout

    result = gradfix("fix", "--unsafe-fixes")
    assert result.exit_code == 0
    assert Path("a.py").read_text() == "x = OK_SAFE\ny = OK_UNSAFE\n"


def test_fix_beside_a_syntax_error_still_fixes_the_good_files() -> None:
    write("a.py", "x = BUG_SAFE\n")
    write("b.py", "SYNTAX_ERROR\n")
    write("c.py", "x = BUG_SAFE\n")
    result = gradfix("fix")
    assert result.exit_code == 2
    assert Path("a.py").read_text() == Path("c.py").read_text() == "x = OK_SAFE\n"
    assert Path("b.py").read_text() == "SYNTAX_ERROR\n"
    assert "b.py:3:7: parse error: expected ':'" in result.stdout


def test_internal_error_is_reported_for_its_file_only() -> None:
    write("a.py", "x = BUG_SAFE\n")
    write("b.py", "CRASH_ME\n")
    result = gradfix("fix")
    assert result.exit_code == 2
    assert Path("a.py").read_text() == "x = OK_SAFE\n"
    assert "b.py:1:1: internal error: RuntimeError: boom" in result.stdout


def test_diff_writes_nothing_and_names_the_findings_first() -> None:
    write("a.py", "x = BUG_SAFE\ny = BUG_REPORT\n")
    write("b.py", "x = 1\n")
    result = gradfix("fix", "--diff")
    assert result.exit_code == 1
    assert Path("a.py").read_text() == "x = BUG_SAFE\ny = BUG_REPORT\n"
    assert result.stdout.splitlines()[:4] == [
        "# a.py:1: GF001 BUG_SAFE found; replace it with OK_SAFE",
        "--- a.py",
        "+++ a.py",
        "@@ -1,2 +1,2 @@",
    ]
    assert "-x = BUG_SAFE\n+x = OK_SAFE\n" in result.stdout
    assert "b.py" not in result.stdout
    assert "Would fix 1 finding in 1 file" in result.stderr

    Path("a.py").write_text("x = OK_SAFE\n")
    clean = gradfix("fix", "--diff")
    assert clean.exit_code == 0 and clean.stdout == ""


# --- stdin ----------------------------------------------------------------------------------


def test_check_stdin_uses_the_stdin_filename() -> None:
    result = gradfix("check", "-", "--stdin-filename", "src/model.py", input="x = BUG_REPORT\n")
    assert result.exit_code == 1
    assert result.stdout.startswith("src/model.py:1:5: GF003 ")


def test_fix_stdin_writes_the_fixed_source_to_stdout() -> None:
    result = gradfix("fix", "-", input=b"x = BUG_SAFE\r\ny = BUG_REPORT\r\n")
    assert result.exit_code == 1
    assert result.stdout_bytes == b"x = OK_SAFE\r\ny = BUG_REPORT\r\n"
    assert "-:2:5: GF003" in result.stderr

    unchanged = gradfix("fix", "-", input=b"x = 1\n")
    assert unchanged.exit_code == 0 and unchanged.stdout_bytes == b"x = 1\n"

    broken = gradfix("fix", "-", input=b"SYNTAX_ERROR\n")
    assert broken.exit_code == 2 and broken.stdout_bytes == b"SYNTAX_ERROR\n"


def test_diff_stdin_prints_the_diff() -> None:
    result = gradfix("fix", "--diff", "--stdin-filename", "m.py", input="x = BUG_SAFE\n")
    assert result.exit_code == 1
    assert result.stdout.startswith("# m.py:1: GF001 BUG_SAFE found")
    assert "--- m.py\n+++ m.py\n" in result.stdout


def test_stdin_cannot_be_mixed_with_paths() -> None:
    write("a.py", "")
    result = gradfix("check", "-", "a.py", input="")
    assert result.exit_code == 2
    assert "cannot be combined" in result.stderr


# --- configuration and file selection --------------------------------------------------------


def test_config_select_ignore_and_per_file_ignores() -> None:
    write(
        "pyproject.toml",
        """
[tool.gradfix]
select = ["GF001", "GF002"]
ignore = ["GF002"]

[tool.gradfix.per-file-ignores]
"tests/*" = ["GF001"]
""",
    )
    write("src/a.py", "BUG_SAFE\nBUG_UNSAFE\nBUG_REPORT\n")
    write("tests/t.py", "BUG_SAFE\n")
    result = gradfix("check", ".")
    assert result.exit_code == 1
    assert [line.split(":")[0] for line in result.stdout.splitlines()[:-2]] == ["src/a.py"]
    assert "GF001" in result.stdout and "GF002" not in result.stdout
    # the per-file-ignores apply to stdin through its filename
    stdin = gradfix("check", "--stdin-filename", "tests/x.py", input="BUG_SAFE\n")
    assert stdin.exit_code == 0
    # flags win over the file
    flagged = gradfix("check", "--select", "GF003")
    assert "GF003" in flagged.stdout and "GF001" not in flagged.stdout


def test_config_exclude_and_cli_exclude() -> None:
    write("pyproject.toml", "[tool.gradfix]\nexclude = ['generated/']\n")
    write("generated/g.py", "BUG_REPORT\n")
    write("src/gen_x.py", "BUG_REPORT\n")
    write("src/a.py", "BUG_REPORT\n")
    assert "Scanned 2 files." in gradfix("check").stdout
    only = gradfix("check", "--exclude", "gen_*.py")  # replaces the file's patterns
    assert "Scanned 2 files." in only.stdout and "generated/g.py" in only.stdout


def test_config_unknown_key_is_an_error() -> None:
    write("pyproject.toml", "[tool.gradfix]\nselcet = ['GF001']\n")
    write("a.py", "")
    result = gradfix("check")
    assert result.exit_code == 2
    assert "unknown key `selcet` in [tool.gradfix]" in result.stderr
    assert "pyproject.toml" in result.stderr


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"tool = 5  # gradfix\n", "pyproject.toml: `tool` must be a table, got 5; fix the file"),
        (b"[tool.gradfix]\nselect = ['\xff']\n", "pyproject.toml:2: not UTF-8 (byte 0xff cannot"),
    ],
)
def test_a_broken_configuration_is_one_line_and_exit_2(data: bytes, expected: str) -> None:
    Path("pyproject.toml").write_bytes(data)
    write("a.py", "x = BUG_SAFE\n")
    result = gradfix("check")
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("gradfix: error: ") and expected in line


def test_gitignore_is_honoured() -> None:
    write(".gitignore", "ignored/\nskip.py\n")
    write("ignored/a.py", "BUG_REPORT\n")
    write("skip.py", "BUG_REPORT\n")
    write("keep.py", "BUG_REPORT\n")
    result = gradfix("check")
    assert "keep.py" in result.stdout
    assert "ignored/" not in result.stdout and "skip.py" not in result.stdout
    assert "skip.py:1:1: GF003" in gradfix("check", "skip.py").stdout  # named explicitly


# --- rules, explain, version ----------------------------------------------------------------


def test_rules_lists_every_rule() -> None:
    result = gradfix("rules")
    assert result.exit_code == 0
    for code in ["GF001", "GF002", "GF003"]:
        assert code in result.stdout
    assert "summary of safe-thing" in result.stdout


def test_explain() -> None:
    result = gradfix("explain", "gf001")
    assert result.exit_code == 0
    assert result.stdout.startswith("GF001 (safe-thing): summary of safe-thing")
    assert "explanation of safe-thing" in result.stdout
    assert "Before:" in result.stdout and "before = 1" in result.stdout
    assert "After:" in result.stdout and "after = 1" in result.stdout


def test_explain_unknown_code() -> None:
    result = gradfix("explain", "GF999")
    assert result.exit_code == 2
    assert "unknown rule code `GF999`" in result.stderr
    assert "gradfix rules" in result.stderr


def test_version() -> None:
    result = gradfix("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"gradfix {__version__}"


def _console_script() -> str | None:
    beside = Path(sys.executable).with_name("gradfix")
    return str(beside) if beside.exists() else shutil.which("gradfix")


def test_installed_console_script(tmp_path: Path) -> None:
    script = _console_script()
    if script is None:
        pytest.skip("the `gradfix` console script is not installed (pip install -e .)")
    env = {**os.environ, "NO_COLOR": "1"}
    version = subprocess.run(
        [script, "--version"], capture_output=True, text=True, env=env, check=False
    )
    assert version.returncode == 0 and version.stdout.strip() == f"gradfix {__version__}"
    # Real pipeline here: a file with nothing to report.
    (tmp_path / "a.py").write_text("x = 1\n")
    check = subprocess.run(
        [script, "check", "."], cwd=tmp_path, capture_output=True, text=True, env=env, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "Scanned 1 file." in check.stdout


def test_ctrl_c_wrapped_by_class_creation_still_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while a dataclass is created arrives as a RuntimeError caused by it."""
    from codemods import cli as entry

    def interrupted_import() -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise RuntimeError("Error calling __set_name__") from interrupt

    fake = type(sys)("codemods.commands")
    fake.app = interrupted_import  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "codemods.commands", fake)
    # main() ignores a second Ctrl-C; this process's handler (inherited by the subprocesses
    # of later tests) must stay as it is.
    monkeypatch.setattr(entry.signal, "signal", lambda *args: None)
    monkeypatch.setattr(entry, "_exit_at_once", sys.exit)  # not os._exit: pytest runs here
    with pytest.raises(SystemExit) as exit_info:
        entry.main()
    assert exit_info.value.code == entry.EXIT_INTERRUPTED
