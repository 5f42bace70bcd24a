"""The light list of rule codes is the registry's."""

from codemods.rule_codes import RULE_CODES
from codemods.rules import RULES


def test_rule_codes_are_the_registered_rules() -> None:
    assert set(RULES) == RULE_CODES
