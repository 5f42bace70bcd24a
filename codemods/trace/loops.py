"""The loops of a user file, by the function they run in.

Two questions need them, both about statement shapes (no fact about values), asked rarely and
for one file at a time, so the file gets a parse of its own, like `stores`:
- where a state an object keeps is reset, when a loop inside one training step reads it (a
  time loop over a sequence);
- whether the loop that runs the optimizer step is an epoch's batch loop: a loop directly in
  the body of another loop, with more statements after it (validation, logging).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Loop:
    start: int  # the `for`/`while` line
    end: int  # its last line
    # The statements of the enclosing loop's body after this one, as lines (an epoch's tail).
    tail: tuple[int, int] | None = None


def loops_by_function(source: bytes) -> dict[int, list[Loop]]:
    """The `for` and `while` loops of each function, keyed by the first line of its code (a
    decorator's line for a decorated one: `co_firstlineno`), 0 for the module's own code;
    {} for a file that does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    found: dict[int, list[Loop]] = {}
    _collect(tree, 0, False, found)
    return found


def _collect(node: ast.AST, scope: int, in_loop: bool, found: dict[int, list[Loop]]) -> None:
    for field in ("body", "orelse", "finalbody", "handlers"):
        statements = getattr(node, field, None)
        if isinstance(statements, list):
            body_of_loop = in_loop and field == "body" and isinstance(node, _LOOPS)
            _statements(statements, scope, body_of_loop, found)
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.match_case):
            _statements(child.body, scope, False, found)


def _statements(
    statements: list, scope: int, body_of_loop: bool, found: dict[int, list[Loop]]
) -> None:
    for index, statement in enumerate(statements):
        if isinstance(statement, _FUNCTIONS):
            first = min([statement.lineno, *(d.lineno for d in statement.decorator_list)])
            _collect(statement, first, False, found)
            continue
        if isinstance(statement, ast.ClassDef):
            _collect(statement, -1, False, found)  # a class body runs once: no loop to watch
            continue
        if isinstance(statement, _LOOPS):
            rest = statements[index + 1 :]
            tail = (rest[0].lineno, rest[-1].end_lineno or rest[-1].lineno) if rest else None
            end = statement.end_lineno or statement.lineno
            found.setdefault(scope, []).append(
                Loop(statement.lineno, end, tail if body_of_loop else None)
            )
            _collect(statement, scope, True, found)
            continue
        _collect(statement, scope, False, found)


def innermost(loops: list[Loop], line: int) -> Loop | None:
    """The innermost of `loops` whose lines hold `line`."""
    holding = [loop for loop in loops if loop.start <= line <= loop.end]
    return max(holding, key=lambda loop: loop.start, default=None)
