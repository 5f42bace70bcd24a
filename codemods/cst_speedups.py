"""Two costs LibCST pays for uses gradfix does not have, removed where gradfix parses a
statement or a file to write a fix (`codemods/rewrite.py`).

- **Hashing nodes.** Nodes are equal only when identical, and LibCST hashes them by `id(self)`
  in a Python method, which the writer's node maps call for every node they hold.
  `object.__hash__` is the same identity hash, computed in C: `hash_nodes_in_c` gives it to
  every node class, once, when this module is imported.
- **Validating parsed trees.** Every node LibCST builds runs `CSTNode.__post_init__`, which
  calls the node's `_validate`: checks written for trees built by hand (a `Name` that is an
  identifier, whitespace that is whitespace). A tree its parser built from source that CPython
  compiles passes them by construction (LibCST's own comment on `__post_init__` says as much),
  and they cost about a sixth of the parse. `parse_module` skips them; the nodes gradfix builds
  for its rewrites are still validated.
"""

from __future__ import annotations

import libcst as cst

_VALIDATING_POST_INIT = cst.CSTNode.__dict__["__post_init__"]


def _node_classes() -> frozenset[type]:
    found: set[type] = set()
    pending: list[type] = [cst.CSTNode]
    while pending:
        kind = pending.pop()
        found.add(kind)
        pending.extend(kind.__subclasses__())
    return frozenset(found)


# Every LibCST node class, abstract ones included (all are defined when libcst is imported).
NODE_CLASSES = _node_classes()


def hash_nodes_in_c() -> None:
    """LibCST copies its `__hash__` into every node class: replace each copy."""
    python_hash = cst.CSTNode.__dict__["__hash__"]
    for kind in NODE_CLASSES:
        if kind.__dict__.get("__hash__") is python_hash:
            kind.__hash__ = object.__hash__  # type: ignore[method-assign,assignment]


def _trusted(self: cst.CSTNode) -> None:
    """`__post_init__` while the parser builds a tree: nothing to check."""


def parse_module(source: bytes) -> cst.Module:
    """`libcst.parse_module`, without validating the nodes the parser builds. Only for
    source CPython has compiled (`pipeline.syntax_error`), or that LibCST's grammar alone
    accepts; single-threaded, as gradfix's workers are."""
    cst.CSTNode.__post_init__ = _trusted  # type: ignore[method-assign]
    try:
        return cst.parse_module(source)
    finally:
        cst.CSTNode.__post_init__ = _VALIDATING_POST_INIT  # type: ignore[method-assign]


hash_nodes_in_c()
