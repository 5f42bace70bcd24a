"""Map a file's own spellings of imported names onto qualified names
(`F` -> `torch.nn.functional`)."""

from __future__ import annotations

import ast


def dotted_name(node: ast.AST | None) -> str | None:
    """`a.b.c` as a string, or None when the expression is not a plain dotted name."""
    kind = type(node)  # nobody subclasses the ast classes: `is` spares `isinstance`
    if kind is ast.Name:
        return node.id  # type: ignore[union-attr]
    if kind is ast.Attribute:
        base = dotted_name(node.value)  # type: ignore[union-attr]
        return f"{base}.{node.attr}" if base else None  # type: ignore[union-attr]
    return None


def import_aliases(module: ast.Module) -> dict[str, str]:
    """Local name -> qualified name for the module-level imports of `module`."""
    aliases: dict[str, str] = {}
    for statement in module.body:
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                name = alias.name
                if alias.asname is not None:
                    aliases[alias.asname] = name
                else:
                    top = name.split(".")[0]
                    aliases[top] = top
        elif isinstance(statement, ast.ImportFrom) and statement.level == 0:
            base = statement.module
            if base is None:
                continue
            for alias in statement.names:
                name = alias.name
                if name == "*":
                    break  # `from m import *`
                local = alias.asname if alias.asname is not None else name
                aliases[local] = f"{base}.{name}"
    return aliases


def qualify(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """The qualified name `node` spells through the file's imports (`nn.Linear` ->
    `torch.nn.Linear`), or None when its first part is not an imported name."""
    name = dotted_name(node)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    if head not in aliases:
        return None
    return f"{aliases[head]}.{rest}" if rest else aliases[head]
