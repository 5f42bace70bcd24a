"""The rule registry: one module per rule, each a `Rule` subclass."""

from __future__ import annotations

from codemods.rules.base import Rule, RuleFinding
from codemods.rules.gf001_accumulated_loss import AccumulatedLoss

RULES: dict[str, Rule] = {rule.code: rule for rule in (AccumulatedLoss(),)}

__all__ = ["RULES", "Rule", "RuleFinding"]
