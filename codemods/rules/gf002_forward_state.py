"""GF002, state a module keeps in its `forward` across training steps: a running metric
(`self.total = self.total + value`, `self.total += value`, `self.preds.append(preds)`) fed the
model's live, graph-attached output once per training step.

Each step's graph then stays alive in the kept state until it is reset (often once an epoch),
so memory grows with every batch. A finding only where the analysis proves the premise:
- the forward runs once per training step (`TrainingSteps.runs_once_per_step`: called in a
  training loop, or from a `training_step` a trainer's loop calls once per batch, through
  `nn.ModuleDict` collections and the forwards of outer modules);
- the stored value is graph-attached, and no backward reaches what the module keeps (a state
  meant to carry the graph within one step, as a recurrent cell's, is read by the loss);
- the call that feeds it sits in training code and runs with grad enabled.

The fix is `.detach()` of the graph-attached arguments at that call (`self.train_metrics(
out.detach(), y)`): safe when the modules it runs compute without weights of their own (a
graph in what they keep comes only from what they are given) and nothing differentiates the
call's result; otherwise reported, with what gradfix could not prove.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from codemods.analysis import FileAnalysis, Function, Grad
from codemods.analysis.flows import Use, follow_expression, follow_self_attribute
from codemods.analysis.index import BRANCH_TYPES, FUNCTION_TYPES, LOOP_TYPES
from codemods.analysis.interpreter import target_key
from codemods.analysis.torch_api import FORWARD_METHODS
from codemods.analysis.training import in_forward
from codemods.findings import Tier
from codemods.rules.base import Rewrite, RuleFinding
from codemods.rules.edits import calling

_detached: Rewrite = calling("detach")
_GROWING_METHODS = frozenset({"append", "extend", "insert"})
_LOOP_OR_FUNCTION = (*LOOP_TYPES, *FUNCTION_TYPES)
_STORE_TYPES = frozenset({ast.Assign, ast.AugAssign, ast.Expr})


@dataclass
class _ForwardStore:
    statement: ast.stmt  # the store, in the forward or in a method only the forward runs
    attribute: str  # `total` of `self.total`
    stored: ast.expr  # what it stores (the accumulated expression, the appended value)
    forward: Function | None = None  # the forward that runs it


def forward_state_findings(
    analysis: FileAnalysis,
) -> Iterator[tuple[list[ast.stmt], RuleFinding | None]]:
    """Findings at the calls that feed graph-attached values into state a module's forward
    keeps across training steps, each with the stores it is about (so that the carried-value
    search does not report them again); None for a call whose module the step resets."""
    by_forward: dict[Function, list[_ForwardStore]] = {}
    for store in _forward_stores(analysis):
        by_forward.setdefault(store.forward, []).append(store)  # type: ignore[arg-type]
    by_call: dict[ast.Call, list[_ForwardStore]] = {}
    for forward, stores in by_forward.items():
        stores = [s for s in stores if _kept_with_graph(analysis, s)]
        if not stores:
            continue
        training = analysis.training
        calls = [
            c for c in training.calls_running(forward) if not training.evaluated_by_lightning(c)
        ]
        if not calls or not all(training.runs_once_per_step(c) for c in calls):
            continue  # not proven to cross a training step: left to the carried-value search
        for call in calls:
            if not in_forward(analysis, call) and analysis.grad_enabled(call):
                by_call.setdefault(call, []).extend(stores)
    for call, stores in by_call.items():
        statements = [s.statement for s in stores]
        if _reset_every_step(analysis, stores, call):
            yield statements, None
        else:
            yield statements, _judge_call(analysis, stores, call)


def _forward_stores(analysis: FileAnalysis) -> list[_ForwardStore]:
    """Accumulating stores of a module class of the file, in its `forward` or in a method
    only its forward calls (`self.update(preds, target)`, as running metrics do), in source
    order."""
    found: list[_ForwardStore] = []
    for method in analysis.index.class_of:  # the file's methods
        forward = _forward_running(analysis, method)
        if forward is None:
            continue
        for node in analysis.descendants(method):
            if type(node) in _STORE_TYPES and analysis.scope_of(node) is method:
                store = _accumulation(node)  # type: ignore[arg-type]
                if store is not None:
                    store.forward = forward
                    found.append(store)
    start = analysis.index.start
    found.sort(key=lambda store: start[store.statement])
    return found


def _forward_running(analysis: FileAnalysis, scope: ast.AST) -> Function | None:
    """The forward of a module class of the file that runs `scope`: `scope` itself, or the
    one forward of its class (or of a class deriving from it) that every call of the method
    `scope` is made from, as `self.<method>(...)`."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    owner = analysis.class_of(scope)
    if owner is None or not analysis.is_module_class(owner.name):
        return None
    if scope.name in FORWARD_METHODS:
        return scope
    calls = analysis.index.calls_by_name.get(scope.name, [])
    callers = {analysis.scope_of(call) for call in calls}
    if (
        scope.name == "__init__"
        or len(callers) != 1
        or not all(
            isinstance(call.func, ast.Attribute) and target_key(call.func.value) == "self"
            for call in calls
        )
    ):
        return None
    (caller,) = callers
    if not (
        isinstance(caller, (ast.FunctionDef, ast.AsyncFunctionDef))
        and caller.name in FORWARD_METHODS
        and analysis.class_of(caller) is not None
        and analysis.class_of(caller).name in analysis.class_family(owner.name)  # type: ignore[union-attr]
    ):
        return None
    return caller


def _accumulation(node: ast.stmt) -> _ForwardStore | None:
    """`self.x = <reads self.x>`, `self.x += v`, `self.xs.append(v)`."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        key = target_key(node.targets[0])
        if _is_self_attribute(key) and any(
            isinstance(n, ast.Attribute) and target_key(n) == key for n in ast.walk(node.value)
        ):
            return _ForwardStore(node, key[5:], node.value)  # type: ignore[index]
    elif isinstance(node, ast.AugAssign):
        key = target_key(node.target)
        if _is_self_attribute(key):
            return _ForwardStore(node, key[5:], node.value)  # type: ignore[index]
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        func = node.value.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in _GROWING_METHODS
            and _is_self_attribute(target_key(func.value))
            and node.value.args
            and not node.value.keywords
        ):
            key = target_key(func.value)
            return _ForwardStore(node, key[5:], node.value.args[-1])  # type: ignore[index]
    return None


def _is_self_attribute(key: str | None) -> bool:
    return key is not None and key.startswith("self.") and key.count(".") == 1


def _kept_with_graph(analysis: FileAnalysis, store: _ForwardStore) -> bool:
    """Whether the store keeps a graph no backward reaches: an attached tensor (not a
    parameter, a loss or a number), and no read of the kept state flows to a backward."""
    value = analysis.value_of(store.stored)
    if value.grad is not Grad.ATTACHED and value.element is not Grad.ATTACHED:
        return False
    if value.leaf or value.loss or value.scalar:
        return False  # a parameter keeps no history; running losses and scalars are GF001's
    owner = analysis.class_of(analysis.scope_of(store.statement))
    flow = follow_self_attribute(analysis, owner.name, store.attribute)  # type: ignore[union-attr]
    return not flow.backward_calls


def _judge_call(analysis: FileAnalysis, stores: list[_ForwardStore], call: ast.Call) -> RuleFinding:
    statement = analysis.statement_of(call) or call
    forwards = list(dict.fromkeys(s.forward for s in stores))
    owners = [analysis.class_of(f).name for f in forwards]  # type: ignore[union-attr]
    store_owners = [analysis.class_of(analysis.scope_of(s.statement)).name for s in stores]  # type: ignore[union-attr]
    runs = " and ".join(f"`{o}.{f.name}`" for o, f in zip(owners, forwards, strict=True))  # type: ignore[union-attr]
    callee = analysis.value_of(call.func)
    attached = [
        argument
        for argument in [*call.args, *(k.value for k in call.keywords)]
        if not isinstance(argument, ast.Starred)
        and analysis.value_of(argument).grad is Grad.ATTACHED
    ]
    kept = ", ".join(f"`self.{s.attribute}` (line {s.statement.lineno})" for s in stores)
    message = (
        f"`{analysis.code_of(call, 60)}` runs {runs} once per training step, keeping "
        f"{kept} across calls, computed from graph-attached values: "
        "every step's graph stays alive in the kept state until it is reset, so memory grows "
        "with every batch. Nothing differentiates the kept state."
    )
    if not attached:
        return RuleFinding(
            statement,
            message + " gradfix could not tell which argument carries the graph: pass it "
            "detached, or detach what the forward stores.",
            Tier.REPORT,
        )
    shown = ", ".join(f"`{analysis.code_of(a, 40)}.detach()`" for a in attached)
    result = follow_expression(analysis, call)
    if result.backward_calls:
        return RuleFinding(
            statement,
            message + f" The call's result is differentiated (line "
            f"{result.backward_calls[0].lineno}), so detaching what it is given would change "
            f"the gradients: detach what {runs} stores instead.",
            Tier.REPORT,
        )
    modules = [*(callee.classes or (callee.cls,)), *owners]
    without_weights = all(
        name in analysis.index.classes and analysis.weights.computes_without_weights(name)  # type: ignore[arg-type]
        for name in modules
    )
    if not without_weights:
        return RuleFinding(
            statement,
            message + f" gradfix could not prove that the modules this call runs compute "
            f"without weights of their own, so passing {shown} may leave a graph in the "
            f"kept state: detach what {runs} stores instead.",
            Tier.REPORT,
        )
    differentiated = _differentiated_state(analysis, modules)
    if differentiated is not None:
        return RuleFinding(
            statement,
            message + f" `{differentiated}` of a module this call runs also reaches a "
            f"backward, so detaching what the call is given may change the gradients: "
            f"detach what {runs} stores instead.",
            Tier.REPORT,
        )
    message += f" Pass {shown}."
    tier = Tier.SAFE
    uses = set().union(
        *(
            follow_self_attribute(analysis, owner, s.attribute).uses
            for owner, s in zip(store_owners, stores, strict=True)
        ),
        result.uses,
    )
    if uses & {Use.UNKNOWN_CONSUMER, Use.RETURNED_UNSEEN}:
        tier = Tier.UNSAFE
        message += (
            " Unsafe: the kept state or the call's result reaches code outside this file; "
            "check it does not backpropagate through them."
        )
    return RuleFinding(statement, message, tier, {a: _detached for a in attached})


def _differentiated_state(analysis: FileAnalysis, modules: list[str | None]) -> str | None:
    """A `self` attribute that the file's module classes `modules` store and that flows to a
    backward (`self.last = x`, read by the loss): what the call passes reaches it too."""
    for name in modules:
        for owner in analysis.class_family(name):  # type: ignore[arg-type]
            for attribute, occurrences in analysis.index.self_attributes[owner].items():
                stored = any(not analysis.is_load(o) for o in occurrences)
                if stored and follow_self_attribute(analysis, owner, attribute).backward_calls:
                    return f"self.{attribute}"
    return None


def _reset_every_step(analysis: FileAnalysis, stores: list[_ForwardStore], call: ast.Call) -> bool:
    """Whether every step that makes `call` also resets what its module keeps: a method of
    the storing class that binds each kept attribute to a value with no graph
    (`self.history = []`) called on the same module (`metric.reset()` next to `metric(out,
    y)`), unconditionally, in the same loop iterations. Nothing then accumulates."""
    receiver = target_key(call.func)
    if receiver is None:
        return False
    loops = analysis.enclosing_loops(call)
    for store in stores:
        owner = analysis.class_of(analysis.scope_of(store.statement)).name  # type: ignore[union-attr]
        methods = _resetting_methods(analysis, owner, store.attribute)
        if not any(
            isinstance(reset.func, ast.Attribute)
            and target_key(reset.func.value) == receiver
            and analysis.scope_of(reset) is analysis.scope_of(call)
            and analysis.enclosing_loops(reset) == loops
            and not _conditional(analysis, reset)
            for name in methods
            for reset in analysis.index.calls_by_name.get(name, [])
        ):
            return False
    return True


def _resetting_methods(analysis: FileAnalysis, owner: str, attribute: str) -> set[str]:
    """The methods of `owner`'s family (not `__init__`) that bind `self.<attribute>` to a value
    with no graph."""
    names: set[str] = set()
    for name in analysis.class_family(owner):
        for occurrence in analysis.index.self_attributes[name].get(attribute, []):
            assign = analysis.parent(occurrence)
            method = analysis.scope_of(occurrence)
            if (
                isinstance(assign, ast.Assign)
                and occurrence in assign.targets
                and isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
                and method.name not in ("__init__", *FORWARD_METHODS)
                and analysis.value_of(assign.value).grad is Grad.FREE
            ):
                names.add(method.name)
    return names


def _conditional(analysis: FileAnalysis, node: ast.AST) -> bool:
    """Whether a branch (`if`, `try`, `match`) lies between `node` and its loop or function."""
    around = analysis.ancestors_within(node, _LOOP_OR_FUNCTION)
    return any(isinstance(ancestor, BRANCH_TYPES) for ancestor in around)
