"""Where nodes are in the source: LibCST's `PositionProvider`, one top-level statement at a time.

LibCST locates nodes by generating the code of the whole module while recording where each node
starts and ends, which for a model file costs about twice its parse; a file's findings sit in a
few statements. A top-level statement starts a line at column 0, so its nodes' positions in a
module of that statement alone are their positions in the file, shifted by the lines before it:
those are counted from the plain code of the statements before it (generated without positions,
once). A node outside every statement (the module, its header or footer comments) gets the
whole module located at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

_NEWLINE = re.compile(r"\r\n?|\n")


class SourcePositions(Mapping[cst.CSTNode, CodeRange]):
    def __init__(self, module: cst.Module, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> None:
        self._module = module
        self._parents = parents
        self._known: dict[cst.CSTNode, CodeRange] = {}
        self._located: set[cst.CSTNode] = set()  # top-level statements located, or the module
        self._first_lines: dict[cst.CSTNode, int] | None = None

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        if node not in self._known:
            self._locate(self._statement_of(node))
        return self._known[node]

    def __iter__(self) -> Iterator[cst.CSTNode]:
        self._locate(self._module)
        return iter(self._known)

    def __len__(self) -> int:
        self._locate(self._module)
        return len(self._known)

    def _statement_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The top-level statement holding `node`; the module for any other node."""
        module = self._module
        while True:
            parent = self._parents.get(node)
            if parent is None:
                return module
            if parent is module:
                return node if node in self.first_lines else module
            node = parent

    @property
    def first_lines(self) -> dict[cst.CSTNode, int]:
        """Each top-level statement's first line (that of its leading comments)."""
        if self._first_lines is None:
            module = self._module
            line = 1 + sum(_newlines(module.code_for_node(empty)) for empty in module.header)
            self._first_lines = {}
            for statement in module.body:
                self._first_lines[statement] = line
                line += _newlines(module.code_for_node(statement))
        return self._first_lines

    def _locate(self, where: cst.CSTNode) -> None:
        if where in self._located or self._module in self._located:
            return
        self._located.add(where)
        module = self._module
        if where is module:
            self._known.update(
                MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
            )
            return
        alone = module.with_changes(header=(), body=(where,), footer=())
        shift = self.first_lines[where] - 1
        positions = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
        for node, found in positions.items():
            if node is not alone:
                self._known[node] = CodeRange(
                    CodePosition(found.start.line + shift, found.start.column),
                    CodePosition(found.end.line + shift, found.end.column),
                )


def _newlines(code: str) -> int:
    """How many line breaks `code` holds, counted as LibCST's position provider counts them."""
    return len(_NEWLINE.findall(code))
