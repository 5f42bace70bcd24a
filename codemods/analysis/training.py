"""The training-step boundary: which loops run a backward pass or an optimizer step.

A graph carried or kept from one loop iteration into the next is a bug only when something
between the iterations consumes the graph: a backward (which frees its buffers) or an optimizer
step (which changes the weights it saved). Loops without one are a single forward computation
(blocks of a network, pyramid levels, decoding steps, message-passing rounds) and carry graphs
on purpose. This module answers, for a loop, whether a training step is reachable from its body:
directly, or through the file's own functions and methods that the body calls.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from codemods.analysis import torch_api
from codemods.analysis.imports import dotted_name
from codemods.analysis.interpreter import target_key
from codemods.analysis.values import Kind

if TYPE_CHECKING:
    from codemods.analysis import FileAnalysis

# Methods that only infer (`generate`, `sample`, `predict_step`): nothing backpropagates through
# what they return.


Loop = ast.For | ast.AsyncFor | ast.While
Function = ast.FunctionDef | ast.AsyncFunctionDef
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# How many calls up `runs_once_per_step` follows a call to the loop that trains.
_ONCE_DEPTH = 6


def is_optimizer_step(call: ast.Call) -> bool:
    """`optimizer.step()`, `opt_g.step()`, `scaler.step(opt)`: a parameter update."""
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "step" and _named_optimizer(func.value)


def _named_optimizer(receiver: ast.expr) -> bool:
    name = (dotted_name(receiver) or "").rsplit(".", 1)[-1]
    return bool(torch_api.STEPPER_NAME.search(name)) and not torch_api.SCHEDULER_NAME.search(name)


def is_training_step(call: ast.Call) -> bool:
    """A call that consumes graphs: a backward, `autograd.grad`, or an optimizer step. (A
    `zero_grad()` alone is not one: it frees nothing and changes no saved weight.)"""
    func = call.func
    if isinstance(func, ast.Attribute):
        method = func.attr
        if method == "backward":
            return True
        if method == "grad" and (dotted_name(func.value) or "").endswith("autograd"):
            return True
        return is_optimizer_step(call)
    return False


# Optimizer methods that leave the parameters as they are.
_OPTIMIZER_READS = frozenset({"zero_grad", "state_dict", "add_param_group"})


def _updates_in_place(call: ast.Call) -> bool:
    return _writes_in_place(call) or is_optimizer_step(call)


def _writes_in_place(call: ast.Call) -> bool:
    """`x.add_(...)`, `x.copy_(...)`: an in-place tensor method on anything but a gradient
    (`p.grad.zero_()` changes no weight a graph saved)."""
    func = call.func
    if not isinstance(func, ast.Attribute) or not torch_api.writes_data(func.attr):
        return False
    return not (isinstance(func.value, ast.Attribute) and func.value.attr == "grad")


class TrainingSteps:
    """Which loops and functions of one file reach a training step, and which calls may
    update parameters (memoised per function)."""

    def __init__(self, analysis: FileAnalysis) -> None:
        self._analysis = analysis
        self._reaches: dict[Function, bool] = {}
        self._loop_reaches: dict[Loop, bool] = {}
        self._updates: dict[Function, bool] = {}
        self._draws: dict[Function, bool] = {}
        self._runs: dict[Function, dict[Function, bool]] = {}  # per function run
        self._once: dict[ast.Call, bool] = {}
        self._called_by_step: dict[Function, bool] = {}

    def may_update_parameters(self, call: ast.Call) -> bool:
        """Whether `call` may change weights in place: any method of an optimizer but the
        ones that only read it (a two-step optimizer's `first_step()`, as SAM has), a
        `step` of something named like an optimizer, or a function or method of the file
        that writes a tensor in place or makes such a call."""
        func = call.func
        if isinstance(func, ast.Attribute):
            receiver = self._analysis.value_of(func.value)
            if receiver.kind is Kind.OPTIMIZER and func.attr not in _OPTIMIZER_READS:
                return True
            if func.attr.endswith("step") and _named_optimizer(func.value):
                return True  # `opt.first_step()`: a name is only a hint, but this lowers a tier
        scope = self._analysis.scope_of(call)
        return any(
            self._function_does(f, self._updates, _updates_in_place, set())
            for f in self._callees(call, scope)
        )

    def optimizer_trains(self, step: ast.Call, module: ast.expr) -> bool:
        """Whether the optimizer of `step` (`opt.step()`) is built in this file over
        `<module>.parameters()`: the same name, or a name bound to the same module
        (`net.parameters()` in a base class's `__init__` for `self.net` called in a subclass)."""
        analysis = self._analysis
        optimizer = target_key(step.func.value)  # type: ignore[attr-defined]
        return any(
            isinstance(node, ast.Assign)
            and any(target_key(t) == optimizer for t in node.targets)
            and isinstance(node.value, ast.Call)
            and (analysis.qualified_name(node.value.func) or "").startswith("torch.optim.")
            and _takes_parameters_of(analysis, node.value, module)
            for node in analysis.index.of_types(ast.Assign)
        )

    def may_run(self, call: ast.Call, function: Function) -> bool:
        """Whether `call` may run `function` of the file, itself or through the file's own
        functions and methods it calls (`self.update_D()` runs `forward()` when `update_D`
        calls it)."""
        memo = self._runs.setdefault(function, {})

        def runs(inner: ast.Call) -> bool:
            return function in self._callees(inner, self._analysis.scope_of(inner))

        if runs(call):
            return True
        return any(
            self._function_does(callee, memo, runs, set())
            for callee in self._callees(call, self._analysis.scope_of(call))
        )

    @cached_property
    def _methods_by_name(self) -> dict[str, list[Function]]:
        by_name: dict[str, list[Function]] = {}
        for info in self._analysis.index.classes.values():
            for name, method in info.methods.items():
                by_name.setdefault(name, []).append(method)
        return by_name

    def loop_reaches_step(self, loop: Loop, scope: ast.AST) -> bool:
        """Whether a backward or optimizer step runs between two iterations of `loop`;
        answered once per loop (rules ask it for every statement in the loop)."""
        known = self._loop_reaches.get(loop)
        if known is None:
            known = self._loop_reaches[loop] = self._calls_do(
                loop.body, scope, self._reaches, self._is_step, set()
            )
        return known

    def call_reaches_step(self, call: ast.Call) -> bool:
        """Whether `call` is a backward or optimizer step, or runs one through the file's own
        functions and methods it calls (`update_params(opt, net, loss)`)."""
        scope = self._analysis.scope_of(call)
        return self._is_step(call) or any(
            self.function_reaches_step(function) for function in self._callees(call, scope)
        )

    def function_reaches_step(self, function: Function) -> bool:
        return self._function_does(function, self._reaches, self._is_step, set())

    def called_by_training_step(self, function: Function) -> bool:
        """Whether the file calls `function` from code that trains: a function or method
        that reaches a training step (a `train()` that runs `self.rollout()` and then a
        backward), or a loop that does. Each call then runs between two training steps.
        Answered once per function (rules ask it for each store in the function)."""
        known = self._called_by_step.get(function)
        if known is None:
            known = self._called_by_step[function] = self._called_by_step_search(function)
        return known

    def _called_by_step_search(self, function: Function) -> bool:
        for call in self._analysis.index.calls_by_name.get(function.name, []):
            scope = self._analysis.scope_of(call)
            if self._is_step(call) or function not in self._callees(call, scope):
                continue
            if (
                isinstance(scope, _FUNCTIONS)
                and scope is not function
                and self.function_reaches_step(scope)
            ):
                return True
            loops = self._analysis.enclosing_loops(call)
            if any(self._analysis.loop_reaches_step(loop) for loop in loops):
                return True
        return False

    def runs_once_per_step(self, call: ast.Call) -> bool:
        """Whether the module call `call` runs once in every training step: in a loop whose
        iterations a training step separates (not in a forward), or in a function or forward
        whose every call does so (`self.train_metrics(out, y)` in a `training_step` that a
        trainer's loop calls once per batch; `m(x)` in the `forward` of a `ModuleDict`
        subclass, an entry of `{k: m(x) for k, m in self.items()}`, run by such a call). A
        loop or comprehension inside the step runs it several times, unless it goes over
        the entries of a module collection calling each entry once."""
        known = self._once.get(call)
        if known is None:
            known = self._once[call] = self._once_per_step(call, frozenset())
        return known

    def _once_per_step(self, call: ast.Call, seen: frozenset[ast.Call]) -> bool:
        analysis = self._analysis
        if call in seen or len(seen) > _ONCE_DEPTH:
            return False
        seen |= {call}
        for comprehension in analysis.comprehensions_around(call):
            if not all(self.calls_entry(call, g.iter, g.target) for g in comprehension.generators):
                return False
        forward = in_forward(analysis, call)
        for loop in analysis.enclosing_loops(call):
            if isinstance(loop, (ast.For, ast.AsyncFor)) and self.calls_entry(
                call, loop.iter, loop.target
            ):
                continue
            return not forward and analysis.loop_reaches_step(loop)
        scope = analysis.scope_of(call)
        if not isinstance(scope, _FUNCTIONS):
            return False
        if forward:
            if scope.name not in torch_api.FORWARD_METHODS or analysis.class_of(scope) is None:
                return False  # a function nested in a forward
            callers = self.calls_running(scope)
        else:
            callers = [
                c
                for c in analysis.index.calls_by_name.get(scope.name, [])
                if scope in self._callees(c, analysis.scope_of(c)) and not self._other_method(c)
            ]
        if not callers and self._run_by_lightning(scope):
            return True
        return bool(callers) and all(self._once_per_step(c, seen) for c in callers)

    def evaluated_by_lightning(self, call: ast.Call) -> bool:
        """Whether `call` is made in a LightningModule's `validation_step`, `test_step` or
        `predict_step`, which the library's trainer runs with grad disabled."""
        scope = self._analysis.scope_of(call)
        owner = self._analysis.class_of(scope)
        return (
            isinstance(scope, _FUNCTIONS)
            and scope.name in torch_api.TRAINER_EVALUATION_STEPS
            and owner is not None
            and self._analysis.is_lightning_module(owner.name)
        )

    def _run_by_lightning(self, function: Function) -> bool:
        """A LightningModule's `training_step`, which nothing in the file calls: the library's
        trainer runs it once per training step."""
        owner = self._analysis.class_of(function)
        return (
            function.name == torch_api.TRAINER_RUN_STEP
            and owner is not None
            and self._analysis.is_lightning_module(owner.name)
        )

    def _other_method(self, call: ast.Call) -> bool:
        """Whether `call` is a method of a value that is no object of the file's classes
        (`self.opt.step()` is not a call of a trainer's own `step`)."""
        return self._is_step(call) or (
            isinstance(call.func, ast.Attribute)
            and self._analysis.value_of(call.func.value).kind
            in (Kind.OPTIMIZER, Kind.TENSOR, Kind.CRITERION, Kind.NUMBER)
        )

    def calls_running(self, forward: Function) -> list[ast.Call]:
        """The calls that run the module `forward` (`__call__`), on an instance of its own
        class or of a subclass that inherits it."""
        analysis = self._analysis
        owner = analysis.class_of(forward)
        if owner is None:
            return []
        calls: list[ast.Call] = []
        for info in analysis.index.classes.values():
            if info.methods.get(forward.name) is forward and owner.name in analysis.lineage(
                info.name
            ):
                calls += [c for c in analysis.calls_running_forward(info) if c not in calls]
        return calls

    def calls_entry(self, call: ast.Call, iterable: ast.expr, target: ast.expr) -> bool:
        """Whether `call` calls the module that `target` takes from `iterable`, the entries
        of a module collection (`for name, metric in metrics.items(): metric(out, y)`)."""
        func = call.func
        return (
            isinstance(func, ast.Name)
            and any(isinstance(n, ast.Name) and n.id == func.id for n in ast.walk(target))
            and self._analysis.module_collection(iterable) is not None
        )

    def draws_random_batches(self, loop: Loop, scope: ast.AST) -> ast.AST | None:
        """What makes the batches of `loop` random draws of a data set, if anything: a
        `DataLoader(..., shuffle=True)` it iterates, or a call in its body that draws a random
        sample or order (`torch.randperm`, `random.shuffle`), directly or through the file's
        functions (`x, y = sample_windows(data)`). Consecutive batches then do not continue
        one another."""
        iterable = loop.iter if isinstance(loop, (ast.For, ast.AsyncFor)) else None
        while isinstance(iterable, ast.Call) and iterable.args:  # `enumerate(loader)`, `tqdm(...)`
            iterable = iterable.args[0]
        shuffled = self._shuffling_loader(iterable) if iterable is not None else None
        if shuffled is not None:
            return shuffled
        for statement in loop.body:
            for inner in self._analysis.descendants(statement):
                if type(inner) is not ast.Call:
                    continue
                if self._is_random_draw(inner):  # type: ignore[arg-type]
                    return inner
                for callee in self._callees(inner, scope):  # type: ignore[arg-type]
                    if self._function_does(callee, self._draws, self._is_random_draw, set()):
                        return inner
        return None

    def _is_random_draw(self, call: ast.Call) -> bool:
        return self._analysis.qualified_name(call.func) in torch_api.RANDOM_DRAWS

    def _shuffling_loader(self, iterable: ast.expr) -> ast.AST | None:
        """The `DataLoader(..., shuffle=True)` that `iterable` is, or names."""
        key = dotted_name(iterable)
        candidates: list[ast.AST] = [iterable]
        if key is not None:
            candidates += [
                node.value
                for node in self._analysis.index.of_types(ast.Assign)
                if isinstance(node, ast.Assign)
                and any(dotted_name(target) == key for target in node.targets)
            ]
        for candidate in candidates:
            if (
                isinstance(candidate, ast.Call)
                and (self._analysis.qualified_name(candidate.func) or "").endswith("DataLoader")
                and any(
                    keyword.arg == "shuffle"
                    and isinstance(keyword.value, ast.Constant)
                    and keyword.value.value is True
                    for keyword in candidate.keywords
                )
            ):
                return candidate
        return None

    def _is_step(self, call: ast.Call) -> bool:
        qualified = self._analysis.qualified_name(call.func)
        return is_training_step(call) or qualified in torch_api.AUTOGRAD_FUNCTIONS

    def _function_does(
        self,
        function: Function,
        memo: dict[Function, bool],
        direct: Callable[[ast.Call], bool],
        seen: set[ast.AST],
    ) -> bool:
        """Whether `function` makes a call `direct` accepts, itself or through the file's own
        functions it calls (memoised in `memo`). `seen`: the functions on the way here, added
        and removed in place (a new set at each step made a long chain of calls quadratic)."""
        known = memo.get(function)
        if known is not None:
            return known
        if function in seen:
            return False
        seen.add(function)
        try:
            result = self._calls_do(function.body, function, memo, direct, seen)
        finally:
            seen.discard(function)
        memo[function] = result
        return result

    def _calls_do(
        self,
        body: Sequence[ast.stmt],
        scope: ast.AST,
        memo: dict[Function, bool],
        direct: Callable[[ast.Call], bool],
        seen: set[ast.AST],
    ) -> bool:
        """Whether a statement of `body` (a loop's or a function's) makes such a call."""
        for statement in body:
            for inner in self._analysis.descendants(statement):
                if type(inner) is not ast.Call:
                    continue
                if direct(inner):  # type: ignore[arg-type]
                    return True
                for callee in self._callees(inner, scope):  # type: ignore[arg-type]
                    if self._function_does(callee, memo, direct, seen):
                        return True
        return False

    def _callees(self, call: ast.Call, scope: ast.AST) -> Sequence[Function]:
        """The file's own functions a call may run: `f(...)` a module-level function,
        `self.m(...)` a method of the enclosing class, `obj.m(...)` any method of that name
        in the file's classes (a trainer object's `train_step`). Asked for every call in a
        training loop: not to be changed by callers."""
        func = call.func
        kind = type(func)
        if kind is ast.Name:
            function = self._analysis.index.functions.get(func.id)  # type: ignore[attr-defined]
            return (function,) if function is not None else ()
        if kind is not ast.Attribute:
            return ()
        name = func.attr  # type: ignore[attr-defined]
        owner = func.value  # type: ignore[attr-defined]
        if type(owner) is ast.Name and owner.id == "self":
            info = self._analysis.class_of(scope)  # type: ignore[arg-type]
            if info is not None and name in info.methods:
                return (info.methods[name],)
        return self._methods_by_name.get(name, ())


def _takes_parameters_of(analysis: FileAnalysis, constructor: ast.Call, module: ast.expr) -> bool:
    """Whether an optimizer's arguments hold `<module>.parameters()`, by name or by the
    constructor that built the module."""
    # Provenance is built on the analysis that builds this module: imported when first used.
    from codemods.analysis.provenance import Provenance

    wanted = target_key(module)
    built: list[ast.Call | None] = []  # the module's constructor, looked up when first needed
    for arg in [*constructor.args, *constructor.keywords]:
        for node in analysis.descendants(arg):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "parameters"
            ):
                continue
            owner = node.func.value
            if wanted is not None and target_key(owner) == wanted:
                return True
            if not built:
                built.append(Provenance(analysis).module_constructor(module))
            if built[0] is not None and Provenance(analysis).module_constructor(owner) is built[0]:
                return True
    return False


def in_forward(analysis: FileAnalysis, node: ast.AST) -> bool:
    """Whether `node` runs inside a module's forward computation (`forward`, `__call__`, or a
    function nested in one)."""
    scope = analysis.scope_of(node)
    while isinstance(scope, _FUNCTIONS):
        if scope.name in torch_api.FORWARD_METHODS and analysis.class_of(scope) is not None:
            return True
        scope = analysis.index.enclosing_function.get(scope, analysis.module)
    return False


def iterates_batches(analysis: FileAnalysis, loop: Loop) -> bool:
    """`for ... in <a data loader, batches, tqdm(...)>`: an epoch over a data set."""
    return isinstance(loop, (ast.For, ast.AsyncFor)) and bool(
        torch_api.BATCHES_TEXT.search(analysis.code_of(loop.iter))
    )


def in_inference_method(analysis: FileAnalysis, node: ast.AST) -> bool:
    """Whether `node` runs in a function named for inference (`generate`, `sample`,
    `predict`) that reaches no training step."""
    scope = analysis.scope_of(node)
    return (
        isinstance(scope, _FUNCTIONS)
        and bool(torch_api.INFERENCE_NAME.match(scope.name))
        and not analysis.training.function_reaches_step(scope)
    )


def is_evaluation_function(analysis: FileAnalysis, function: Function) -> bool:
    """Whether `function` only evaluates: it is named for inference or evaluation
    (`predict`, `evaluate`, `validate`) or puts a module in eval mode (`self.model.eval()`),
    and reaches no training step."""
    named = torch_api.EVALUATION_NAME.match(function.name)
    return bool(named or _calls_eval_mode(analysis, function)) and not (
        analysis.training.function_reaches_step(function)
    )


def _calls_eval_mode(analysis: FileAnalysis, function: Function) -> bool:
    return any(
        isinstance(call.func, ast.Attribute)
        and not call.args
        and not call.keywords
        and analysis.scope_of(call) is function
        for call in analysis.index.calls_by_name.get("eval", [])
    )
