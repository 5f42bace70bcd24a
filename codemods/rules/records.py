"""Records: a dict appended whole to a list kept across steps (a step's output dict kept for
the epoch's end). Which of its entries hold graphs, whether each append stores a fresh dict, and
the copy that keeps those entries detached. GF001 fixes records whose attached entries are all
losses, GF002 those that hold other tensors too."""

from __future__ import annotations

import ast
import json
import re

from codemods.analysis import FileAnalysis, Kind, Value
from codemods.analysis.index import FUNCTION_TYPES
from codemods.analysis.interpreter import target_key
from codemods.lazy_libcst import cst
from codemods.rules.base import Rewrite

# A dict that is not a plain one: a copy made with `{**d, ...}` would change its type.
DICT_SUBCLASS_TEXT = re.compile(r"\b(defaultdict|OrderedDict|UserDict|Counter)\b|\(\s*dict\s*\)")


def attached_keys(record: Value) -> tuple[str, ...]:
    """The constant keys under which the dict `record` holds graph-attached values (a step's
    output dict `{"loss": loss, "metrics": {...}}`); () for anything else."""
    if record.kind is not Kind.DICT:
        return ()
    return tuple(key for key, value in record.entries or () if value.grad.attached)


def region_binding_afresh(
    analysis: FileAnalysis, record: ast.Name, statement: ast.stmt
) -> ast.AST | None:
    """The loop (or, outside loops, the function) in which `record` is bound anew before
    `statement` on each run; None when it may be the same dict each time (bound before the
    loop, or a parameter)."""
    loops = analysis.enclosing_loops(statement)
    if loops:
        return loops[0] if rebound_before(analysis, loops[0], record.id, statement) else None
    scope = analysis.scope_of(statement)
    if not isinstance(scope, FUNCTION_TYPES):
        return None
    arguments = scope.args
    parameters = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    if any(parameter.arg == record.id for parameter in parameters):
        return None
    for node in scope.body:
        if analysis.contains(node, statement):
            return None
        if isinstance(node, ast.Assign) and any(
            record.id in {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            for target in node.targets
        ):
            return scope  # `log = ...`, `log, out = self.step(...)`
    return None


def rebound_before(
    analysis: FileAnalysis,
    loop: ast.For | ast.AsyncFor | ast.While,
    key: str,
    statement: ast.stmt,
) -> bool:
    """Whether `key` is plainly re-assigned in `loop`'s body, outside any `if`, before
    `statement` in the same iteration."""
    for node in loop.body:
        if analysis.contains(node, statement):
            return False
        if isinstance(node, ast.Assign) and any(target_key(t) == key for t in node.targets):
            return True
    return False


def used_after(
    analysis: FileAnalysis,
    region: ast.AST,
    record: ast.Name,
    statement: ast.stmt,
) -> bool:
    """Whether `record` is used after `statement` in `region` other than by reading its
    entries (`record["loss"].item()`), a use that sees the same whatever the list keeps; a
    `return record` counts as such a read when every caller in the file only reads entries of
    what it gets (`log = model.training_step(...)`, then `log["loss"].backward()`)."""
    for occurrence in analysis.occurrences(record.id, analysis.scope_of(record)):
        if (
            not analysis.contains(region, occurrence)
            or analysis.contains(statement, occurrence)
            or (occurrence.lineno, occurrence.col_offset) < (statement.lineno, statement.col_offset)
        ):
            continue
        if not analysis.is_load(occurrence) or _entry_read(analysis, occurrence):
            continue
        if isinstance(analysis.parent(occurrence), ast.Return) and _callers_only_read_entries(
            analysis, analysis.scope_of(occurrence)
        ):
            continue
        return True
    return False


def _entry_read(analysis: FileAnalysis, occurrence: ast.AST) -> bool:
    parent = analysis.parent(occurrence)
    return (
        isinstance(parent, ast.Subscript)
        and parent.value is occurrence
        and isinstance(parent.ctx, ast.Load)
    )


def _callers_only_read_entries(analysis: FileAnalysis, function: ast.AST) -> bool:
    """Whether the file calls `function` and every call binds the result to a name whose
    every later use reads an entry (a caller outside the file may do anything)."""
    if not isinstance(function, FUNCTION_TYPES):
        return False
    calls = analysis.index.calls_by_name.get(function.name, [])
    if not calls:
        return False
    for call in calls:
        assign = analysis.parent(call)
        if not (
            isinstance(assign, ast.Assign)
            and assign.value is call
            and len(assign.targets) == 1
            and isinstance(assign.targets[0], ast.Name)
        ):
            return False
        target = assign.targets[0]
        for occurrence in analysis.occurrences(target.id, analysis.scope_of(call)):
            if (
                occurrence is not target
                and analysis.is_load(occurrence)
                and not _entry_read(analysis, occurrence)
            ):
                return False
    return True


def record_copy(keys: tuple[str, ...]) -> Rewrite:
    """The rewrite of a dict `record` into `{**record, "loss": record["loss"].detach()}`."""

    def rewrite(node: cst.CSTNode) -> cst.CSTNode:
        code = cst.Module([]).code_for_node(node)
        detached = ", ".join(
            f"{json.dumps(key)}: {code}[{json.dumps(key)}].detach()" for key in keys
        )
        return cst.parse_expression(f"{{**{code}, {detached}}}")

    return rewrite
