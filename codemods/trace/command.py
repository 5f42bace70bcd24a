"""`gradfix trace`: run the script, turn what was observed into findings, print and fix them."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path

import typer

from codemods import output
from codemods.engine import FileResult
from codemods.findings import Finding
from codemods.trace.observations import Observation
from codemods.trace.runner import Target, TraceRun, run_target

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
INSTALL_TORCH = (
    "gradfix: error: `gradfix trace` runs the script under PyTorch, which is not installed "
    "here: install it with `pip install torch`"
)


def main(
    script: Path | None, module: str | None, args: list[str], steps: int, as_json: bool, mode: str
) -> int:
    """Run, report and (mode "fix"/"diff") fix; the exit status."""
    if importlib.util.find_spec("torch") is None:
        typer.echo(INSTALL_TORCH, err=True)
        return EXIT_ERROR
    if script is not None and not script.is_file():
        typer.echo(f"gradfix: error: no such script: {script}", err=True)
        return EXIT_ERROR
    from codemods.trace import fixes  # the rules' fix builders, and LibCST

    if sys.gettrace() is not None:
        typer.echo(
            "gradfix trace: a tracer is already set (a debugger, coverage); it is paused while "
            "the script runs, since Python runs one `sys.settrace` tracer at a time.",
            err=True,
        )

    # stdout carries gradfix's JSON or diff: the script's own prints go to stderr then.
    quiet = as_json or mode == "diff"
    with contextlib.redirect_stdout(sys.stderr) if quiet else contextlib.nullcontext():
        run = run_target(Target(script, module, tuple(args)), steps)

    results = []
    for path, observed in _by_file(run.observations).items():
        found = fixes.file_fixes(path, observed)
        fixed = tuple(f for f in found.findings if f.fixable)
        if mode == "fix" and found.new_source is not None:
            fixes.write(found)
        left = found.findings if mode != "fix" else [f for f in found.findings if not f.fixable]
        results.append(
            FileResult(
                path=path,
                findings=tuple(left),
                fixed=fixed if mode != "check" else (),
                changed=mode != "check" and found.new_source is not None,
                source=found.source,
                new_source=found.new_source,
            )
        )

    if mode == "diff":
        for result in results:
            if result.changed:
                typer.echo(output.render_diff(result), nl=False)
    elif as_json:
        typer.echo(output.render_json(results), nl=False)
    else:
        for line in output.text_lines(results, unsafe_fixes=False):
            typer.echo(line)
        for result in results:
            for finding in result.fixed if mode == "fix" else ():
                typer.echo(f"{result.path}:{finding.line}: {finding.rule} fixed")
    _summary(run, results, mode)
    if run.error is not None and not run.explained:
        return EXIT_ERROR
    findings: list[Finding] = [f for r in results for f in (*r.findings, *r.fixed)]
    return EXIT_FINDINGS if findings else EXIT_OK


def _by_file(observations: list[Observation]) -> dict[Path, list[Observation]]:
    grouped: dict[Path, list[Observation]] = {}
    for observation in observations:
        path = Path(observation.place.path)
        if path.is_file():
            grouped.setdefault(path, []).append(observation)
    return grouped


def _summary(run: TraceRun, results: list[FileResult], mode: str) -> None:
    """The run's outcome on stderr: how far it got, and an exception of the script's own."""
    ran = (
        f"stopped after {run.steps} optimizer steps"
        if run.stopped
        else (
            f"ran to its end ({run.steps} optimizer steps)"
            if run.error is None
            else f"failed after {run.steps} optimizer steps"
        )
    )
    # `fix` moves the fixed findings out of `findings`; `diff` lists them in both.
    count = sum(len(r.findings) + (len(r.fixed) if mode == "fix" else 0) for r in results)
    changed = sum(r.changed for r in results)
    verb = {"fix": "fixed", "diff": "would fix", "check": "found"}[mode]
    typer.echo(
        f"gradfix trace: the script {ran}; {count} finding(s) observed"
        + (f", {verb} in {changed} file(s)" if mode != "check" else "")
        + ".",
        err=True,
    )
    if run.error is not None and not run.explained:
        typer.echo(
            "gradfix trace: the script raised an exception of its own, not one of the "
            f"autograd bugs gradfix traces:\n{run.error_trace.rstrip()}",
            err=True,
        )
