"""The shape of a rule: what it detects, a cheap text pre-check, and a check over the analysis."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import libcst as cst

from codemods.findings import Tier

if TYPE_CHECKING:
    from codemods.analysis import FileAnalysis


@dataclass
class RuleFinding:
    """A finding while the tree is still at hand: `node` locates it, `replacements` fix it."""

    node: cst.CSTNode
    message: str
    tier: Tier
    replacements: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    # Shown by `gradfix explain`: what it detects, why it matters, when it is left alone.
    explanation: ClassVar[str]
    example_before: ClassVar[str]
    example_after: ClassVar[str]

    def may_apply(self, text: str) -> bool:
        """A cheap necessary condition on the raw text: False means the file has nothing for
        this rule and need not be parsed for it."""
        raise NotImplementedError

    def check(self, analysis: FileAnalysis) -> Iterator[RuleFinding]:
        raise NotImplementedError
