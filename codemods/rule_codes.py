"""The rule codes, known without loading the rules (which load LibCST): enough to check
`--select` and the configuration on a run that the caches answer. `tests/test_rule_codes.py`
keeps it equal to the registry in `codemods.rules`."""

RULE_CODES = frozenset({"GF001", "GF002", "GF003", "GF004"})
