"""From what `gradfix trace` observed to findings, and their fixes.

Each observation names a rule and the statement the fix must change. The edit comes from that
rule's own fix builder (its `fix_at`), so that `trace` and `check` write the same edit for the
same bug; it is applied as `fix` applies edits (`SourceEditor`, the output re-parsed, an atomic
write of a file that still holds the bytes that were read). Observations whose right change is
not one edit (a step between two backward passes, a duplicated backward) are reports.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from codemods import atomic
from codemods.analysis import FileAnalysis
from codemods.findings import Finding, Tier
from codemods.pipeline import checked_tree, encoded_as, nodes_overlap, source_text
from codemods.rewrite import SourceEditor
from codemods.rules import (
    gf001_accumulated_loss,
    gf002_carried_tensor,
    gf003_shared_graph_backward,
    gf004_inplace_on_saved,
)
from codemods.rules.base import Rewrite
from codemods.rules.edits import calling
from codemods.trace.observations import Kind, Observation

_REPORTS = {
    Kind.STATE_KEPT,
    Kind.DUPLICATE,
    Kind.STEP_BETWEEN,
    Kind.REUSED_AFTER_STEP,
    Kind.UPDATED_AFTER_READ,
    Kind.STEP_BEFORE_BACKWARD,
    Kind.FAILED,
}


@dataclass
class FileFixes:
    path: Path
    source: bytes
    findings: list[Finding]
    new_source: bytes | None  # the file with every confirmed fix applied, when one changed it


def file_fixes(path: Path, observations: list[Observation]) -> FileFixes:
    """The findings of `observations` (all in `path`), each with its edit when it has one,
    and the file with the edits applied."""
    source = path.read_bytes()
    text = source_text(source)
    tree, index, error = checked_tree(source, text)
    if tree is None or error is not None:
        return FileFixes(path, source, [_finding(o, None, Tier.REPORT) for o in observations], None)
    analysis = FileAnalysis(tree, text, index)
    editor = SourceEditor(analysis)
    findings: list[Finding] = []
    applied: dict[ast.AST, Rewrite] = {}
    for observation in observations:
        statement = _statement_at(analysis, observation.place.line)
        replacements = {} if statement is None else _replacements(analysis, statement, observation)
        module = _fact(observation, "module:")
        if not replacements and module is not None:
            constructor, replacements = gf004_inplace_on_saved.fix_inplace_module(
                analysis, module, statement
            )
            if constructor is not None:
                # Reported at the module's constructor: the line the fix changes.
                statement = constructor  # type: ignore[assignment]
                where = analysis.positions[constructor].start.line
                observation = replace(observation, place=replace(observation.place, line=where))
        if not replacements or nodes_overlap(replacements, applied, analysis):
            findings.append(_finding(observation, None, _tier(observation, replacements)))
            continue
        spans = [analysis.positions[statement], *(analysis.positions[n] for n in replacements)]
        observation = _at_edit(analysis, statement, replacements, observation)
        findings.append(_finding(observation, editor.edit(replacements, spans), Tier.CONFIRMED))
        applied.update(replacements)
    new_source = None
    if applied:
        new = encoded_as(source, editor.rewritten(applied))
        ast.parse(new)  # a bug in a fix builder must never reach the user's file
        new_source = new if new != source else None
    analysis.release()
    return FileFixes(path, source, findings, new_source)


def write(fixes: FileFixes) -> None:
    """Write the fixed file in place, atomically, if it still holds the bytes that were read."""
    if fixes.new_source is not None:
        atomic.rewrite(fixes.path, fixes.source, fixes.new_source)


_BUILDERS: dict[str, Callable[[FileAnalysis, ast.stmt, Observation], dict[ast.AST, Rewrite]]] = {
    "GF001": lambda analysis, statement, observation: gf001_accumulated_loss.fix_at(
        analysis, statement, _holders(observation)
    ),
    "GF002": lambda analysis, statement, observation: gf002_carried_tensor.fix_at(
        analysis, statement, _holders(observation)
    ),
    "GF003": lambda analysis, statement, observation: gf003_shared_graph_backward.fix_at(
        analysis, statement, "repeated" in observation.facts
    ),
    "GF004": lambda analysis, statement, _: gf004_inplace_on_saved.fix_at(analysis, statement),
}


def _replacements(
    analysis: FileAnalysis, statement: ast.stmt, observation: Observation
) -> dict[ast.AST, Rewrite]:
    if observation.kind in _REPORTS or "within-step" in observation.facts:
        return {}
    cloned = _facts(observation, "clone:")
    if cloned:
        return _clones(analysis, statement, cloned)
    replacements = _BUILDERS[observation.rule](analysis, statement, observation)
    if not replacements and observation.rule == "GF001":
        # A total the accumulation rule does not know the shape of (`meter.update(loss)`
        # into a method it cannot follow): the stored value itself is detached.
        replacements = gf002_carried_tensor.fix_at(analysis, statement, _holders(observation))
    return replacements


def _fact(observation: Observation, prefix: str) -> str | None:
    return next((f.removeprefix(prefix) for f in observation.facts if f.startswith(prefix)), None)


def _facts(observation: Observation, prefix: str) -> frozenset[str]:
    return frozenset(f.removeprefix(prefix) for f in observation.facts if f.startswith(prefix))


def _holders(observation: Observation) -> frozenset[str]:
    return _facts(observation, "holder:")


def _clones(
    analysis: FileAnalysis, statement: ast.stmt, sources: frozenset[str]
) -> dict[ast.AST, Rewrite]:
    """`.clone()` on each read, in `statement`, of the saved tensor an op later wrote inside
    itself (`sources`, its source text there); {} unless exactly one read is found."""
    reads = [
        node
        for node in ast.walk(statement)
        if isinstance(node, (ast.Name, ast.Attribute))
        and isinstance(node.ctx, ast.Load)
        and analysis.code_of(node) in sources
    ]
    return {reads[0]: calling("clone")} if len(reads) == 1 else {}


def _at_edit(
    analysis: FileAnalysis,
    statement: ast.AST,
    replacements: dict[ast.AST, Rewrite],
    observation: Observation,
) -> Observation:
    """The observation moved to the statement its fix changes, when the edit lies wholly in
    one other statement of another function (a clone where a method saved the tensor another
    wrote, a layer's constructor): a finding is reported at the line the fix must change. In
    the same function the observed statement stays (its message names the other line)."""
    if any(analysis.contains(statement, node) for node in replacements):
        return observation
    edited = {analysis.statement_of(node) for node in replacements}
    if len(edited) != 1 or None in edited:
        return observation
    other = edited.pop()
    assert other is not None
    if analysis.scope_of(other) is analysis.scope_of(statement):
        return observation
    line = analysis.positions[other].start.line
    message = (
        f"{observation.message} (Observed at line {observation.place.line}, and reported "
        "here, where the fix goes.)"
    )
    return replace(observation, place=replace(observation.place, line=line), message=message)


def _tier(observation: Observation, replacements: dict[ast.AST, Rewrite]) -> Tier:
    return Tier.REPORT if observation.kind in _REPORTS or not replacements else Tier.CONFIRMED


def _finding(observation: Observation, edit: object, tier: Tier) -> Finding:
    message = observation.message
    if tier is Tier.REPORT and observation.kind not in _REPORTS:
        message += " (gradfix cannot write this fix: make it by hand.)"
    line = observation.place.line
    return Finding(
        rule=observation.rule,
        line=line,
        column=1,
        end_line=line,
        end_column=1,
        message=message,
        tier=tier,
        edit=edit,  # type: ignore[arg-type]
    )


def _statement_at(analysis: FileAnalysis, line: int) -> ast.stmt | None:
    """The innermost statement that starts on `line`, or else spans it."""
    best: ast.stmt | None = None
    for node in ast.walk(analysis.module):
        if not isinstance(node, ast.stmt):
            continue
        end = node.end_lineno or node.lineno
        if node.lineno <= line <= end and (
            best is None or (end - node.lineno) < ((best.end_lineno or best.lineno) - best.lineno)
        ):
            best = node
    return best
