"""GF004, the reordering shape: an optimizer step between a loss's forward and its backward.

`optimizer.step()` updates its parameters in place. A loss computed before the step whose graph
ran a module the optimizer holds (a `Linear` saves its weight when its input requires grad)
fails its later backward with "one of the variables needed for gradient computation has been
modified by an inplace operation": a SAC agent computing the policy loss through the critic,
then stepping the critic's Q optimizers, then backpropagating the policy loss; a GAN computing
`loss_G` through `D` before `opt_D.step()`. Steps and backward calls count where a helper of
the file makes them (`update_params(opt, net, loss)` backpropagates `loss` and steps `opt`).

Reported only, at the first such step: the fix is reordering (compute the loss after the step,
or call its backward before it), which no single edit makes safely. Evidence is an overlap of
access paths (`analysis/parameter_steps.py`): the optimizer built over
`self.critic.Q1.parameters()`, the loss's graph through `self.critic`, whose forward runs
`self.Q1`. Left alone: a loss whose module calls all ran after the step (`loss_G =
crit(D(fake), y)` after `opt_D.step()`, with only `fake` made before it), a step of an optimizer
whose modules the graph never ran, a graph already backpropagated before the step, and
optimizers or modules gradfix cannot name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from codemods.analysis import FileAnalysis
from codemods.analysis.index import FUNCTION_TYPES
from codemods.analysis.parameter_steps import (
    Function,
    GraphEvent,
    ModuleRun,
    ParameterSteps,
    overlap,
)
from codemods.analysis.provenance import Origin, OriginKind, Provenance
from codemods.findings import Tier
from codemods.rules.base import RuleFinding

_ERROR = (
    '"one of the variables needed for gradient computation has been modified by an '
    'inplace operation"'
)


@dataclass(frozen=True)
class _Backward:
    event: GraphEvent
    root: ast.expr  # the value backpropagated, as the scope names it
    value: Origin
    runs: list[ModuleRun]  # the module calls of its graph that saved parameters (or may have)


@dataclass(frozen=True)
class _Step:
    event: GraphEvent
    paths: frozenset[str]  # the modules it updates, as the scope names them


def step_before_backward(analysis: FileAnalysis, provenance: Provenance) -> Iterator[RuleFinding]:
    """Reports for each loss whose backward follows a step of an optimizer over a module
    its graph ran (and saved parameters of) before that step."""
    calls = analysis.index.calls_by_name
    if not (calls.get("step") and calls.get("backward")):
        # Every step is a `.step(...)` call of the file and every backward a `.backward()`
        # (`ParameterSteps.events`), made there or in a helper: without both, nothing to judge.
        return
    finder = _Finder(analysis, provenance)
    for scope_calls in finder.calls_by_scope().values():
        yield from finder.judge_scope(scope_calls)


class _Finder:
    def __init__(self, analysis: FileAnalysis, provenance: Provenance) -> None:
        self.analysis = analysis
        self.provenance = provenance
        self.steps = ParameterSteps(analysis, provenance)

    def calls_by_scope(self) -> dict[ast.AST, list[ast.Call]]:
        """The calls that may step or backpropagate, by scope, in source order: each a
        step or backward itself or a call of the file's functions that reach one."""
        by_scope: dict[ast.AST, list[ast.Call]] = {}
        for call in self.analysis.index.of_types(ast.Call):
            if self.analysis.training.call_reaches_step(call):  # type: ignore[arg-type]
                by_scope.setdefault(self.analysis.scope_of(call), []).append(call)  # type: ignore[arg-type]
        return by_scope

    def judge_scope(self, calls: list[ast.Call]) -> Iterator[RuleFinding]:
        backwards: list[_Backward] = []
        steps: list[_Step] = []
        for call in calls:
            for event in self.steps.events(call):
                if event.is_step:
                    step = self._step(event)
                    if step is not None:
                        steps.append(step)
                    continue
                root = self.steps.outward_argument(event.target, event.chain)
                if root is not None:
                    backwards.append(self._backward(event, root))
        if not steps or not backwards:
            return
        reported: set[Origin] = set()
        for backward in backwards:
            if backward.value in reported:
                continue
            finding = self._judge(backward, steps, backwards)
            if finding is not None:
                reported.add(backward.value)
                yield finding

    def _backward(self, event: GraphEvent, root: ast.expr) -> _Backward:
        value = self.provenance.of(root)
        made_by: tuple[tuple[ast.Call, Function], ...] = ()
        if value.kind is OriginKind.UNKNOWN:  # `self.loss_g` that `self.compute()` cached
            cached = self.steps.cached_value(root, event.call)
            if cached is not None:
                value, made_by = cached[0], (cached[1],)
        runs = [
            run
            for run in self.steps.module_runs(value, made_by)
            if run.path is not None and run.saves is not False
        ]
        return _Backward(event, root, value, runs)

    def _step(self, event: GraphEvent) -> _Step | None:
        """The step with the modules it updates named in the caller's scope: through the
        optimizer the caller passes (`update_params(self.q1_optim, ...)`), or through the
        paths a method's own optimizer holds (`self.opt_d.step()` in `self.update_d()`)."""
        passed = self.steps.outward_argument(event.target, event.chain)
        if passed is not None:
            paths = self.steps.stepped_paths(passed)
            return _Step(event, paths) if paths is not None else None
        paths = self.steps.stepped_paths(event.target)
        if paths is None:
            return None
        outer = {self.steps.outward(path, event.chain) for path in paths}
        if None in outer:
            return None
        return _Step(event, frozenset(outer))  # type: ignore[arg-type]

    def _judge(
        self, backward: _Backward, steps: list[_Step], backwards: list[_Backward]
    ) -> RuleFinding | None:
        for step in steps:
            if not _before(self.analysis, step.event, backward.event):
                continue
            if self.analysis.exclusive_branches(step.event.call, backward.event.call):
                continue
            for run in backward.runs:
                if not self._ran_before(run, step):
                    continue
                held = [path for path in step.paths if overlap(path, run.path)]  # type: ignore[arg-type]
                if not held or self._backpropagated_between(run, step, backwards):
                    continue
                return self._finding(backward, step, run, held[0])
        return None

    def _ran_before(self, run: ModuleRun, step: _Step) -> bool:
        start = self.analysis.index.start
        return start[run.where] < start[step.event.call] and not (
            self.analysis.exclusive_branches(run.where, step.event.call)
        )

    def _backpropagated_between(
        self, run: ModuleRun, step: _Step, backwards: list[_Backward]
    ) -> bool:
        """Whether a backward through `run` runs after it and before `step`: the step then
        meets a graph already consumed, and a later backward is GF003's concern."""
        start = self.analysis.index.start
        for other in backwards:
            if not (
                start[run.where] < start[other.event.call]
                and _before(self.analysis, other.event, step.event)
            ):
                continue
            if any(other_run.node is run.node for other_run in other.runs):
                return True
        return False

    def _finding(self, backward: _Backward, step: _Step, run: ModuleRun, held: str) -> RuleFinding:
        analysis = self.analysis
        step_call, backward_call = step.event.call, backward.event.call
        site = run.where
        loss = analysis.code_of(backward.root, 60)
        unproven = []
        if run.saves is None:
            unproven.append(
                f"gradfix does not know whether `{run.node.key or run.path}` saves its parameters"
            )
        if held != run.path and not run.path.startswith(f"{held}."):  # type: ignore[union-attr]
            unproven.append(f"gradfix cannot see whether the forward of `{run.path}` runs `{held}`")
        if self._conditional(step_call, backward_call):
            unproven.append("the step or the backward runs only under a condition")
        note = f" ({'; '.join(unproven)})" if unproven else ""
        message = (
            f"`{analysis.code_of(step_call, 60)}` (line {step_call.lineno}) updates in place "
            f"the parameters of `{held}`, which the graph of `{loss}` saved when "
            f"`{analysis.code_of(site, 60)}` (line {site.lineno}) ran `{run.path}`; "  # type: ignore[attr-defined]
            f"the backward of `{loss}` at line {backward_call.lineno} then raises {_ERROR}. "
            f"Reorder: compute `{loss}` after the step (line {step_call.lineno}), or move "
            f"the backward of `{loss}` before the step{note}."
        )
        statement = analysis.statement_of(step_call) or step_call
        return RuleFinding(statement, message, Tier.REPORT)

    def _conditional(self, step_call: ast.Call, backward_call: ast.Call) -> bool:
        """Whether the step or the backward sits under an `if` the other is not in."""
        return _if_around(self.analysis, step_call) is not _if_around(self.analysis, backward_call)


def _before(analysis: FileAnalysis, first: GraphEvent, second: GraphEvent) -> bool:
    start = analysis.index.start
    return (start[first.call], first.order) < (start[second.call], second.order)


def _if_around(analysis: FileAnalysis, node: ast.AST) -> ast.AST | None:
    around = analysis.ancestors_within(node, (*FUNCTION_TYPES, ast.Module))
    return next((ancestor for ancestor in around if isinstance(ancestor, ast.If)), None)
