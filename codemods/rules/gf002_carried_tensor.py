"""GF002: a graph-attached tensor stored across training steps.

Detects two shapes, for tensors that are proven graph-attached and are not losses (summed or
logged losses are GF001's):
- *carried*: a name or `self` attribute assigned in a loop (or, for `self`, in a method) and
  read again in the next iteration before it is reassigned (by reaching bindings):
  `hidden = model(x, hidden)`, `out, (h, c) = lstm(x, (h, c))`, `prev = out` ... `out + prev`,
  EMA centres (`center = m * center + (1 - m) * feat.mean(0)`), autoregressive feedback;
- *kept*: appended to, or stored by a varying key into, a container that outlives the loop:
  `outputs.append(logits)`, `bank[idx] = feat`; a step's record (a dict appended whole, in a
  training loop or a method run once per step) whose attached entries are not all losses;
- *retained*: a value made once before a loop whose every iteration backpropagates through it
  with `retain_graph=True` and steps the optimizer of the module that made it (a fake reused
  over generator steps): reported, recompute it inside the loop.
- *kept by a module's forward* (`gf002_forward_state.py`): a running metric whose forward
  accumulates the graph-attached values it is given, called once per training step: detached
  at the call that feeds it.

The training-step boundary decides (`analysis/training.py`). A carried value is a finding only
when a backward or an optimizer step runs between the iterations it crosses: reachable from the
loop body, directly or through the file's own functions and methods the body calls (or, for a
`self` attribute carried between calls, a method that runs a backward, or whose class is called
in a loop that does). A loop inside a `forward` / `__call__`, or any loop without such a step
(blocks, pyramid levels, decoding steps, message passing, a helper whose result its caller
trains on) carries graphs on purpose and is never a finding. A kept container is a finding only
in a training loop or an evaluation loop over batches (a loader, `tqdm(...)`, any `for` loop
of a function or script that also trains, or a loop of an evaluation method over the data it
is given: `def predict(self, graphs): ... for g in graphs:`, a method named for inference or
evaluation or calling `.eval()`, reaching no training step), never in a forward, and not when
it is differentiated after the loop. (Kept losses and scalars are GF001's, so one store is
never reported by both rules.)

Safe when the carried value either reaches a backward inside the loop (the next backward then
walks a graph whose buffers are freed: "Trying to backward through the graph a second time"),
or feeds back into itself so that every iteration's graph stays chained; and when a kept value
is never differentiated after the loop. Left alone: state re-initialised each iteration,
values backpropagated after the loop on purpose (full BPTT, `torch.stack(outputs)` into one
loss), backward calls with `create_graph=True` (meta-learning) or with `retain_graph=True` and
no optimizer step between the iterations (per-step losses of one sequence), values
already detached (`.detach()`, `.detach_()`, `.data`, `Variable(h.data)`, a repackaging
helper, `tuple(e.data for e in h)`) or made under `no_grad`, tensors whose `requires_grad` the
code sets, parameters, and values of unknown origin.

Rewrites with `.detach()` where the value is carried, always on the finding's own statement:
on the stored operand when nothing in the same iteration reads the stored value afterwards
(`prev = out.detach()`, the graph-attached operand of an EMA update), otherwise on the read
that takes it into the next iteration (`model(x, hidden.detach())`), element-wise for `(h, c)`
tuples (a NamedTuple keeps its class: `State(*(s.detach() for s in state))`), through the
file's own `repackage_hidden`-style helper when it has one, and guarded
(`None if h is None else h.detach()`) when the state starts as `None`. A value stored
only under a condition and read after it in the same step (kept once: `if self.x is None:
self.x = losses`) is detached at the store, unsafe when that step differentiates through
what it reads (detaching changes that step's gradient). Never on what
`backward()` or `autograd.grad` differentiates; a fix that would touch several statements is
reported instead.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from codemods.analysis import FileAnalysis, Grad, Kind, Value, torch_api
from codemods.analysis.detaching import always_rebinds, is_none_test
from codemods.analysis.flows import Use, follow_expression, follow_target
from codemods.analysis.index import (
    BRANCH_TYPES,
    FUNCTION_TYPES,
    LOOP_TYPES,
    ClassInfo,
    Loop,
    ScopeNode,
)
from codemods.analysis.interpreter import target_key
from codemods.analysis.provenance import OriginKind, Provenance, evaluated_in, walk
from codemods.analysis.training import in_forward, is_evaluation_function, iterates_batches
from codemods.analysis.values import UNKNOWN
from codemods.findings import Tier
from codemods.lazy_libcst import cst
from codemods.rules.base import Rewrite, Rule, RuleFinding
from codemods.rules.edits import calling, method_call
from codemods.rules.gf002_forward_state import forward_state_findings
from codemods.rules.records import (
    DICT_SUBCLASS_TEXT,
    attached_keys,
    record_copy,
    region_binding_afresh,
    used_after,
)

_STORE_TEXT = re.compile(r"\bfor\b|\bwhile\b|self\.\w+\s*=")
# Expressions a `.detach()` follows without parentheses (as `edits.method_call` decides).
_ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)
# Recurrent modules whose state output (position 1) is an `(h, c)` tuple or one tensor.
_TUPLE_STATE_MODULES = frozenset({"torch.nn.LSTM"})
_TENSOR_STATE_MODULES = frozenset({"torch.nn.GRU", "torch.nn.RNN"})
_GROWING_METHODS = frozenset({"append", "insert"})
_FOR_TYPES = (ast.For, ast.AsyncFor)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_LOOP_OR_BRANCH = (*BRANCH_TYPES, *LOOP_TYPES)


class CarriedTensor(Rule):
    code = "GF002"
    name = "carried-graph-tensor"
    summary = "A graph-attached tensor is stored across training steps"
    explanation = (
        "A tensor that is part of an autograd graph keeps that whole graph alive for as long "
        "as it is stored. Carried into the next training step (RNN hidden state across "
        "batches, a previous output, an EMA centre, a memory bank) and read by the next "
        "forward, it makes the next backward walk into the previous step's graph, whose "
        "buffers the previous backward freed: 'Trying to backward through the graph a second "
        "time'. Only kept (outputs gathered for metrics), it keeps every batch's activations "
        "alive and memory grows through the epoch.\n\n"
        "When it is a finding: only when a backward or an optimizer step runs between the "
        "iterations the value crosses, in the loop itself or in the file's own functions and "
        "methods the loop calls (a training loop). A loop inside `forward` / `__call__`, or "
        "any loop with no backward or step reachable from its body (over blocks, pyramid "
        "levels, decoding or message-passing steps, a helper returning its result to the "
        "caller that trains on it), is one forward computation: it carries graphs on purpose "
        "and gradfix leaves it alone. A `self` attribute stored in such a loop of a method "
        "the file calls from code that trains (an RL `rollout()` keeping the policy state "
        "between env steps, called by `train()` before its backward) outlives the call and "
        "crosses the training step. A kept list is a finding only when a training loop, or "
        "an evaluation loop over batches (or over the data an evaluation method such as "
        "`predict(self, graphs)` is given), fills it and nothing differentiates it "
        "afterwards (returned to callers outside the file, the fix is unsafe); a list "
        "emptied each step (`temp.clear()`, `temp = []`) is one only when the emptying "
        "comes after a step's reads and before its append (`h0 = temp[0]; temp.clear(); ...; "
        "temp.append(h)`), so the appended value reaches the next step.\n\n"
        "gradfix adds `.detach()` where the value is carried: on the stored value when nothing "
        "else reads it in the same iteration, otherwise on the read that starts the next "
        "iteration, element-wise for `(h, c)` tuples (a NamedTuple state keeps its class: "
        "`State(*(s.detach() for s in state))`), through the file's own "
        "`repackage_hidden`-style helper, and as `None if h is None else h.detach()` when "
        "the state starts as `None`. When `backward(retain_graph=True)` kept the carried graph "
        "alive across an optimizer step in every iteration (a bandage that then fails with "
        "'modified by an inplace operation'), the same detach is the fix and the message says "
        "`retain_graph=True` is needless after it; safe only when the file shows the step "
        "updates the recurrent module whose state is carried, unsafe otherwise. A value kept "
        "once (`if self.initial_losses is None: "
        "self.initial_losses = losses`) is detached where it is stored; when the storing step "
        "also differentiates through it (`losses / self.initial_losses`), that fix changes the "
        "step's gradient and is unsafe.\n\n"
        "A state a module keeps between forward calls (`out, self.h = self.rnn(x, self.h)`) "
        "while the training loop draws its batches at random (`DataLoader(..., "
        "shuffle=True)`, `torch.randperm`) links unrelated sequences: it is reported with "
        "advice to restructure (re-initialise the state per batch), never detached. So is a "
        "state kept by a layer whose forward runs several times in one step (a spiking "
        "neuron's membrane inside an `nn.Sequential` called for each time step), unless the "
        "file calls a method of the class that resets it. A state carried by an inner time "
        "loop into the next chunk of the training loop around it is reported (the detach "
        "belongs at the top of each chunk), and so is a state object whose `detach()` method "
        "only rebinds local names.\n\n"
        "A module whose forward accumulates what it is given (a running metric: `self.total "
        "= self.total + err`, `self.preds.append(preds)`), called on the model's live output "
        "once per training step (in the training loop, or in a `training_step` a trainer's "
        "loop calls once per batch, through `nn.ModuleDict` / `nn.ModuleList` collections), "
        "keeps every step's graph until it is reset: when no backward reaches what it keeps, "
        "gradfix passes the graph-attached arguments detached at that call (`metric(out."
        "detach(), y)`), safe when the modules the call runs have no weights of their own and "
        "nothing differentiates the call's result; a module the step resets next to the call "
        "is left alone.\n\n"
        "A graph made once before a loop whose every iteration backpropagates through it with "
        "`retain_graph=True` and steps the optimizer of the module that made it (a fake "
        "reused over several generator steps) is reported with advice to recompute it inside "
        "the loop. A step's record appended whole (`self.step_outputs.append(log)`) whose "
        "graph-attached entries are not all losses is appended as a copy with them "
        "detached.\n\n"
        "Left alone: state re-initialised every iteration, values backpropagated after the loop "
        "on purpose (full BPTT, `torch.stack(outputs)` into one loss), `create_graph=True` / "
        "meta-learning loops, `backward(retain_graph=True)` with no optimizer step between "
        "the iterations (per-step losses of one sequence), values already detached "
        "(`.detach()`, `.data`, "
        "`Variable(h.data)`, `detach_()`) or computed under `no_grad`, parameters, tensors "
        "whose `requires_grad` the code sets, and values whose origin the file does not show."
    )
    example_before = (
        "hidden = torch.zeros(1, batch, 32)\n"
        "for x, y in batches:\n"
        "    out, hidden = gru(x, hidden)\n"
        "    loss = criterion(head(out), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    example_after = example_before.replace("gru(x, hidden)", "gru(x, hidden.detach())")

    def may_apply(self, text: str) -> bool:
        return bool(_STORE_TEXT.search(text))

    def check(self, analysis: FileAnalysis) -> Iterator[RuleFinding]:
        reported: set[ast.AST] = set()
        # State a module's forward keeps: the finding is at the call that feeds it.
        for stores, finding in forward_state_findings(analysis):
            reported.update(stores)
            if finding is not None and finding.node not in reported:
                reported.add(finding.node)
                yield finding
        carries_by_store: dict[ast.Assign, list[_Carry]] = {}
        for carry in _carries(analysis):
            if carry.store in reported:
                continue
            carries_by_store.setdefault(carry.store, []).append(carry)
        for store, carries in carries_by_store.items():
            verdicts = [v for v in (_judge_carry(analysis, c) for c in carries) if v is not None]
            if verdicts:
                reported.add(store)
                yield _carry_finding(analysis, store, verdicts)
        for store in _kept_stores(analysis):
            finding = _judge_kept(analysis, store)
            if finding is not None and finding.node not in reported:
                reported.add(finding.node)
                yield finding
        for finding in _kept_records(analysis):
            if finding.node not in reported:
                reported.add(finding.node)
                yield finding
        yield from _retained_across_steps(analysis)


# -- what it detects: carried values --------------------------------------------------------
@dataclass
class _Carry:
    key: str  # `hidden` or `self.hidden`
    store: ast.Assign  # the assignment that stores the attached value
    target: ast.expr  # the stored-to expression inside that assignment
    loop: Loop | None  # None: a `self` attribute carried across calls of a method
    carry_reads: list[ast.expr]  # reads that see the previous iteration's value
    later_reads: list[ast.expr]  # reads of this iteration's value after the store


def _carries(analysis: FileAnalysis) -> Iterator[_Carry]:
    facts: dict[tuple[ScopeNode, str], _KeyFacts] = {}
    # Asked once per innermost loop, when first needed: the training loop around its body,
    # and whether its body runs between training steps. Both depend only on a statement's
    # enclosing loops and scope, which every statement of one loop's body shares:
    # `enclosing_loops` is that loop and the loops around it, and the walk up to the loop
    # crosses no function.
    training_loops: dict[Loop, Loop | None] = {}
    between_steps: dict[Loop, bool] = {}
    for node in analysis.index.of_types(ast.Assign):
        assert isinstance(node, ast.Assign)
        loops = analysis.enclosing_loops(node)
        if loops:
            if loops[0] not in training_loops:
                training_loops[loops[0]] = _training_loop_of(analysis, node)
            training_loop = training_loops[loops[0]]
        elif _one_name(node) or not _runs_again(analysis.scope_of(node)):
            continue  # outside loops, only a `self` attribute that a later call reads is carried
        else:
            training_loop = None
        for assign_target in node.targets:
            for target in _stored_names(assign_target):
                key = target_key(target)
                if key is None:
                    continue
                if training_loop is None and not key.startswith("self."):
                    continue  # neither a training loop nor calls of a method to carry it across
                if training_loop is None and loops:
                    # In a loop without a training step (a rollout's env steps) a `self`
                    # attribute crosses one between calls of a method the file runs once per
                    # training step; otherwise `_judge_carry` would leave it.
                    if loops[0] not in between_steps:
                        between_steps[loops[0]] = _called_between_steps(analysis, node)
                    if not between_steps[loops[0]]:
                        continue
                carry = _carry_of(analysis, node, target, key, loops, training_loop, facts)
                if carry is not None:
                    yield carry


@dataclass
class _KeyFacts:
    """What one scope does with one name, computed once however often it is stored: its
    reads, the statements that store it, and which reads each store reaches from a previous
    loop iteration (by reaching bindings)."""

    reads: list[ast.expr]
    stores: list[ast.AST]
    carried_reads: dict[ast.AST, list[ast.expr]]

    @classmethod
    def of(cls, analysis: FileAnalysis, scope: ScopeNode, key: str) -> _KeyFacts:
        reads = _reads(analysis, key, scope)
        carried: dict[ast.AST, list[ast.expr]] = {}
        bindings = analysis.bindings(scope)
        for read in reads:
            statement = analysis.statement_of(read)
            if statement is None:
                continue
            for binding in bindings.reaching(key, statement) or ():
                if bindings.carried(binding, statement):
                    carried.setdefault(binding.statement, []).append(read)
        return cls(reads, _stores(analysis, key, scope), carried)

    @classmethod
    def remembered(
        cls,
        analysis: FileAnalysis,
        known: dict[tuple[ScopeNode, str], _KeyFacts],
        scope: ScopeNode,
        key: str,
    ) -> _KeyFacts:
        """`of`, once per scope and name, however often it is stored."""
        facts = known.get((scope, key))
        if facts is None:
            facts = known[(scope, key)] = cls.of(analysis, scope, key)
        return facts


def _bound_names(target: ast.expr) -> set[str]:
    return {key for name in _stored_names(target) if (key := target_key(name)) is not None}


def _stored_names(target: ast.expr) -> Iterator[ast.expr]:
    """`x`, `self.x`, and the names inside `out, (h, c)` unpacking (`*rest` included)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _stored_names(element)
    elif isinstance(target, ast.Starred):
        yield from _stored_names(target.value)
    elif isinstance(target, (ast.Name, ast.Attribute)):
        yield target


def _carry_of(
    analysis: FileAnalysis,
    store: ast.Assign,
    target: ast.expr,
    key: str,
    loops: list[Loop],
    training_loop: Loop | None,
    known: dict[tuple[ScopeNode, str], _KeyFacts],
) -> _Carry | None:
    """`loops`: those around `store`, innermost first; `training_loop`: the innermost of them
    a training step separates the iterations of; `known`: the facts of each scope and name
    computed so far. The tests that need no facts come first (most stores are a
    constructor's `self.x = ...`)."""
    if loops and isinstance(loops[0], _FOR_TYPES) and key in _bound_names(loops[0].target):
        return None  # the loop rebinds it at the top of every iteration
    scope = analysis.scope_of(store)
    if training_loop is not None:
        loop: Loop | None = training_loop
        if training_loop is not loops[0] and not _survives_iteration(
            analysis, store, key, training_loop
        ):
            return None  # carried by an inner loop only, re-initialised each training step
        facts = _KeyFacts.remembered(analysis, known, scope, key)
        # Reaching bindings: the store reaches the read around the loop's back edge.
        carry_reads = [
            r
            for r in facts.carried_reads.get(store, [])
            if analysis.contains(training_loop, r)
            and _carries_on(analysis, r)
            and not _rebound_unless_none(analysis, training_loop, key, r)
        ]
        if not carry_reads:
            return None
        reads = [read for read in facts.reads if analysis.contains(training_loop, read)]
        stores = [s for s in facts.stores if analysis.contains(training_loop, s)]
    elif key.startswith("self.") and _runs_again(scope):
        loop = None
        facts = _KeyFacts.remembered(analysis, known, scope, key)
        reads, stores = facts.reads, facts.stores
        if loops:
            # Stored in a loop without a training step, carried across calls of the method:
            # what the first iteration reads before the store is the previous call's value,
            # unless a store that always runs re-initialises it first.
            first_store_end = min(
                (analysis.index.end[s] for s in stores if not _conditional(analysis, s, scope)),
                default=analysis.index.start[store],
            )
            carry_reads = [
                r
                for r in reads
                if analysis.index.start[r] < min(first_store_end, analysis.index.start[store])
                and _carries_on(analysis, r)
            ]
            return _carry_with(analysis, store, target, key, None, reads, stores, carry_reads)
        # A read sees the previous call's value where some path from the method's entry
        # reaches it without a store (a lazy `if self.h is None: self.h = ...` may not run).
        bindings = analysis.bindings(scope)
        carry_reads = [
            r
            for r in reads
            if bindings.entry_reaches(key, analysis.statement_of(r)) is not False
            and _carries_on(analysis, r)
        ]
    else:
        return None
    return _carry_with(analysis, store, target, key, loop, reads, stores, carry_reads)


def _one_name(assignment: ast.Assign) -> bool:
    """`x = ...`: a local alone (the most common statement, tested before any lookup)."""
    return len(assignment.targets) == 1 and type(assignment.targets[0]) is ast.Name


def _runs_again(scope: ScopeNode) -> bool:
    """Whether a later call of `scope` may read a `self` attribute it stored: a function or
    method, but not a constructor (it runs once per object)."""
    return isinstance(scope, FUNCTION_TYPES) and scope.name != "__init__"


def _training_loop_of(analysis: FileAnalysis, store: ast.Assign) -> Loop | None:
    """The innermost loop around `store` whose iterations a training step separates: the
    chunk loop around a time-step loop (`for chunk ...: for x in chunk: h = cell(x, h)`)."""
    for loop in analysis.enclosing_loops(store):
        if _loop_crosses_training_step(analysis, store, loop):
            return loop
    return None


def _survives_iteration(analysis: FileAnalysis, store: ast.Assign, key: str, loop: Loop) -> bool:
    """Whether what `store`, inside an inner loop of `loop`, binds reaches the next iteration
    of `loop`: it reaches the statement of `loop`'s body that holds the store (a binding made
    inside a statement reaches that statement's start only around `loop`'s back edge)."""
    holder: ast.AST = store
    while analysis.parent(holder) is not loop:
        holder = analysis.parent(holder)  # type: ignore[assignment]
    reaching = analysis.bindings(analysis.scope_of(store)).reaching(key, holder) or ()
    return any(binding.statement is store for binding in reaching)


def _carry_with(
    analysis: FileAnalysis,
    store: ast.Assign,
    target: ast.expr,
    key: str,
    loop: Loop | None,
    reads: list[ast.expr],
    stores: list[ast.AST],
    carry_reads: list[ast.expr],
) -> _Carry | None:
    if not carry_reads or any(_detaches_in_place(analysis, s) for s in stores):
        return None
    store_end = analysis.index.end[store]
    # A read under `no_grad` sees the same numbers detached or not: it keeps no graph.
    later_reads = [
        r
        for r in reads
        if analysis.index.start[r] >= store_end
        and not analysis.exclusive_branches(store, r)
        and analysis.grad_enabled(r)
    ]
    return _Carry(key, store, target, loop, carry_reads, later_reads)


def _called_between_steps(analysis: FileAnalysis, store: ast.Assign) -> bool:
    """Whether `store` runs in a method (outside any forward) that the file calls once per
    training step, or that runs one itself: a `self` attribute it stores outlives the call."""
    scope = analysis.scope_of(store)
    return (
        isinstance(scope, FUNCTION_TYPES)
        and analysis.class_of(scope) is not None
        and not in_forward(analysis, store)
        and (
            analysis.training.function_reaches_step(scope)
            or analysis.training.called_by_training_step(scope)
        )
    )


def _occurrences(
    analysis: FileAnalysis, key: str, scope: ScopeNode, class_wide: bool = False
) -> list[ast.expr]:
    """Where `key` (`x`, or `self.x`) occurs in `scope`; for `self.x` with `class_wide`, in
    every method of the class."""
    if not key.startswith("self."):
        return list(analysis.occurrences(key, scope))
    info = analysis.class_of(scope)
    if info is None:
        return []
    found = analysis.self_attribute_occurrences(info.name, key[5:])
    return list(found) if class_wide else [o for o in found if analysis.scope_of(o) is scope]


def _reads(analysis: FileAnalysis, key: str, scope: ScopeNode) -> list[ast.expr]:
    return [
        r
        for r in _occurrences(analysis, key, scope)
        if analysis.is_load(r) and not _is_method_receiver(analysis, r)
    ]


def _stores(analysis: FileAnalysis, key: str, scope: ScopeNode) -> list[ast.AST]:
    """Statements in `scope` that rebind `key`, or detach it in place."""
    stores: list[ast.AST] = []
    for occurrence in _occurrences(analysis, key, scope):
        statement = analysis.statement_of(occurrence)
        if statement is None:
            continue
        if not analysis.is_load(occurrence) or _detaches_in_place(analysis, statement):
            stores.append(statement)
    return stores


def _rebound_unless_none(analysis: FileAnalysis, loop: Loop, key: str, read: ast.AST) -> bool:
    """`if h is not None: h = repackage(h)` earlier in the iteration: the only value that
    skips the rebinding is `None`, which carries no graph."""
    for statement in loop.body:
        if analysis.contains(statement, read):
            return False
        if (
            isinstance(statement, ast.If)
            and is_none_test(statement.test, key, ast.IsNot)
            and always_rebinds(statement.body, key)
        ):
            return True
    return False


def _is_none(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _conditional(analysis: FileAnalysis, statement: ast.AST, boundary: ast.AST) -> bool:
    """Whether `statement` sits under a branch (`if`, `try`, `match`) or an inner loop inside
    `boundary`."""
    around = analysis.ancestors_within(statement, boundary)
    return any(isinstance(ancestor, _LOOP_OR_BRANCH) for ancestor in around)


def _argument_of(analysis: FileAnalysis, node: ast.AST) -> ast.Call | None:
    """The call `node` is an argument of (`f(node)`, `f(k=node)`, `f(*node)`), if any."""
    parent = analysis.parent(node)
    if isinstance(parent, (ast.keyword, ast.Starred)):
        holder, parent = parent, analysis.parent(parent)
    else:
        holder = node
    if isinstance(parent, ast.Call) and parent.func is not holder:
        return parent
    return None


def _carries_on(analysis: FileAnalysis, read: ast.AST) -> bool:
    """Whether `read` takes the value into further computation: not an `is None` test, and
    not already detached there (`h.detach()`, `repackage_hidden(h)`,
    `tuple(s.detach() for s in h)`)."""
    parent = analysis.parent(read)
    if isinstance(parent, (ast.Compare, ast.If, ast.BoolOp)):
        return False
    if (
        isinstance(parent, ast.Attribute)
        and parent.value is read
        and parent.attr in ("detach", "detach_", "data")
    ):
        return False  # `h.data`, `Variable(h.data)` (pre-0.4 code) detach too
    call = _argument_of(analysis, read)
    if call is not None and analysis.returns_detached(call):
        return False  # `detach(states)` with `return [Variable(s.data) for s in states]`
    if isinstance(parent, ast.comprehension) and parent.iter is read:
        # `tuple(s.detach() for s in h)`, `tuple([each.data for each in h])`
        comprehension = analysis.parent(parent)
        element = (
            getattr(comprehension, "elt", None)
            if getattr(comprehension, "generators", [None])[0] is parent
            else None
        )
        if isinstance(element, ast.Call):
            element = element.func
        if isinstance(element, ast.Attribute) and element.attr in ("detach", "data"):
            return False
    return True


def _is_method_receiver(analysis: FileAnalysis, read: ast.AST) -> bool:
    """`h.detach_()`, `h.zero_()`: in-place calls, not reads that carry the value on."""
    parent = analysis.parent(read)
    if not (
        isinstance(parent, ast.Attribute) and parent.value is read and parent.attr.endswith("_")
    ):
        return False
    call = analysis.parent(parent)
    return isinstance(call, ast.Call) and call.func is parent


def _detaches_in_place(analysis: FileAnalysis, statement: ast.AST) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Call)
        and (
            isinstance(statement.value.func, ast.Attribute)
            and statement.value.func.attr == "detach_"
        )
    )


# -- when it is safe: carried values --------------------------------------------------------
@dataclass
class _CarryVerdict:
    key: str
    why: str
    reused_by_backward: bool
    tier: Tier
    replacements: dict[ast.AST, Rewrite]
    shown: str  # the detached read or store, for the message
    caveat: str = ""  # what else to do, or why an unsafe fix may change gradients
    proven: bool = True  # False: gradfix could not prove the carried value holds a graph
    retained: bool = False  # its backward retains the graph: the next one meets the step

    @classmethod
    def report(cls, key: str, why: str, reused_by_backward: bool, advice: str) -> _CarryVerdict:
        """A verdict with no edit: `advice` says what to change by hand."""
        return cls(key, why, reused_by_backward, Tier.REPORT, {}, "", advice)


def _judge_carry(analysis: FileAnalysis, carry: _Carry) -> _CarryVerdict | None:
    if not _crosses_training_step(analysis, carry):
        return None  # one forward computation: the carried graph is the computation
    if _requires_grad_set(analysis, carry.key, carry.store):
        return None  # a tensor made to require grad on purpose (attribution, optimisation)
    stored = _stored_value(analysis, carry)
    if stored.grad is not Grad.ATTACHED and stored.element is not Grad.ATTACHED:
        return _discarded_detach_verdict(analysis, carry)
    if stored.leaf:
        return None  # a parameter has no history to keep alive
    if stored.loss and stored.scalar:
        return None  # a loss carried as a number is GF001's
    reused_by_backward = False
    retained: list[ast.Call] = []  # `backward(retain_graph=True)` calls the carry reaches
    freeing = False  # it also reaches a backward that frees the graph
    for read in carry.carry_reads:
        flow = follow_expression(analysis, read)
        inside = [c for c in flow.backward_calls if _inside(analysis, carry, c)]
        if flow.backward_calls and not inside:
            return None  # backpropagated after the loop on purpose (full BPTT)
        for call in flow.backward_calls:
            if _only_retains(call):
                retained.append(call)
            elif _keeps_graph(call):
                return None  # create_graph (meta-learning): the user keeps the graph on purpose
            else:
                freeing = True
        reused_by_backward = reused_by_backward or bool(inside)
    if not reused_by_backward and not _feeds_back(analysis, carry):
        return None  # read once more, then dropped: no error and no growth
    why = stored.evidence or "it is computed from graph-attached values"
    draw = _random_batches(analysis, carry)
    if draw is not None:
        return _CarryVerdict.report(
            carry.key,
            why,
            reused_by_backward,
            f" The batches it is carried across are random draws of the data set "
            f"(`{analysis.code_of(draw, 60)}`, line {draw.lineno}), so the state links "  # type: ignore[attr-defined]
            "unrelated sequences and detaching it would only hide the error: restructure, "
            f"so that each batch starts from a fresh state (re-initialise `{carry.key}` at the "
            "start of each forward, or do not pass it); detach it only if consecutive batches "
            "continue one sequence.",
        )
    repeated = _forward_repeated_in_step(analysis, carry)
    if repeated is not None and _reset_by_called_method(analysis, carry):
        return None  # `module.reset_mem()` called by the file: the user resets it per batch
    if repeated is not None:
        call, loop = repeated
        return _CarryVerdict.report(
            carry.key,
            why,
            reused_by_backward,
            f" `{analysis.code_of(call, 60)}` (line {call.lineno}) runs this forward on every "
            f"iteration of the loop at line {loop.lineno}, which takes no training step, so "  # type: ignore[attr-defined]
            f"`{carry.key}` is carried from call to call within one step on purpose "
            "(backpropagation through those calls), and detaching it would cut that. "
            f"Restructure, so that each batch starts from a fresh state: re-initialise "
            f"`{carry.key}` before that loop (a reset of the module's state at the start of "
            "each batch), or detach it there if consecutive batches continue one sequence.",
        )
    if retained:
        # With another backward freeing the graph, `retain_graph` shares it with that one.
        return None if freeing else _retained_verdict(analysis, carry, why, retained)
    if _read_where_stored(analysis, carry):
        return _kept_once_verdict(analysis, carry, why, reused_by_backward)
    edit = _carry_edit(analysis, carry)
    if edit is None:
        return _CarryVerdict(carry.key, why, reused_by_backward, Tier.REPORT, {}, "")
    return _CarryVerdict(carry.key, why, reused_by_backward, Tier.SAFE, *edit)


def _discarded_detach_verdict(analysis: FileAnalysis, carry: _Carry) -> _CarryVerdict | None:
    """A carried state object whose graph the loop means to cut with `state.detach()`, where
    the file's `detach` method only rebinds local names: nothing the object holds is
    detached. Reported: gradfix cannot prove the object holds graph-attached tensors (what
    reaches its attributes), but the code shows the intent and that it does nothing."""
    if carry.loop is None:
        return None
    for node in analysis.descendants(carry.loop):
        call = node.value if isinstance(node, ast.Expr) else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "detach"
            and not call.args
            and not call.keywords
            and target_key(call.func.value) == carry.key
        ):
            continue
        receiver = analysis.value_of(call.func.value)
        info = analysis.index.classes.get(receiver.cls or "")
        methods = _detach_methods(analysis, receiver)
        if not methods or not all(_binds_only_locals(method, info) for method in methods):
            return None
        method = methods[0]
        owner = analysis.index.class_of.get(method, "")
        locals_bound = sorted(
            {
                t.id
                for n in analysis.descendants(method)
                if isinstance(n, ast.Assign)
                for t in n.targets
                if isinstance(t, ast.Name)
            }
            | {
                n.target.id
                for n in analysis.descendants(method)
                if isinstance(n, _FOR_TYPES) and isinstance(n.target, ast.Name)
            }
        )
        shown = ", ".join(f"`{name}`" for name in locals_bound) or "nothing"
        caveat = (
            f" `{analysis.code_of(call)}` (line {call.lineno}) is meant to cut its graph, but "
            f"`{owner}.detach` (line {method.lineno}) only rebinds local names ({shown}) and "
            "stores nothing back on the object, so nothing it holds is detached. gradfix could "
            f"not prove that `{carry.key}` holds graph-attached tensors; if it does, the next "
            "backward reaches the previous iteration's graph. Detach what the object holds "
            "and assign it back in that method (`self.hidden = tuple(h.detach() for h in "
            "self.hidden)`)."
        )
        return _CarryVerdict(carry.key, "", False, Tier.REPORT, {}, "", caveat, proven=False)
    return None


def _detach_methods(analysis: FileAnalysis, receiver: Value) -> list[ast.FunctionDef]:
    """The file's `detach` methods a call on `receiver` may run: its class's, when its class
    is known, else every class's of the file."""
    if receiver.cls is not None and receiver.cls in analysis.index.classes:
        found = analysis.index.classes[receiver.cls].methods.get("detach")
        return [found] if isinstance(found, ast.FunctionDef) else []
    if receiver.kind not in (Kind.UNKNOWN, Kind.OBJECT):
        return []
    methods: list[ast.FunctionDef] = []
    for info in analysis.index.classes.values():
        found = info.methods.get("detach")
        if isinstance(found, ast.FunctionDef) and found not in methods:
            methods.append(found)
    return methods


def _binds_only_locals(
    method: ast.FunctionDef, info: ClassInfo | None, getter: bool = False
) -> bool:
    """Whether `method`, run on an object of `info`, stores nothing on an object and returns
    nothing: no attribute or item stores, no in-place (`_`-suffixed) calls; a method it calls
    on `self` (`self.tensors()`) may return a value (a `getter`) but stores nothing either."""
    for node in ast.walk(method):
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, ast.Store):
            return False
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return False
        if isinstance(node, ast.Return) and node.value is not None and not getter:
            return False
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr.endswith("_"):
            return False
        if target_key(node.func.value) == "self":
            called = info.methods.get(node.func.attr) if info is not None else None
            if getter or not isinstance(called, ast.FunctionDef):
                return False  # one level of getters is enough to see what it loops over
            if not _binds_only_locals(called, info, getter=True):
                return False
    return True


def _forward_repeated_in_step(
    analysis: FileAnalysis, carry: _Carry
) -> tuple[ast.Call, ast.AST] | None:
    """For a state a module keeps between forward calls, a call running that forward in a
    loop without a training step (the time steps of a spiking or recurrent model's outer
    forward), with that loop: the state then links calls of one step as well as steps."""
    if carry.loop is not None or not in_forward(analysis, carry.store):
        return None
    info = analysis.class_of(analysis.scope_of(carry.store))
    training = analysis.training
    for call in analysis.calls_running_forward(info):
        loops = analysis.enclosing_loops(call)
        node = analysis.parent(call)
        while node is not None and not isinstance(node, (*FUNCTION_TYPES, ast.Module)):
            # Going over the entries of a module collection runs each entry once.
            if isinstance(node, _COMPREHENSIONS) and not all(
                training.calls_entry(call, g.iter, g.target) for g in node.generators
            ):
                return call, node  # type: ignore[return-value]
            if (
                node in loops
                and not analysis.loop_reaches_step(node)  # type: ignore[arg-type]
                and not (
                    isinstance(node, _FOR_TYPES)
                    and training.calls_entry(call, node.iter, node.target)
                )
            ):
                return call, node  # type: ignore[return-value]
            node = analysis.parent(node)
    return None


def _reset_by_called_method(analysis: FileAnalysis, carry: _Carry) -> bool:
    """Whether another method of the carrying class (`reset_mem`) binds the state to a value
    with no graph, and the file calls it: when it runs is the user's schedule."""
    scope = analysis.scope_of(carry.store)
    info = analysis.class_of(scope)
    if info is None:
        return False
    for name, method in info.methods.items():
        if method is scope or name == "__init__" or not _called(analysis, name):
            continue
        for node in analysis.descendants(method):
            if (
                isinstance(node, ast.Assign)
                and any(target_key(t) == carry.key for t in node.targets)
                and _carries_no_graph(analysis.value_of(node.value))
            ):
                return True
    return False


def _called(analysis: FileAnalysis, name: str) -> bool:
    """Whether the file calls a function or method `name` from code that runs: the module,
    a function the file itself calls (`utils.reset(net)` running `module.reset_mem()`), or a
    module's forward the file runs (`self.cell.reset(...)` at the start of the owner's
    `forward`)."""
    for call in analysis.index.calls_by_name.get(name, []):
        caller = analysis.scope_of(call)
        if not isinstance(caller, FUNCTION_TYPES):
            return True
        if caller.name in torch_api.FORWARD_METHODS and analysis.training.calls_running(caller):
            return True
        if any(
            analysis.scope_of(outer) is not caller
            for outer in analysis.index.calls_by_name.get(caller.name, [])
        ):
            return True
    return False


def _random_batches(analysis: FileAnalysis, carry: _Carry) -> ast.AST | None:
    """For a state a module keeps between forward calls, what makes the batches of the
    training loops that call it random draws (a shuffling loader, `torch.randperm`)."""
    if carry.loop is not None or not in_forward(analysis, carry.store):
        return None
    info = analysis.class_of(analysis.scope_of(carry.store))
    for call in analysis.calls_running_forward(info):
        for loop in analysis.enclosing_loops(call):
            if analysis.loop_reaches_step(loop):
                draw = analysis.training.draws_random_batches(loop, analysis.scope_of(loop))
                if draw is not None:
                    return draw
    return None


def _retained_verdict(
    analysis: FileAnalysis, carry: _Carry, why: str, retained: list[ast.Call]
) -> _CarryVerdict | None:
    """A carry whose backward runs with `retain_graph=True`, the bandage for 'Trying to
    backward through the graph a second time'. With an optimizer step in every iteration the
    next backward walks into a graph whose saved weights the step changed ('modified by an
    inplace operation'), or, when the step changed none, backpropagates through every earlier
    batch. Without a step between them, backpropagating through all history may be meant."""
    step = _step_every_iteration(analysis, carry)
    if step is None or _read_where_stored(analysis, carry):
        return None
    edit = _carry_edit(analysis, carry)
    if edit is None:
        return _CarryVerdict(carry.key, why, True, Tier.REPORT, {}, "")
    backward = analysis.code_of(retained[0])
    caveat = (
        f" With it detached, `retain_graph=True` in `{backward}` keeps nothing the next "
        "step needs: remove it by hand (it keeps every step's saved tensors alive)."
    )
    if _step_updates_saved_weights(analysis, carry, step):
        return _CarryVerdict(carry.key, why, True, Tier.SAFE, *edit, caveat, retained=True)
    caveat += (
        f" Unsafe: `{analysis.code_of(step)}` is not shown to update a weight the carried "
        "graph saved, so the program may run and backpropagate each loss through every "
        "earlier batch; detaching changes those gradients. Check that truncated "
        "backpropagation is meant."
    )
    return _CarryVerdict(carry.key, why, True, Tier.UNSAFE, *edit, caveat, retained=True)


def _step_every_iteration(analysis: FileAnalysis, carry: _Carry) -> ast.Call | None:
    """An optimizer step (`opt.step()` on an optimizer this file makes) that runs in every
    iteration the value is carried across (or every call of the carrying method)."""
    boundary = carry.loop if carry.loop is not None else analysis.scope_of(carry.store)
    return _unconditional_step(analysis, boundary)


def _unconditional_step(analysis: FileAnalysis, boundary: ast.AST) -> ast.Call | None:
    """An optimizer step (`opt.step()` on an optimizer this file makes) that runs whenever
    `boundary` (a loop body, a function) runs."""
    for node in analysis.descendants(boundary):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "step"
            and analysis.value_of(node.func.value).kind is Kind.OPTIMIZER
            and not _conditional(analysis, analysis.statement_of(node) or node, boundary)
        ):
            return node
    return None


def _step_updates_saved_weights(analysis: FileAnalysis, carry: _Carry, step: ast.Call) -> bool:
    """Whether the step updates weights that the carried graph saved: the value is the state
    a recurrent module (`nn.GRU`, `nn.LSTM`, `nn.RNN`) returns when the carried state is its
    input (its weights are saved once that input requires grad), and the optimizer is built
    in this file over that module's `.parameters()`."""
    value = carry.store.value
    if not isinstance(value, ast.Call):
        return False
    module = analysis.value_of(value.func)
    if module.kind is not Kind.MODULE:
        return False
    if not any(analysis.contains(value, read) for read in carry.carry_reads):
        return False
    if module.cls not in torch_api.RECURRENT_MODULES and not _weights_take_carried(analysis, value):
        return False
    return analysis.training.optimizer_trains(step, value.func)


def _weights_take_carried(analysis: FileAnalysis, call: ast.Call) -> bool:
    """Whether the file's module called by `call` (`lstm(x, h0, c0)` with a `forward` the
    file defines) certainly runs a layer with parameters on a value carried from the previous
    iteration: that layer saved its weights for the carried input's gradient."""
    for origin, certain in walk(Provenance(analysis).of(call)):
        if (
            certain
            and origin.kind is OriginKind.FORWARD
            and origin.module
            and (origin.key or "").startswith("torch.nn.")  # a layer, not an unseen module
            and any(inner.kind is OriginKind.CARRIED for inner, _ in walk(origin))
        ):
            return True
    return False


def _read_where_stored(analysis: FileAnalysis, carry: _Carry) -> list[ast.expr]:
    """Carried reads that may also see the value stored in the same iteration (or call): a
    value stored only under a condition (`if self.initial is None: self.initial = losses`)
    and read after it, in a branch that can run after the store."""
    return [read for read in carry.carry_reads if read in carry.later_reads]


def _kept_once_verdict(
    analysis: FileAnalysis, carry: _Carry, why: str, reused_by_backward: bool
) -> _CarryVerdict:
    """A value the storing step reads too. Detaching it anywhere also detaches it for that
    step, so the edit goes on the store (which then keeps no graph), and it is safe only when
    that step does not differentiate through what it reads."""
    edit = _store_edit(analysis, carry)
    if edit is None:
        return _CarryVerdict(carry.key, why, reused_by_backward, Tier.REPORT, {}, "")
    differentiated = []
    for read in _read_where_stored(analysis, carry):
        calls = follow_expression(analysis, read).backward_calls
        if any(_inside(analysis, carry, call) for call in calls):
            differentiated.append(read)
    if not differentiated:
        return _CarryVerdict(carry.key, why, reused_by_backward, Tier.SAFE, *edit)
    read_statement = analysis.statement_of(differentiated[0]) or differentiated[0]
    caveat = (
        f" Unsafe: the step that stores `{carry.key}` also differentiates through it "
        f"(`{analysis.code_of(read_statement, 60)}`), and detaching it changes that step's "
        "gradient (the stored value becomes a constant there too); check that it is meant "
        "as a constant reference, as initial losses of loss ratios are."
    )
    return _CarryVerdict(carry.key, why, reused_by_backward, Tier.UNSAFE, *edit, caveat)


def _crosses_training_step(analysis: FileAnalysis, carry: _Carry) -> bool:
    """Whether the iterations the value is carried across are separated by a backward or an
    optimizer step: a training loop (the step reachable from its body, directly or through
    the file's own functions), or a `self` attribute carried between calls of a method that
    the file runs once per training step."""
    if carry.loop is None:
        return _repeats_with_backward(analysis, carry)
    return _loop_crosses_training_step(analysis, carry.store, carry.loop)


def _loop_crosses_training_step(analysis: FileAnalysis, store: ast.Assign, loop: Loop) -> bool:
    """Whether a backward or optimizer step runs between two iterations of `loop`, around a
    store outside any `forward`."""
    return not in_forward(analysis, store) and analysis.loop_reaches_step(loop)


def _requires_grad_set(analysis: FileAnalysis, key: str, node: ast.AST) -> bool:
    """Whether the code sets `requires_grad` on `key` (`x.requires_grad_()`,
    `x.requires_grad = True`): it wants gradients with respect to that tensor itself."""
    for occurrence in _occurrences(analysis, key, analysis.scope_of(node), class_wide=True):
        parent = analysis.parent(occurrence)
        if (
            isinstance(parent, ast.Attribute)
            and parent.value is occurrence
            and parent.attr in ("requires_grad", "requires_grad_")
        ):
            grandparent = analysis.parent(parent)
            called = isinstance(grandparent, ast.Call) and grandparent.func is parent
            if called or not analysis.is_load(parent):
                return True
    return False


def _carry_finding(
    analysis: FileAnalysis, store: ast.Assign, verdicts: list[_CarryVerdict]
) -> RuleFinding:
    names = " and ".join(f"`{v.key}`" for v in verdicts)
    carries = (
        "carries a graph-attached value" if len(verdicts) == 1 else "carry graph-attached values"
    )
    if any(v.retained for v in verdicts):
        symptom = (
            "the next iteration reads it into a forward whose backward, the graph being "
            "retained, walks into the previous iteration's graph after the optimizer step, and "
            "fails once the step has changed weights that graph saved ('one of the variables "
            "needed for gradient computation has been modified by an inplace operation')"
        )
    elif any(v.reused_by_backward for v in verdicts):
        symptom = (
            "the next iteration reads it into a forward whose backward then reaches the "
            "previous iteration's freed graph ('Trying to backward through the graph a second "
            "time')"
        )
    else:
        symptom = "each new value references the previous one's graph, so memory grows"
    message = f"{names} {carries} ({verdicts[0].why}) from one iteration into the next: {symptom}."
    if not all(v.proven for v in verdicts):
        message = f"{names} is carried from one iteration of a training loop into the next."
    replacements = {k: v for verdict in verdicts for k, v in verdict.replacements.items()}
    edited = {analysis.statement_of(node) for node in replacements}
    if any(v.tier is Tier.REPORT for v in verdicts) or len(edited) > 1:
        # The finding is where its fix is: a fix spread over several statements is left to
        # a person.
        first = verdicts[0].key
        advice = "".join(v.caveat for v in verdicts if v.tier is Tier.REPORT)
        message += advice or (
            f" Detach it at the top of each iteration (`{first} = {first}.detach()`, "
            "element-wise for tuples); gradfix cannot place that edit here."
        )
        return RuleFinding(store, message, Tier.REPORT)
    shown = ", ".join(f"`{v.shown}`" for v in verdicts)
    caveats = dict.fromkeys(v.caveat for v in verdicts)  # one per distinct caveat, in order
    message += f" Detach where it is carried: {shown}." + "".join(caveats)
    tier = Tier.UNSAFE if any(v.tier is Tier.UNSAFE for v in verdicts) else Tier.SAFE
    (statement,) = edited
    return RuleFinding(statement or store, message, tier, replacements)


def _inside(analysis: FileAnalysis, carry: _Carry, node: ast.AST) -> bool:
    """Whether the backward `node`, which a carried read flows to, runs within an iteration:
    in the loop, or in a function the loop calls (a `train_step(model, ..., state)` helper)."""
    if carry.loop is not None:
        if analysis.scope_of(node) is not analysis.scope_of(carry.store):
            return analysis.loop_reaches_step(carry.loop)
        return analysis.contains(carry.loop, node)
    return analysis.scope_of(node) is analysis.scope_of(carry.store) or _called_per_step(
        analysis, carry
    )


def _only_retains(call: ast.Call) -> bool:
    """`loss.backward(retain_graph=True)`: the graph is kept, no higher-order graph is made."""
    keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
    retain = keywords.get("retain_graph")
    # Past the first argument (the gradient), only named arguments.
    arguments: list[ast.AST] = [*call.args, *call.keywords]
    return (
        isinstance(retain, ast.Constant)
        and retain.value is True
        and "create_graph" not in keywords
        and all(isinstance(a, ast.keyword) and a.arg is not None for a in arguments[1:])
    )


def _keeps_graph(call: ast.Call) -> bool:
    for keyword in call.keywords:
        if keyword.arg in ("retain_graph", "create_graph"):
            value = keyword.value
            return not (
                isinstance(value, ast.Constant) and (value.value is False or value.value is None)
            )
    return False


def _feeds_back(analysis: FileAnalysis, carry: _Carry) -> bool:
    """Whether the stored value is computed from the carried one (a recurrence, an EMA)."""
    return any(analysis.contains(carry.store, read) for read in carry.carry_reads) or any(
        _mentions_key(analysis, carry, read) for read in carry.carry_reads
    )


def _mentions_key(analysis: FileAnalysis, carry: _Carry, read: ast.AST) -> bool:
    """Whether `read` flows, through assignments in the loop, into the carried store."""
    node: ast.AST = read
    for _ in range(8):
        statement = analysis.statement_of(node)
        if statement is None or not isinstance(statement, ast.Assign):
            return False
        if statement is carry.store:
            return True
        if _carries_no_graph(analysis.value_of(statement.value)):
            return False  # `states = detach(states)`: the chain is cut here
        # Every name the statement binds (`logits, value, state = policy(obs, state)`).
        names = [n for t in statement.targets for n in _stored_names(t) if isinstance(n, ast.Name)]
        if not names:
            return False
        scope = analysis.scope_of(statement)
        later = [
            o
            for name in names
            for o in analysis.occurrences(name.id, scope)
            if analysis.is_load(o)
            and analysis.index.start[o] > analysis.index.end[statement]
            and analysis.contains(carry.store, o)
        ]
        if not later:
            return False
        node = later[0]
    return False


def _carries_no_graph(value: Value) -> bool:
    return (
        value.grad is Grad.FREE
        and value.element in (None, Grad.FREE)
        and (value.parts is None or all(_carries_no_graph(part) for part in value.parts))
    )


def _repeats_with_backward(analysis: FileAnalysis, carry: _Carry) -> bool:
    """Whether the code shows the carrying method running again after a backward."""
    scope = analysis.scope_of(carry.store)
    if any(analysis.scope_of(call) is scope for call in analysis.backward_calls):
        return True  # a training step method: each call ends in a backward
    return _called_per_step(analysis, carry)


def _called_per_step(analysis: FileAnalysis, carry: _Carry) -> bool:
    """Whether an instance of the carrying class is called in a loop that runs backward, or
    the carrying method (outside a forward) is called by code that trains."""
    scope = analysis.scope_of(carry.store)
    if (
        isinstance(scope, FUNCTION_TYPES)
        and not in_forward(analysis, carry.store)
        and analysis.training.called_by_training_step(scope)
    ):
        return True
    backward_loops = {
        loop for call in analysis.backward_calls for loop in analysis.enclosing_loops(call)
    }
    owner = analysis.class_of(analysis.scope_of(carry.store))
    return any(
        analysis.contains(loop, call)
        for loop in backward_loops  # first: no calls of the forward are looked for without one
        for call in analysis.calls_running_forward(owner)
    )


def _carry_edit(analysis: FileAnalysis, carry: _Carry) -> tuple[dict[ast.AST, Rewrite], str] | None:
    store = carry.store
    # An EMA / running statistic: keep the update out of the graph. Not when the step goes
    # on computing with the new value (`self.v = beta * self.v + x`, then `spike(self.v)`):
    # the state is then part of the step's computation, and detaching `x` would cut it.
    if _is_update_of_itself(carry) and isinstance(store.value, ast.BinOp) and not carry.later_reads:
        atoms = analysis.attached_operands(store.value, _is_key(carry.key), proven_only=True)
        if atoms:
            return {a: _detached for a in atoms}, _detached_text(analysis, atoms[0])
    if not carry.later_reads:
        edit = _store_edit(analysis, carry)
        if edit is not None:
            return edit
    reads = [r for r in carry.carry_reads if not _in_nested_loop(analysis, carry, r)]
    if len(reads) != len(carry.carry_reads):
        return None  # read inside an inner loop: only the first inner iteration carries
    state = _state_shape(analysis, carry)
    if state is None:
        return None
    if any(_is_autograd_input(analysis, read) for read in reads):
        return None  # detaching what backward() differentiates would make it fail
    entry = _entry_value(analysis, carry)
    initialised = _initialised_before(analysis, carry)
    may_be_none = _may_be_none(analysis, carry) and not initialised
    if entry.kind is not state and not may_be_none and not initialised:
        return None  # the first iteration reads a value of another shape, or an unknown one
    helper = _shape_keeping_helper(analysis)
    stored = _stored_value(analysis, carry)
    named = stored.cls if stored.kind is Kind.TUPLE else None
    replacements: dict[ast.AST, Rewrite] = {}
    shown: list[str] = []
    for read in reads:
        code = _operand_text(analysis, read)
        detached: Rewrite
        if helper is not None:
            detached = _through_helper(helper)
            text = f"{helper}({analysis.code_of(read)})"
        elif state is Kind.TENSOR:
            detached = _detached
            text = f"{code}.detach()"
        elif named is not None:  # a NamedTuple of tensors keeps its class
            detached = _detached_named(named)
            name = _element_name(analysis.code_of(read))
            text = f"{named}(*({name}.detach() for {name} in {analysis.code_of(read)}))"
        else:
            detached = _detached_tuple
            name = _element_name(analysis.code_of(read))
            text = f"tuple({name}.detach() for {name} in {analysis.code_of(read)})"
        # The first iteration reads the initial `None`: detach only what a step made.
        if may_be_none:
            replacements[read] = _unless_none(detached)
            shown.append(f"(None if {analysis.code_of(read)} is None else {text})")
        else:
            replacements[read] = detached
            shown.append(text)
    return replacements, shown[0]


def _store_edit(analysis: FileAnalysis, carry: _Carry) -> tuple[dict[ast.AST, Rewrite], str] | None:
    """`.detach()` on the stored value, when it is one graph-attached tensor stored whole,
    or element-wise when it is a name holding a tuple of tensors (`(h, c)`)."""
    store = carry.store
    if carry.target is not store.targets[0]:
        return None
    stored = _stored_value(analysis, carry)
    if stored.kind is Kind.TUPLE and isinstance(store.value, ast.Name) and _all_tensors(stored):
        code = analysis.code_of(store.value)
        name = _element_name(code)
        if stored.cls is not None:  # a NamedTuple keeps its class
            text = f"{stored.cls}(*({name}.detach() for {name} in {code}))"
            return {store.value: _detached_named(stored.cls)}, text
        return {store.value: _detached_tuple}, f"tuple({name}.detach() for {name} in {code})"
    if stored.kind is not Kind.TENSOR:
        return None
    atoms = analysis.attached_operands(store.value, _is_key(carry.key), proven_only=True)
    if len(atoms) != 1 or atoms[0] is not store.value:
        return None
    return {store.value: _detached}, _detached_text(analysis, store.value)


def _all_tensors(value: Value) -> bool:
    """Whether every element of a tuple is known to be a tensor (so each has `.detach()`)."""
    return value.parts is not None and all(part.kind is Kind.TENSOR for part in value.parts)


def _entry_value(analysis: FileAnalysis, carry: _Carry) -> Value:
    """What the first iteration (or call) reads: the value flowing into the loop."""
    if carry.loop is None:
        return analysis.class_attribute_inits(*_class_and_attribute(analysis, carry)) or UNKNOWN
    return analysis.loop_entry(carry.loop).get(carry.key, UNKNOWN)


def _class_and_attribute(analysis: FileAnalysis, carry: _Carry) -> tuple[str, str]:
    info = analysis.class_of(analysis.scope_of(carry.store))
    return (info.name if info else ""), carry.key[5:]


def _may_be_none(analysis: FileAnalysis, carry: _Carry) -> bool:
    return _bound_to_none(analysis, carry.key, analysis.scope_of(carry.store))


def _bound_to_none(analysis: FileAnalysis, key: str, scope: ScopeNode) -> bool:
    """Whether the name (or `self` attribute) `key` is ever bound to `None` in `scope` (`h =
    None` ... `out, h = rnn(x, h)`), for an attribute in any method of its class.
    (Parameters are not occurrences: one defaulting to `None` does not count, as it did not
    with LibCST's index.)"""
    for occurrence in _occurrences(analysis, key, scope, class_wide=True):
        assign = analysis.parent(occurrence)
        if (
            isinstance(assign, ast.Assign)
            and any(target is occurrence for target in assign.targets)
            and _is_none(assign.value)
        ):
            return True
    return False


def _initialised_before(analysis: FileAnalysis, carry: _Carry) -> bool:
    """`if self.h is None: self.h = torch.zeros(...)` before every carried read: the read
    never sees `None`."""
    if carry.loop is not None:
        nodes = [n for s in carry.loop.body for n in analysis.descendants(s)]
    else:
        nodes = analysis.descendants(analysis.scope_of(carry.store))
    first_read = min(analysis.index.start[r] for r in carry.carry_reads)
    for node in nodes:
        if analysis.index.start[node] >= first_read:
            break
        if (
            isinstance(node, ast.If)
            and is_none_test(node.test, carry.key, ast.Is)
            and not node.orelse
            and any(
                isinstance(s, ast.Assign) and any(target_key(t) == carry.key for t in s.targets)
                for statement in node.body
                for s in analysis.descendants(statement)
            )
        ):
            return True
    return False


def _is_autograd_input(analysis: FileAnalysis, read: ast.AST) -> bool:
    """`h.backward()`, `torch.autograd.grad(h, ...)`: the read is what gets differentiated."""
    parent = analysis.parent(read)
    if isinstance(parent, ast.Attribute) and parent.value is read:
        return parent.attr == "backward"
    call = _argument_of(analysis, read)
    return call is not None and (analysis.qualified_name(call.func) in torch_api.AUTOGRAD_FUNCTIONS)


def _is_update_of_itself(carry: _Carry) -> bool:
    return any(
        isinstance(read, (ast.Name, ast.Attribute))
        and _is_arithmetic_operand(carry.store.value, read)
        for read in carry.carry_reads
    )


def _is_arithmetic_operand(expression: ast.expr, read: ast.AST) -> bool:
    if expression is read:
        return True
    if isinstance(expression, ast.BinOp):
        return _is_arithmetic_operand(expression.left, read) or _is_arithmetic_operand(
            expression.right, read
        )
    if isinstance(expression, ast.UnaryOp):
        return _is_arithmetic_operand(expression.operand, read)
    return False


def _is_key(key: str) -> Callable[[ast.expr], bool]:
    """Whether a part of an expression reads the carried value itself."""
    return lambda part: target_key(part) == key


def _state_shape(analysis: FileAnalysis, carry: _Carry) -> Kind | None:
    """TENSOR or TUPLE when the carried value's structure is known, else None."""
    kind = _stored_value(analysis, carry).kind
    return kind if kind in (Kind.TENSOR, Kind.TUPLE) else None


def _stored_value(analysis: FileAnalysis, carry: _Carry) -> Value:
    """What the store puts into the carried target, through tuple unpacking."""
    value = analysis.value_of(carry.store.value)
    path = _path_to(carry.store.targets[0], carry.target)
    for position in path or ():
        if value.parts is None or position >= len(value.parts):
            return Value(value.element or Grad.UNKNOWN)
        value = value.parts[position]
    return value


def _path_to(target: ast.expr, wanted: ast.expr) -> list[int] | None:
    """Positions leading from an unpacking target to one of its names."""
    if target is wanted:
        return []
    if isinstance(target, ast.Starred):
        return _path_to(target.value, wanted)
    if isinstance(target, (ast.Tuple, ast.List)):
        for position, element in enumerate(target.elts):
            inner = _path_to(element, wanted)
            if inner is not None:
                return [position, *inner]
    return None


def _shape_keeping_helper(analysis: FileAnalysis) -> str | None:
    """The file's detaching helper that detaches a tensor as itself (`return h.detach()`), so
    a state passed through it keeps its shape (`repackage_hidden`); not one that makes a list."""
    for name, function in analysis.detaching_helpers.items():
        parameter = function.args.args[0].arg
        if any(
            isinstance(node, ast.Return)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr == "detach"
            and isinstance(node.value.func.value, ast.Name)
            and node.value.func.value.id == parameter
            for node in analysis.descendants(function)
        ):
            return name
    return None


def _in_nested_loop(analysis: FileAnalysis, carry: _Carry, read: ast.AST) -> bool:
    loops = analysis.enclosing_loops(read)
    return bool(loops) and loops[0] is not carry.loop


# -- what it detects: records of tensors kept across steps ----------------------------------
def _kept_records(analysis: FileAnalysis) -> Iterator[RuleFinding]:
    """`self.training_step_outputs.append(log)`, where `log` is a dict whose graph-attached
    entries include tensors other than losses (attention maps, predictions kept for the
    epoch's end), appended in a training loop or in a method the file runs once per training
    step: the list keeps every step's graph. Appended as a copy with those entries detached.
    (A record whose attached entries are all losses is GF001's.)"""
    start = analysis.index.start
    for call in sorted(analysis.index.calls_by_name.get("append", []), key=start.__getitem__):
        statement = analysis.parent(call)
        if not (
            isinstance(statement, ast.Expr)
            and isinstance(call.func, ast.Attribute)
            and len(call.args) == 1
            and not call.keywords
            and isinstance(call.args[0], ast.Name)
        ):
            continue
        record = call.args[0]
        value = analysis.value_of(record)
        keys = attached_keys(value)
        entries = [value.entry(key) for key in keys]
        if not keys or all(e is not None and (e.loss or e.scalar) for e in entries):
            continue  # nothing attached, or only losses (GF001's)
        finding = _judge_record(analysis, statement, call.func.value, record, keys, entries)  # type: ignore[arg-type]
        if finding is not None:
            yield finding


def _judge_record(
    analysis: FileAnalysis,
    statement: ast.Expr,
    container: ast.expr,
    record: ast.Name,
    keys: tuple[str, ...],
    entries: list[Value | None],
) -> RuleFinding | None:
    key = target_key(container)
    if key is None or in_forward(analysis, statement):
        return None
    loops = analysis.enclosing_loops(statement)
    if loops:
        outlived = [
            loop
            for loop in loops
            if (key in analysis.loop_entry(loop) or key.startswith("self."))
            and analysis.loop_reaches_step(loop)
        ]
        if not outlived:
            return None
    elif not (key.startswith("self.") and _called_between_steps(analysis, statement)):  # type: ignore[arg-type]
        return None
    if follow_target(analysis, container).backward_calls:
        return None  # differentiated afterwards: kept on purpose
    region = region_binding_afresh(analysis, record, statement)
    if region is None:
        return None  # the same dict appended again and again: a copy would change that
    shown = ", ".join(f"`{json.dumps(k)}`" for k in keys)
    across = "loop iterations" if loops else "training steps (calls of this method)"
    message = (
        f"`{analysis.code_of(container)}` keeps `{record.id}` across {across}, whose {shown} "
        "entries are graph-attached, not only losses (tensors computed in the step's "
        "forward): every step's autograd graph stays alive and memory grows. Append a copy "
        f"with {shown} detached instead."
    )
    if not all(entry is not None and entry.kind is Kind.TENSOR for entry in entries):
        return RuleFinding(
            statement, message + " (Some are not tensors: detach them by hand.)", Tier.REPORT
        )
    reasons = []
    if used_after(analysis, region, record, statement):
        reasons.append(
            f"`{record.id}` is used after the append and the list now keeps a copy of it, "
            "check nothing changes it"
        )
    if DICT_SUBCLASS_TEXT.search(analysis.source):
        reasons.append(f"the copy is a plain dict, check `{record.id}` is one")
    if reasons:
        message += f" Unsafe: {'; '.join(reasons)}."
    tier = Tier.UNSAFE if reasons else Tier.SAFE
    return RuleFinding(statement, message, tier, {record: record_copy(keys)})


# -- what it detects: a graph kept across the steps of a loop by retain_graph ---------------
def _retained_across_steps(analysis: FileAnalysis) -> Iterator[RuleFinding]:
    """`fake = netG(z)` before a loop whose every iteration backpropagates through it with
    `retain_graph=True` and then steps the optimizer of the module that made it: from the
    second iteration on, the backward walks a graph made with weights the step has changed
    (stale gradients, or 'modified by an inplace operation' where the graph saved them).
    Reported with advice to recompute the value inside the loop: where the recomputation
    goes, and what it takes, is the user's to decide."""
    provenance: Provenance | None = None
    for call in analysis.backward_calls:
        loops = analysis.enclosing_loops(call)
        if not loops or not _only_retains(call) or in_forward(analysis, call):
            continue
        loop = loops[0]
        step = _unconditional_step(analysis, loop)
        if step is None or _conditional(analysis, analysis.statement_of(call) or call, loop):
            continue
        provenance = provenance or Provenance(analysis)
        made = _made_before_by_stepped_module(analysis, provenance, call, loop, step)
        if made is None:
            continue
        read = _read_of_made(analysis, provenance, loop, call, made)
        kept = f"`{analysis.code_of(read)}` (`{analysis.code_of(made, 60)}`, line {made.lineno})"
        message = (
            f"`{analysis.code_of(call, 60)}` (line {call.lineno}) runs on every iteration of "
            f"the loop at line {loop.lineno}, and each backpropagates through {kept}, "
            f"computed once before it, whose graph `retain_graph=True` keeps across "
            f"`{analysis.code_of(step)}` (line {step.lineno}), which updates the module that "
            "made it: from the second iteration on, the backward walks a graph made with "
            "weights the step has since changed (stale gradients, or 'one of the variables "
            "needed for gradient computation has been modified by an inplace operation' "
            "where that graph saved them). Recompute it inside the loop, after each step, "
            "so that every iteration has a graph of its own; gradfix cannot prove where the "
            "recomputation belongs."
        )
        yield RuleFinding(analysis.statement_of(read) or call, message, Tier.REPORT)


def _read_of_made(
    analysis: FileAnalysis, provenance: Provenance, loop: Loop, call: ast.Call, made: ast.Call
) -> ast.expr:
    """Where the iteration first reads what `made` produced before the loop (`fake` in
    `output = netD(fake)`), or the backward's root when no name in the loop is seen to."""
    scope = analysis.scope_of(call)
    for node in analysis.descendants(loop):
        if (
            isinstance(node, ast.Name)
            and analysis.is_load(node)
            and analysis.index.start[node] < analysis.index.start[call]
            and analysis.scope_of(node) is scope
            and any(
                origin.site is made or origin.expression is made
                for origin, _ in walk(provenance.of(node))
            )
        ):
            return node
    return call.func.value  # type: ignore[attr-defined]


def _made_before_by_stepped_module(
    analysis: FileAnalysis, provenance: Provenance, call: ast.Call, loop: Loop, step: ast.Call
) -> ast.Call | None:
    """The call, outside `loop`, of a module with parameters that `step`'s optimizer updates,
    whose output the backward `call` certainly differentiates through."""
    for origin, certain in walk(provenance.of(call.func.value)):  # type: ignore[attr-defined]
        if not (certain and origin.kind is OriginKind.FORWARD and origin.module):
            continue
        if evaluated_in(origin, loop, analysis) or not origin.is_graph_node:
            continue
        site = origin.site if isinstance(origin.site, ast.Call) else origin.expression
        if isinstance(site, ast.Call) and analysis.training.optimizer_trains(step, site.func):
            return site
    return None


# -- what it detects and when it is safe: kept values ----------------------------------------
@dataclass
class _KeptStore:
    statement: ast.stmt
    container: ast.expr  # what outlives the loop
    operand: ast.expr  # the stored value
    loop: Loop


def _kept_stores(analysis: FileAnalysis) -> Iterator[_KeptStore]:
    """`xs.append(v)` statements, and `xs[i] = v` by a varying key, in source order."""
    found: list[tuple[ast.stmt, ast.expr, ast.expr]] = []  # statement, container, operand
    for method in _GROWING_METHODS:
        for call in analysis.index.calls_by_name.get(method, []):
            statement = analysis.parent(call)
            if isinstance(call.func, ast.Attribute) and isinstance(statement, ast.Expr):
                arguments = _arguments(call)
                if arguments:
                    found.append((statement, call.func.value, arguments[-1]))
    for node in analysis.index.of_types(ast.Assign):
        assert isinstance(node, ast.Assign)
        target = node.targets[0]
        if (
            len(node.targets) == 1
            and isinstance(target, ast.Subscript)
            and not _constant_index(target)
        ):
            found.append((node, target.value, node.value))
    start = analysis.index.start
    found.sort(key=lambda store: start[store[0]])
    for statement, container, operand in found:
        store = _kept_store(analysis, statement, container, operand)
        if store is not None:
            yield store


def _arguments(call: ast.Call) -> list[ast.expr]:
    """The values `call` passes, positional then named (`*xs` as `xs`)."""
    positional = [a.value if isinstance(a, ast.Starred) else a for a in call.args]
    return positional + [keyword.value for keyword in call.keywords]


def _kept_store(
    analysis: FileAnalysis,
    statement: ast.stmt,
    container: ast.expr,
    operand: ast.expr,
) -> _KeptStore | None:
    key = target_key(container)
    loops = analysis.enclosing_loops(statement)
    if key is None or not loops:
        return None
    outlived = [
        loop for loop in loops if key in analysis.loop_entry(loop) or key.startswith("self.")
    ]
    if not outlived:
        return None
    # The outermost loop it outlives: a backward anywhere in it reads what earlier
    # iterations stored.
    return _KeptStore(statement, container, operand, outlived[-1])


def _constant_index(target: ast.Subscript) -> bool:
    index = target.slice
    elements = index.elts if isinstance(index, ast.Tuple) else [index]
    return all(
        isinstance(element, ast.Constant) and type(element.value) in (str, bytes, int)
        for element in elements
    )


def _judge_kept(analysis: FileAnalysis, store: _KeptStore) -> RuleFinding | None:
    if in_forward(analysis, store.statement):
        return None  # features gathered by a forward are returned to the loss
    training = analysis.loop_reaches_step(store.loop)
    if not training and not _evaluation_loop(analysis, store.loop):
        return None  # a loop inside one computation (layers, levels, decoding steps)
    value = analysis.value_of(store.operand)
    if value.grad is not Grad.ATTACHED or value.loss or value.scalar or value.leaf:
        return None  # unproven, a loss/scalar (GF001's), or a parameter (no history)
    if value.kind is not Kind.TENSOR:
        return None  # a tuple or structure: `.detach()` would not apply
    flow = follow_target(analysis, store.container)
    if any(_keeps_graph(call) for call in flow.backward_calls):
        return None
    reused = [c for c in flow.backward_calls if analysis.contains(store.loop, c)]
    if flow.backward_calls and not reused:
        return None  # differentiated after the loop on purpose (full BPTT, stacked loss)
    if _emptied_in(analysis, store):
        return None  # nothing stored survives an iteration of the loop
    container = analysis.code_of(store.container)
    if reused and _read_back_in_same_iteration(analysis, store):
        # This iteration's entries are differentiated too (a REINFORCE-style list of log
        # probabilities): detaching them would silence their gradients. What is wrong is
        # that older entries survive the backward.
        return RuleFinding(
            store.statement,
            f"`{container}` keeps graph-attached tensors across iterations and a backward "
            "in the loop reads them all, including those whose graph an earlier backward "
            "freed ('Trying to backward through the graph a second time'). Empty it after "
            f"each backward (`{container}.clear()`) rather than detaching what it stores.",
            Tier.REPORT,
        )
    operand = analysis.code_of(store.operand)
    why = value.evidence or "it is computed from graph-attached values"
    if reused:
        symptom = (
            "a later iteration reads it back into a backward, after the previous "
            "backward freed its graph ('Trying to backward through the graph a second "
            "time')"
        )
    else:
        symptom = "each stored tensor keeps its whole graph, so memory grows with every batch"
    message = (
        f"`{container}` keeps `{operand}`, which is graph-attached ({why}), across loop "
        f"iterations: {symptom}. Store `{_detached_text(analysis, store.operand)}` instead."
    )
    tier = Tier.SAFE
    if flow.uses & {Use.UNKNOWN_CONSUMER, Use.RETURNED_UNSEEN}:
        tier = Tier.UNSAFE
        message += (
            " Unsafe: the stored tensors reach code outside this file; check it does "
            "not backpropagate through them."
        )
    if not isinstance(store.operand, _ATOMS):
        return RuleFinding(store.statement, message, Tier.REPORT)
    return RuleFinding(store.statement, message, tier, {store.operand: _detached})


def _evaluation_loop(analysis: FileAnalysis, loop: Loop) -> bool:
    """A loop over batches with no step of its own: `for ... in <a data loader, tqdm(...)>`,
    any `for` loop in training code (a function or script that also trains), such as a
    validation pass between epochs, or a loop of an evaluation method over the data it is
    given (`def predict(self, graphs): ... for g in graphs:`)."""
    if not isinstance(loop, _FOR_TYPES):
        return False
    if iterates_batches(analysis, loop):
        return True
    scope = analysis.scope_of(loop)
    if isinstance(scope, FUNCTION_TYPES):
        return analysis.training.function_reaches_step(scope) or (
            _iterates_parameter(loop, scope) and is_evaluation_function(analysis, scope)
        )
    return any(analysis.scope_of(call) is scope for call in analysis.backward_calls)


def _iterates_parameter(
    loop: ast.For | ast.AsyncFor, function: ast.FunctionDef | ast.AsyncFunctionDef
) -> bool:
    """`for x in data`, `for i, x in enumerate(data)`, where `data` is a parameter of
    `function` (not `range(steps)`: decoding steps are one computation)."""
    iterable = loop.iter
    if (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
        and iterable.func.id in ("enumerate", "zip")
        and _arguments(iterable)
    ):
        iterable = _arguments(iterable)[0]
    params = [*function.args.posonlyargs, *function.args.args]
    return isinstance(iterable, ast.Name) and any(param.arg == iterable.id for param in params)


def _emptied_in(analysis: FileAnalysis, store: _KeptStore) -> bool:
    """Whether the loop empties or rebinds the container (`xs.clear()`, `del xs[:]`,
    `xs = []`) between the store and the next iteration's reads of it, so that what one
    iteration stores is gone by the time another reads it. Emptying after the reads that
    start an iteration and before the store (`h0 = xs[0]; xs.clear(); ...; xs.append(h)`)
    leaves the stored value to the next iteration."""
    emptying = _emptying_statements(analysis, store)
    if not emptying:
        return False
    start, end = analysis.index.start, analysis.index.end
    if any(start[statement] >= end[store.statement] for statement in emptying):
        return True  # emptied later in the same iteration
    reads = _container_reads(analysis, store, emptying)
    if not reads:
        return True  # never read back: the container holds one iteration's values at most
    first_read = min(start[read] for read in reads)
    return any(end[statement] <= first_read for statement in emptying)


def _emptying_statements(analysis: FileAnalysis, store: _KeptStore) -> list[ast.AST]:
    key = target_key(store.container)
    found: list[ast.AST] = []
    for node in (n for s in store.loop.body for n in analysis.descendants(s)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            emptied = node.func.attr == "clear" and target_key(node.func.value) == key
        elif isinstance(node, ast.Delete):
            emptied = any(
                key == target_key(_container_of(t))
                for target in node.targets
                for t in _deleted(target)
            )
        elif isinstance(node, ast.Assign):
            emptied = any(target_key(t) == key for t in node.targets)
        else:
            continue
        statement = analysis.statement_of(node) if emptied else None
        if statement is not None:
            found.append(statement)
    return found


def _container_reads(
    analysis: FileAnalysis, store: _KeptStore, emptying: list[ast.AST]
) -> list[ast.expr]:
    """Reads of the container in the loop, other than the store and the emptying
    statements (`xs[0]`, `torch.stack(xs)`, `if xs`)."""
    key = target_key(store.container)
    scope = analysis.scope_of(store.statement)
    if key is None:
        return []
    skipped = [store.statement, *emptying]
    return [
        read
        for read in _occurrences(analysis, key, scope)
        if analysis.contains(store.loop, read)
        and analysis.is_load(read)
        and not any(analysis.contains(statement, read) for statement in skipped)
    ]


def _deleted(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return list(target.elts)
    return [target]


def _container_of(target: ast.expr) -> ast.expr:
    return target.value if isinstance(target, ast.Subscript) else target


def _read_back_in_same_iteration(analysis: FileAnalysis, store: _KeptStore) -> bool:
    """Whether the container is read after the store within an iteration of the loop, and
    that read reaches a backward in the loop: the backward then differentiates what this
    iteration stored."""
    key = target_key(store.container)
    scope = analysis.scope_of(store.statement)
    after = analysis.index.end[store.statement]
    if key is None or key.startswith("self."):
        return True  # reads in other methods: assume the worst
    for read in analysis.occurrences(key, scope):
        if (
            analysis.index.start[read] >= after
            and analysis.contains(store.loop, read)
            and analysis.is_load(read)
            and any(
                analysis.contains(store.loop, c)
                for c in follow_expression(analysis, read).backward_calls
            )
        ):
            return True
    return False


# -- shared helpers --------------------------------------------------------------------------
# Texts (for messages) are written from the source; rewrites build LibCST nodes from the
# LibCST node the fix writer finds where the `ast` node is.
def _operand_text(analysis: FileAnalysis, expression: ast.expr) -> str:
    """`expression`'s code (with the parentheses the source gives it) as `.method()` can
    follow it: parenthesised unless an atom or parenthesised already."""
    code = analysis.code_of(expression)
    if isinstance(expression, _ATOMS) or analysis.parenthesized(expression):
        return code
    return f"({code})"


def _detached_text(analysis: FileAnalysis, expression: ast.expr) -> str:
    return f"{_operand_text(analysis, expression)}.detach()"


# `h` -> `h.detach()`
_detached: Rewrite = calling("detach")


def _through_helper(helper: str) -> Rewrite:
    """`repackage_hidden(h)`: the file's own detaching helper applied to the read."""

    def rewrite(read: cst.CSTNode) -> cst.CSTNode:
        return cst.Call(func=cst.Name(helper), args=[cst.Arg(read)])  # type: ignore[arg-type]

    return rewrite


def _element_name(code: str) -> str:
    """The generator's variable: `s`, unless the detached expression already uses `s`."""
    return "part" if re.search(r"\bs\b", code) else "s"


def _detached_parts(expression: cst.CSTNode) -> cst.GeneratorExp:
    """`s.detach() for s in hidden`, without parentheses."""
    element = cst.Name(_element_name(cst.Module([]).code_for_node(expression)))
    return cst.GeneratorExp(
        elt=method_call(element, "detach"),
        for_in=cst.CompFor(target=element, iter=expression),  # type: ignore[arg-type]
        lpar=[],
        rpar=[],
    )


def _detached_tuple(expression: cst.CSTNode) -> cst.CSTNode:
    """`tuple(s.detach() for s in hidden)`: element-wise for an `(h, c)` state."""
    return cst.Call(func=cst.Name("tuple"), args=[cst.Arg(_detached_parts(expression))])


def _detached_named(class_name: str) -> Rewrite:
    """`LIFState(*(s.detach() for s in state))`: element-wise, keeping the NamedTuple."""

    def rewrite(expression: cst.CSTNode) -> cst.CSTNode:
        parts = _detached_parts(expression).with_changes(
            lpar=[cst.LeftParen()], rpar=[cst.RightParen()]
        )
        return cst.Call(func=cst.Name(class_name), args=[cst.Arg(parts, star="*")])

    return rewrite


def _unless_none(detached: Rewrite) -> Rewrite:
    """`None if h is None else h.detach()`, parenthesised so it reads as one argument."""

    def rewrite(read: cst.CSTNode) -> cst.CSTNode:
        return cst.IfExp(
            body=cst.Name("None"),
            test=cst.Comparison(
                left=read,  # type: ignore[arg-type]
                comparisons=[cst.ComparisonTarget(cst.Is(), cst.Name("None"))],
            ),
            orelse=detached(read),  # type: ignore[arg-type]
            lpar=[cst.LeftParen()],
            rpar=[cst.RightParen()],
        )

    return rewrite


# -- for `gradfix trace` --------------------------------------------------------------------
def fix_at(
    analysis: FileAnalysis, statement: ast.stmt, holders: frozenset[str]
) -> dict[ast.AST, Rewrite]:
    """The fix of `statement`, which `gradfix trace` saw store or read back a tensor of an
    earlier training step, held by the names or `self` attributes `holders` (their source
    text): what `check` writes for a carry or store it proves in `statement`, else `.detach()`
    on each read of a holder there (`None if h is None else h.detach()` for a state the file
    also sets to None). {} when no holder is read in `statement`."""
    for finding in CarriedTensor().check(analysis):
        if finding.replacements and all(
            analysis.contains(statement, node) for node in finding.replacements
        ):
            return finding.replacements
    replacements: dict[ast.AST, Rewrite] = {}
    for node in ast.walk(statement):
        if (
            isinstance(node, (ast.Name, ast.Attribute))
            and isinstance(node.ctx, ast.Load)
            and analysis.code_of(node) in holders
            and not _is_method_receiver(analysis, node)
        ):
            key = target_key(node)
            scope = analysis.scope_of(statement)
            may_be_none = key is not None and _bound_to_none(analysis, key, scope)
            detached = calling("detach")
            replacements[node] = _unless_none(detached) if may_be_none else detached
    return replacements
