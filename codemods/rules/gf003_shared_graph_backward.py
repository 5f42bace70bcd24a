"""GF003: several backward passes over one graph, without `retain_graph` on the earlier ones.

Detects two `.backward()` / `torch.autograd.backward` / `torch.autograd.grad` calls of one
function body (or module), the earlier one free to run before the later one, whose roots share
a part of the autograd graph that holds saved tensors: the first call frees them and the second
raises "Trying to backward through the graph a second time". Also one such call in a loop whose
every iteration backpropagates through a graph part built once, before the loop (`for loss in
losses: loss.backward()` over losses of one forward).

Safe when: the provenance of both roots (`analysis/provenance.py`) certainly reaches one
attached operation evaluated once for both, and the op table (or, for what it does not list,
"a module with parameters saves, a loss saves its input") says that operation saves tensors;
a common part made only of ops that save nothing (add, sum, views, cat, ...) is no finding, nor
are separate forwards. Common parts gradfix is unsure of (an op missing from the table, a
branch, a call it cannot see into) are reported, never rewritten. So is an `optimizer.step()`,
`scaler.step()` or in-place parameter update between the calls: retaining the graph there turns
the error into the in-place error (pytorch/pytorch#39141); the step belongs after the last
backward. Earlier calls with `retain_graph` or `create_graph` already given are left alone.

Rewrites every call but the last over the shared graph with `retain_graph=True` appended to its
arguments (layout kept); in a loop, `retain_graph=i < len(losses) - 1` (with an index from
`enumerate` or `range`) or `retain_graph=loss is not losses[-1]` (a loop over a list of tensors
or modules), so the last iteration frees the graph.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from codemods.analysis import FileAnalysis, Grad, Kind
from codemods.analysis.bindings import BindingKind
from codemods.analysis.imports import dotted_name
from codemods.analysis.index import ScopeNode
from codemods.analysis.provenance import (
    Origin,
    OriginKind,
    Provenance,
    evaluated_in,
    reachable_graph_nodes,
    saves_tensors,
    walk,
)
from codemods.findings import Tier
from codemods.rules.base import Rule, RuleFinding

_BACKWARD_TEXT = re.compile(r"\.backward\(|autograd\.(?:backward|grad)\(|\bgrad\(")
_LOOP_TEXT = re.compile(r"^\s*(?:for|while)\b", re.MULTILINE)
_TWICE_ERROR = '"Trying to backward through the graph a second time"'
# Receivers whose `.step()` updates parameters: optimizers and AMP grad scalers.
_STEPPER_NAME = re.compile(r"opt|scaler", re.IGNORECASE)
_SCHEDULER_NAME = re.compile(r"sched", re.IGNORECASE)
# Context managers and helpers under which a failing backward is what the code expects.
_EXPECTS_ERROR = re.compile(r"assertRaises|raises|expectedFailure")
# Where `retain_graph` and `create_graph` sit among the positional arguments of each form.
_POSITIONS = {
    "backward": {"retain_graph": 1, "create_graph": 2},
    "torch.autograd.backward": {"retain_graph": 2, "create_graph": 3},
    "torch.autograd.grad": {"retain_graph": 3, "create_graph": 4},
}


@dataclass
class _Site:
    """One backward call: what it differentiates and how."""

    call: cst.Call
    form: str  # "backward", "torch.autograd.backward" or "torch.autograd.grad"
    roots: list[cst.BaseExpression]  # the tensors it differentiates
    inputs: cst.BaseExpression | None  # `inputs=`: it then runs only the paths to them
    retains: bool  # retain_graph or create_graph is given: it frees nothing
    statement: cst.CSTNode


class _Verdict(Enum):
    SAVES = "saves"  # proven: the second backward fails
    UNSURE = "unsure"  # may fail: report
    NOTHING = "nothing"


@dataclass
class _Sharing:
    verdict: _Verdict
    through: Origin | None = None  # the shared operation to name in the message
    why_unsure: str = ""


class SharedGraphBackward(Rule):
    code = "GF003"
    name = "backward-twice-without-retain-graph"
    summary = "A second backward runs through a graph part the first one freed"
    explanation = (
        "A backward pass frees the tensors the graph saved for it (the input of a Linear, the "
        "output of a sigmoid, ...) as it goes, so a second `.backward()` or "
        "`torch.autograd.grad` that reaches the same nodes fails with 'Trying to backward "
        "through the graph a second time'. This happens with several losses over one "
        "forward: multi-task heads on a shared trunk, a GAN step reusing one generator "
        "output, an auxiliary loss, `autograd.grad` called twice on the same outputs, a loop "
        "that backpropagates each loss of a list.\n\n"
        "gradfix adds `retain_graph=True` to every call but the last over the shared part (in "
        "a loop: on every iteration but the last). When nothing runs between the calls, "
        "`(loss_a + loss_b).backward()` gives the same gradients in one cheaper pass: "
        "retaining keeps every saved buffer alive until the graph is dropped.\n\n"
        "Reported, not rewritten: an `optimizer.step()` or `scaler.step()` between the calls "
        "(retaining would turn the error into 'modified by an inplace operation', "
        "pytorch/pytorch#39141: move the step after the last backward instead), and shared "
        "parts gradfix cannot prove save anything. Left alone: separate forwards, shared parts "
        "made only of ops that save nothing (add, sum, mean, views, cat, clone), calls that "
        "already pass `retain_graph` or `create_graph=True`."
    )
    example_before = (
        "features = backbone(x)\n"
        "loss_cls = criterion(classifier(features), y)\n"
        "loss_box = box_loss(regressor(features), boxes)\n"
        "optimizer.zero_grad()\n"
        "loss_cls.backward()\n"
        "loss_box.backward()\n"
        "optimizer.step()\n"
    )
    example_after = example_before.replace(
        "loss_cls.backward()", "loss_cls.backward(retain_graph=True)"
    )

    def may_apply(self, text: str) -> bool:
        calls = len(_BACKWARD_TEXT.findall(text))
        return calls >= 2 or (calls == 1 and bool(_LOOP_TEXT.search(text)))

    def check(self, analysis: FileAnalysis) -> Iterator[RuleFinding]:
        provenance = Provenance(analysis)
        checker = _Checker(analysis, provenance)
        for sites in _sites_by_scope(analysis).values():
            for position, site in enumerate(sites):
                if not site.retains:
                    finding = checker.judge(site, sites[position + 1 :])
                    if finding is not None:
                        yield finding


# -- what it detects ------------------------------------------------------------------------
def _sites_by_scope(analysis: FileAnalysis) -> dict[ScopeNode, list[_Site]]:
    sites: dict[ScopeNode, list[_Site]] = {}
    for node in analysis.index.parents:
        if isinstance(node, cst.Call):
            site = _site(analysis, node)
            if site is not None:
                sites.setdefault(analysis.scope_of(node), []).append(site)
    for scope_sites in sites.values():
        scope_sites.sort(key=lambda site: analysis.index.start[site.call])
    return sites


def _site(analysis: FileAnalysis, call: cst.Call) -> _Site | None:
    if any(arg.star == "**" for arg in call.args):
        return None  # `**kwargs` may already hold retain_graph: nothing to say
    statement = analysis.statement_of(call)
    if statement is None:
        return None
    func = call.func
    form = analysis.qualified_name(func) or ""
    if form in _POSITIONS:
        first = _argument(call, 0, "outputs" if form == "torch.autograd.grad" else "tensors")
        if first is None:
            return None
        roots = [first]
        if isinstance(first, (cst.List, cst.Tuple)):
            roots = [element.value for element in first.elements]
    elif isinstance(func, cst.Attribute) and func.attr.value == "backward":
        if not _may_be_tensor(analysis, func.value):
            return None
        form, roots = "backward", [func.value]
    else:
        return None
    inputs_position = 1 if form == "torch.autograd.grad" else None
    inputs = _argument(call, inputs_position, "inputs")
    return _Site(call, form, roots, inputs, _retains(call, form), statement)


def _may_be_tensor(analysis: FileAnalysis, node: cst.BaseExpression) -> bool:
    """Not a module, object or class: `Function.backward(ctx, grad)` of a custom autograd
    Function and `module.backward(...)` methods are not tensor backward calls."""
    if analysis.value_of(node).kind not in (Kind.TENSOR, Kind.UNKNOWN):
        return False
    return not (isinstance(node, cst.Name) and node.value[:1].isupper())


def _argument(call: cst.Call, position: int | None, keyword: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    if position is not None and position < len(positional):
        return positional[position]
    return None


def _retains(call: cst.Call, form: str) -> bool:
    """Whether the call keeps its graph: `retain_graph` given (other than a literal False),
    or `create_graph` given (other than False), which retain_graph defaults to."""
    for keyword, position in _POSITIONS[form].items():
        value = _argument(call, position, keyword)
        if value is not None and not (
            isinstance(value, cst.Name) and value.value in ("False", "None")
        ):
            return True
    return False


# -- when it is safe ------------------------------------------------------------------------
class _Checker:
    def __init__(self, analysis: FileAnalysis, provenance: Provenance) -> None:
        self.analysis = analysis
        self.provenance = provenance
        self._lines: dict[cst.CSTNode, object] | None = None

    def judge(self, site: _Site, later: list[_Site]) -> RuleFinding | None:
        unsure: tuple[_Site | None, _Sharing] | None = None
        for partner in later:
            if not self._may_follow(site, partner):
                continue
            sharing = self._shared(site, partner)
            if sharing.verdict is _Verdict.SAVES:
                return self._pair_finding(site, partner, sharing)
            if sharing.verdict is _Verdict.UNSURE and unsure is None:
                unsure = (partner, sharing)
        loops = self.analysis.enclosing_loops(site.call)
        if loops:
            sharing = self._shared_across_iterations(site, loops[0])
            if sharing.verdict is _Verdict.SAVES:
                return self._loop_finding(site, loops, sharing)
            if sharing.verdict is _Verdict.UNSURE and unsure is None:
                unsure = (None, sharing)
        if unsure is not None:
            return self._unsure_finding(site, *unsure)
        return None

    # -- sharing ----------------------------------------------------------------------------
    def _roots(self, site: _Site) -> list[Origin]:
        return [self.provenance.of(root) for root in site.roots]

    def _shared(self, first: _Site, second: _Site) -> _Sharing:
        certain = _graph(self._roots(first), True) & _graph(self._roots(second), True)
        possible = _graph(self._roots(first), False) & _graph(self._roots(second), False)
        return self._verdict(first, certain, possible)

    def _shared_across_iterations(self, site: _Site, loop: cst.For | cst.While) -> _Sharing:
        """What two iterations of `loop` running `site` both backpropagate through: what is
        evaluated once before the loop, and what different elements of the iterated
        collection have in common."""
        certain: set[Origin] = set()
        possible: set[Origin] = set()
        for root in self._roots(site):
            once_certain, once_possible = _evaluated_once(root, loop, self.analysis)
            certain |= once_certain
            possible |= once_possible
        return self._verdict(site, certain, possible)

    def _verdict(self, first: _Site, certain: set[Origin], possible: set[Origin]) -> _Sharing:
        freed = self._freed_by(first)
        saving = [
            node
            for node in certain
            if saves_tensors(node) and node.grad is Grad.ATTACHED and freed(node)
        ]
        if saving:
            return _Sharing(_Verdict.SAVES, self._latest(saving))
        doubtful = [node for node in possible if saves_tensors(node) is not False]
        if doubtful:
            node = self._latest(doubtful)
            return _Sharing(_Verdict.UNSURE, node, self._why_unsure(node, certain, freed))
        return _Sharing(_Verdict.NOTHING)

    def _freed_by(self, site: _Site) -> Callable[[Origin], bool]:
        """Which shared nodes `site` certainly runs, and so frees: its whole graph, or with
        `inputs` only the nodes from which an input can be reached (a tensor in `inputs`, or
        a module whose `.parameters()` are)."""
        if site.inputs is None:
            return lambda node: True
        wanted = {
            origin
            for origin, _ in walk(self.provenance.of(site.inputs))
            if origin.kind is OriginKind.LEAF or origin.is_graph_node
        }
        owners = {
            self.provenance.module_constructor(receiver)
            for receiver in _parameter_owners(site.inputs)
        } - {None}

        def runs(node: Origin) -> bool:
            for origin, _ in walk(node, certain_only=True):
                if origin in wanted:
                    return True
                call = origin.expression
                if origin.kind is OriginKind.FORWARD and isinstance(call, cst.Call):
                    if self.provenance.module_constructor(call.func) in owners:
                        return True
            return False

        return runs

    def _why_unsure(
        self, node: Origin, certain: set[Origin], freed: Callable[[Origin], bool]
    ) -> str:
        saves = saves_tensors(node)
        if saves is None:
            what = f"`{node.key}`" if node.key else "this operation"
            return f"gradfix does not know whether {what} saves tensors for backward"
        if node.grad is not Grad.ATTACHED:
            return "gradfix cannot prove it is part of the autograd graph"
        if node in certain and not freed(node):
            return "the first call differentiates only with respect to some inputs"
        return "it is reached through a branch or a call gradfix cannot see into"

    def _latest(self, nodes: list[Origin]) -> Origin:
        """The shared node closest to the roots (latest in the source): the one to name."""
        return max(
            nodes,
            key=lambda node: (
                self.analysis.index.start.get(node.site, -1),
                self.provenance.binding_of(node) is not None,
            ),
        )

    # -- order and separation ---------------------------------------------------------------
    def _may_follow(self, first: _Site, second: _Site) -> bool:
        """Whether `second` can run after `first` in one pass, and is not expected to fail."""
        if _exclusive_branches(self.analysis, first.call, second.call):
            return False
        return not _expects_error(self.analysis, second.call)

    def _updates_between(self, start: cst.CSTNode, end: cst.CSTNode) -> cst.CSTNode | None:
        """The first parameter update (optimizer step, in-place write to a parameter) that
        runs after `start` and before `end`, in source order."""
        index = self.analysis.index
        scope = self.analysis.scope_of(start)
        after, before = index.end[start], index.start[end]
        for node in index.parents:
            if after <= index.start[node] < before and _updates_parameters(
                self.analysis, self.provenance, node
            ):
                if self.analysis.scope_of(node) is scope:
                    return node
        return None

    def _update_in_loop(self, loop: cst.For | cst.While) -> cst.CSTNode | None:
        index = self.analysis.index
        body = loop.body
        for node in index.parents:
            if index.start[body] <= index.start[node] < index.end[body] and _updates_parameters(
                self.analysis, self.provenance, node
            ):
                return node
        return None

    def _nothing_between(self, first: _Site, second: _Site) -> bool:
        """Whether only tensor computations run between the two calls (no step, no zero_grad,
        no reading of `.grad`), so that one backward of the sum is equivalent."""
        if first.form != "backward" or second.form != "backward" or first.call.args:
            return False
        index = self.analysis.index
        after, before = index.end[first.statement], index.start[second.statement]
        for node in index.parents:
            if after <= index.start[node] < before:
                if isinstance(node, cst.Attribute) and node.attr.value in ("grad", "zero_grad"):
                    return False
                if isinstance(node, (cst.For, cst.While, cst.If, cst.Return)):
                    return False
        return not self.analysis.enclosing_loops(second.call) or (
            self.analysis.enclosing_loops(second.call) == self.analysis.enclosing_loops(first.call)
        )

    # -- findings ---------------------------------------------------------------------------
    def _pair_finding(self, site: _Site, partner: _Site, sharing: _Sharing) -> RuleFinding:
        shared = self._describe(sharing.through)
        call, other = self._code(site.call), self._code(partner.call)
        line = self._line(partner.call)
        update = self._updates_between(site.statement, partner.statement)
        if update is not None:
            message = (
                f"`{call}` and `{other}` (line {line}) both backpropagate through {shared}, "
                f"whose saved tensors the first call frees, and `{self._code(update)}` (line "
                f"{self._line(update)}) updates parameters in between: `retain_graph=True` "
                f"would only turn the {_TWICE_ERROR} error into 'modified by an inplace "
                "operation' (pytorch/pytorch#39141). Move the step after the last backward."
            )
            return RuleFinding(site.call, message, Tier.REPORT)
        message = (
            f"`{call}` frees the saved tensors of {shared}, which `{other}` (line {line}) "
            f"backpropagates through again: it raises {_TWICE_ERROR}. Pass "
            "`retain_graph=True` here"
        )
        if self._nothing_between(site, partner):
            sum_code = f"({self._code(site.roots[0])} + {self._code(partner.roots[0])})"
            message += (
                f"; as nothing runs between them, `{sum_code}.backward()` gives the same "
                "gradients in one cheaper pass"
            )
        replacement = _with_retain_graph(site.call, cst.Name("True"))
        return RuleFinding(site.call, message + ".", Tier.SAFE, {site.call: replacement})

    def _loop_finding(
        self, site: _Site, loops: list[cst.For | cst.While], sharing: _Sharing
    ) -> RuleFinding:
        loop = loops[0]
        call, shared = self._code(site.call), self._describe(sharing.through)
        repeated = (
            f"`{call}` runs on every iteration of the loop at line {self._line(loop)}, and "
            f"every iteration backpropagates through {shared}, which is computed once for all "
            f"of them: the second iteration raises {_TWICE_ERROR}."
        )
        update = self._update_in_loop(loop)
        if update is not None:
            message = (
                f"{repeated} `{self._code(update)}` (line {self._line(update)}) updates "
                "parameters between iterations, so retaining the graph would fail with "
                "'modified by an inplace operation' instead (pytorch/pytorch#39141): recompute "
                f"{shared} in each iteration, or move the step after the loop."
            )
            return RuleFinding(site.call, message, Tier.REPORT)
        outer_shared = len(loops) > 1 and evaluated_outside(
            sharing.through, loops[1], self.analysis
        )
        condition = (
            None if outer_shared else _last_iteration_test(self.analysis, self.provenance, loop)
        )
        if condition is None:
            message = (
                f"{repeated} Retain the graph on every iteration but the last (gradfix "
                "cannot write that condition for this loop)."
            )
            return RuleFinding(site.call, message, Tier.REPORT)
        code = self.analysis.module.code_for_node(condition)
        message = f"{repeated} Retain it on all but the last: `retain_graph={code}`."
        replacement = _with_retain_graph(site.call, condition)
        return RuleFinding(site.call, message, Tier.SAFE, {site.call: replacement})

    def _unsure_finding(self, site: _Site, partner: _Site | None, sharing: _Sharing) -> RuleFinding:
        shared = self._describe(sharing.through)
        call = self._code(site.call)
        if partner is None:
            where = "every iteration of its loop may backpropagate through"
        else:
            where = (
                f"`{self._code(partner.call)}` (line {self._line(partner.call)}) may "
                "backpropagate through"
            )
        message = (
            f"After `{call}`, {where} {shared} again ({sharing.why_unsure}). If it raises "
            f"{_TWICE_ERROR}, pass `retain_graph=True` to `{call}`"
            + (" on all iterations but the last." if partner is None else ".")
        )
        return RuleFinding(site.call, message, Tier.REPORT)

    # -- message helpers --------------------------------------------------------------------
    def _describe(self, origin: Origin | None) -> str:
        if origin is None or origin.expression is None:
            return "a common part of the graph"
        binding = self.provenance.binding_of(origin)
        if binding is not None and binding.kind is BindingKind.ASSIGN:
            return f"`{binding.key}` (`{self._code(binding.statement)}`, line {self._line(binding.statement)})"
        return f"`{self._code(origin.expression)}` (line {self._line(origin.expression)})"

    def _code(self, node: cst.CSTNode) -> str:
        code = self.analysis.module.code_for_node(node).strip()
        code = " ".join(code.split())
        return code if len(code) <= 60 else code[:57] + "..."

    def _line(self, node: cst.CSTNode) -> int:
        if self._lines is None:
            wrapper = MetadataWrapper(self.analysis.module, unsafe_skip_copy=True)
            self._lines = dict(wrapper.resolve(PositionProvider))
        position = self._lines.get(node)
        return position.start.line if position is not None else 0  # type: ignore[attr-defined]


# -- sharing helpers ---------------------------------------------------------------------------
def _graph(roots: list[Origin], certain_only: bool) -> set[Origin]:
    nodes: set[Origin] = set()
    for root in roots:
        nodes |= reachable_graph_nodes(root, certain_only)
    return nodes


def _evaluated_once(
    root: Origin, loop: cst.For | cst.While, analysis: FileAnalysis
) -> tuple[set[Origin], set[Origin]]:
    """The graph nodes of `root` that two iterations of `loop` share (certainly, possibly):
    those evaluated outside the loop, and those common to different elements of the
    collection the loop iterates."""
    certain: set[Origin] = set()
    possible: set[Origin] = set()

    def own_element(origin: Origin) -> bool:
        return origin.kind is OriginKind.ELEMENT and origin.repeats_in is loop

    for origin, is_certain in walk(root, stop=own_element):
        if own_element(origin):
            element_certain, element_possible = _common_to_elements(origin.inputs[0], analysis)
            possible |= element_possible
            if is_certain:
                certain |= element_certain
        elif origin.is_graph_node and not evaluated_in(origin, loop, analysis):
            possible.add(origin)
            if is_certain:
                certain.add(origin)
    return certain, possible


def _common_to_elements(
    collection: Origin, analysis: FileAnalysis
) -> tuple[set[Origin], set[Origin]]:
    """Graph nodes shared by different elements of `collection`: per comprehension or loop
    template, what is evaluated outside the region that repeats it; across literal items,
    what they have in common."""
    if collection.kind is not OriginKind.COLLECTION:
        return set(), set()
    certain: set[Origin] = set()
    possible: set[Origin] = set()
    literal = [item for item in collection.inputs if item.repeats_in is None]
    for item in collection.inputs:
        if item.repeats_in is None:
            continue
        for origin, is_certain in walk(item.inputs[0]):
            if origin.is_graph_node and not evaluated_in(origin, item.repeats_in, analysis):
                possible.add(origin)
                if is_certain:
                    certain.add(origin)
    graphs = [_graph([item.inputs[0]], True) for item in literal]
    loose = [_graph([item.inputs[0]], False) for item in literal]
    if len(graphs) >= 2:
        certain |= set.intersection(*graphs)
        for position, nodes in enumerate(loose):
            for other in loose[position + 1 :]:
                possible |= nodes & other
    return certain, possible


def evaluated_outside(origin: Origin | None, loop: cst.CSTNode, analysis: FileAnalysis) -> bool:
    return origin is not None and not evaluated_in(origin, loop, analysis)


# -- order, branches, updates ------------------------------------------------------------------
def _parameter_owners(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`model` for each `model.parameters()` / `model.named_parameters()` in `node`."""
    owners: list[cst.BaseExpression] = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in (
                "parameters",
                "named_parameters",
            ):
                owners.append(func.value)

    node.visit(Finder())
    return owners


def _exclusive_branches(analysis: FileAnalysis, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """Whether `a` and `b` sit in different branches of one `if` (never both run)."""
    ancestors: dict[cst.CSTNode, cst.CSTNode] = {}  # ancestor -> its child on the way to `a`
    child, current = a, analysis.parent(a)
    while current is not None:
        ancestors[current] = child
        child, current = current, analysis.parent(current)
    child, current = b, analysis.parent(b)
    while current is not None and current not in ancestors:
        child, current = current, analysis.parent(current)
    if not isinstance(current, cst.If):
        return False
    branch_a, branch_b = ancestors[current], child
    return branch_a is not branch_b and current.test not in (branch_a, branch_b)


def _expects_error(analysis: FileAnalysis, node: cst.CSTNode) -> bool:
    """Whether `node` runs where the code expects an exception: under `with
    self.assertRaises(...)` / `pytest.raises(...)`, or in a `try` body."""
    child, current = node, analysis.parent(node)
    while current is not None and not isinstance(current, cst.FunctionDef):
        if isinstance(current, cst.With):
            for item in current.items:
                context = item.item
                callee = context.func if isinstance(context, cst.Call) else context
                if _EXPECTS_ERROR.search(dotted_name(callee) or ""):
                    return True
        if isinstance(current, cst.Try) and child is current.body:
            return True
        child, current = current, analysis.parent(current)
    return False


def _updates_parameters(analysis: FileAnalysis, provenance: Provenance, node: cst.CSTNode) -> bool:
    """An optimizer or grad-scaler step, or an in-place write to a parameter."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        method = node.func.attr.value
        receiver = node.func.value
        if method == "step":
            if analysis.value_of(receiver).kind is Kind.OPTIMIZER:
                return True
            name = (dotted_name(receiver) or "").rsplit(".", 1)[-1]
            return bool(_STEPPER_NAME.search(name)) and not _SCHEDULER_NAME.search(name)
        in_place = method.endswith("_") and not method.startswith("_")
        return in_place and _is_parameter(analysis, provenance, receiver)
    if isinstance(node, cst.AugAssign):
        return _is_parameter(analysis, provenance, node.target)
    return False


def _is_parameter(analysis: FileAnalysis, provenance: Provenance, node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Attribute):
        if node.attr.value == "data":
            return _is_parameter(analysis, provenance, node.value)
        if node.attr.value in ("weight", "bias"):
            return True
    if isinstance(node, cst.Name):
        for binding in provenance.reaching(node.value, node):
            iterable = binding.value
            if binding.kind is BindingKind.LOOP_TARGET and iterable is not None:
                if "parameters(" in analysis.module.code_for_node(iterable):
                    return True
    return provenance.of(node).kind is OriginKind.LEAF


# -- how it rewrites ---------------------------------------------------------------------------
def _with_retain_graph(call: cst.Call, value: cst.BaseExpression) -> cst.Call:
    """`call` with `retain_graph=<value>` appended, in the layout of its other arguments."""
    new = cst.Arg(
        value=value,
        keyword=cst.Name("retain_graph"),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    # The old last argument gets the separator used between the others (a call laid out one
    # argument per line keeps that layout); a trailing comma moves to the new argument.
    separator = args[-2].comma if len(args) > 1 else None
    if not isinstance(separator, cst.Comma):
        trailing = isinstance(last.comma, cst.Comma)
        spacing = call.whitespace_before_args if trailing else cst.SimpleWhitespace(" ")
        separator = cst.Comma(whitespace_after=spacing)
    if isinstance(last.comma, cst.Comma):
        new = new.with_changes(comma=last.comma)
    args[-1] = last.with_changes(comma=separator)
    return call.with_changes(args=[*args, new])


def _last_iteration_test(
    analysis: FileAnalysis, provenance: Provenance, loop: cst.For | cst.While
) -> cst.BaseExpression | None:
    """An expression true on every iteration of `loop` but the last: `i < len(xs) - 1` with an
    `enumerate` or `range` index, `x is not xs[-1]` over a list of distinct tensors or
    modules; None when gradfix cannot write one."""
    if not isinstance(loop, cst.For) or loop.orelse is not None:
        return None
    target, iterable = loop.target, loop.iter
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name):
        builtin = iterable.func.value
        args = [arg.value for arg in iterable.args]
        keywords = [arg for arg in iterable.args if arg.keyword is not None or arg.star]
        if keywords:
            return None
        if builtin == "enumerate" and len(args) == 1 and isinstance(target, cst.Tuple):
            index = target.elements[0].value if target.elements else None
            if isinstance(index, cst.Name) and _is_sized(analysis, provenance, args[0]):
                length = cst.Call(cst.Name("len"), [cst.Arg(args[0])])
                return _less_than_last(index, length)
        if builtin == "range" and len(args) in (1, 2) and isinstance(target, cst.Name):
            return _less_than_last(target, args[-1])
        return None
    if isinstance(target, cst.Name) and isinstance(iterable, (cst.Name, cst.Attribute)):
        if _distinct_items(analysis, provenance, iterable):
            last = cst.Subscript(
                iterable,
                [
                    cst.SubscriptElement(
                        cst.Index(cst.UnaryOperation(cst.Minus(), cst.Integer("1")))
                    )
                ],
            )
            return cst.Comparison(target, [cst.ComparisonTarget(cst.IsNot(), last)])
    return None


def _less_than_last(index: cst.Name, stop: cst.BaseExpression) -> cst.Comparison:
    if not isinstance(stop, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer)):
        stop = stop.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    last = cst.BinaryOperation(stop, cst.Subtract(), cst.Integer("1"))
    return cst.Comparison(index, [cst.ComparisonTarget(cst.LessThan(), last)])


def _is_sized(analysis: FileAnalysis, provenance: Provenance, node: cst.BaseExpression) -> bool:
    """A list, tuple, tensor or ModuleList: `len()` works on it."""
    if analysis.value_of(node).kind in (Kind.LIST, Kind.TUPLE, Kind.TENSOR):
        return True
    origin = provenance.of(node)
    if origin.kind is OriginKind.COLLECTION and isinstance(
        origin.expression, (cst.List, cst.Tuple, cst.ListComp)
    ):
        return True
    constructor = provenance.module_constructor(node)
    return (
        constructor is not None
        and analysis.qualified_name(constructor.func) == "torch.nn.ModuleList"
    )


def _distinct_items(
    analysis: FileAnalysis, provenance: Provenance, node: cst.BaseExpression
) -> bool:
    """A list or tuple whose elements are distinct tensors or modules, so that `x is xs[-1]`
    holds for the last one only: a comprehension or appended list of tensors, a literal of
    different tensors, or a ModuleList."""
    constructor = provenance.module_constructor(node)
    if (
        constructor is not None
        and analysis.qualified_name(constructor.func) == "torch.nn.ModuleList"
    ):
        return True
    origin = provenance.of(node)
    if origin.kind is not OriginKind.COLLECTION or not isinstance(
        origin.expression, (cst.List, cst.Tuple, cst.ListComp)
    ):
        return False
    values = [item.inputs[0] for item in origin.inputs]
    tensors = all(
        value.kind in (OriginKind.OP, OriginKind.FORWARD, OriginKind.LOSS) for value in values
    )
    return tensors and len(set(values)) == len(values)
