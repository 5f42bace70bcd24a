"""GF001: a graph-attached loss accumulated across loop iterations.

Detects `acc += loss`, `acc.add_(loss)`, `acc = acc + loss`, `acc.append(loss)`,
`acc[key] += loss`, `acc[key] = acc.get(key, 0) + loss`, `self.acc += loss`, and
`meter.update(loss)` or `logger.log("loss", loss)` when the method, in a class of the same
file, adds or appends its parameter as it was passed (never rebinding it; through graph-keeping
tensor methods and helpers of the file that return it, `allreduce(val.cpu())`, included) into a
`self` attribute, and `stats.total("loss").add_(loss)` into a tensor an object keeps in `self`,
where `loss` is proven graph-attached and `acc` outlives the iteration. What the method itself
does with the value counts as a use of the total (`value.item()` there needs a tensor:
`.detach()` at the call).
Losses read back from a dict or list of losses (`for name, value in loss_dict.items()`) keep
what the analysis knows of the stored terms; an entry read under a constant key (`out["mse"]`
of a criterion's dict) keeps what was stored under that key, its scalar-ness included. Where
the total goes is followed through `zip`/`enumerate` and into methods of objects of the file's
classes (`self.printer.epoch_done(total)`), so a total only printed there is fixed safely and
one a helper's method backpropagates is left alone.

Not a finding: a total of loss terms that is itself a loss, summed in a `forward` (a model's
or a criterion's), or summed by a loop with no training step in it (no backward or optimizer
step reachable, not a loop over batches) and then returned or passed on; nor, outside such
loops, a loss over inputs gradfix cannot trace (attached by convention only).

Safe when: the value is proven attached (a backward on it, a loss or module call, arithmetic on
those) in grad mode, the accumulator was bound before the loop (or lives on `self`), and no
value derived from the accumulator ever reaches `backward()` / `autograd.grad` (that is
gradient accumulation on purpose). An accumulator that leaves the file (returned to callers
gradfix cannot see, passed to unknown code) or a loss known only by a conventional name gets
the unsafe tier.

Rewrites the accumulated operand: `loss.item()` when the accumulator is a Python number (or a
list/dict of them) only printed, logged or averaged; `loss.detach()` when it must stay a tensor.
A dict appended whole (`outputs.append(output)`, a step's output dict whose `"loss"` entry is
attached) is appended as a copy with those entries detached, `{**output, "loss":
output["loss"].detach()}`: safe when the name is rebound each iteration before the append and
only its entries are read after it (the list keeps a copy, not the dict), unsafe when the file
uses dict subclasses (the copy is a plain dict). A value attached on some paths and a Python
number on others (`adv = 0.0` then a loss under an `if`) is reported: neither rewrite applies
to both. A history list whose newest entry the loop itself backpropagates (`losses.append(
total)`, `losses[-1].backward()`) is reported: every older entry keeps its graph, and
`.detach()` at the append would stop that backward.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

from codemods.analysis import FileAnalysis, Grad, Kind, Value, torch_api
from codemods.analysis.bindings import BindingKind
from codemods.analysis.flows import (
    Use,
    follow_self_attribute,
    follow_target,
    through_setdefault,
)
from codemods.analysis.index import Loop
from codemods.analysis.interpreter import target_key
from codemods.analysis.training import in_forward, iterates_batches
from codemods.findings import Tier
from codemods.rules.base import Rewrite, Rule, RuleFinding
from codemods.rules.edits import calling
from codemods.rules.records import (
    DICT_SUBCLASS_TEXT,
    attached_keys,
    rebound_before,
    record_copy,
    region_binding_afresh,
    used_after,
)

_ACCUMULATION_TEXT = re.compile(r"\+=|\.append\(|\.update\(|\.add_\(|=[^=\n]*\+")
_FUNCTION_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
# Dicts that are not plain ones: a copy made with `{**d, ...}` would lose their class.


@dataclass
class _Accumulation:
    statement: ast.stmt  # where it happens
    accumulator: ast.expr  # what outlives the iteration
    operand: ast.expr  # what is added to it
    exclude: ast.expr | None = None  # the accumulator's own read in `acc = acc + x`
    stores_reference: bool = False  # append/update keep the tensor itself, even under no_grad
    owner_class: str | None = None  # for meters: the class whose attribute accumulates
    owner_attribute: str | None = None
    owner_parameter: ast.arg | None = None  # the method's parameter that receives `operand`
    in_place: bool = False  # `acc.add_(x)`: the accumulator is a tensor, whatever it started as
    # For a dict appended whole (`outputs.append(output)`): the constant keys of its
    # graph-attached entries, which are what it keeps.
    attached_keys: tuple[str, ...] = ()


class AccumulatedLoss(Rule):
    code = "GF001"
    name = "accumulated-graph-loss"
    summary = "A graph-attached loss is accumulated across loop iterations"
    explanation = (
        "Adding a loss tensor to a running total (`total += loss`, `losses.append(loss)`, "
        "`meters[name] += value` over the terms of a loss dict's `.items()`) keeps "
        "a reference to its autograd graph, so every iteration's graph (and, when nothing "
        "backpropagates that loss, every iteration's activations) stays alive: memory grows "
        "step after step, and a later backward through the total can fail. The PyTorch FAQ "
        "calls this 'accumulating history across your training loop'.\n\n"
        "gradfix accumulates `loss.item()` when the total is a Python number that is printed, "
        "logged or averaged, and `loss.detach()` when it must stay a tensor (it is stacked, "
        "reduced or used with tensor methods), which also avoids a device sync each step. "
        "A meter or logger class of the same file that keeps what it is given "
        "(`self.sum += val`, `self.sum = self.sum + val * n`, "
        "`self.values[name].append(value)`) is fixed at the call site: "
        "`logger.log('loss', loss.item())`; a loss inside a record appended to a history "
        "(`history.append({'step': i, 'loss': loss})`) inside the record. A loss read back "
        "from a dict under a constant key (`meter.update(out['mse'])` for a criterion that "
        "returns a dict) is as proven as what was stored there; a total passed to a method of "
        "the file's own classes is followed into it. A step's output dict appended whole "
        "(`outputs.append(output)`) is appended as a copy with its loss entries detached; "
        "`running.add_(loss)` is a running total like `+=`. A value that is a loss on some "
        "paths and a Python number on others is reported: detach it where it becomes a "
        "tensor. A history list whose newest entry the loop backpropagates "
        "(`losses.append(total)`, then `losses[-1].backward()`) is reported: detaching at the "
        "append would stop that backward, so move the backward before the append and append "
        "`total.detach()`.\n\n"
        "Left alone: totals that reach `backward()` (gradient accumulation, "
        "`torch.stack(losses).mean().backward()`), loss terms summed in a `forward` (a model's "
        "or a criterion's) or by a loop with no backward or optimizer step that hands the sum "
        "on to its caller (that sum is the training loss), values already taken out of the "
        "graph with `.item()` / `.detach()`, accumulation under `torch.no_grad()`, and values "
        "whose origin the file does not show. A total returned to callers outside the file, "
        "or a loss known only by its name (`criterion(...)` passed in as a parameter), gets an "
        "unsafe fix."
    )
    example_before = (
        "total_loss = 0.0\n"
        "for x, y in loader:\n"
        "    loss = criterion(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    total_loss += loss\n"
    )
    example_after = example_before.replace("total_loss += loss", "total_loss += loss.item()")

    def may_apply(self, text: str) -> bool:
        return bool(_ACCUMULATION_TEXT.search(text))

    def check(self, analysis: FileAnalysis) -> Iterator[RuleFinding]:
        for accumulation in _accumulations(analysis):
            finding = _judge(analysis, accumulation)
            if finding is not None:
                yield finding


# -- what it detects ------------------------------------------------------------------------
def _accumulations(analysis: FileAnalysis) -> Iterator[_Accumulation]:
    for statement in _adding_statements(analysis):
        if isinstance(statement, ast.AugAssign):
            yield _Accumulation(statement, statement.target, statement.value)
        elif isinstance(statement, ast.Assign):
            target = statement.targets[0]
            value = statement.value
            assert isinstance(value, ast.BinOp)
            if _reads_accumulator(analysis, target, value.left):
                yield _Accumulation(statement, target, value.right, exclude=value.left)
            elif _reads_accumulator(analysis, target, value.right):
                yield _Accumulation(statement, target, value.left, exclude=value.right)
        else:
            assert isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
            yield from _call_accumulations(analysis, statement, statement.value)


def _adding_statements(analysis: FileAnalysis) -> list[ast.stmt]:
    """The statements that may add to something, in source order: `x += v`, `x = a + b`,
    and expression statements calling `add_`, `append` or a method of the file's classes
    (a call of any other method adds to nothing `_call_accumulations` knows)."""
    index = analysis.index
    called = {"add_", "append"} | analysis.method_names
    statements: list[ast.stmt] = [
        *(node for node in index.of_types(ast.AugAssign) if type(node.op) is ast.Add),  # type: ignore[attr-defined]
        *(node for node in index.of_types(ast.Assign) if _assigns_a_sum(node)),  # type: ignore[arg-type]
        *(
            statement
            for name in called
            for call in index.calls_by_name.get(name, ())
            if isinstance(statement := analysis.parent(call), ast.Expr)
        ),
    ]
    statements.sort(key=index.start.__getitem__)
    return statements


def _assigns_a_sum(assignment: ast.Assign) -> bool:
    value = assignment.value
    return (
        len(assignment.targets) == 1 and isinstance(value, ast.BinOp) and type(value.op) is ast.Add
    )


def _reads_accumulator(analysis: FileAnalysis, target: ast.expr, read: ast.expr) -> bool:
    """Whether `read` reads what `target` stores: `acc` in `acc = acc + x`, and for an entry,
    `acc[k]` or `acc.get(k, 0)` in `acc[k] = acc.get(k, 0) + x`."""
    key = target_key(target)
    if key is not None:
        return target_key(read) == key
    if not isinstance(target, ast.Subscript) or target_key(_container(target)) is None:
        return False
    if isinstance(read, ast.Subscript):
        return analysis.code_of(read) == analysis.code_of(target)
    if (
        isinstance(read, ast.Call)
        and isinstance(read.func, ast.Attribute)
        and read.func.attr == "get"
        and len(read.args) == 2
        and not read.keywords
        and not any(isinstance(arg, ast.Starred) for arg in read.args)
    ):
        same_dict = analysis.code_of(read.func.value) == analysis.code_of(target.value)
        index = target.slice
        # `acc[i, j]` (a bare tuple) never equals the code of `acc.get((i, j), 0)`'s key.
        same_key = not isinstance(index, ast.Slice) and (
            analysis.code_of(read.args[0]) == analysis.code_of(index)
        )
        return same_dict and same_key
    return False


def _call_accumulations(
    analysis: FileAnalysis, statement: ast.Expr, call: ast.Call
) -> Iterator[_Accumulation]:
    func = call.func
    if (
        not isinstance(func, ast.Attribute)
        or not call.args
        or isinstance(call.args[0], ast.Starred)
    ):
        return
    if func.attr == "add_" and len(call.args) == 1:
        # `acc.add_(loss)`: `acc += loss` spelled as a tensor method (an `alpha=` keyword
        # scales the operand, which a rewrite of the operand keeps).
        owner = _state_returned(analysis, func.value)
        if owner is None:
            yield _Accumulation(statement, func.value, call.args[0], in_place=True)
        else:
            # `stats.device_stat("loss").add_(loss)`: a tensor the object keeps in `self`
            yield _Accumulation(
                statement,
                func.value,
                call.args[0],
                in_place=True,
                owner_class=owner[0],
                owner_attribute=owner[1],
            )
        return
    if func.attr == "append":
        for part in _appended_parts(call.args[0]):
            yield _Accumulation(
                statement,
                func.value,
                part,
                stores_reference=True,
                attached_keys=attached_keys(analysis.value_of(part)),
            )
        return
    if func.attr not in analysis.method_names:
        return  # no object of the file's classes has such a method to keep what it is given
    receiver = analysis.value_of(func.value)
    if (
        receiver.kind not in (Kind.OBJECT, Kind.MODULE)
        or receiver.cls not in analysis.index.classes
    ):
        return
    method = analysis.index.classes[receiver.cls].methods.get(func.attr)
    if method is None:
        return
    params = list(method.args.args)[1:]
    for arg, param in zip(call.args, params, strict=False):
        if isinstance(arg, ast.Starred):
            break
        attribute = _attribute_accumulating(analysis, method, param.arg)
        if attribute is not None:
            yield _Accumulation(
                statement,
                func.value,
                arg,
                stores_reference=True,
                owner_class=receiver.cls,
                owner_attribute=attribute,
                owner_parameter=param,
            )


def _state_returned(analysis: FileAnalysis, expression: ast.expr) -> tuple[str, str] | None:
    """For a call of a method of an object of the file's classes that returns only what the
    object keeps in one `self` attribute (`return self.device_stats[name]`): the class and the
    attribute. None for anything else."""
    if not isinstance(expression, ast.Call) or not isinstance(expression.func, ast.Attribute):
        return None
    receiver = analysis.value_of(expression.func.value)
    if receiver.kind is not Kind.OBJECT or receiver.cls not in analysis.index.classes:
        return None
    method = analysis.index.classes[receiver.cls].methods.get(expression.func.attr)
    if method is None:
        return None
    attributes = set()
    for node in analysis.descendants(method):
        if isinstance(node, ast.Return):
            key = target_key(_container(node.value)) if node.value is not None else None
            attributes.add(key[5:] if key is not None and key.startswith("self.") else None)
        elif isinstance(node, (ast.Yield, ast.YieldFrom, *_FUNCTION_TYPES, ast.Lambda)) and (
            node is not method
        ):
            return None  # a generator, or returns of another function
    if len(attributes) != 1 or None in attributes:
        return None
    return receiver.cls, attributes.pop()


def _appended_parts(item: ast.expr) -> list[ast.expr]:
    """What an append keeps: the item, or what a literal holds (`history.append({"step": i,
    "loss": loss})`, `.append((i, loss))`)."""
    if isinstance(item, ast.Dict):
        # `{**record, "loss": ...}`: what an unpacked dict keeps is known only with the keys
        # that follow it, which may replace its entries.
        return [value for key, value in zip(item.keys, item.values, strict=True) if key]
    if isinstance(item, (ast.Tuple, ast.List)):
        return [part for part in item.elts if not isinstance(part, ast.Starred)]
    return [item]


def _attribute_accumulating(
    analysis: FileAnalysis, method: ast.FunctionDef | ast.AsyncFunctionDef, param: str
) -> str | None:
    """The `self` attribute into which `method` adds or appends its parameter `param` as it
    was passed: a meter's `self.sum += val * n`, a logger's `self.values[name].append(value)`.
    None when the method rebinds the parameter first (`value = value.item()`): what it keeps
    is then not what the caller passed."""
    occurrences = analysis.occurrences(param, method)
    if not all(analysis.is_load(occurrence) for occurrence in occurrences):
        return None
    for occurrence in occurrences:
        attribute = _self_attribute_storing(analysis, occurrence)
        if attribute is not None and not _tested_before(analysis, occurrence, param, method):
            return attribute
    return None


def _tested_before(
    analysis: FileAnalysis,
    occurrence: ast.Name,
    param: str,
    method: ast.FunctionDef | ast.AsyncFunctionDef,
) -> bool:
    """Whether `occurrence` runs under a test of `param` (`if torch.is_tensor(value): ...
    .append(value.item()) else: .append(value)`): a tensor may then take another branch."""
    node: ast.AST | None = analysis.parent(occurrence)
    while node is not None and node is not method:
        if isinstance(node, (ast.If, ast.While, ast.IfExp)) and any(
            isinstance(inner, ast.Name) and inner.id == param
            for inner in analysis.descendants(node.test)
        ):
            return True
        node = analysis.parent(node)
    return False


def _self_attribute_storing(analysis: FileAnalysis, occurrence: ast.Name) -> str | None:
    """The `self` attribute that keeps `occurrence` (through arithmetic on it): `self.x +=`,
    `self.x[k] = self.x.get(k, 0) + ...`, `self.x.append(...)`, `self.x[k].append(...)`,
    `self.x.setdefault(k, []).append(...)`."""
    node: ast.AST = occurrence
    parent = analysis.parent(node)
    while True:
        if isinstance(parent, (ast.BinOp, ast.UnaryOp)):
            node, parent = parent, analysis.parent(parent)
            continue
        call = analysis.parent(parent) if isinstance(parent, ast.Attribute) else None
        if (
            isinstance(parent, ast.Attribute)
            and parent.value is node
            and parent.attr in torch_api.GRAPH_KEEPING_METHODS
            and isinstance(call, ast.Call)
            and call.func is parent
        ):
            node, parent = call, analysis.parent(call)  # `val.cpu()`
            continue
        if isinstance(parent, ast.Call) and _returns_graph_of_argument(analysis, parent, node):
            node, parent = parent, analysis.parent(parent)  # `allreduce(val)` of the file
            continue
        break
    store: ast.expr | None = None
    if isinstance(parent, ast.AugAssign) and type(parent.op) is ast.Add:
        store = parent.target if parent.value is node else None
    elif isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1:
        target = parent.targets[0]
        if (
            isinstance(node, ast.BinOp)
            and type(node.op) is ast.Add
            and isinstance(target, (ast.Subscript, ast.Attribute))
            and any(_reads_accumulator(analysis, target, side) for side in (node.left, node.right))
        ):
            store = target  # `self.sum = self.sum + val * n`, `self.x[k] = self.x.get(k, 0) + v`
    elif (
        isinstance(parent, ast.Call)
        and parent.args
        and parent.args[0] is node
        and isinstance(parent.func, ast.Attribute)
        and parent.func.attr == "append"
    ):
        store = through_setdefault(parent.func.value)
    key = target_key(_container(store)) if store is not None else None
    return key[5:] if key is not None and key.startswith("self.") else None


def _returns_graph_of_argument(analysis: FileAnalysis, call: ast.Call, argument: ast.AST) -> bool:
    """Whether `call` calls a function of the file that returns (on every `return`) its
    parameter receiving the positional `argument` through arithmetic and graph-keeping tensor
    methods (`return tensor / world_size`): what it returns keeps the argument's graph."""
    if argument not in call.args or any(isinstance(arg, ast.Starred) for arg in call.args):
        return False
    function = analysis.function_named(analysis.value_of(call.func))
    if function is None or isinstance(function, ast.Lambda):
        return False
    parameters = [*function.args.posonlyargs, *function.args.args]
    position = call.args.index(argument)  # type: ignore[arg-type]
    if position >= len(parameters) or analysis.assigns(parameters[position].arg):
        return False
    returns = [node for node in ast.walk(function) if isinstance(node, ast.Return)]
    nested = any(
        isinstance(node, (*_FUNCTION_TYPES, ast.Lambda, ast.Yield, ast.YieldFrom))
        for body_node in function.body
        for node in ast.walk(body_node)
    )
    name = parameters[position].arg
    return (
        bool(returns)
        and not nested
        and all(ret.value is not None and _keeps_graph_of(ret.value, name) for ret in returns)
    )


def _keeps_graph_of(expression: ast.expr, name: str) -> bool:
    """Whether `expression` is `name` through arithmetic and graph-keeping tensor methods."""
    if isinstance(expression, ast.Name):
        return expression.id == name
    if isinstance(expression, ast.BinOp):
        return _keeps_graph_of(expression.left, name) or _keeps_graph_of(expression.right, name)
    if isinstance(expression, ast.UnaryOp):
        return _keeps_graph_of(expression.operand, name)
    if (
        isinstance(expression, ast.Call)
        and isinstance(expression.func, ast.Attribute)
        and expression.func.attr in torch_api.GRAPH_KEEPING_METHODS
    ):
        return _keeps_graph_of(expression.func.value, name)
    return False


# -- when it is safe ------------------------------------------------------------------------
def _judge(
    analysis: FileAnalysis, accumulation: _Accumulation, nested: bool = False
) -> RuleFinding | None:
    """The finding on `accumulation`, if any; `nested`: asked while judging another one,
    whose value may come from this (values attached on some paths only are then not asked)."""
    statement = accumulation.statement
    if not accumulation.stores_reference and not analysis.grad_enabled(statement):
        return None  # arithmetic under no_grad records no graph
    if accumulation.attached_keys:
        return _judge_record(analysis, accumulation)
    newest = _judge_newest_differentiated(analysis, accumulation)
    if newest is not None:
        return newest
    operand = analysis.value_of(accumulation.operand)
    # Attached on one path, a Python number on another: neither `.item()` nor `.detach()` is
    # proven to apply, so this can only be reported.
    on_some_path = operand.grad is Grad.UNKNOWN and operand.attached_on_some_path
    if not (operand.grad.attached or on_some_path):
        return None
    if on_some_path and (nested or _fixed_where_summed(analysis, accumulation)):
        return None
    initial = _initial_value(analysis, accumulation)
    if initial is None:
        return None  # not carried across iterations
    if not (operand.loss or operand.scalar or initial.kind is Kind.NUMBER) and (
        accumulation.stores_reference or not _across_training_steps(analysis, statement)
    ):
        # A tensor kept in a list or an object: GF002's concern. A running total that starts
        # as a Python number, or a sum kept across training steps, is a statistic whatever
        # the shape of what it adds.
        return None
    atoms = analysis.attached_operands(
        accumulation.operand, lambda part: part is accumulation.exclude
    )
    if atoms and all(_is_parameter(analysis, atom) for atom in atoms):
        return None  # attached only through its callers: fixed where they pass it in
    uses = _uses(analysis, accumulation)
    if Use.DIFFERENTIATED in uses:
        return None  # gradient accumulation on purpose
    if _sums_a_training_loss(analysis, accumulation, operand, uses):
        return None
    unsafe_because = _unsafe_reasons(operand, uses)
    to_number = (
        not accumulation.in_place
        and _holds_numbers(initial)
        and not uses & {Use.NEEDS_TENSOR, Use.UNKNOWN_CONSUMER, Use.RETURNED_UNSEEN}
        and all(analysis.value_of(atom).scalar for atom in atoms)
    )
    method = "item" if to_number else "detach"
    accumulator = f"`{analysis.code_of(accumulation.accumulator)}`"
    operand_code = analysis.code_of(accumulation.operand)
    if on_some_path:
        return RuleFinding(
            statement,
            f"{accumulator} accumulates `{operand_code}` across loop iterations, and "
            f"`{operand_code}` is graph-attached on some paths but may still be a Python "
            "number on others (a path that binds a number and never computes the loss): each "
            "iteration's autograd graph may stay alive. Take it out of the graph where it "
            f"becomes a tensor (`{operand_code}.item()` or `.detach()` there: both fail on a "
            "Python float).",
            Tier.REPORT,
        )
    verb = "Accumulate"
    if accumulation.owner_class is not None and accumulation.in_place:
        accumulator = (
            f"`{analysis.code_of(accumulation.accumulator)}` (`self.{accumulation.owner_attribute}`"
            f" of {accumulation.owner_class})"
        )
    elif accumulation.owner_class is not None:
        call = analysis.code_of(accumulation.statement, limit=60)
        receiver = analysis.code_of(accumulation.accumulator)
        accumulator = f"`{receiver}.{accumulation.owner_attribute}` (through `{call}`)"
        verb = "Pass"
    across = "loop iterations" if analysis.enclosing_loops(statement) else "calls"
    why = operand.evidence or "it is computed from graph-attached values"
    attached = "is graph-attached" if operand.grad is Grad.ATTACHED else "may be graph-attached"
    message = (
        f"{accumulator} accumulates `{operand_code}` across {across}, and "
        f"`{operand_code}` {attached} ({why}): every iteration's autograd graph stays "
        f"alive. {verb} `{analysis.code_of(atoms[0]) if atoms else operand_code}.{method}()`"
        " instead."
    )
    evaluation = _evaluation_loop(analysis, statement, atoms)
    if evaluation is not None:
        # The forward's own graph is the larger waste there, and the usual fix is no_grad.
        message += (
            f" The loop at line {evaluation.lineno} takes no training step (no backward or "  # type: ignore[attr-defined]
            "optimizer step runs in it): running it under `with torch.no_grad():` "
            "also stops each forward from building a graph."
        )
    if not atoms:
        return RuleFinding(
            statement, message + " (gradfix cannot rewrite this expression.)", Tier.REPORT
        )
    if unsafe_because:
        message += f" Unsafe: {unsafe_because}."
    replacements: dict[ast.AST, Rewrite] = {atom: calling(method) for atom in atoms}
    tier = Tier.UNSAFE if unsafe_because else Tier.SAFE
    return RuleFinding(statement, message, tier, replacements)


def _evaluation_loop(
    analysis: FileAnalysis, statement: ast.AST, atoms: list[ast.expr]
) -> Loop | None:
    """The loop around `statement`, if it is an evaluation pass: grad is on, it runs over
    batches (the loader's name is the hint) and takes no training step, and the accumulated
    value is computed in its body (not handed in, as to a logging helper's loop over a dict of
    losses). It only adds advice to a finding that the bindings already support."""
    loops = analysis.enclosing_loops(statement)
    if not loops or not atoms or not analysis.grad_enabled(statement):
        return None
    loop = loops[0]
    if analysis.loop_reaches_step(loop) or not iterates_batches(analysis, loop):
        return None
    bindings = analysis.bindings(analysis.scope_of(statement))
    for atom in atoms:
        if not isinstance(atom, ast.Name):
            continue  # computed in place: `criterion(model(x), y).item()`
        reaching = bindings.reaching(atom.id, statement) or frozenset()
        if not reaching or any(
            binding.kind is not BindingKind.ASSIGN or not analysis.contains(loop, binding.statement)
            for binding in reaching
        ):
            return None
    return loop


def _judge_newest_differentiated(
    analysis: FileAnalysis, accumulation: _Accumulation
) -> RuleFinding | None:
    """A history list whose newest entry is what the loop backpropagates (`losses.append(
    total)` then `losses[-1].backward()` in the same loop): the backward proves each entry
    attached, and every older entry keeps its graph. `.detach()` at the append would stop
    that backward, so this is reported with the restructuring that fixes it."""
    if not accumulation.stores_reference or accumulation.owner_class is not None:
        return None
    loops = analysis.enclosing_loops(accumulation.statement)
    if not loops or analysis.value_of(accumulation.operand).grad is Grad.FREE:
        return None
    if not analysis.loop_reaches_step(loops[0]):
        return None  # no backward in the loop, so none on its newest entry: no flow to follow
    flow = follow_target(analysis, _container(accumulation.accumulator))
    calls = flow.backward_calls
    if not calls or Use.DIFFERENTIATED not in flow.uses:
        return None
    newest = flow.newest_element_calls
    if any(call not in newest or not analysis.contains(loops[0], call) for call in calls):
        return None  # the container itself is differentiated: a loss built from its entries
    if _initial_value(analysis, accumulation) is None:
        return None  # a fresh list each iteration keeps nothing
    container = analysis.code_of(_container(accumulation.accumulator))
    operand = analysis.code_of(accumulation.operand, limit=60)
    call = calls[0]
    keeps = any(keyword.arg in ("retain_graph", "create_graph") for keyword in call.keywords)
    retained = " (every saved tensor too, as the graph is retained)" if keeps else ""
    position = analysis.positions.get(call)
    line = position.start.line if position is not None else call.lineno
    message = (
        f"`{container}` keeps every iteration's `{operand}`, and only its newest entry is "
        f"backpropagated (`{analysis.code_of(call, limit=60)}`, line {line}): the older "
        f"entries keep their autograd graphs alive{retained}, so memory grows with every "
        "iteration. `.detach()` at the append would stop that backward: restructure the loop, "
        "binding the value to a name, and move the backward (and the step) before the append, "
        "then append its `.detach()`."
    )
    return RuleFinding(accumulation.statement, message, Tier.REPORT)


def _judge_record(analysis: FileAnalysis, accumulation: _Accumulation) -> RuleFinding | None:
    """A dict appended whole whose entries hold losses (a step's output dict kept for the
    epoch's end): the list keeps a copy whose attached entries are detached."""
    record = accumulation.operand
    kept = [analysis.value_of(record).entry(key) for key in accumulation.attached_keys]
    losses = [value for value in kept if value is not None and (value.loss or value.scalar)]
    if not isinstance(record, ast.Name) or len(losses) != len(kept):
        return None  # tensors kept in a record are GF002's concern
    if _initial_value(analysis, accumulation) is None:
        return None
    operand = losses[0]
    for value in losses[1:]:
        operand = operand.join(value)
    uses = _uses(analysis, accumulation)
    if Use.DIFFERENTIATED in uses or _sums_a_training_loss(analysis, accumulation, operand, uses):
        return None
    region = region_binding_afresh(analysis, record, accumulation.statement)
    if region is None:
        return None  # the same dict appended again and again: a copy would change that
    reasons = [reason for reason in (_unsafe_reasons(operand, uses),) if reason]
    if used_after(analysis, region, record, accumulation.statement):
        reasons.append(
            f"`{record.id}` is used after the append and the list now keeps a copy of it, "
            "check nothing changes it"
        )
    if DICT_SUBCLASS_TEXT.search(analysis.source):
        reasons.append(f"the copy is a plain dict, check `{record.id}` is one")
    keys = ", ".join(f"`{json.dumps(key)}`" for key in accumulation.attached_keys)
    across = "loop iterations" if analysis.enclosing_loops(accumulation.statement) else "calls"
    accumulator = analysis.code_of(accumulation.accumulator)
    message = (
        f"`{accumulator}` keeps `{record.id}` across {across}, whose {keys} "
        f"{'entry is' if len(kept) == 1 else 'entries are'} graph-attached "
        f"({operand.evidence or 'computed from graph-attached values'}): every iteration's "
        f"autograd graph stays alive. Append a copy with {keys} detached instead."
    )
    if reasons:
        message += f" Unsafe: {'; '.join(reasons)}."
    rewrite = record_copy(accumulation.attached_keys)
    return RuleFinding(
        accumulation.statement,
        message,
        Tier.UNSAFE if reasons else Tier.SAFE,
        {record: rewrite},
    )


def _fixed_where_summed(analysis: FileAnalysis, accumulation: _Accumulation) -> bool:
    """Whether what makes the operand of `accumulation` attached on some path is judged
    elsewhere: a name it is computed from (`epoch_loss = running_loss / n` included) is a
    total of this scope that another finding fixes (after that fix it is a number on every
    path), or a parameter, whose callers are judged where they pass it."""
    scope = analysis.scope_of(accumulation.statement)
    operand_names = _names_in(accumulation.operand)
    sources = set(operand_names)
    for node in analysis.index.of_types(ast.Assign):
        if analysis.scope_of(node) is scope and any(
            target_key(target) in operand_names
            for target in node.targets  # type: ignore[attr-defined]
        ):
            sources |= _names_in(node.value)  # type: ignore[attr-defined]
    if isinstance(scope, _FUNCTION_TYPES):
        arguments = scope.args
        parameters = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        if any(parameter.arg in sources for parameter in parameters):
            return True
    return any(
        other.statement is not accumulation.statement
        and target_key(_container(other.accumulator)) in sources
        and analysis.scope_of(other.statement) is scope
        and _judge(analysis, other, nested=True) is not None
        for other in _accumulations(analysis)
    )


def _names_in(expression: ast.AST) -> set[str]:
    return {node.id for node in ast.walk(expression) if isinstance(node, ast.Name)}


def _across_training_steps(analysis: FileAnalysis, statement: ast.stmt) -> bool:
    """Whether a loop around `statement` runs a training step, or is an epoch over batches."""
    return any(
        analysis.loop_reaches_step(loop) or iterates_batches(analysis, loop)
        for loop in analysis.enclosing_loops(statement)
    )


def _sums_a_training_loss(
    analysis: FileAnalysis, accumulation: _Accumulation, operand: Value, uses: set[Use]
) -> bool:
    """A total of loss terms that is itself a loss: summed in a forward (a model's or a
    criterion's), or summed by a loop with no training step in it and handed on to code that
    may train on it (returned, passed on)."""
    statement = accumulation.statement
    local = not (target_key(_container(accumulation.accumulator)) or "").startswith("self.")
    if local and in_forward(analysis, statement):
        return True
    loops = analysis.enclosing_loops(statement)
    if _across_training_steps(analysis, statement):
        return False  # an epoch: each step's graph should be gone by the next
    handed_on = bool(uses & {Use.RETURNED_UNSEEN, Use.UNKNOWN_CONSUMER})
    # Outside an epoch, a loss attached by convention only (inputs gradfix cannot trace, as
    # in a test comparing losses of fixed tensors) is no evidence of a leak.
    return bool(loops) and (handed_on or operand.grad is not Grad.ATTACHED)


def _initial_value(analysis: FileAnalysis, accumulation: _Accumulation) -> Value | None:
    """What the accumulator held before it started accumulating, or None when it does not
    outlive the iteration (it is re-initialised in the loop before being added to)."""
    if accumulation.owner_class is not None:
        if _fresh_each_iteration(analysis, accumulation):
            return None
        return analysis.class_attribute_inits(
            accumulation.owner_class, accumulation.owner_attribute or ""
        ) or Value(Grad.FREE, Kind.UNKNOWN)
    key = target_key(_container(accumulation.accumulator))
    if key is None:
        return None
    scope = analysis.scope_of(accumulation.statement)
    info = analysis.class_of(scope)
    # The value it had before the outermost loop it accumulates across: loops that
    # re-initialise it before the accumulation end the search.
    initial: Value | None = None
    for loop in analysis.enclosing_loops(accumulation.statement):
        entry = analysis.loop_entry(loop)
        if key not in entry or rebound_before(analysis, loop, key, accumulation.statement):
            break
        initial = entry[key]
    if initial is not None:
        return initial
    if (
        key.startswith("self.")
        and info is not None
        and isinstance(scope, _FUNCTION_TYPES)
        and scope.name != "__init__"
    ):
        return analysis.class_attribute_inits(info.name, key[5:])  # object state outlives calls
    return None


def _fresh_each_iteration(analysis: FileAnalysis, accumulation: _Accumulation) -> bool:
    """Whether a meter or logger object is made anew in its loop before the call
    (`log = StepLog()` ... `log.add(loss)`): what it keeps dies with the iteration."""
    key = target_key(_container(accumulation.accumulator))
    loops = analysis.enclosing_loops(accumulation.statement)
    if key is None or key.startswith("self.") or not loops:
        return False
    return rebound_before(analysis, loops[0], key, accumulation.statement)


def _uses(analysis: FileAnalysis, accumulation: _Accumulation) -> set[Use]:
    if accumulation.owner_class is not None:
        owner, attribute = accumulation.owner_class, accumulation.owner_attribute or ""
        uses = follow_self_attribute(analysis, owner, attribute).uses
        if accumulation.owner_parameter is not None:
            # What the method itself does with what it is given (`value.item()` there needs
            # a tensor; `value.backward()` differentiates it).
            uses |= follow_target(analysis, accumulation.owner_parameter).uses
        return uses
    return follow_target(analysis, _container(accumulation.accumulator)).uses


def _unsafe_reasons(operand: Value, uses: set[Use]) -> str:
    reasons = []
    if operand.grad is Grad.LIKELY:
        reasons.append(
            "the value is graph-attached only by convention (a loss by its name, or over "
            "inputs gradfix cannot trace), check it comes from tensors that require grad"
        )
    if Use.RETURNED_UNSEEN in uses:
        reasons.append(
            "the total is returned to callers outside this file, "
            "check none of them calls backward() on it"
        )
    if Use.UNKNOWN_CONSUMER in uses:
        reasons.append(
            "the total is passed to code outside this file, check it does not call backward() on it"
        )
    return "; ".join(reasons)


def _holds_numbers(initial: Value) -> bool:
    if initial.kind is Kind.NUMBER:
        return True
    if initial.kind in (Kind.LIST, Kind.DICT):
        return initial.element in (None, Grad.FREE)
    return False


# -- how it rewrites ------------------------------------------------------------------------
def _is_parameter(analysis: FileAnalysis, atom: ast.expr) -> bool:
    """Whether `atom` is a parameter of its function, or one passed through graph-keeping
    tensor methods and helpers of the file (`average(value.cpu())`)."""
    while isinstance(atom, ast.Call):
        func = atom.func
        if isinstance(func, ast.Attribute) and func.attr in torch_api.GRAPH_KEEPING_METHODS:
            atom = func.value
            continue
        passed = [arg for arg in atom.args if _returns_graph_of_argument(analysis, atom, arg)]
        if len(passed) != 1 or len(atom.args) != 1 or atom.keywords:
            return False
        atom = passed[0]
    scope = analysis.scope_of(atom)
    if not isinstance(atom, ast.Name) or not isinstance(scope, _FUNCTION_TYPES):
        return False
    params = [*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs]
    return any(param.arg == atom.id for param in params)


def _container(target: ast.expr) -> ast.expr:
    """`acc` for `acc[key]` and `acc["a"]["b"]`."""
    while isinstance(target, ast.Subscript):
        target = target.value
    return target


# -- for `gradfix trace` --------------------------------------------------------------------
def fix_at(
    analysis: FileAnalysis, statement: ast.stmt, holders: frozenset[str]
) -> dict[ast.AST, Rewrite]:
    """The fix of the accumulation `statement`, which `gradfix trace` saw keep a graph at run
    time, the tensor held by the names or attributes `holders` (the accumulator, or the value
    added): what `check` writes when it proves the finding, else the same edit on the run's
    evidence (`.item()` into a total that starts as a Python number, `.detach()` otherwise).
    {} when `statement` is no accumulation of one of `holders` this rule knows."""
    for accumulation in _accumulations(analysis):
        if accumulation.statement is not statement:
            continue
        judged = _judge(analysis, accumulation)
        if judged is not None and judged.replacements:
            return judged.replacements
        codes = {analysis.code_of(accumulation.operand), analysis.code_of(accumulation.accumulator)}
        if not codes & holders or accumulation.attached_keys:
            continue  # a dict kept whole takes no `.detach()`: only the judged copy fixes it
        excluded = accumulation.exclude
        atoms = analysis.attached_operands(
            accumulation.operand, lambda part, excluded=excluded: part is excluded
        ) or [accumulation.operand]
        initial = _initial_value(analysis, accumulation)
        to_number = initial is not None and initial.kind is Kind.NUMBER
        method = "item" if to_number and not accumulation.in_place else "detach"
        return {atom: calling(method) for atom in atoms}
    return {}
