"""Suppression comments: `# gradfix: ignore`, `# gradfix: ignore[GF001]`, `# noqa: GF001`."""

from __future__ import annotations

import re

_GRADFIX = re.compile(r"#\s*gradfix:\s*ignore(?:\[(?P<codes>[^\]]*)\])?")
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.I)


def suppressed_codes(line: str) -> set[str] | None:
    """The rule codes a line's comment suppresses; an empty set means all; None means none."""
    if "#" not in line:
        return None
    codes: set[str] | None = None
    for pattern in (_GRADFIX, _NOQA):
        match = pattern.search(line)
        if match is None:
            continue
        listed = match.group("codes")
        if not listed:
            return set()
        codes = (codes or set()) | {c.upper() for c in re.split(r"[,\s]+", listed) if c}
    return codes


def is_suppressed(lines: list[str], first_line: int, last_line: int, code: str) -> bool:
    """Whether a comment on any of the 1-based lines first_line..last_line suppresses `code`."""
    for number in {first_line, last_line}:
        if 1 <= number <= len(lines):
            codes = suppressed_codes(lines[number - 1])
            if codes is not None and (not codes or code in codes):
                return True
    return False
