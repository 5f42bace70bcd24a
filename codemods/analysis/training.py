"""The training-step boundary: which loops run a backward pass or an optimizer step.

A graph carried or kept from one loop iteration into the next is a bug only when something
between the iterations consumes the graph: a backward (which frees its buffers) or an optimizer
step (which changes the weights it saved). Loops without one are a single forward computation
(blocks of a network, pyramid levels, decoding steps, message-passing rounds) and carry graphs
on purpose. This module answers, for a loop, whether a training step is reachable from its body:
directly, or through the file's own functions and methods that the body calls.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from codemods.analysis import torch_api
from codemods.analysis.imports import dotted_name

if TYPE_CHECKING:
    from codemods.analysis import FileAnalysis

# Methods that only infer (`generate`, `sample`, `predict_step`): nothing backpropagates through
# what they return.


Loop = cst.For | cst.While


def is_optimizer_step(call: cst.Call) -> bool:
    """`optimizer.step()`, `opt_g.step()`, `scaler.step(opt)`: a parameter update."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "step":
        return False
    name = (dotted_name(func.value) or "").rsplit(".", 1)[-1]
    return bool(torch_api.STEPPER_NAME.search(name)) and not torch_api.SCHEDULER_NAME.search(name)


def is_training_step(call: cst.Call) -> bool:
    """A call that consumes graphs: a backward, `autograd.grad`, or an optimizer step. (A
    `zero_grad()` alone is not one: it frees nothing and changes no saved weight.)"""
    func = call.func
    if isinstance(func, cst.Attribute):
        method = func.attr.value
        if method == "backward":
            return True
        if method == "grad" and (dotted_name(func.value) or "").endswith("autograd"):
            return True
        return is_optimizer_step(call)
    return False


class TrainingSteps:
    """Which loops and functions of one file reach a training step (memoised per function)."""

    def __init__(self, analysis: FileAnalysis) -> None:
        self._analysis = analysis
        self._reaches: dict[cst.FunctionDef, bool] = {}

    @cached_property
    def _methods_by_name(self) -> dict[str, list[cst.FunctionDef]]:
        by_name: dict[str, list[cst.FunctionDef]] = {}
        for info in self._analysis.index.classes.values():
            for name, method in info.methods.items():
                by_name.setdefault(name, []).append(method)
        return by_name

    def loop_reaches_step(self, loop: Loop, scope: cst.CSTNode) -> bool:
        """Whether a backward or optimizer step runs between two iterations of `loop`."""
        return self._reaches_in(loop.body, scope, frozenset())

    def function_reaches_step(self, function: cst.FunctionDef) -> bool:
        return self._function_reaches(function, frozenset())

    def _function_reaches(self, function: cst.FunctionDef, seen: frozenset[cst.CSTNode]) -> bool:
        known = self._reaches.get(function)
        if known is not None:
            return known
        if function in seen:
            return False
        result = self._reaches_in(function.body, function, seen | {function})
        self._reaches[function] = result
        return result

    def _reaches_in(
        self, node: cst.CSTNode, scope: cst.CSTNode, seen: frozenset[cst.CSTNode]
    ) -> bool:
        for inner in self._analysis.descendants(node):
            if type(inner) is not cst.Call:  # final class: `is`, not the ABC's check
                continue
            if is_training_step(inner) or (
                self._analysis.qualified_name(inner.func) in torch_api.AUTOGRAD_FUNCTIONS
            ):
                return True
            for callee in self._callees(inner, scope):
                if self._function_reaches(callee, seen):
                    return True
        return False

    def _callees(self, call: cst.Call, scope: cst.CSTNode) -> list[cst.FunctionDef]:
        """The file's own functions a call may run: `f(...)` a module-level function,
        `self.m(...)` a method of the enclosing class, `obj.m(...)` any method of that name
        in the file's classes (a trainer object's `train_step`)."""
        func = call.func
        if isinstance(func, cst.Name):
            function = self._analysis.index.functions.get(func.value)
            return [function] if function is not None else []
        if not isinstance(func, cst.Attribute):
            return []
        name = func.attr.value
        if isinstance(func.value, cst.Name) and func.value.value == "self":
            info = self._analysis.class_of(scope)  # type: ignore[arg-type]
            if info is not None and name in info.methods:
                return [info.methods[name]]
        return list(self._methods_by_name.get(name, []))


def in_forward(analysis: FileAnalysis, node: cst.CSTNode) -> bool:
    """Whether `node` runs inside a module's forward computation (`forward`, `__call__`, or a
    function nested in one)."""
    scope = analysis.scope_of(node)
    while isinstance(scope, cst.FunctionDef):
        if scope.name.value in torch_api.FORWARD_METHODS and analysis.class_of(scope) is not None:
            return True
        scope = analysis.index.enclosing_function.get(scope, analysis.module)
    return False


def iterates_batches(analysis: FileAnalysis, loop: Loop) -> bool:
    """`for ... in <a data loader, batches, tqdm(...)>`: an epoch over a data set."""
    return isinstance(loop, cst.For) and bool(
        torch_api.BATCHES_TEXT.search(analysis.code_of(loop.iter))
    )


def in_inference_method(analysis: FileAnalysis, node: cst.CSTNode) -> bool:
    """Whether `node` runs in a function named for inference (`generate`, `sample`,
    `predict`) that reaches no training step."""
    scope = analysis.scope_of(node)
    return (
        isinstance(scope, cst.FunctionDef)
        and bool(torch_api.INFERENCE_NAME.match(scope.name.value))
        and not analysis.training.function_reaches_step(scope)
    )


def is_evaluation_function(analysis: FileAnalysis, function: cst.FunctionDef) -> bool:
    """Whether `function` only evaluates: it is named for inference or evaluation
    (`predict`, `evaluate`, `validate`) or puts a module in eval mode (`self.model.eval()`),
    and reaches no training step."""
    named = torch_api.EVALUATION_NAME.match(function.name.value)
    return bool(named or _calls_eval_mode(analysis, function)) and not (
        analysis.training.function_reaches_step(function)
    )


def _calls_eval_mode(analysis: FileAnalysis, function: cst.FunctionDef) -> bool:
    return any(
        isinstance(call.func, cst.Attribute)
        and not call.args
        and analysis.scope_of(call) is function
        for call in analysis.index.calls_by_name.get("eval", [])
    )
