"""Map a file's own spellings of imported names onto qualified names
(`F` -> `torch.nn.functional`)."""

from __future__ import annotations

import libcst as cst


def dotted_name(node: cst.BaseExpression) -> str | None:
    """`a.b.c` as a string, or None when the expression is not a plain dotted name."""
    kind = type(node)  # LibCST's node classes are final: `is` spares the ABC's isinstance
    if kind is cst.Name:
        return node.value  # type: ignore[attr-defined]
    if kind is cst.Attribute:
        base = dotted_name(node.value)  # type: ignore[attr-defined]
        return f"{base}.{node.attr.value}" if base else None  # type: ignore[attr-defined]
    return None


def import_aliases(module: cst.Module) -> dict[str, str]:
    """Local name -> qualified name for the module-level imports of `module`."""
    aliases: dict[str, str] = {}
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    name = dotted_name(alias.name)
                    if name is None:
                        continue
                    if alias.asname is not None:
                        local = dotted_name(alias.asname.name)
                        if local:
                            aliases[local] = name
                    else:
                        top = name.split(".")[0]
                        aliases[top] = top
            elif isinstance(small, cst.ImportFrom) and small.relative == ():
                base = dotted_name(small.module) if small.module else None
                if base is None or isinstance(small.names, cst.ImportStar):
                    continue
                for alias in small.names:
                    name = dotted_name(alias.name)
                    if name is None:
                        continue
                    local = name
                    if alias.asname is not None:
                        local = dotted_name(alias.asname.name) or name
                    aliases[local] = f"{base}.{name}"
    return aliases


def qualify(node: cst.BaseExpression, aliases: dict[str, str]) -> str | None:
    """The qualified name `node` spells through the file's imports (`nn.Linear` ->
    `torch.nn.Linear`), or None when its first part is not an imported name."""
    name = dotted_name(node)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    if head not in aliases:
        return None
    return f"{aliases[head]}.{rest}" if rest else aliases[head]
