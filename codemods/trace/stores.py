"""The statements of the user's code that may keep a tensor beyond its step, found in the
source: appends and other method calls given a value (`losses.append(loss)`,
`meter.update(loss)`), attribute and index stores (`self.h = h`, `bank[i] = f`) and augmented
assignments (`total += loss`).

The line tracer reads, just before such a statement runs, the values it is about to store, and
the object it stores them into; a value the statement computes itself (`xs.append(model(x))`,
`self.h = f(x)`) is read once it ran, where it was stored (the list's last item, the
attribute). Only names and attribute chains (`loss`, `self.hidden`) are read, from the frame's
variables and objects' own `__dict__`, so that watching never runs the user's code (no call,
no property, no `__getattr__`).

The sites come from a parse of their own, not from `codemods.analysis`: the tracer needs them
for every user file a frame runs in, as that frame starts and before any finding exists, and
they are shapes of statements, no fact about values; a full analysis of each file the script
imports would cost far more than this one `ast.parse`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType

Chain = tuple[str, ...]  # `self.hidden` as ("self", "hidden")


@dataclass(frozen=True)
class StoreSite:
    operands: tuple[Chain, ...]  # what it stores, read before it runs
    receiver: Chain | None  # what it stores into
    end_line: int  # the statement's last line
    # Where the value it stores is read once it ran, when the statement computes that value
    # itself: the attribute it assigns (`self.h = f(x)`), or the list it appends to (`appended`:
    # its last item).
    result: Chain | None = None
    appended: bool = False
    # The constant key of an augmented assignment to an item (`acc["mse"] += x`): `result` is
    # the container, read at that key once the statement ran (a plain dict or list only).
    key: str | int | None = None


def store_sites(source: bytes) -> dict[int, StoreSite]:
    """Each store statement's first line, and what it stores; {} for a file that does not
    parse. The bytes are parsed as Python reads them (a BOM, an encoding declaration)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    sites: dict[int, StoreSite] = {}
    for node in ast.walk(tree):
        site = _site(node)
        if site is not None and (site.operands or site.result):
            sites[node.lineno] = site  # type: ignore[attr-defined]
    return sites


def _site(node: ast.AST) -> StoreSite | None:
    end = getattr(node, "end_lineno", None) or getattr(node, "lineno", 0)
    if isinstance(node, ast.AugAssign):
        return _augmented(node, end)
    if isinstance(node, ast.Assign):
        stored = [t for t in node.targets if isinstance(t, (ast.Attribute, ast.Subscript))]
        if not stored:
            return None
        operands = tuple(_paths(node.value))
        computed = not operands and isinstance(stored[0], ast.Attribute)
        result = _path(stored[0]) if computed else None
        return StoreSite(operands, _path(_container(stored[0])), end, result)
    if (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
    ):
        call = node.value
        values = [*call.args, *(keyword.value for keyword in call.keywords)]
        operands = tuple(path for value in values for path in _paths(value))
        receiver = _path(_container(call.func.value))  # type: ignore[attr-defined]
        appended = call.func.attr == "append" and not operands and len(call.args) == 1
        return StoreSite(operands, receiver, end, receiver if appended else None, appended)
    return None


def _augmented(node: ast.AugAssign, end: int) -> StoreSite:
    """`acc += x`: the operands it adds, read before; for an attribute or an item with a
    constant key (`self.total += x`, `acc["mse"] += x * n`), also the sum, read after."""
    operands = tuple(_paths(node.value))
    receiver = _path(_container(node.target))
    target = node.target
    if isinstance(target, ast.Attribute):
        return StoreSite(operands, receiver, end, _path(target))
    if (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, (ast.Name, ast.Attribute))
        and isinstance(target.slice, ast.Constant)
        and isinstance(target.slice.value, (str, int))
    ):
        return StoreSite(operands, receiver, end, receiver, key=target.slice.value)
    return StoreSite(operands, receiver, end)


def item(container: object, key: str | int) -> object:
    """`container[key]` for a plain dict or list (no code of the user's runs); else None."""
    if type(container) is dict:
        return container.get(key)
    if type(container) is list and isinstance(key, int) and -len(container) <= key < len(container):
        return container[key]
    return None


def _paths(value: ast.expr) -> Iterator[Chain]:
    """The names and attribute chains `value` stores as they are: itself, or the items of a
    literal tuple, list or dict (`(h, c)`, `{"loss": loss}`)."""
    if isinstance(value, ast.Starred):
        value = value.value
    if isinstance(value, (ast.Tuple, ast.List)):
        for element in value.elts:
            yield from _paths(element)
    elif isinstance(value, ast.Dict):
        for element in value.values:
            yield from _paths(element)
    else:
        path = _path(value)
        if path is not None:
            yield path


def _container(target: ast.expr) -> ast.expr:
    """`acc` for `acc[k]` and `acc[k][j]`; `self` for `self.h`."""
    while isinstance(target, ast.Subscript):
        target = target.value
    if isinstance(target, ast.Attribute) and isinstance(target.ctx, ast.Store):
        return target.value
    return target


def _path(node: ast.expr) -> Chain | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return tuple(reversed(parts))


_MISSING = object()


def read(frame: FrameType, path: Chain) -> object:
    """The value of `path` in `frame`, without running any of the user's code; `None` when it
    cannot be read that way."""
    value = frame.f_locals.get(path[0], _MISSING)
    if value is _MISSING:
        value = frame.f_globals.get(path[0], _MISSING)
    for attribute in path[1:]:
        if value is _MISSING:
            break
        value = _own_attribute(value, attribute)
    return None if value is _MISSING else value


def _own_attribute(value: object, attribute: str) -> object:
    """`value.attribute` from the object's `__dict__`, or from the registries a torch module
    keeps there (submodules, buffers, parameters)."""
    namespace = (
        getattr(value, "__dict__", None) if getattr(type(value), "__dictoffset__", 0) else None
    )
    if not isinstance(namespace, dict):
        return _MISSING
    found = namespace.get(attribute, _MISSING)
    for registry in ("_modules", "_buffers", "_parameters"):
        if found is not _MISSING:
            break
        held = namespace.get(registry)
        found = held.get(attribute, _MISSING) if isinstance(held, dict) else _MISSING
    return found


def detach_rebinds_name(source: bytes, line: int) -> bool:
    """Whether the statement at `line` drops a `.detach()` result or binds it to a plain name
    only (`h.detach()`, `h = h.detach()`): a detach that leaves whatever held the tensor
    attached. Parsed here only for a tensor read back after such a detach (rare)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Expr, ast.Assign)) or node.lineno != line:
            continue
        value = node.value
        is_detach = (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == "detach"
        )
        if isinstance(node, ast.Expr):
            return is_detach
        return is_detach and all(isinstance(t, ast.Name) for t in node.targets)
    return False
