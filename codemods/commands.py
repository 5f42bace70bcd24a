"""The `gradfix` commands: check, fix, rules, explain (run by `codemods.cli.main`)."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from codemods import __version__, engine, output
from codemods.cache import CACHE_DIR, ResultCache
from codemods.config import ConfigError, Settings, load_config, resolve_settings, split_codes
from codemods.engine import ErrorKind, FileError, FileResult, FileTask, Mode
from codemods.rule_codes import RULE_CODES
from codemods.walk import PathNotFoundError, UnreadableIgnoreFile, python_files, write_roots

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

app = typer.Typer(
    name="gradfix",
    help="Find and fix PyTorch autograd bugs by rewriting source code.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


class Format(str, Enum):
    text = "text"
    json = "json"
    github = "github"
    sarif = "sarif"


PathsArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="PATHS",
        help="Files or directories to process (default: the current directory); "
        "`-` reads standard input.",
        show_default=False,
    ),
]
SelectOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--select",
        metavar="CODES",
        help="Rule codes to run, comma-separated (default: all).",
        show_default=False,
    ),
]
IgnoreOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--ignore",
        metavar="CODES",
        help="Rule codes not to run, comma-separated.",
        show_default=False,
    ),
]
ExcludeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude",
        metavar="GLOB",
        help="Gitignore-style pattern of files or directories to skip (repeatable); "
        "replaces the `exclude` setting.",
        show_default=False,
    ),
]
JobsOpt = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        "-j",
        min=1,
        metavar="N",
        help="Worker processes (default: the CPU count).",
        show_default=False,
    ),
]
StdinFilenameOpt = Annotated[
    str | None,
    typer.Option(
        "--stdin-filename",
        metavar="PATH",
        help="The path to use for standard input in messages and per-file-ignores.",
        show_default=False,
    ),
]
UnsafeOpt = Annotated[
    bool | None,
    typer.Option(
        "--unsafe-fixes/--no-unsafe-fixes",
        help="Include fixes that may change behaviour (review them).",
        show_default=False,
    ),
]
NoCacheOpt = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help=f"Neither read nor write the result cache ({CACHE_DIR}/ in the project root).",
    ),
]


def _fail(message: str) -> NoReturn:
    # A path in the message may be a folder or file name of the checked tree.
    typer.echo(f"gradfix: error: {output.visible(message)}", err=True)
    raise typer.Exit(EXIT_ERROR)


@dataclass(frozen=True)
class Inputs:
    settings: Settings
    tasks: list[FileTask]
    stdin_path: Path | None  # set when reading standard input
    stdin_source: bytes = b""
    # Paths given on the command line that cannot be reached: one error each, reported with
    # the results; every other path is still processed.
    unreachable: tuple[FileResult, ...] = ()


def _settings(
    start: Path,
    select: Sequence[str] | None,
    ignore: Sequence[str] | None,
    exclude: Sequence[str] | None,
    unsafe_fixes: bool | None,
) -> Settings:
    try:
        return resolve_settings(
            load_config(start),
            RULE_CODES,
            select=split_codes(select) if select else None,
            ignore=split_codes(ignore) if ignore else None,
            exclude=exclude or None,
            unsafe_fixes=unsafe_fixes,
        )
    except ConfigError as exc:
        _fail(str(exc))


def _inputs(
    paths: Sequence[str] | None,
    stdin_filename: str | None,
    select: Sequence[str] | None,
    ignore: Sequence[str] | None,
    exclude: Sequence[str] | None,
    unsafe_fixes: bool | None,
    *,
    writes: bool,
    no_cache: bool,
) -> Inputs:
    """What to process; `writes`: fixes will be written, so each task carries the real paths
    they may be written under; unless `no_cache`, each task carries the project's result
    cache."""
    paths = list(paths or [])
    if paths == ["-"] or (not paths and stdin_filename is not None):
        stdin_path = Path(stdin_filename or "-")
        start = stdin_path.parent if stdin_filename else Path.cwd()
        settings = _settings(start, select, ignore, exclude, unsafe_fixes)
        return Inputs(settings, [], stdin_path, sys.stdin.buffer.read())
    if "-" in paths:
        _fail("`-` (standard input) cannot be combined with other paths")

    paths = paths or ["."]
    settings = _settings(Path(paths[0]), select, ignore, exclude, unsafe_fixes)
    reachable = [Path(p) for p in paths]
    unreachable: tuple[FileResult, ...] = ()
    try:
        files = _files(reachable, settings)
    except PathNotFoundError:
        # Looked at once more, one by one, only when one is missing: those are reported and
        # the others processed.
        checked = [(path, _unreachable(path)) for path in reachable]
        unreachable = tuple(error for _, error in checked if error is not None)
        reachable = [path for path, error in checked if error is None]
        try:
            files = _files(reachable, settings)
        except PathNotFoundError as exc:  # it vanished since: the run is not what was asked for
            _fail(str(exc))
    if not files and not unreachable:
        typer.echo(f"gradfix: warning: no Python files found under {', '.join(paths)}", err=True)
    # Fixes are written only under the paths given. Nothing else needs those: a check sends
    # none to its workers (one per path given, copied into every chunk of work).
    roots = write_roots(reachable) if writes else None
    cache = None if no_cache or not files else ResultCache.at(settings.root)
    tasks = [FileTask(path, settings.rules_for(path), cache, roots) for path in files]
    return Inputs(settings, tasks, None, unreachable=unreachable)


def _files(paths: list[Path], settings: Settings) -> list[Path]:
    try:
        return python_files(paths, settings.excludes)
    except UnreadableIgnoreFile as exc:  # its patterns cannot be honoured: nothing is checked
        _fail(str(exc))


def _unreachable(path: Path) -> FileResult | None:
    """The error for a path on the command line that does not exist (or cannot be looked at);
    None for one that can be walked."""
    try:
        os.stat(path)
    except OSError as exc:
        reason = "no such file or directory" if exc.errno == errno.ENOENT else exc.strerror
        message = f"{reason}; check the path (the other paths were processed)"
        return FileResult(path, error=FileError(ErrorKind.READ, message))
    return None


def _results(inputs: Inputs, mode: Mode, jobs: int | None) -> list[FileResult]:
    settings = inputs.settings
    if inputs.stdin_path is not None:
        path = inputs.stdin_path
        select = settings.rules_for(path)
        source = inputs.stdin_source
        return [engine.process_bytes(path, source, select, mode, settings.unsafe_fixes)]
    results = list(inputs.unreachable)
    with output.progress(len(inputs.tasks)) as advance:
        for result in engine.run_cached(inputs.tasks, mode, settings.unsafe_fixes, jobs):
            results.append(result)
            advance()
    return results


def _echo_lines(lines: Iterable[str], err: bool = False) -> None:
    for line in lines:
        typer.echo(line, err=err)


def _write_stdout_bytes(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


@app.command()
def check(
    paths: PathsArg = None,
    output_format: Annotated[
        Format,
        typer.Option(
            "--format", metavar="text|json|github|sarif", help="How to print the findings."
        ),
    ] = Format.text,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    exclude: ExcludeOpt = None,
    unsafe_fixes: UnsafeOpt = None,
    jobs: JobsOpt = None,
    stdin_filename: StdinFilenameOpt = None,
    no_cache: NoCacheOpt = False,
) -> None:
    """Report autograd bugs without changing any file.

    Exit status: 0 nothing found, 1 findings, 2 a usage or configuration error or a file
    that could not be processed (all other files are still checked)."""
    inputs = _inputs(
        paths,
        stdin_filename,
        select,
        ignore,
        exclude,
        unsafe_fixes,
        writes=False,
        no_cache=no_cache,
    )
    unsafe = inputs.settings.unsafe_fixes
    results = _results(inputs, Mode.CHECK, jobs)
    if output_format is Format.text:
        _echo_lines(output.text_lines(results, unsafe))
    elif output_format is Format.json:
        typer.echo(output.render_json(results), nl=False)
    elif output_format is Format.github:
        _echo_lines(output.github_lines(results))
    else:
        from codemods.rules import RULES  # the rules' help texts, for SARIF's rule table

        typer.echo(output.render_sarif(results, RULES, __version__), nl=False)
    summary = output.Summary.of(results, unsafe)
    console = Console(stderr=output_format is not Format.text)
    output.print_summary(console, output.summary_lines(summary, fixing=False, diff=False))
    if summary.errors:
        raise typer.Exit(EXIT_ERROR)
    raise typer.Exit(EXIT_FINDINGS if summary.findings_left else EXIT_OK)


@app.command()
def fix(
    paths: PathsArg = None,
    diff: Annotated[
        bool,
        typer.Option("--diff", help="Print a unified diff of the fixes instead of writing them."),
    ] = False,
    unsafe_fixes: UnsafeOpt = None,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    exclude: ExcludeOpt = None,
    jobs: JobsOpt = None,
    stdin_filename: StdinFilenameOpt = None,
    exit_non_zero_on_fix: Annotated[
        bool,
        typer.Option("--exit-non-zero-on-fix", help="Exit with 1 when anything was fixed."),
    ] = False,
    no_cache: NoCacheOpt = False,
) -> None:
    """Apply the fixes in place (safe ones; unsafe ones too with --unsafe-fixes).

    Exit status: 0 nothing left to report, 1 findings left (or, with --diff, changes to make;
    with --exit-non-zero-on-fix, anything fixed), 2 an error (other files are still fixed).
    With `-`, the fixed source goes to standard output."""
    inputs = _inputs(
        paths,
        stdin_filename,
        select,
        ignore,
        exclude,
        unsafe_fixes,
        writes=not diff,
        no_cache=no_cache,
    )
    unsafe = inputs.settings.unsafe_fixes
    results = _results(inputs, Mode.DIFF if diff else Mode.FIX, jobs)
    summary = output.Summary.of(results, unsafe)
    # stdout carries the diff or the fixed source when there is one; the rest goes to stderr.
    to_stderr = diff or inputs.stdin_path is not None
    if diff:
        for result in results:
            if result.changed:
                typer.echo(output.render_diff(result), nl=False)
        _echo_lines(output.text_lines([r for r in results if r.error], unsafe), err=True)
    else:
        _echo_lines(output.text_lines(results, unsafe), err=to_stderr)
        if inputs.stdin_path is not None:
            (result,) = results
            new_source = result.new_source
            _write_stdout_bytes(inputs.stdin_source if new_source is None else new_source)
    output.print_summary(
        Console(stderr=to_stderr), output.summary_lines(summary, fixing=True, diff=diff)
    )
    if summary.errors:
        raise typer.Exit(EXIT_ERROR)
    if diff:
        raise typer.Exit(EXIT_FINDINGS if summary.changed else EXIT_OK)
    changed = exit_non_zero_on_fix and summary.changed
    raise typer.Exit(EXIT_FINDINGS if summary.findings_left or changed else EXIT_OK)


class TraceFormat(str, Enum):
    text = "text"
    json = "json"


@app.command(context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
def trace(
    command: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="SCRIPT [ARGS]...",
            help="The script to run and its arguments (with -m: the module's arguments).",
            show_default=False,
        ),
    ] = None,
    module: Annotated[
        str | None,
        typer.Option("-m", metavar="MODULE", help="Run a module, as `python -m` does."),
    ] = None,
    steps: Annotated[
        int,
        typer.Option(
            "--steps",
            min=0,
            metavar="N",
            help=(
                "Stop after N optimizer steps (0: run to the end). When the steps run in an "
                "epoch's batch loop, the run goes on through the epoch's end (validation, "
                "logging) to the next step, at most N + max(1, N // 3) steps in all."
            ),
        ),
    ] = 3,
    output_format: Annotated[
        TraceFormat,
        typer.Option("--format", metavar="text|json", help="How to print the findings."),
    ] = TraceFormat.text,
    diff: Annotated[
        bool,
        typer.Option("--diff", help="Print a unified diff of the fixes instead of writing them."),
    ] = False,
    apply: Annotated[bool, typer.Option("--fix", help="Apply the fixes in place.")] = False,
) -> None:
    """Run a training script with gradfix's hooks and report the autograd bugs it hits.

    This runs the script's code (it is your program, run because you asked): `check` and `fix`
    never do. Findings have the tier `confirmed` (or `report`). Exit status: 0 nothing found,
    1 findings (or, with --diff, changes to make), 2 a usage error or an exception of the
    script's own."""
    from codemods.trace import command as trace_command  # torch is imported only here

    args = list(command or [])
    if module is None and not args:
        _fail("give the script to run (`gradfix trace train.py`) or `-m MODULE`")
    if diff and apply:
        _fail("--diff and --fix cannot be combined")
    status = trace_command.main(
        script=None if module is not None else Path(args[0]),
        module=module,
        args=args if module is not None else args[1:],
        steps=steps,
        as_json=output_format is TraceFormat.json,
        mode="diff" if diff else "fix" if apply else "check",
    )
    raise typer.Exit(status)


@app.command("rules")
def list_rules() -> None:
    """List the rules: code, name and what each detects."""
    from rich.table import Table

    from codemods.rules import RULES

    table = Table("Code", "Name", "Summary")
    for code in sorted(RULES):
        rule = RULES[code]
        table.add_row(rule.code, rule.name, rule.summary)
    Console().print(table)


# What `gradfix trace` observes for each rule, shown by `gradfix explain`.
TRACE_SEES = {
    "GF001": "a loss of an earlier training step still alive (kept in a list or a meter) or "
    "added into a total read by a later step; reported at the accumulation.",
    "GF002": "a tensor of an earlier training step still alive where it was stored, or read "
    "into the next step's graph after a backward went through it (backward through "
    "history); reported at the store or the read. State an object keeps from one step to "
    "the next, and a carried state its own line also reads within a step (a time loop), "
    "are reports: reset or detach it where a step starts. A tensor of an earlier step that "
    "the same code reads into every step's graph after an optimizer step (a GAN `fake` "
    "reused over generator steps) is a report at the read: make it again in that step.",
    "GF003": "a backward that reaches graph nodes an earlier backward freed; reported at the "
    "earlier backward (retain_graph=True) when no parameter update ran between them, else as "
    "a report at the update or where the failing graph takes in the freed one; a loss "
    "backpropagated twice through a wrapper is reported at the second call.",
    "GF004": "an in-place write that changes a tensor an op saved, caught as the write "
    "happens; reported at the write, naming the saving op's line. An optimizer step that "
    "changed a weight a graph saved before that graph's first backward is a report at the "
    "line that built the graph: build it after the step.",
}


@app.command()
def explain(code: Annotated[str, typer.Argument(help="A rule code, e.g. GF001.")]) -> None:
    """Explain a rule: what it detects, why it matters, and an example fix."""
    from codemods.rules import RULES

    rule = RULES.get(code.strip().upper())
    if rule is None:
        _fail(
            f"unknown rule code `{code}`; known codes: {', '.join(sorted(RULES))} "
            "(run `gradfix rules` to list them)"
        )
    typer.echo(f"{rule.code} ({rule.name}): {rule.summary}\n")
    typer.echo(rule.explanation.strip() + "\n")
    typer.echo("Before:\n")
    typer.echo(rule.example_before.rstrip() + "\n")
    typer.echo("After:\n")
    typer.echo(rule.example_after.rstrip())
    seen = TRACE_SEES.get(rule.code)
    if seen is None:
        return
    typer.echo(f"\nAt run time: {seen}")
    typer.echo(
        "`gradfix trace SCRIPT` runs your script (it is your code, run because you ask: `check` "
        "and `fix` never run anything) and reports this only when it happens, with the tier "
        "`confirmed`; `trace --fix` applies the same fix as `fix`."
    )


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"gradfix {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Find and fix PyTorch autograd bugs by rewriting source code."""
