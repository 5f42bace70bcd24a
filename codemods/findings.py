"""What a rule reports: findings, their fix tier and the text edit that fixes them.

Findings carry plain data (positions and replacement text), never LibCST nodes, so the CLI,
the output formats and the Fixit adapter can use them without knowing how they were made.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Tier(str, Enum):
    """How sure gradfix is that a finding's fix keeps the program's meaning."""

    SAFE = "safe"  # the code proves the premise: `gradfix fix` applies it
    UNSAFE = "unsafe"  # plausible but unproven: applied only with --unsafe-fixes
    REPORT = "report"  # no edit: the message says what to do
    # Observed at run time by `gradfix trace`, not inferred: its fix applies like a safe one.
    # Only trace gives it, so `check` and `fix` output keeps the three tiers above.
    CONFIRMED = "confirmed"


@dataclass(frozen=True)
class Edit:
    """Replace the original text from (start_line, start_column) up to, not including,
    (end_line, end_column) with `replacement`. Lines and columns are 1-based and count
    characters of the decoded source."""

    start_line: int
    start_column: int
    end_line: int
    end_column: int
    replacement: str
    cell: int | None = None  # in a notebook: the cell whose source the positions count in


@dataclass(frozen=True)
class Finding:
    rule: str
    line: int  # 1-based
    column: int  # 1-based
    end_line: int
    end_column: int
    message: str
    tier: Tier
    edit: Edit | None = None
    # In a notebook: the cell (1-based, counting every cell) whose source the positions count
    # in, and where the finding starts in the .ipynb file's own text (the JSON string holding
    # the line), for tools that only know file lines: GitHub annotations and SARIF. A fixable
    # one also carries its fix as an edit of that text (`file_edit`, None when the notebook
    # cannot be rewritten as it was), the rest of the file as it is, for SARIF.
    cell: int | None = None
    file_line: int | None = None
    file_column: int | None = None
    file_edit: Edit | None = None

    @property
    def fixable(self) -> bool:
        return self.edit is not None and self.tier is not Tier.REPORT
