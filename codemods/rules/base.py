"""The shape of a rule: what it detects, a cheap text pre-check, and a check over the analysis."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from codemods.findings import Tier
from codemods.lazy_libcst import cst

if TYPE_CHECKING:
    from codemods.analysis import FileAnalysis

# How a fix rewrites one node: given the LibCST node at the `ast` node's place in the source
# (parsed only when a fix is written), the node that replaces it.
Rewrite = Callable[["cst.CSTNode"], "cst.CSTNode"]  # names: LibCST is loaded with a fix


@dataclass
class RuleFinding:
    """A finding on the analysed `ast` tree: `node` locates it, `replacements` fix it."""

    node: ast.AST
    message: str
    tier: Tier
    replacements: dict[ast.AST, Rewrite] = field(default_factory=dict)


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
