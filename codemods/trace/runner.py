"""Running the user's script (or module) in this interpreter under the recorder.

The script runs as `__main__`, with `sys.argv` set to it and its arguments and its folder first
on `sys.path`, as `python SCRIPT ARGS...` would run it; `-m MODULE` runs a module the way
`python -m` does. It stops after N optimizer steps (`StopTracing`, raised from the step hook).
"""

from __future__ import annotations

import runpy
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from codemods.trace.observations import Kind, Observation, Place

# The messages of the errors the bugs raise, and the rule each belongs to.
_BUG_ERRORS = {
    "Trying to backward through the graph a second time": "GF003",
    "has been modified by an inplace operation": "GF004",
}


@dataclass(frozen=True)
class Target:
    script: Path | None  # a script to run, or
    module: str | None  # a module to run as `python -m` does
    args: tuple[str, ...] = ()


@dataclass
class TraceRun:
    observations: list[Observation] = field(default_factory=list)
    steps: int = 0  # optimizer steps that ran
    stopped: bool = False  # stopped after the N steps asked for
    error: str | None = None  # the script's own exception, `Type: message`
    error_trace: str = ""  # its traceback
    exit_code: int | None = None  # a `sys.exit(code)` of the script
    explained: bool = False  # the error is one of the bugs', traced to its cause


def run_target(target: Target, steps: int) -> TraceRun:
    """Run `target` under the hooks; what they observed and how the script ended."""
    from codemods.trace.recorder import Recorder, StopTracing  # imports torch

    roots = _roots(target)
    recorder = Recorder(roots=roots, stop_after=steps)
    result = TraceRun()
    failing_line: Place | None = None
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    try:
        if target.script is not None:
            sys.argv = [str(target.script), *target.args]
            sys.path.insert(0, str(target.script.resolve().parent))
        else:
            sys.argv = [str(target.module), *target.args]
            sys.path.insert(0, str(Path.cwd()))
        with recorder.installed():
            try:
                if target.script is not None:
                    runpy.run_path(str(target.script), run_name="__main__")
                else:
                    runpy.run_module(str(target.module), run_name="__main__", alter_sys=True)
            except StopTracing:
                result.stopped = True
            except SystemExit as exit_:
                code = exit_.code
                result.exit_code = code if isinstance(code, int) else (0 if code is None else 1)
            except KeyboardInterrupt:
                raise
            except BaseException as error:  # the script's own failure, reported as such
                result.error = f"{type(error).__name__}: {error}"
                result.error_trace = "".join(traceback.format_exception(error))
                failing_line = _failing_line(error, recorder.is_user)
        recorder.finish()
        result.explained = recorder.explained_error
        if result.error is not None and not result.explained:
            unexplained = _unexplained(result.error, failing_line)
            if unexplained is not None:
                recorder.observations.append(unexplained)
                result.explained = True
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    result.observations = recorder.observations
    result.steps = recorder.steps
    return result


def _roots(target: Target) -> tuple[Path, ...]:
    """The folders whose files are the user's code."""
    if target.script is not None:
        return (target.script.resolve().parent,)
    return (Path.cwd().resolve(),)


def _failing_line(error: BaseException, is_user: Callable[[str], bool]) -> Place | None:
    """The user's innermost line in the traceback of `error`."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if is_user(f.filename)]
    return Place(frames[-1].filename, frames[-1].lineno or 0) if frames else None


def _unexplained(error: str, place: Place | None) -> Observation | None:
    """One of the bugs' errors that no hook explained (a write through code gradfix does not
    see): reported where the script failed."""
    rule = next((rule for text, rule in _BUG_ERRORS.items() if text in error), None)
    if rule is None or place is None:
        return None
    message = (
        f"Observed at run time: the script failed here with {error.splitlines()[0][:160]!r}; "
        "gradfix did not see which earlier line caused it (run `gradfix check` on the file, "
        "or look for a second backward or an in-place write before this line)."
    )
    return Observation(rule, Kind.FAILED, place, message, raised=True)
