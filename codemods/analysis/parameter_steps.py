"""Which modules an optimizer step updates in place, and which modules a value's graph ran
through (GF004: an optimizer step between a loss's forward and its backward).

Modules are named by access paths in one scope: `self.critic.Q1`, `D`. An optimizer built
over `self.critic.Q1.parameters()` (or a list, chain or param groups of such calls) steps
that path and every path under it. A loss whose graph ran `self.critic(s, a)`, whose forward
calls `self.Q1(s, a)`, which calls its `self.net`, ran `self.critic.Q1.net`: paths are carried
out of the file's functions through the calls that ran them (`self` becomes the receiver, a
parameter what the call passes). Two paths of which one is a prefix of the other name modules
that may share parameters; two instances of one class (`critic`, `critic_target`) do not. A
module gradfix cannot name this way (a local alias, a list entry) has no path: unknown.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from codemods.analysis import FileAnalysis, saved_ops
from codemods.analysis.imports import dotted_name
from codemods.analysis.index import FUNCTION_TYPES
from codemods.analysis.provenance import Origin, OriginKind, Provenance, walk
from codemods.analysis.training import is_optimizer_step
from codemods.analysis.values import Grad, Kind

Function = ast.FunctionDef | ast.AsyncFunctionDef
Chain = Sequence[tuple[ast.Call, Function]]
# How deep into the file's helpers a step or a backward is looked for (`learn()` calling
# `self.update_critic(loss)` calling `update_params(opt, loss)`).
_MAX_HELPER_DEPTH = 3
_PARAMETER_METHODS = frozenset({"parameters", "named_parameters"})


@dataclass(frozen=True)
class ModuleRun:
    """A call of a module with parameters in a value's graph."""

    path: str | None  # the module's access path in the scope asked about; None: unknown
    node: Origin  # the FORWARD origin of the call
    saves: bool | None  # whether the call saved a parameter an in-place update breaks
    where: ast.AST  # what, in the scope asked about, ran it (a statement's call or operator)


@dataclass(frozen=True)
class GraphEvent:
    """A step or a backward that a call of the scope asked about makes, itself or in the
    file's functions it runs; `order` orders the events of one call."""

    call: ast.Call  # the call in the scope asked about
    order: int
    is_step: bool  # an optimizer step (else a backward)
    target: ast.expr  # the optimizer stepped, or the value backpropagated
    chain: tuple[tuple[ast.Call, Function], ...]  # the calls from that scope to `target`


def overlap(first: str, second: str) -> bool:
    """Whether two access paths may name modules that share parameters: one holds the other."""
    return first == second or second.startswith(f"{first}.") or first.startswith(f"{second}.")


class ParameterSteps:
    """Steps, backward calls and module runs of one file, named by access paths."""

    def __init__(self, analysis: FileAnalysis, provenance: Provenance) -> None:
        self.analysis = analysis
        self.provenance = provenance
        self._events: dict[ast.Call, list[GraphEvent]] = {}
        self._calls_in: dict[Function, list[ast.Call]] = {}

    # -- what a call steps and backpropagates -------------------------------------------------
    def events(self, call: ast.Call) -> list[GraphEvent]:
        """The optimizer steps and backward calls `call` makes, itself or through the file's
        helpers, in the order they run: `update_params(opt, net, loss)` backpropagates
        `loss`, then steps `opt`."""
        known = self._events.get(call)
        if known is None:
            known = self._events[call] = [
                GraphEvent(call, order, is_step, target, chain)
                for order, (is_step, target, chain) in enumerate(
                    self._reached(call, (), frozenset())
                )
            ]
        return known

    def _reached(
        self, call: ast.Call, chain: Chain, seen: frozenset[Function]
    ) -> Iterator[tuple[bool, ast.expr, tuple[tuple[ast.Call, Function], ...]]]:
        direct = self._direct_target(call)
        if direct is not None:
            yield (*direct, tuple(chain))
            return
        if len(chain) >= _MAX_HELPER_DEPTH or not self.analysis.training.call_reaches_step(call):
            return
        function = self.provenance.function_run_by(call)
        if not isinstance(function, FUNCTION_TYPES) or function in seen:
            return
        inner_chain = (*chain, (call, function))
        for inner in self._calls_of(function):
            yield from self._reached(inner, inner_chain, seen | {function})

    def _calls_of(self, function: Function) -> list[ast.Call]:
        """The calls in `function`'s own body (not in functions nested in it), in order."""
        known = self._calls_in.get(function)
        if known is None:
            known = self._calls_in[function] = [
                node
                for node in self.analysis.descendants(function)
                if type(node) is ast.Call and self.analysis.scope_of(node) is function
            ]
        return known  # type: ignore[return-value]

    def _direct_target(self, call: ast.Call) -> tuple[bool, ast.expr] | None:
        """Whether `call` steps (else backpropagates) and what: `opt.step()` its optimizer,
        `scaler.step(opt)` its argument, `loss.backward()` the loss."""
        func = call.func
        if not isinstance(func, ast.Attribute):
            return None
        if func.attr == "backward" and not call.args:
            return False, func.value
        stepped = func.attr == "step" and (
            is_optimizer_step(call) or self.analysis.value_of(func.value).kind is Kind.OPTIMIZER
        )
        if not stepped:
            return None
        if call.args and self.analysis.value_of(call.args[0]).kind is Kind.OPTIMIZER:
            return True, call.args[0]  # `scaler.step(opt)`
        return True, func.value

    # -- what an optimizer steps ----------------------------------------------------------------
    def stepped_paths(self, optimizer: ast.expr) -> frozenset[str] | None:
        """The access paths, in the scope of `optimizer`, of the modules whose
        `.parameters()` the optimizer was built over; None when gradfix does not know them."""
        constructor = self.provenance.module_constructor(optimizer)
        if constructor is None:
            return None
        given = constructor.args[0] if constructor.args else None
        for keyword in constructor.keywords:
            if keyword.arg == "params":
                given = keyword.value
        if given is None:
            return None
        built: set[str] = set()
        for node in self.analysis.descendants(given):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _PARAMETER_METHODS
            ):
                path = dotted_name(node.func.value)
                if path is None:
                    return None
                built.add(path)
        if not built:
            return None
        return self._as_seen_from(constructor, built, optimizer)

    def _as_seen_from(
        self, constructor: ast.Call, paths: set[str], optimizer: ast.expr
    ) -> frozenset[str] | None:
        """`paths`, written where `constructor` runs, as the scope of `optimizer` names them:
        `self.x` paths when the optimizer is `self.<attribute>` of the same object, plain
        names when both are in one scope (or the optimizer's scope reads the module's
        globals)."""
        built_in = self.analysis.scope_of(constructor)
        used_in = self.analysis.scope_of(optimizer)
        assigned = self.analysis.parent(constructor)
        target = assigned.targets[0] if isinstance(assigned, ast.Assign) else None
        roots = {path.split(".", 1)[0] for path in paths}
        if built_in is used_in:
            return frozenset(paths)
        if roots == {"self"}:
            owner = dotted_name(target) if target is not None else None
            used = dotted_name(optimizer)
            if owner is None or used is None or not owner.startswith("self."):
                return None
            attribute = owner[len("self.") :]
            if not used.endswith(f".{attribute}"):
                return None
            receiver = used[: -len(attribute) - 1]
            return frozenset(receiver + path[len("self") :] for path in paths)
        if built_in is self.analysis.module and not any(
            self.analysis.occurrences(root, used_in) and self._binds(root, used_in)
            for root in roots
        ):
            return frozenset(paths)
        return None

    def _binds(self, name: str, scope: ast.AST) -> bool:
        return any(
            isinstance(node.ctx, ast.Store) for node in self.analysis.occurrences(name, scope)
        ) or any(
            arg.arg == name
            for arg in (scope.args.args if isinstance(scope, FUNCTION_TYPES) else [])
        )

    # -- which modules a value's graph ran --------------------------------------------------------
    def module_runs(self, value: Origin, made_by: Chain = ()) -> list[ModuleRun]:
        """The calls of modules with parameters in `value`'s graph (attached, or maybe), with
        their access paths in the scope `value` was asked about, or, for a value a method
        cached (`made_by`: the call of it, see `cached_value`), in its caller's scope."""
        runs = []
        for node, _certain in walk(value):
            if node.kind is not OriginKind.FORWARD or not node.module:
                continue
            if node.grad is Grad.FREE or not isinstance(node.expression, ast.Call):
                continue
            where = made_by[0][0] if made_by else node.site
            if where is None:
                continue
            chain = (*made_by, *self.provenance.calls_to(node))
            path = self.outward(dotted_name(node.expression.func), chain)
            runs.append(ModuleRun(path, node, _saves_parameters(node), where))
        return runs

    def cached_value(
        self, root: ast.expr, before: ast.AST
    ) -> tuple[Origin, tuple[ast.Call, Function]] | None:
        """For `self.loss_g` read where no binding of its scope reaches: the value the last
        call of a method on the same object before `before` leaves there (`self.compute()`
        binding `self.loss_g`), with that call and method."""
        owner = root.value if isinstance(root, ast.Attribute) else None
        receiver = dotted_name(owner)
        if receiver is None:
            return None
        scope = self.analysis.scope_of(root)
        start = self.analysis.index.start
        candidates = [
            call
            for call in self._calls_of(scope)  # type: ignore[arg-type]
            if start[call] < start[before]
            and isinstance(call.func, ast.Attribute)
            and dotted_name(call.func.value) == receiver
        ]
        for call in reversed(candidates):
            method = self.provenance.function_run_by(call)
            if not isinstance(method, FUNCTION_TYPES) or not method.args.args:
                continue
            key = f"{method.args.args[0].arg}.{root.attr}"  # type: ignore[union-attr]
            if key not in self.analysis.bindings(method).final:
                continue
            value = self.provenance.attribute_at_exit(method, key)
            return (value, (call, method)) if value is not None else None
        return None

    def outward_argument(self, target: ast.expr, chain: Chain) -> ast.expr | None:
        """What the outermost caller of `chain` passes that `target` (a parameter of the
        innermost function, `loss` in `loss.backward()`) is; `target` itself without calls."""
        for call, function in reversed(chain):
            if not isinstance(target, ast.Name):
                return None
            params = (param.arg for param in self.analysis.passed_parameters(function))
            passed = dict(zip(params, call.args, strict=False))
            passed.update((k.arg, k.value) for k in call.keywords if k.arg is not None)
            found = passed.get(target.id)
            if found is None:
                return None
            target = found
        return target

    def outward(self, path: str | None, chain: Chain) -> str | None:
        """`path`, written in the innermost function of `chain`, as the outermost caller
        names it: `self.net` in `QNetwork.forward` run by `self.Q1(s, a)` in a forward run
        by `self.critic(s, a)` is `self.critic.Q1.net`."""
        for call, function in reversed(chain):
            if path is None:
                return None
            root, _, rest = path.partition(".")
            outer = self._passed_for(root, call, function)
            if outer is None:
                return None
            path = f"{outer}.{rest}" if rest else outer
        return path

    def _passed_for(self, name: str, call: ast.Call, function: Function) -> str | None:
        """The caller's access path for `name` in `function`, which `call` runs: the receiver
        for `self`, what the call passes for a parameter."""
        params = [*function.args.posonlyargs, *function.args.args]
        passed = self.analysis.passed_parameters(function)
        if len(passed) < len(params) and name == params[0].arg:  # `self` of a method
            func = call.func
            if function.name in ("forward", "__call__") and not (
                isinstance(func, ast.Attribute) and func.attr == function.name
            ):
                return dotted_name(func)  # `self.critic(s, a)` runs `forward` of `self.critic`
            return dotted_name(func.value) if isinstance(func, ast.Attribute) else None
        for param, argument in zip(passed, call.args, strict=False):
            if param.arg == name:
                return dotted_name(argument)
        for keyword in call.keywords:
            if keyword.arg == name:
                return dotted_name(keyword.value)
        return None


def _saves_parameters(node: Origin) -> bool | None:
    """Whether a module call saved a parameter that an update in place breaks, from the op
    table's "params" entry with what its input requires; unknown for a module it lacks."""
    op = saved_ops.op_saving(node.key) if node.key is not None else None
    if op is None:
        return None
    if not op.params:
        return False
    requires = [_requires_grad(origin.grad) for origin in node.inputs][: len(op.input_kinds)]
    answers = {op.saves_param(name, requires or None) for name in op.params}
    if True in answers:
        return True
    return None if None in answers else False


def _requires_grad(grad: Grad) -> bool | None:
    if grad is Grad.ATTACHED:
        return True
    if grad is Grad.FREE:
        return False
    return None
