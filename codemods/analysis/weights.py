"""Which of the file's module classes compute without weights: a running metric, a
`nn.ModuleDict` of metrics, a module that only rearranges its inputs.

A graph in what such a module computes comes only from the tensors it is given, so detaching
them where it is called takes every graph out of what it computes and keeps (the fact GF002
needs to detach a running metric's input at the call site rather than in its `forward`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from codemods.analysis import torch_api
from codemods.analysis.imports import dotted_name
from codemods.analysis.values import Kind

if TYPE_CHECKING:
    from codemods.analysis import FileAnalysis

# Bases outside the file a weightless module class may have: they add no weights.
_PLAIN_BASES = frozenset(
    {
        "torch.nn.Module",
        "torch.nn.modules.module.Module",
        "torch.nn.ModuleDict",
        "torch.nn.ModuleList",
        "object",
    }
)


class ModuleWeights:
    """Answers, once per class, whether the file's module class computes without weights."""

    def __init__(self, analysis: FileAnalysis) -> None:
        self._analysis = analysis
        self._known: dict[str, bool] = {}

    def computes_without_weights(self, class_name: str) -> bool:
        """Whether modules of the file's class `class_name` (or of any class of the file
        deriving from it) compute only from their inputs: their bases outside the file are
        `nn.Module`, `nn.ModuleDict` or `nn.ModuleList`, no method binds to `self` a
        parameter, a tensor that requires grad or a module with weights, reads such a
        tensor, or calls a module with weights (`F.mse_loss` and `nn.ReLU()` have none;
        another class of the file is asked the same question)."""
        known = self._known.get(class_name)
        if known is None:
            # A class reaching itself (`self`, a collection of its own kind) adds no weights:
            # only a node that binds, reads or calls one does.
            self._known[class_name] = True
            # Its subclasses' methods run on its instances where values join them into it.
            known = self._known[class_name] = all(
                self._class_without_weights(name)
                for name in self._analysis.class_and_subclasses(class_name)
            )
        return known

    def _class_without_weights(self, class_name: str) -> bool:
        analysis = self._analysis
        for owner in analysis.lineage(class_name):
            for base in analysis.index.classes[owner].bases:
                if dotted_name(base) in analysis.index.classes:
                    continue  # in the lineage: its methods are the class's own
                if analysis.qualified_name(base) not in _PLAIN_BASES:
                    return False
        for method in analysis.index.classes[class_name].methods.values():
            for node in analysis.descendants(method):
                if not self._node_without_weights(node):
                    return False
        return True

    def _node_without_weights(self, node: ast.AST) -> bool:
        analysis = self._analysis
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("Parameter", "register_parameter"):
                return False
            callee = analysis.value_of(func)
            return callee.kind is not Kind.MODULE or self._module_without_weights(callee.cls)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = analysis.value_of(node.value)  # `self.proj = nn.Linear(...)`, a Parameter
            return not value.leaf and (
                value.kind is not Kind.MODULE or self._module_without_weights(value.cls)
            )
        if isinstance(node, (ast.Name, ast.Attribute)) and analysis.is_load(node):
            value = analysis.value_of(node)
            if value.leaf:
                return False
            return value.kind is not Kind.MODULE or self._module_without_weights(value.cls)
        return True

    def _module_without_weights(self, class_name: str | None) -> bool:
        if class_name in torch_api.PARAMETERLESS_MODULES:
            return True
        if class_name is not None and class_name in self._analysis.index.classes:
            return self.computes_without_weights(class_name)
        return False
