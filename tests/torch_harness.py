"""Fixture discovery and the torch side of the fixture tests.

A fixture is a directory `tests/fixtures/<RULE>/<case>/` holding `before.py`, `case.toml` and,
for cases gradfix rewrites, `after.py` (see tests/fixtures/README.md); a notebook case has
`before.ipynb` and `after.ipynb` instead. This module loads them and runs their scripts (a
notebook's code cells, joined) in-process under torch, so that torch is imported once for the
whole suite.
"""

from __future__ import annotations

import io
import os
import random
import re
import runpy
import sys
import traceback
import types
import warnings
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import torch
from torch import nn

FIXTURES_DIR = Path(__file__).parent / "fixtures"

SYMPTOMS = frozenset({"grad_fn", "error", "none"})
TIERS = frozenset({"safe", "unsafe", "report"})
_FINDING_RE = re.compile(
    r"^(?P<rule>GF\d{3}):(?:cell (?P<cell>[1-9]\d*):)?(?P<line>[1-9]\d*):(?P<tier>[a-z]+)$"
)
SUFFIXES = (".py", ".ipynb")  # a case is a script, or a notebook
_TOP_KEYS = frozenset({"description", "findings", "fixed_later", "run"})
_RUN_KEYS = frozenset({"symptom", "probe", "error", "same_result"})

# Emitted by torch when a requires-grad tensor is converted to a Python scalar (`float(loss)`).
SCALAR_WARNING = "requires_grad=True to a scalar"


class FixtureError(ValueError):
    """A fixture directory or its case.toml is malformed."""


@dataclass(frozen=True)
class Case:
    rule: str
    name: str
    directory: Path
    description: str
    findings: tuple[str, ...]  # "RULE:LINE:TIER" ("RULE:cell N:LINE:TIER" in a notebook), sorted
    # What later fix rounds of the same `fix` apply, on the file the round before wrote
    # (what a first fix uncovers), sorted
    fixed_later: tuple[str, ...]
    symptom: str
    suffix: str  # ".py", or ".ipynb" for a notebook case
    probe: str | None = None
    error: str | None = None
    same_result: str | None = None

    @property
    def id(self) -> str:
        return f"{self.rule}/{self.name}"

    @property
    def is_notebook(self) -> bool:
        return self.suffix == ".ipynb"

    @property
    def before_path(self) -> Path:
        return self.directory / f"before{self.suffix}"

    @property
    def after_path(self) -> Path | None:
        path = self.directory / f"after{self.suffix}"
        return path if path.exists() else None

    @property
    def reference_path(self) -> Path | None:
        """A hand-written correct version that `same_result` compares the fixed script with."""
        path = self.directory / f"reference{self.suffix}"
        return path if path.exists() else None

    @property
    def is_fix(self) -> bool:
        return self.after_path is not None

    def expected_source(self) -> bytes:
        """What `gradfix fix` (safe fixes only) must turn before.py into."""
        return (self.after_path or self.before_path).read_bytes()

    def tiers(self) -> set[str]:
        return {finding.rsplit(":", 1)[1] for finding in self.findings}


def load_case(directory: Path) -> Case:
    rule, name = directory.parent.name, directory.name
    toml_path = directory / "case.toml"
    suffixes = [suffix for suffix in SUFFIXES if (directory / f"before{suffix}").is_file()]
    if len(suffixes) != 1:
        raise FixtureError(f"{directory}: needs one before.py or before.ipynb")
    (suffix,) = suffixes
    if not toml_path.is_file():
        raise FixtureError(f"{directory}: missing case.toml")
    data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise FixtureError(f"{toml_path}: unknown keys {sorted(unknown)}")
    run = data.get("run", {})
    unknown = set(run) - _RUN_KEYS
    if unknown:
        raise FixtureError(f"{toml_path}: unknown [run] keys {sorted(unknown)}")

    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        raise FixtureError(f"{toml_path}: `description` must be a non-empty string")
    findings = data.get("findings")
    if not isinstance(findings, list) or not all(isinstance(f, str) for f in findings):
        raise FixtureError(f"{toml_path}: `findings` must be a list of strings")
    fixed_later = data.get("fixed_later", [])
    if not isinstance(fixed_later, list) or not all(isinstance(f, str) for f in fixed_later):
        raise FixtureError(f"{toml_path}: `fixed_later` must be a list of strings")
    in_cell = suffix == ".ipynb"
    for finding in [*findings, *fixed_later]:
        match = _FINDING_RE.match(finding)
        if not match or match["tier"] not in TIERS or (match["cell"] is not None) != in_cell:
            want = "RULE:cell N:LINE:TIER" if in_cell else "RULE:LINE:TIER"
            raise FixtureError(f"{toml_path}: bad finding {finding!r} (want {want})")

    symptom = run.get("symptom")
    if symptom not in SYMPTOMS:
        raise FixtureError(f"{toml_path}: [run] symptom must be one of {sorted(SYMPTOMS)}")
    if symptom == "grad_fn" and not run.get("probe"):
        raise FixtureError(f"{toml_path}: symptom 'grad_fn' needs a probe")
    if symptom == "error" and not run.get("error"):
        raise FixtureError(f"{toml_path}: symptom 'error' needs an error substring")
    has_reference = (directory / f"reference{suffix}").is_file()
    if symptom == "error" and run.get("same_result") and not has_reference:
        raise FixtureError(
            f"{toml_path}: before{suffix} raises, so same_result needs a reference{suffix} to "
            "compare with"
        )
    if has_reference and not run.get("same_result"):
        raise FixtureError(f"{toml_path}: reference{suffix} is only read through same_result")
    return Case(
        rule=rule,
        name=name,
        directory=directory,
        description=description,
        findings=tuple(sorted(findings)),
        fixed_later=tuple(sorted(fixed_later)),
        symptom=symptom,
        suffix=suffix,
        probe=run.get("probe"),
        error=run.get("error"),
        same_result=run.get("same_result"),
    )


def discover_case_dirs(root: Path = FIXTURES_DIR) -> list[Path]:
    """Every `<root>/<RULE>/<case>/` directory, sorted by rule then case name."""
    return [
        case_dir
        for rule_dir in sorted(root.iterdir())
        if rule_dir.is_dir() and re.fullmatch(r"GF\d{3}", rule_dir.name)
        for case_dir in sorted(rule_dir.iterdir())
        if case_dir.is_dir() and not case_dir.name.startswith((".", "_"))
    ]


def case_id(directory: Path) -> str:
    return f"{directory.parent.name}/{directory.name}"


def discover_cases(root: Path = FIXTURES_DIR) -> list[Case]:
    """Every case, loaded; raises FixtureError on the first malformed one."""
    return [load_case(case_dir) for case_dir in discover_case_dirs(root)]


# --- running a fixture script -------------------------------------------------------------


@dataclass
class ScriptRun:
    path: Path
    namespace: dict[str, Any] = field(default_factory=dict)  # the script's globals after it ran
    exception: BaseException | None = None
    traceback: str = ""
    output: str = ""
    warnings: list[str] = field(default_factory=list)

    def check_clean(self) -> None:
        assert self.exception is None, f"{self.path} raised:\n{self.traceback}\n{self.output}"

    def evaluate(self, expression: str) -> Any:
        return eval(expression, dict(self.namespace))


def parse_finding(finding: str) -> tuple[str, int | None, int, str]:
    """RULE, cell (None outside notebooks), LINE and TIER of a case.toml finding."""
    match = _FINDING_RE.match(finding)
    assert match is not None, finding
    cell = None if match["cell"] is None else int(match["cell"])
    return match["rule"], cell, int(match["line"]), match["tier"]


def python_code(path: Path) -> str:
    """What runs: the script, or a notebook's code cells joined as gradfix analyses them, where
    IPython lines (magics, shell escapes) are placeholders, so they are skipped."""
    if path.suffix != ".ipynb":
        return path.read_text(encoding="utf-8")
    # Imported here so that a broken codemods package fails the notebook cases only.
    from codemods import notebooks

    return notebooks.read(path.read_bytes()).code


def line_count(path: Path, cell: int | None) -> int:
    """The lines of the file, or of the notebook's code cell `cell` (1-based; 0 if no code)."""
    if cell is None:
        data = path.read_bytes()
        return data.count(b"\n") + (not data.endswith(b"\n"))
    from codemods import notebooks

    return sum(line.cell == cell - 1 for line in notebooks.read(path.read_bytes()).lines)


def script_of(path: Path, workdir: Path) -> Path:
    """`path`, or for a notebook its `python_code` written to a script in `workdir`."""
    if path.suffix != ".ipynb":
        return path
    script = workdir / f"{path.stem}_cells.py"
    script.write_text(python_code(path), encoding="utf-8")
    return script


def run_script(path: Path, workdir: Path) -> ScriptRun:
    """Run `path` (a notebook: its `script_of`) as `__main__` in this process, as `python path`
    would, in a fresh namespace.

    Global state a script may touch (argv, cwd, RNG seeds, grad mode, default dtype) is reset
    before and restored after, so scripts do not see each other.
    """
    result = ScriptRun(path=path)
    saved_argv = sys.argv[:]
    saved_cwd = os.getcwd()
    saved_grad = torch.is_grad_enabled()
    saved_dtype = torch.get_default_dtype()
    saved_anomaly = torch.is_anomaly_enabled()
    workdir.mkdir(parents=True, exist_ok=True)
    script = script_of(path, workdir)
    buffer = io.StringIO()
    sys.argv = [str(path)]
    os.chdir(workdir)
    torch.manual_seed(0)
    random.seed(0)
    try:
        with (
            warnings.catch_warnings(record=True) as caught,
            redirect_stdout(buffer),
            redirect_stderr(buffer),
        ):
            warnings.simplefilter("always")
            try:
                result.namespace = runpy.run_path(str(script), run_name="__main__")
            except (Exception, SystemExit) as exc:
                result.exception = exc
                result.traceback = traceback.format_exc()
        result.warnings = [str(w.message) for w in caught]
    finally:
        result.output = buffer.getvalue()
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        torch.set_grad_enabled(saved_grad)
        torch.set_default_dtype(saved_dtype)
        torch.set_anomaly_enabled(saved_anomaly)
    return result


# --- inspecting results --------------------------------------------------------------------

# Values that cannot hold a tensor, or whose contents are code rather than state.
_SKIPPED = (
    str,
    bytes,
    bytearray,
    int,
    float,
    complex,
    bool,
    type(None),
    range,
    torch.dtype,
    torch.device,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.GeneratorType,
    type,
)


def _is_attached(tensor: torch.Tensor) -> bool:
    # Parameters are leaves that require grad by design; everything else that requires grad
    # (a non-leaf with a grad_fn, or a stray requires-grad leaf) holds or starts a graph.
    if tensor.grad_fn is not None:
        return True
    return tensor.requires_grad and not isinstance(tensor, nn.Parameter)


def _children(obj: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield f"[{key!r}]", value
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield f"[{i}]", value
    elif isinstance(obj, (set, frozenset)):
        for value in obj:
            yield "{...}", value
    else:
        attrs = getattr(obj, "__dict__", None)
        if isinstance(attrs, dict):
            for key, value in attrs.items():
                yield f".{key}", value
        for slot in getattr(type(obj), "__slots__", ()):
            if isinstance(slot, str) and hasattr(obj, slot):
                yield f".{slot}", getattr(obj, slot)


def find_attached(obj: Any, path: str = "probe") -> str | None:
    """The path of a graph-attached tensor reachable from `obj`, or None.

    Walks containers and objects' attributes; Python numbers are clean, parameters of modules
    (leaves that require grad) are not counted.
    """
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [(path, obj)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, _SKIPPED):
            continue
        if isinstance(value, torch.Tensor):
            if _is_attached(value):
                return f"{where} (grad_fn={type(value.grad_fn).__name__})"
            continue
        if id(value) in seen:
            continue
        seen.add(id(value))
        stack.extend((where + step, child) for step, child in reversed(list(_children(value))))
    return None


# A reference.py computes the same values in another order (`(a + b).backward()` instead of
# two backward calls): floating-point sums round differently, so it is compared this closely.
REFERENCE_RTOL = 1e-5
REFERENCE_ATOL = 1e-6


def state_difference(before: Any, after: Any, path: str = "", close: bool = False) -> str | None:
    """Where two final states differ (modules by state_dict, tensors exactly, or with `close`
    within REFERENCE_RTOL / REFERENCE_ATOL), or None."""
    if isinstance(before, (nn.Module, torch.optim.Optimizer)):
        # By name: a class defined in a script is a new class object in each script run.
        if type(before).__qualname__ != type(after).__qualname__:
            return f"{path}: {type(before).__name__} vs {type(after).__name__}"
        return state_difference(
            before.state_dict(), after.state_dict(), path + ".state_dict()", close
        )
    if isinstance(before, torch.Tensor):
        if not isinstance(after, torch.Tensor):
            return f"{path}: tensor vs {type(after).__name__}"
        if before.dtype != after.dtype or before.shape != after.shape:
            return f"{path}: {before.dtype}{list(before.shape)} vs {after.dtype}{list(after.shape)}"
        if close and before.is_floating_point():
            same = torch.allclose(
                before.detach(), after.detach(), rtol=REFERENCE_RTOL, atol=REFERENCE_ATOL
            )
        else:
            same = torch.equal(before.detach(), after.detach())
        if not same:
            return f"{path}: values differ"
        return None
    if isinstance(before, dict):
        if not isinstance(after, dict) or list(before) != list(after):
            return f"{path}: keys differ"
        for key in before:
            diff = state_difference(before[key], after[key], f"{path}[{key!r}]", close)
            if diff:
                return diff
        return None
    if isinstance(before, (list, tuple)):
        if not isinstance(after, (list, tuple)) or len(before) != len(after):
            return f"{path}: lengths differ"
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            diff = state_difference(b, a, f"{path}[{i}]", close)
            if diff:
                return diff
        return None
    return None if before == after else f"{path}: {before!r} != {after!r}"
