"""The rule registry: one module per rule, each a `Rule` subclass."""

from __future__ import annotations

from codemods.rules.base import Rule, RuleFinding
from codemods.rules.gf001_accumulated_loss import AccumulatedLoss
from codemods.rules.gf002_carried_tensor import CarriedTensor
from codemods.rules.gf003_shared_graph_backward import SharedGraphBackward
from codemods.rules.gf004_inplace_on_saved import InplaceOnSaved

RULES: dict[str, Rule] = {
    rule.code: rule
    for rule in (AccumulatedLoss(), CarriedTensor(), SharedGraphBackward(), InplaceOnSaved())
}

__all__ = ["RULES", "Rule", "RuleFinding"]
