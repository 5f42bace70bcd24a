"""Whether `refusals.compiler_may_refuse` flags every tree the running Python's compiler
refuses, among the snippets of that Python's own test suite (every string constant and
doctest example of `Lib/test`: its syntax tests hold the code each compiler error is about).

Imported by tests/test_syntax_check.py, and run by it under the other Pythons installed
beside the one running the tests (`python refusal_harvest.py` prints the result as JSON):
the module needs nothing beyond the standard library and gradfix's `analysis.index` and
`analysis.refusals`.
"""

from __future__ import annotations

import ast
import doctest
import json
import sys
import sysconfig
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's gradfix

from codemods.analysis.index import build_index
from codemods.analysis.refusals import compiler_may_refuse

TEST_SUITE = Path(sysconfig.get_paths()["stdlib"]) / "test"


def snippets() -> set[str]:
    found: set[str] = set()
    for path in sorted(TEST_SUITE.rglob("*.py")):
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if type(node) is ast.Constant and type(node.value) is str:
                found.add(node.value)
                if ">>>" in node.value:
                    try:
                        examples = doctest.DocTestParser().get_examples(node.value)
                    except ValueError:
                        continue
                    found.update(example.source for example in examples)
    return found


def refused(tree: ast.Module) -> bool:
    try:
        compile(tree, "<file>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError):
        return True
    return False


def harvest() -> dict[str, object]:
    """How many snippets parse and are refused by the compiler, and those not flagged."""
    count, missed = 0, []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for snippet in snippets():
            try:
                snippet.encode()  # a file's text: no lone surrogates
                tree = ast.parse(snippet)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            if refused(tree):
                count += 1
                if not compiler_may_refuse(tree, build_index(tree), snippet):
                    missed.append(snippet)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    return {"python": python, "refused": count, "missed": missed}


if __name__ == "__main__":
    print(json.dumps(harvest()))
