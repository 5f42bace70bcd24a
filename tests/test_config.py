from __future__ import annotations

from pathlib import Path

import pytest

from codemods.config import (
    ConfigError,
    FileConfig,
    find_pyproject,
    load_config,
    resolve_settings,
    split_codes,
)
from codemods.walk import python_files

KNOWN = {"GF001", "GF002", "GF003"}


def write_pyproject(directory: Path, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "pyproject.toml"
    path.write_text(body)
    return path


def test_nearest_pyproject_with_a_gradfix_table(tmp_path: Path) -> None:
    outer = write_pyproject(tmp_path, "[tool.gradfix]\nselect = ['GF001']\n")
    write_pyproject(tmp_path / "pkg", "[project]\nname = 'pkg'\n")
    (tmp_path / "pkg" / "src").mkdir()
    assert find_pyproject(tmp_path / "pkg" / "src") == outer
    inner = write_pyproject(tmp_path / "pkg", "[tool.gradfix]\nignore = ['GF002']\n")
    assert find_pyproject(tmp_path / "pkg" / "src") == inner
    assert load_config(tmp_path / "pkg" / "src").ignore == ("GF002",)


def test_no_config_gives_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path)
    assert config == FileConfig()
    settings = resolve_settings(config, KNOWN, cwd=tmp_path)
    assert settings.select == KNOWN
    assert not settings.unsafe_fixes


def test_all_keys(tmp_path: Path) -> None:
    write_pyproject(
        tmp_path,
        """
[tool.gradfix]
select = ["GF001", "gf002"]
ignore = ["GF002"]
exclude = ["generated/"]
unsafe-fixes = true

[tool.gradfix.per-file-ignores]
"tests/*" = ["GF001"]
""",
    )
    config = load_config(tmp_path)
    settings = resolve_settings(config, KNOWN, cwd=tmp_path)
    assert settings.select == {"GF001"}
    assert settings.unsafe_fixes
    assert settings.rules_for(tmp_path / "tests" / "test_x.py") == frozenset()
    assert settings.rules_for(tmp_path / "src" / "x.py") == {"GF001"}
    for name in ["generated/g.py", "src/x.py"]:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    files = python_files([tmp_path], settings.excludes)
    assert [f.relative_to(tmp_path).as_posix() for f in files] == ["src/x.py"]


def test_command_line_overrides_the_file(tmp_path: Path) -> None:
    write_pyproject(
        tmp_path,
        "[tool.gradfix]\nselect = ['GF001']\nignore = ['GF001']\nunsafe-fixes = true\n",
    )
    config = load_config(tmp_path)
    assert resolve_settings(config, KNOWN, cwd=tmp_path).select == frozenset()
    settings = resolve_settings(
        config, KNOWN, select=["GF001", "GF003"], ignore=["GF003"], unsafe_fixes=False
    )
    assert settings.select == {"GF001"}
    assert not settings.unsafe_fixes


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("[tool.gradfix]\nselet = ['GF001']\n", "unknown key `selet` in \\[tool.gradfix\\]"),
        ("[tool.gradfix]\nselect = 'GF001'\n", "`select` must be a list of strings"),
        ("[tool.gradfix]\nunsafe-fixes = 'yes'\n", "`unsafe-fixes` must be true or false"),
        ("[tool.gradfix]\nper-file-ignores = ['x']\n", "`per-file-ignores` must be a table"),
        (
            "[tool.gradfix.per-file-ignores]\n'a.py' = 'GF001'\n",
            "per-file-ignores` entry 'a.py' must be a list",
        ),
        ("[tool.gradfix\n", "invalid TOML"),
        # tomllib itself fails on these (Python's recursion limit, its integer limit)
        # (deeper than the recursion limit the pipeline sets, which a test run may have set)
        ("[tool.gradfix]\nexclude = " + "[" * 10**5 + "]" * 10**5 + "\n", "nested too deeply"),
        ("[tool.gradfix]\nx = " + "{a = " * 10**5 + "1" + "}" * 10**5 + "\n", "nested too deeply"),
        ("[tool.gradfix]\nx = " + "1" * 5000 + "\n", r"unreadable TOML: Exceeds the limit \("),
    ],
)
def test_bad_files_name_the_problem(tmp_path: Path, body: str, expected: str) -> None:
    path = write_pyproject(tmp_path, body)
    with pytest.raises(ConfigError, match=expected) as info:
        load_config(tmp_path)
    assert str(path) in str(info.value)


def test_patterns_the_matcher_cannot_read_are_named(tmp_path: Path) -> None:
    write_pyproject(tmp_path, "[tool.gradfix]\nexclude = ['gen/', '[z-a]']\n")
    with pytest.raises(ConfigError) as info:
        resolve_settings(load_config(tmp_path), KNOWN, cwd=tmp_path)
    assert str(info.value) == (
        f"{tmp_path / 'pyproject.toml'}: [tool.gradfix] `exclude`: cannot read the pattern "
        "'[z-a]' (bad character range z-a); write it in .gitignore's syntax"
    )
    write_pyproject(tmp_path, "[tool.gradfix.per-file-ignores]\n'tail\\' = ['GF001']\n")
    with pytest.raises(ConfigError, match=r"`per-file-ignores`: cannot read the pattern 'tail"):
        resolve_settings(load_config(tmp_path), KNOWN, cwd=tmp_path)
    with pytest.raises(ConfigError, match=r"^--exclude: cannot read the pattern 'a\\\\' \(Inv"):
        resolve_settings(FileConfig(), KNOWN, exclude=["ok/", "a\\"], cwd=tmp_path)


def test_unknown_rule_codes_are_named(tmp_path: Path) -> None:
    write_pyproject(tmp_path, "[tool.gradfix]\nignore = ['GF009']\n")
    with pytest.raises(ConfigError, match=r"unknown rule code `GF009` in .*`ignore`"):
        resolve_settings(load_config(tmp_path), KNOWN, cwd=tmp_path)
    with pytest.raises(ConfigError, match="`XX1` in --select; known codes: GF001, GF002"):
        resolve_settings(FileConfig(), KNOWN, select=["XX1"])


def test_command_line_excludes_are_relative_to_cwd(tmp_path: Path) -> None:
    for name in ["a/gen/x.py", "a/y.py"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    settings = resolve_settings(FileConfig(), KNOWN, exclude=["/a/gen"], cwd=tmp_path)
    files = python_files([tmp_path / "a"], settings.excludes)
    assert [f.name for f in files] == ["y.py"]


def test_split_codes() -> None:
    assert split_codes(["GF001,GF002", " GF003 ", ","]) == ("GF001", "GF002", "GF003")


def test_an_empty_select_is_an_error(tmp_path: Path) -> None:
    write_pyproject(tmp_path, "[tool.gradfix]\nselect = []\n")
    with pytest.raises(ConfigError, match=r"`select` is empty, so no rule would run; list"):
        resolve_settings(load_config(tmp_path), KNOWN)
    with pytest.raises(ConfigError, match="--select names no rule code"):
        resolve_settings(FileConfig(), KNOWN, select=[])


def test_parent_pyprojects_that_never_mention_gradfix_are_not_parsed(tmp_path: Path) -> None:
    # Someone else's files, broken in every way: none of them stops the lookup or errs.
    (tmp_path / "pyproject.toml").write_bytes(b"[project\nname = '\xff'\ntool = 5\n")
    write_pyproject(tmp_path / "a", "tool = 5\n")
    # Mentions gradfix, but has no table: parsed, passed over.
    write_pyproject(tmp_path / "a" / "b", "[project]\ndependencies = ['gradfix']\n")
    assert load_config(tmp_path / "a" / "b") == FileConfig()
    ours = write_pyproject(tmp_path / "a", "tool = {gradfix = {select = ['GF002']}}\n")
    assert load_config(tmp_path / "a" / "b") == FileConfig(path=ours, select=("GF002",))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"tool = 5  # gradfix settings below\n", ": `tool` must be a table, got 5; fix the file"),
        (
            b"[tool]\ngradfix = 'all'\n",
            ": `tool.gradfix` must be a table, got 'all'; write the settings under a "
            "[tool.gradfix] header",
        ),
        (
            b"[tool.gradfix]\n# caf\xe9\n",
            ":2: not UTF-8 (byte 0xe9 cannot be decoded); TOML files must be UTF-8: save it as "
            "UTF-8",
        ),
    ],
)
def test_a_broken_gradfix_configuration_is_a_one_line_error(
    tmp_path: Path, data: bytes, expected: str
) -> None:
    (tmp_path / "pyproject.toml").write_bytes(data)
    with pytest.raises(ConfigError) as error:
        load_config(tmp_path)
    assert str(error.value) == f"{tmp_path / 'pyproject.toml'}{expected}"
