"""The rule registry: one module per rule, each a `Rule` subclass."""

from __future__ import annotations

from codemods.rules.base import Rule, RuleFinding
from codemods.rules.gf001_accumulated_loss import AccumulatedLoss
from codemods.rules.gf002_carried_tensor import CarriedTensor

RULES: dict[str, Rule] = {rule.code: rule for rule in (AccumulatedLoss(), CarriedTensor())}

__all__ = ["RULES", "Rule", "RuleFinding"]
