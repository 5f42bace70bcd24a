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
branch, a call it cannot see into) are reported, never rewritten. So is any call between the
two backward passes that may update parameters in place (`training.may_update_parameters`: an
optimizer's `step()` or `first_step()`, a function of the file that writes tensors in place):
retaining the graph there turns the error into the in-place error (pytorch/pytorch#39141); the
second loss must be recomputed after the update, or the step moved after the last backward.
Earlier calls with `retain_graph` or `create_graph` already given are left alone, unless a
parameter update follows before the second backward: that is reported at the update, the
statement to move. A second backward of the whole first loss (the same value, or a sum still
holding it, as when a helper backpropagates the loss it returns and the caller does again) is
reported at the repeat: retaining would add that loss's gradients twice. A call of a function
of the file whose backward differentiates exactly what it is passed (`optimizer.backward(
loss)` of a wrapper class, `backward_step(loss)`) counts as a backward of that argument where
it is called; a fix there is reported, as the wrapper takes no `retain_graph`. An unsure
pair whose second root is a total the first root's name still holds (`loss += loss_t` after
`loss.backward()` with no rebinding of `loss` between) is reported at that augmented assignment,
with the advice to reset the total.

A GAN discriminator loss on the generator's undetached output is rewritten to read
`fake.detach()` instead, when that provably gives the same update (`_detach_instead`): the
first loss reaches the shared graph only through reads of one named value, the modules behind
it are zeroed (`zero_grad()` in the same block) between the two calls, and nothing steps them or
reads their gradients before that.

Backward calls in two methods of one class are paired through the class's own methods: a third
method calling `self.a()` then `self.b()` (in one block, or the second nested in a later
statement), both backpropagating through graphs that `self` attributes cache, each bound by one
other method that nothing between the two calls may run again (`judge_methods`). Rewritten when
they certainly share a saving node and nothing between them may update parameters; reported
when a step runs between them (pix2pix: detach in the discriminator's loss) or the sharing runs
through a branch. Also through calls (`judge_calls`): a backward in a function of the file (a
loss object's `__call__`), its roots followed with the arguments a call passes, paired with a
later backward of the caller, is reported (the roles are named, not proven); a backward in the
caller followed by a call of a function whose backward reaches the same saving node through
what it is passed (a helper's penalty on the same features) is judged like two calls of one
body.

Rewrites every call but the last over the shared graph with `retain_graph=True` appended to its
arguments (layout kept); in a loop, `retain_graph=i < len(losses) - 1` (with an index from
`enumerate` or `range`) or `retain_graph=loss is not losses[-1]` (a loop over a list of tensors
or modules), so the last iteration frees the graph.
"""

from __future__ import annotations

import ast
import bisect
import re
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

from codemods.analysis import FileAnalysis, Grad, Kind, torch_api
from codemods.analysis.bindings import BindingKind
from codemods.analysis.imports import dotted_name
from codemods.analysis.index import TRY_TYPES, ClassInfo, ScopeNode
from codemods.analysis.interpreter import target_key
from codemods.analysis.layers import sequential_layer_classes
from codemods.analysis.provenance import (
    Origin,
    OriginKind,
    Provenance,
    evaluated_in,
    reachable_graph_nodes,
    saves_tensors,
    walk,
)
from codemods.analysis.torch_api import at_word_starts
from codemods.findings import Tier
from codemods.lazy_libcst import cst
from codemods.rules.base import Rewrite, Rule, RuleFinding
from codemods.rules.edits import calling

# `x.backward(`, `torch.autograd.backward(`, `torch.autograd.grad(`, `grad(` once imported.
_GRAD_CALL_TEXT = re.compile(r"grad\(")  # at a word's start: `grad(`, not `no_grad(`
_LOOP_TEXT = re.compile(r"^\s*(?:for|while)\b", re.MULTILINE)
_TWICE_ERROR = '"Trying to backward through the graph a second time"'
# Context managers under which a failing backward is what the code expects.
_EXPECTS_ERROR = re.compile(r"assertRaises|raises")
# Container methods that change a list in place (so `xs[-1]` or `len(xs)` may change).
_MUTATING_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "reverse"})
# Between two backward calls, these mean something reads or resets gradients: one backward
# of the sum would not be equivalent.
_GRADIENT_ATTRIBUTES = frozenset({"grad", "zero_grad", "step", "backward"})
# Origins whose make-up gradfix cannot see.
_OPAQUE = frozenset({OriginKind.UNKNOWN, OriginKind.CARRIED})
# What LibCST's FunctionDef, For and With each covered (their async forms too).
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_FORS = (ast.For, ast.AsyncFor)
_WITHS = (ast.With, ast.AsyncWith)
# Statements with a body: control flow, definitions (LibCST's BaseCompoundStatement).
_COMPOUND = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    *TRY_TYPES,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Match,
)
Loop = ast.For | ast.AsyncFor | ast.While


@dataclass(frozen=True)
class _Form:
    """Where one backward function takes its arguments: (position, keyword) pairs, the
    positions counted without the receiver."""

    roots: tuple[int, str] | None  # the tensors differentiated; None: the receiver
    inputs: tuple[int, str] | None  # what it differentiates with respect to
    retain_graph: tuple[int, str]
    create_graph: tuple[int, str] | None


_FORMS = {
    "backward": _Form(None, (3, "inputs"), (1, "retain_graph"), (2, "create_graph")),
    "torch.autograd.backward": _Form(
        (0, "tensors"), (5, "inputs"), (2, "retain_graph"), (3, "create_graph")
    ),
    "torch.autograd.grad": _Form(
        (0, "outputs"), (1, "inputs"), (3, "retain_graph"), (4, "create_graph")
    ),
    "torch.distributed.autograd.backward": _Form((1, "roots"), None, (2, "retain_graph"), None),
}


@dataclass
class _Site:
    """One backward call: what it differentiates and how."""

    call: ast.Call
    form: str  # a key of _FORMS
    roots: list[ast.expr]  # the tensors it differentiates
    inputs: ast.expr | None  # given: it runs only the paths to them
    retains: bool  # retain_graph or create_graph is given: it frees nothing
    statement: ast.stmt
    # A call of the file's function that backpropagates what it is passed
    # (`optimizer.backward(loss)` of a wrapper class): the backward call inside it.
    relays: ast.Call | None = None


class _Verdict(Enum):
    SAVES = "saves"  # proven: the second backward fails
    UNSURE = "unsure"  # it may: report
    NOTHING = "nothing"


@dataclass
class _Sharing:
    verdict: _Verdict
    nodes: list[Origin] = field(default_factory=list)  # the shared nodes the verdict rests on
    why_unsure: str = ""


@dataclass
class _Detach:
    """Detaching instead of retaining: the reads of the first loss to detach, and the
    `zero_grad()` that proves the gradients they carried are never used."""

    reads: list[ast.Name]
    zero_grad: ast.Call


class SharedGraphBackward(Rule):
    code = "GF003"
    name = "shared-graph-backward"
    summary = "A second backward runs through a graph part the first one freed"
    explanation = (
        "A backward pass frees the tensors the graph saved for it (the input of a Linear, the "
        "output of a sigmoid, ...) as it goes, so a second `.backward()` or "
        "`torch.autograd.grad` that reaches the same nodes fails with 'Trying to backward "
        "through the graph a second time'. This happens with several losses over one "
        "forward: multi-task heads on a shared trunk, a GAN step reusing one generator "
        "output, an auxiliary loss, `autograd.grad` called twice on the same outputs, a loop "
        "that backpropagates each loss of a list.\n\n"
        "gradfix adds `retain_graph=True` to every call but the last over the shared part; in "
        "a loop, a condition true on every iteration but the last (`retain_graph=i < "
        "len(losses) - 1`, `retain_graph=loss is not losses[-1]`). When nothing runs between "
        "the calls, `(loss_a + loss_b).backward()` gives the same gradients in one cheaper "
        "pass: retaining keeps every saved buffer alive until the graph is dropped.\n\n"
        "A GAN discriminator loss built on the generator's output (`D(fake)`) is fixed with "
        "`D(fake.detach())` instead, when the code proves the update is the same: that loss "
        "reaches the generator only through `fake`, and `opt_g.zero_grad()` (or "
        "`G.zero_grad()`) clears the generator's gradients after its backward and before the "
        "generator's, with no step or read of them in between. Otherwise the generator's "
        "update uses what the discriminator loss left in it, and the graph is retained.\n\n"
        "Backward calls in two methods of one class, called in turn by a third, over a "
        "graph another method caches in `self` (`forward()` sets `self.fake_B`, "
        "`optimize_parameters()` calls `backward_D()` then `backward_G()`) get the same fix "
        "when nothing between them updates parameters or runs `forward()` again; with the "
        "discriminator's step between them (pix2pix) they are reported with both methods "
        "named: `self.fake_B.detach()` in the discriminator's loss is the usual fix. A "
        "backward followed by a call of a helper of the file that backpropagates a loss on "
        "what it is passed (a penalty on the same features) is fixed like two calls in one "
        "function; a backward inside a function or a loss object's `__call__` followed by "
        "one in its caller through what the caller passed it is reported.\n\n"
        "Loss modules placed as layers of one `nn.Sequential` (a style-transfer network "
        "whose `forward()` stores `self.loss` from its input, and whose `backward()` method "
        "runs `self.loss.backward()`) backpropagated in loops over lists of them are reported "
        "at that method: sum the losses and call backward once, or retain the graph on all "
        "but the last. A loop over a list of new instances of the file's own loss classes "
        "gets `retain_graph=crit is not criteria[-1]`.\n\n"
        "Reported, not rewritten: any call between the two passes that may update "
        "parameters in place, an `optimizer.step()`, a two-step optimizer's `first_step()` "
        "(SAM), a function of the file that writes tensors in place (retaining would turn "
        "the error into 'modified by an inplace operation', pytorch/pytorch#39141: recompute "
        "the second loss after the update, or move the step after the last backward), "
        "and shared parts gradfix cannot prove save tensors (an op missing from its table, a "
        "call it cannot follow). When such a part reaches the second loss through a total "
        "the first one left (`loss += loss_t` after `loss.backward()`, with no `loss = 0` "
        "between, as in a SAM step's second pass), the report is at that `+=`: reset the "
        "total before it. Also reported: a backward hidden in a function of the file "
        "(`optimizer.backward(loss)` of a wrapper class) followed by another over the same "
        "graph, as the wrapper takes no `retain_graph`; and a second backward of the same "
        "loss (a helper backpropagates the loss it returns, and the caller does again): "
        "remove the repeat, as retaining would add its gradients twice. Left alone: "
        "separate forwards, shared parts made only of ops "
        "that save nothing (add, sum, mean, views, cat, clone), calls that already pass "
        "`retain_graph` or `create_graph=True`, and calls the code expects to fail "
        "(`assertRaises`, `pytest.raises`, `try`)."
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
        calls = text.count(".backward(") + sum(1 for _ in at_word_starts(_GRAD_CALL_TEXT, text))
        return calls >= 2 or (calls == 1 and bool(_LOOP_TEXT.search(text)))

    def check(self, analysis: FileAnalysis) -> Iterator[RuleFinding]:
        provenance = Provenance(analysis)
        checker = _Checker(analysis, provenance)
        by_scope = _sites_by_scope(analysis)
        relayed = _relayed_sites(analysis, provenance, by_scope)
        for sites in by_scope.values():
            for position, site in enumerate(sites):
                if site.retains:
                    finding = checker.judge_retained(site, sites[position + 1 :])
                else:
                    finding = checker.judge(site, sites[position + 1 :])
                if finding is not None:
                    checker.reported.add(site.call)
                    yield _through_wrappers(analysis, finding, relayed)
        for info in analysis.index.classes.values():
            for finding in checker.judge_methods(info, by_scope):
                yield _through_wrappers(analysis, finding, relayed)
        for finding in checker.judge_calls(by_scope):
            yield _through_wrappers(analysis, finding, relayed)
        yield from checker.judge_layer_losses(by_scope)


# -- what it detects ------------------------------------------------------------------------
def _sites_by_scope(analysis: FileAnalysis) -> dict[ScopeNode, list[_Site]]:
    """The backward calls of each function body (and of the module), in source order."""
    sites: dict[ScopeNode, list[_Site]] = {}
    for node in analysis.index.of_types(ast.Call):
        if isinstance(node, ast.Call):
            site = _site(analysis, node)
            if site is not None:
                sites.setdefault(analysis.scope_of(node), []).append(site)
    for scope_sites in sites.values():
        scope_sites.sort(key=lambda site: analysis.index.start[site.call])
    return sites


def _relayed_sites(
    analysis: FileAnalysis, provenance: Provenance, by_scope: dict[ScopeNode, list[_Site]]
) -> dict[ast.Call, _Site]:
    """Adds to `by_scope` a site for each call of a function of the file whose backward
    differentiates exactly what the call passes (`optimizer.backward(loss)` of a wrapper whose
    `backward(self, loss)` runs `loss.backward()`): in the caller, that call is a backward of
    the argument. Returns them by call."""
    wrappers: dict[str, list[_Site]] = {}
    for scope, sites in by_scope.items():
        if isinstance(scope, _FUNCTIONS):
            parameters = {arg.arg for arg in analysis.passed_parameters(scope)}
            for site in sites:
                if site.inputs is None and all(
                    isinstance(root, ast.Name) and root.id in parameters for root in site.roots
                ):
                    wrappers.setdefault(scope.name, []).append(site)
    relayed: dict[ast.Call, _Site] = {}
    for name, inner_sites in wrappers.items():
        for call in analysis.index.calls_by_name.get(name, []):
            statement = analysis.statement_of(call)
            if not isinstance(statement, ast.stmt):
                continue
            function = provenance.function_run_by(call)
            for inner in inner_sites:
                if function is not analysis.scope_of(inner.call):
                    continue
                roots = _passed_roots(provenance, call, inner)
                if roots is not None:
                    site = _Site(
                        call, "backward", roots, None, inner.retains, statement, relays=inner.call
                    )
                    relayed[call] = site
                    by_scope.setdefault(analysis.scope_of(call), []).append(site)
    for scope_sites in by_scope.values():
        scope_sites.sort(key=lambda site: analysis.index.start[site.call])
    return relayed


def _passed_roots(provenance: Provenance, call: ast.Call, inner: _Site) -> list[ast.expr] | None:
    """The arguments of `call` that are, unchanged, what `inner` (a backward in the function
    `call` runs) differentiates; None unless every root of `inner` is one."""
    arguments = _argument_values(call)
    roots = []
    for root in inner.roots:
        origin = provenance.of_in_call(root, call)
        passed = [arg for arg in arguments if origin is not None and provenance.of(arg) is origin]
        if not passed or not _may_be_tensor(provenance.analysis, passed[0]):
            return None
        roots.append(passed[0])
    return roots


def _through_wrappers(
    analysis: FileAnalysis, finding: RuleFinding, relayed: dict[ast.Call, _Site]
) -> RuleFinding:
    """A fix that would pass `retain_graph` to a call of a wrapper function: the wrapper takes
    no such argument, so the finding is reported with where the argument belongs."""
    wrapped = [node for node in finding.replacements if node in relayed]
    if not wrapped:
        return finding
    call = wrapped[0]
    inner = relayed[call].relays
    position = analysis.positions.get(inner) if inner is not None else None
    where = f" (line {position.start.line})" if position is not None else ""
    cut = finding.message.find(". Pass ")
    problem = finding.message[: cut + 1] if cut >= 0 else finding.message
    message = (
        f"{problem} `{analysis.code_of(call, limit=60)}` runs its backward inside a function "
        f"of this file{where}, which takes no `retain_graph`, so gradfix cannot retain the "
        "graph for this call alone. Restructure: backpropagate the losses once, as a sum, or "
        "give that function a `retain_graph` argument to pass here."
    )
    return RuleFinding(finding.node, message, Tier.REPORT)


def _site(analysis: FileAnalysis, call: ast.Call) -> _Site | None:
    if any(keyword.arg is None for keyword in call.keywords):
        return None  # `**kwargs` may hold retain_graph already: nothing to say
    statement = analysis.statement_of(call)
    if statement is None:
        return None
    func = call.func
    form = analysis.qualified_name(func)
    if form in _FORMS and _FORMS[form].roots is not None:
        root = _argument(call, _FORMS[form].roots)
        if root is None:
            return None
        roots = [root]
        if isinstance(root, (ast.List, ast.Tuple)):
            roots = [_unstarred(element) for element in root.elts]
    elif isinstance(func, ast.Attribute) and func.attr == "backward":
        if not _may_be_tensor(analysis, func.value):
            return None
        form, roots = "backward", [func.value]
    else:
        return None
    spec = _FORMS[form]
    inputs = _argument(call, spec.inputs) if spec.inputs is not None else None
    return _Site(call, form, roots, inputs, _retains(call, spec), statement)


def _may_be_tensor(analysis: FileAnalysis, node: ast.expr) -> bool:
    """Not an imported name, module, object or class: `Function.backward(ctx, grad)` of a
    custom autograd Function and `dist_autograd.backward(...)` are no tensor's backward."""
    if analysis.qualified_name(node) is not None:
        return False
    kind = analysis.value_of(node).kind
    if kind is not Kind.UNKNOWN:
        return kind is Kind.TENSOR
    # A capitalised name nothing in the file assigns is likely a class from elsewhere; one the
    # file binds (`D_loss = ...`, `X, Y = batch`) is a value, whatever its spelling.
    return not (
        isinstance(node, ast.Name) and node.id[:1].isupper() and not analysis.assigns(node.id)
    )


def _argument(call: ast.Call, where: tuple[int, str]) -> ast.expr | None:
    position, keyword = where
    for arg in call.keywords:
        if arg.arg == keyword:
            return arg.value
    positional = [arg for arg in call.args if not isinstance(arg, ast.Starred)]
    return positional[position] if position < len(positional) else None


def _unstarred(node: ast.expr) -> ast.expr:
    """`x` for `*x`, else the node."""
    return node.value if isinstance(node, ast.Starred) else node


def _argument_values(call: ast.Call) -> list[ast.expr]:
    """The values passed to `call`, positional then keyword (`*xs` and `**kw` unwrapped)."""
    return [_unstarred(arg) for arg in call.args] + [arg.value for arg in call.keywords]


def _has_arguments(call: ast.Call) -> bool:
    return bool(call.args or call.keywords)


def _retains(call: ast.Call, form: _Form) -> bool:
    """Whether the call keeps its graph: `retain_graph` given (other than a literal False),
    or `create_graph`, which retain_graph defaults to."""
    for where in (form.retain_graph, form.create_graph):
        value = _argument(call, where) if where is not None else None
        literal_false = isinstance(value, ast.Constant) and (
            value.value is False or value.value is None
        )
        if value is not None and not literal_false:
            return True
    return False


# -- when it is safe ------------------------------------------------------------------------
class _Checker:
    def __init__(self, analysis: FileAnalysis, provenance: Provenance) -> None:
        self.analysis = analysis
        self.provenance = provenance
        self._in_order: list[ast.AST] | None = None
        self._graphs: dict[tuple[ast.Call, bool], set[Origin]] = {}
        self.reported: set[ast.Call] = set()  # backward calls that have their finding

    def judge(self, site: _Site, later: list[_Site]) -> RuleFinding | None:
        """The finding for `site`, given the backward calls after it in its scope."""
        unsure: tuple[_Site | None, _Sharing] | None = None
        for partner in later:
            if self.analysis.exclusive_branches(site.call, partner.call):
                continue
            if _expects_error(self.analysis, partner.call):
                continue
            sharing = self._shared(site, partner)
            if sharing.verdict is _Verdict.SAVES:
                return self._pair_finding(site, partner, sharing)
            if sharing.verdict is _Verdict.UNSURE and unsure is None:
                unsure = (partner, sharing)
        loops = self.analysis.enclosing_loops(site.call)
        if loops and not _expects_error(self.analysis, site.call):
            sharing = self._shared_across_iterations(site, loops[0])
            if sharing.verdict is _Verdict.SAVES:
                return self._loop_finding(site, loops, sharing)
            if sharing.verdict is _Verdict.UNSURE and unsure is None:
                unsure = (None, sharing)
        return self._unsure_finding(site, *unsure) if unsure is not None else None

    def judge_retained(self, site: _Site, later: list[_Site]) -> RuleFinding | None:
        """A call that already retains its graph, followed by a parameter update and then a
        backward over the same saved tensors: the update bumped the version of weights the
        retained graph saved, and the second backward raises 'modified by an inplace
        operation' (the GAN step of pytorch/pytorch#39141)."""
        for partner in later:
            if self.analysis.exclusive_branches(site.call, partner.call):
                continue
            if _expects_error(self.analysis, partner.call):
                continue
            update = self._first_update(self._nodes_between(site.statement, partner.statement))
            if update is None:
                continue
            sharing = self._shared(site, partner)
            if sharing.verdict is not _Verdict.SAVES:
                continue
            # Reported at the update: the retained backward is as the user meant it, the
            # step between is what breaks it (and what "move the step" edits).
            message = (
                f"`{self._code(update)}` updates parameters in place after "
                f"{self._label(site.call)} (line {self._line(site.call)}) retained the graph of "
                f"{self._describe(sharing.nodes[0])}, and {self._label(partner.call)} (line "
                f"{self._line(partner.call)}) backpropagates through that retained graph "
                "again: if the step changed a weight that graph saved, it raises 'one of the "
                "variables needed for gradient computation has been modified by an inplace "
                "operation' (pytorch/pytorch#39141). Move the step after the last backward, "
                "or recompute what the second loss needs after the step (in a GAN: the "
                "generator's loss from a fresh `D(fake)`, the discriminator's loss from "
                "`D(fake.detach())`)."
            )
            return RuleFinding(update, message, Tier.REPORT)
        return None

    def judge_calls(self, by_scope: dict[ScopeNode, list[_Site]]) -> Iterator[RuleFinding]:
        """Backward calls split between a function of the file and its caller, over the
        graph of what the caller passed it. A backward inside the function (a loss object's
        `__call__` that steps the discriminator), then one in the caller after the call:
        reported. A backward in the caller, then a later call of the function whose backward
        reaches the same saving node through the arguments (a helper that backpropagates an
        extra loss on the features it is given): rewritten like two calls of one body."""
        reported = self.reported
        names = {scope.name for scope in by_scope if isinstance(scope, _FUNCTIONS)}
        relayed = {site.call for sites in by_scope.values() for site in sites if site.relays}
        for scope, partners in by_scope.items():
            callees = [
                site for other, sites in by_scope.items() if other is not scope for site in sites
            ]
            # a wrapper's call is a backward site of the caller already
            calls = [call for call in self._calls_into(scope, names) if call not in relayed]
            last = self.analysis.index.start[partners[-1].call]
            for call in calls:
                if self.analysis.index.start[call] >= last:
                    continue
                for site in callees:
                    if site.call in reported or site.retains or site.inputs is not None:
                        continue
                    finding = self._call_finding(site, call, partners)
                    if finding is not None:
                        reported.add(site.call)
                        yield finding
            for call in calls:
                finding = self._caller_first_finding(call, partners, callees, reported)
                if finding is not None:
                    reported.add(finding.node)  # type: ignore[arg-type]
                    yield finding

    def judge_layer_losses(self, by_scope: dict[ScopeNode, list[_Site]]) -> Iterator[RuleFinding]:
        """Loss modules that are layers of one `nn.Sequential` (style transfer's content and
        style losses, added with `add_module`): `forward()` caches a loss computed from the
        layer's input in `self`, and a method backpropagates it (`self.loss.backward()`),
        called in a loop over a list of the modules (`for sl in style_losses:
        sl.backward()`) with no forward and no update in the loop. Every loss comes from the
        graph of the network's one forward, so the second backward fails. Reported, once per
        scope of such loops, at the first loop's backward: which call runs last is the
        lists' contents, which gradfix does not know. Left alone when one of them already
        retains the graph."""
        layer_classes = sequential_layer_classes(self.analysis)
        if not layer_classes:
            return
        loops: dict[ScopeNode, list[tuple[ast.Call, _Site]]] = {}
        for scope, sites in by_scope.items():
            info = self.analysis.class_of(scope)
            if info is None or info.name not in layer_classes or len(sites) != 1:
                continue
            forward = info.methods.get("forward")
            if (
                forward is None
                or scope is forward
                or not self._cached_by_forward(sites[0], forward)
            ):
                continue
            for call in self.analysis.index.calls_by_name.get(scope.name, []):  # type: ignore[union-attr]
                if (
                    self._looped_over_modules(call)
                    and self.provenance.function_run_by(call) is scope
                ):
                    loops.setdefault(self.analysis.scope_of(call), []).append((call, sites[0]))
        for calls in loops.values():
            calls.sort(key=lambda pair: self.analysis.index.start[pair[0]])
            site = calls[0][1]
            if any(inner.retains for _, inner in calls) or site.call in self.reported:
                continue
            self.reported.add(site.call)
            yield self._layer_losses_finding(calls)

    def _cached_by_forward(
        self, site: _Site, forward: ast.FunctionDef | ast.AsyncFunctionDef
    ) -> bool:
        """Whether every root of `site` is a `self` attribute that `forward` binds, certainly
        from the input it is passed (not a detached copy of it), and that the method of `site`
        does not bind itself."""
        method = self.analysis.scope_of(site.call)
        inputs = set(self.analysis.passed_parameters(forward))
        for root in site.roots:
            key = target_key(root) if isinstance(root, ast.Attribute) else None
            if key is None or not key.startswith("self."):
                return False
            if any(
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and target_key(node) == key
                for node in self.analysis.descendants(method)
            ):
                return False
            cached = self.provenance.attribute_at_exit(forward, key)
            if cached is None or not any(
                certain and node.kind is OriginKind.UNKNOWN and node.expression in inputs
                for node, certain in walk(cached)
            ):
                return False
        return True

    def _looped_over_modules(self, call: ast.Call) -> bool:
        """`for module in losses: module.backward()`: the receiver is the loop's target, and
        the loop's body runs no module (a forward per iteration) and no parameter update."""
        func = call.func
        loops = self.analysis.enclosing_loops(call)
        if not (loops and isinstance(loops[0], (ast.For, ast.AsyncFor))):
            return False
        loop = loops[0]
        if not (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and isinstance(loop.target, ast.Name)
            and loop.target.id == func.value.id
        ):
            return False
        body = self._nodes_within(loop.body)
        forwards = (Kind.MODULE, Kind.PASSTHROUGH)
        return self._first_update(body) is None and not any(
            isinstance(node, ast.Call)
            and node is not call
            and self.analysis.value_of(node.func).kind in forwards
            for node in body
        )

    def _layer_losses_finding(self, calls: list[tuple[ast.Call, _Site]]) -> RuleFinding:
        site = calls[0][1]
        runs = "; ".join(
            f"{self._label(call)} (line {self._line(call)}) runs "
            f"{self._function_name(self.analysis.scope_of(inner.call))}() "
            f"on every module of `{self._code(self.analysis.enclosing_loops(call)[0].iter)}`"
            for call, inner in calls
        )
        message = (
            f"{runs}. Each backpropagates a loss that the module's forward() computes from "
            "its input, and these modules are layers of one `nn.Sequential`, so one forward "
            "of it makes all the losses from one graph: the first backward frees the tensors "
            f"the layers before them saved, and the next raises {_TWICE_ERROR}. Sum the "
            "losses and call backward once (`sum(m.loss for m in losses).backward()`), or "
            "pass `retain_graph=True` to every backward but the last; gradfix cannot tell "
            "which module's backward runs last, so it does not rewrite."
        )
        return RuleFinding(site.call, message, Tier.REPORT)

    def _function_name(self, function: ScopeNode) -> str:
        """`AdversarialLoss.__call__` for a method, `d_step` for a function."""
        if not isinstance(function, _FUNCTIONS):
            return "the module"
        info = self.analysis.class_of(function)
        prefix = f"{info.name}." if info is not None else ""
        return prefix + function.name

    def _calls_into(self, scope: ScopeNode, names: set[str]) -> list[ast.Call]:
        """The calls of `scope`'s own statements that may run one of the functions `names`:
        by name, or an object's `__call__` (provenance then checks where each call goes)."""
        calls = []
        for node in self.analysis.descendants(scope):
            if type(node) is not ast.Call:  # nobody subclasses: `is`
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else None
            if isinstance(func, ast.Attribute):
                name = func.attr
            named = name in names or (
                "__call__" in names and self.analysis.value_of(func).kind is Kind.OBJECT
            )
            if named and self.analysis.scope_of(node) is scope:
                calls.append(node)
        return calls

    def _caller_first_finding(
        self, call: ast.Call, sites: list[_Site], callees: list[_Site], reported: set[ast.Call]
    ) -> RuleFinding | None:
        """The finding for the caller's last backward before `call` whose graph a backward
        inside the function `call` runs reaches again, with what `call` passes."""
        earlier = [
            site
            for site in sites
            if _runs_later(self.analysis, site.call, call)
            and not site.retains
            and site.call not in reported
            and not _expects_error(self.analysis, call)
        ]
        for site in reversed(earlier):
            for partner in callees:
                if partner.retains or _expects_error(self.analysis, partner.call):
                    continue
                roots = [self.provenance.of_in_call(root, call) for root in partner.roots]
                if not roots or None in roots:
                    continue
                runs = self._run_by(site)
                certain = self._site_graph(site, True) & _graph(roots, True)  # type: ignore[arg-type]
                saving = [
                    node
                    for node in certain
                    if node.grad is Grad.ATTACHED and saves_tensors(node) and runs(node)
                ]
                if saving:
                    return self._caller_first_message(site, call, partner, saving)
        return None

    def _caller_first_message(
        self, site: _Site, call: ast.Call, partner: _Site, saving: list[Origin]
    ) -> RuleFinding:
        name = self._function_name(self.analysis.scope_of(partner.call))
        shared = self._describe(self._closest_first(saving)[0])
        other = (
            f"{self._label(partner.call)} in {name}() (line {self._line(partner.call)}, run by "
            f"{self._label(call)}, line {self._line(call)}, on what it is passed)"
        )
        between = [
            *self._nodes_between(site.statement, call),
            *self.analysis.descendants(call)[1:],
            *self._lead_up_in_scope(partner.statement),
        ]
        update = self._first_update(between)
        if update is not None:
            message = (
                f"{self._label(site.call)} and {other} both backpropagate through {shared}, "
                f"and `{self._code(update)}` (line {self._line(update)}) updates parameters "
                f"between them: `retain_graph=True` would only turn the {_TWICE_ERROR} error "
                "into 'modified by an inplace operation' (pytorch/pytorch#39141). Recompute "
                "what the second loss needs after the update, or move the step after the "
                "last backward."
            )
            return RuleFinding(site.call, message, Tier.REPORT)
        message = (
            f"{self._label(site.call)} frees the saved tensors of {shared}, which {other} "
            f"backpropagates through again: it raises {_TWICE_ERROR}. Pass "
            "`retain_graph=True` here."
        )
        return RuleFinding(site.call, message, Tier.SAFE, {site.call: _retaining("True")})

    def _call_finding(
        self, site: _Site, call: ast.Call, partners: list[_Site]
    ) -> RuleFinding | None:
        roots = [self.provenance.of_in_call(root, call) for root in site.roots]
        if not roots or None in roots:
            return None
        statement = self.analysis.statement_of(call)
        end = self.analysis.index.end
        for partner in partners:
            if statement is None or self.analysis.index.start[partner.statement] < end[statement]:
                continue
            if self.analysis.exclusive_branches(call, partner.call):
                continue
            if _expects_error(self.analysis, partner.call):
                continue
            shared = _graph(roots, True) & _graph(self._roots(partner), True)  # type: ignore[arg-type]
            saving = [n for n in shared if n.grad is Grad.ATTACHED and saves_tensors(n)]
            if not saving:
                continue
            name = self._function_name(self.analysis.scope_of(site.call))
            repeated = _whole_loss(partner) and _repeats(roots, self._roots(partner))  # type: ignore[arg-type]
            if repeated:
                where = (
                    f" in {name}() (line {self._line(site.call)}, run by {self._label(call)}, "
                    f"line {self._line(call)})"
                )
                return self._repeat_finding(site, partner, where)
            message = (
                f"{self._label(site.call)} in {name}() (run by {self._label(call)}, line "
                f"{self._line(call)}) frees the saved tensors of "
                f"{self._describe(self._closest_first(saving)[0])}, which "
                f"{self._label(partner.call)} (line {self._line(partner.call)}) "
                f"backpropagates through again: it raises {_TWICE_ERROR}. Detach it where "
                f"{name}()'s loss reads it (a discriminator's loss: `D(fake.detach())`), or pass "
                "`retain_graph=True` there if that loss's gradients into it are meant to count."
            )
            return RuleFinding(site.call, message, Tier.REPORT)
        return None

    def judge_methods(
        self, info: ClassInfo, by_scope: dict[ScopeNode, list[_Site]]
    ) -> Iterator[RuleFinding]:
        """Backward calls in two methods of one class that a third calls one after the other
        (`self.backward_D()` then `self.backward_G()`, the second maybe under an `if`), over
        graphs that `self` attributes cache (`self.fake_B = self.netG(self.real_A)` in
        `forward()`): when the graphs of what the two read share a node that saves tensors,
        the first frees it and the second fails. Rewritten when nothing between the two
        backward calls may update parameters; reported otherwise (pix2pix: the
        discriminator's step between them, `self.fake_B.detach()` is the usual fix)."""
        if sum(bool(by_scope.get(method)) for method in info.methods.values()) < 2:
            return
        for driver in dict.fromkeys(info.methods.values()):
            for first, second in self._method_calls_in_order(info, driver, by_scope):
                site = by_scope[_self_method(first, info)][-1]  # type: ignore[index]
                partner = by_scope[_self_method(second, info)][0]  # type: ignore[index]
                if site.call in self.reported or site.retains or partner.retains:
                    continue
                cached = self._cached_between(info, driver, first, second, site, partner)
                if cached is not None:
                    self.reported.add(site.call)
                    yield self._methods_finding(site, partner, first, second, *cached)

    def _method_calls_in_order(
        self,
        info: ClassInfo,
        driver: ast.FunctionDef | ast.AsyncFunctionDef,
        by_scope: dict[ScopeNode, list[_Site]],
    ) -> Iterator[tuple[ast.Call, ast.Call]]:
        """Pairs of `self.<method>()` calls of `driver`, of two other methods that each run a
        backward, the second running after the first whenever both run: in the same block,
        or nested in a later statement of the first's block."""
        calls = [
            call
            for call in self.analysis.descendants(driver)
            if isinstance(call, ast.Call)
            and (method := _self_method(call, info)) is not None
            and method is not driver
            and by_scope.get(method)
        ]
        for position, first in enumerate(calls):
            for second in calls[position + 1 :]:
                if _self_method(first, info) is not _self_method(second, info) and _runs_later(
                    self.analysis, first, second
                ):
                    yield first, second

    def _cached_between(
        self,
        info: ClassInfo,
        driver: ast.FunctionDef | ast.AsyncFunctionDef,
        first: ast.Call,
        second: ast.Call,
        site: _Site,
        partner: _Site,
    ) -> tuple[_Sharing, ast.AST | None] | None:
        """What both backward calls reach through the graphs `self` attributes cache, and
        the first call that may update parameters between them (None: nothing does). A read
        attribute is followed when one other method (its maker) binds it and nothing
        between the two backward calls may run that method again: both then read the value
        of the same run, whichever it was."""
        methods = {self.analysis.scope_of(site.call), self.analysis.scope_of(partner.call)}
        excluded = methods | {driver}
        between = [
            *self._rest_of_scope(site.statement),
            *self._nodes_between(first, second),
            *self._lead_up_in_scope(partner.statement),
        ]
        graphs = []
        for certain_only in (True, False):
            graph_a, makers_a = self._graph_with_cached(info, site, excluded, certain_only)
            graph_b, makers_b = self._graph_with_cached(info, partner, excluded, certain_only)
            if not (makers_a or makers_b):
                return None  # the two methods' own graphs: nothing cached in between
            for maker in makers_a | makers_b:
                if any(
                    isinstance(call, ast.Call) and self.analysis.training.may_run(call, maker)
                    for call in (first, second, *between)
                ):
                    return None
            graphs.append(graph_a & graph_b)
        certain, possible = graphs
        sharing = self._verdict(site, certain, possible | certain)
        if sharing.verdict is _Verdict.NOTHING:
            return None
        return sharing, self._first_update(between)

    def _graph_with_cached(
        self, info: ClassInfo, site: _Site, excluded: set[ScopeNode], certain_only: bool
    ) -> tuple[set[Origin], set[ast.FunctionDef | ast.AsyncFunctionDef]]:
        """The graph `site` backpropagates through, with each `self` attribute its method
        reads (and does not bind) followed to what its maker caches there, when one method
        outside `excluded` binds it; and those makers."""
        graph = set(self._site_graph(site, certain_only))
        makers: set[ast.FunctionDef | ast.AsyncFunctionDef] = set()
        for key in sorted(self._self_reads(site, certain_only)):
            maker = self._maker(info, key[len("self.") :])
            if maker is None or maker in excluded:
                continue
            cached = self.provenance.attribute_at_exit(maker, key)
            if cached is not None:
                makers.add(maker)
                graph |= reachable_graph_nodes(cached, certain_only)
        return graph, makers

    def _maker(
        self, info: ClassInfo, attribute: str
    ) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The one method of the class (or of a class of the file it derives from) that
        stores `self.<attribute>`."""
        makers = {
            self.analysis.scope_of(occurrence)
            for owner in self.analysis.lineage(info.name)
            for occurrence in self.analysis.self_attribute_occurrences(owner, attribute)
            if not self.analysis.is_load(occurrence)
        }
        maker = makers.pop() if len(makers) == 1 else None
        return maker if isinstance(maker, _FUNCTIONS) else None

    def _self_reads(self, site: _Site, certain_only: bool) -> set[str]:
        """The `self` attributes a backward call's roots reach (certainly, or possibly) but
        its method does not bind (`self.fake_B` in `torch.cat((self.real_A, self.fake_B),
        1)`)."""
        keys: set[str] = set()
        for root in self._roots(site):
            for origin, _ in walk(root, certain_only=certain_only):
                key = target_key(origin.expression) if origin.kind is OriginKind.UNKNOWN else None
                if key is not None and key.startswith("self."):
                    keys.add(key)
        return keys

    def _methods_finding(
        self,
        site: _Site,
        partner: _Site,
        first: ast.Call,
        second: ast.Call,
        sharing: _Sharing,
        update: ast.AST | None,
    ) -> RuleFinding:
        first_name = self._function_name(self.analysis.scope_of(site.call))
        second_name = self._function_name(self.analysis.scope_of(partner.call))
        driver = self._function_name(self.analysis.scope_of(first))
        shared = self._describe(sharing.nodes[0])
        order = (
            f"{driver}() calls {first_name}() (line {self._line(first)}) before "
            f"{second_name}() (line {self._line(second)})"
        )
        call = f"{self._label(site.call)} in {first_name}()"
        other = f"{self._label(partner.call)} in {second_name}() (line {self._line(partner.call)})"
        if update is not None:
            binding = self.provenance.binding_of(sharing.nodes[0])
            detached = f"`{binding.key}.detach()`" if binding is not None else "a detached value"
            message = (
                f"{call} and {other} both backpropagate through {shared}; {order}, so the "
                f"second raises {_TWICE_ERROR}, and `{self._code(update)}` (line "
                f"{self._line(update)}) updates parameters between them. If {first_name}() is "
                f"the discriminator's step, use {detached} in its loss; otherwise "
                f"recompute what {second_name}() needs after the update, or move the step "
                "after the last backward."
            )
            return RuleFinding(site.call, message, Tier.REPORT)
        if sharing.verdict is _Verdict.UNSURE:
            message = (
                f"After {call}, {other} may backpropagate through {shared} again ({order}; "
                f"{sharing.why_unsure}). If it raises {_TWICE_ERROR}, pass `retain_graph=True` "
                "here."
            )
            return RuleFinding(site.call, message, Tier.REPORT)
        message = (
            f"{call} frees the saved tensors of {shared}, which {other} backpropagates through "
            f"again: {order}, and nothing between them updates parameters or runs the method "
            f"that caches it again, so the second raises {_TWICE_ERROR}. Pass "
            "`retain_graph=True` here."
        )
        return RuleFinding(site.call, message, Tier.SAFE, {site.call: _retaining("True")})

    # -- sharing ----------------------------------------------------------------------------
    def _roots(self, site: _Site) -> list[Origin]:
        return [self.provenance.of(root) for root in site.roots]

    def _shared(self, first: _Site, second: _Site) -> _Sharing:
        """What the two calls both backpropagate through."""
        possible = self._site_graph(first, False) & self._site_graph(second, False)
        if not possible:
            return _Sharing(_Verdict.NOTHING)
        certain = self._site_graph(first, True) & self._site_graph(second, True)
        return self._verdict(first, certain, possible)

    def _site_graph(self, site: _Site, certain_only: bool) -> set[Origin]:
        """The graph nodes `site` backpropagates through, once per call: every backward
        after it in the scope is compared with it."""
        key = (site.call, certain_only)
        if key not in self._graphs:
            self._graphs[key] = _graph(self._roots(site), certain_only)
        return self._graphs[key]

    def _shared_across_iterations(self, site: _Site, loop: Loop) -> _Sharing:
        """What two iterations of `loop` running `site` both backpropagate through."""
        certain: set[Origin] = set()
        possible: set[Origin] = set()
        for root in self._roots(site):
            once_certain, once_possible = _evaluated_once(root, loop, self.analysis)
            certain |= once_certain
            possible |= once_possible
        return self._verdict(site, certain, possible)

    def _verdict(self, first: _Site, certain: set[Origin], possible: set[Origin]) -> _Sharing:
        runs = self._run_by(first)
        saving = [
            node
            for node in certain
            if node.grad is Grad.ATTACHED and saves_tensors(node) and runs(node)
        ]
        if saving:
            return _Sharing(_Verdict.SAVES, self._closest_first(saving))
        # A report needs evidence that the common part is in the graph: an operation on
        # values of unknown origin (a device copy of a function parameter) is most often data.
        doubtful = [
            node for node in possible if node.grad.attached and saves_tensors(node) is not False
        ]
        if not doubtful:
            return _Sharing(_Verdict.NOTHING)
        nodes = self._closest_first(doubtful)
        return _Sharing(_Verdict.UNSURE, nodes, self._why_unsure(nodes[0], certain, runs))

    def _run_by(self, site: _Site) -> Callable[[Origin], bool]:
        """Which nodes `site` certainly runs, and so frees: all of its graph, or with
        `inputs` those from which an input can be reached (a tensor of `inputs`, or a
        parameter of a module whose `.parameters()` are given)."""
        if site.inputs is None:
            return lambda node: True
        inputs = set(_tensors_of(self.provenance.of(site.inputs)))
        owners = {
            self.provenance.module_constructor(receiver)
            for receiver in _parameter_owners(site.inputs)
        } - {None}

        def runs(node: Origin) -> bool:
            for origin, _ in walk(node, certain_only=True):
                if origin in inputs and origin is not node:
                    return True
                call = origin.expression
                if (
                    origin.kind is OriginKind.FORWARD
                    and isinstance(call, ast.Call)
                    and self.provenance.module_constructor(call.func) in owners
                ):
                    return True
            return False

        return runs

    def _why_unsure(self, node: Origin, certain: set[Origin], runs: Callable) -> str:
        if saves_tensors(node) is None:
            what = f"`{node.key}`" if node.key else "an operation it cannot see into"
            return f"gradfix does not know whether {what} saves tensors for backward"
        if node.grad is not Grad.ATTACHED:
            return "it is graph-attached only by the name of a loss"
        if node in certain and not runs(node):
            return "the first call differentiates only with respect to some inputs"
        return "only through a branch or a call gradfix cannot follow"

    def _closest_first(self, nodes: list[Origin]) -> list[Origin]:
        """Latest in the source first (closest to the roots: the one to name), and of nodes
        evaluated together the one a name was bound to; of nodes one call of a function ran
        (one site), the latest in that function, so that the choice never depends on the
        order of a set."""
        start = self.analysis.index.start
        return sorted(
            nodes,
            key=lambda node: (
                start.get(node.site, -1),
                self.provenance.binding_of(node) is not None,
                start.get(node.expression, -1),
            ),
            reverse=True,
        )

    # -- what runs in between -----------------------------------------------------------------
    def _nodes_between(self, after: ast.AST, before: ast.AST) -> list[ast.AST]:
        """The nodes that start after `after` ends and before `before` starts."""
        start, end = self.analysis.index.start, self.analysis.index.end
        if self._in_order is None:
            self._in_order = sorted(start, key=start.__getitem__)
        first = bisect.bisect_left(self._in_order, end[after], key=start.__getitem__)
        last = bisect.bisect_left(self._in_order, start[before], key=start.__getitem__)
        return self._in_order[first:last]

    def _nodes_within(self, block: list[ast.stmt]) -> list[ast.AST]:
        """The nodes of the statements of `block` (a loop's body)."""
        start, end = self.analysis.index.start, self.analysis.index.end
        if self._in_order is None:
            self._in_order = sorted(start, key=start.__getitem__)
        first = bisect.bisect_left(self._in_order, start[block[0]], key=start.__getitem__)
        last = bisect.bisect_left(self._in_order, end[block[-1]], key=start.__getitem__)
        return self._in_order[first:last]

    def _rest_of_scope(self, statement: ast.AST) -> list[ast.AST]:
        """The nodes of `statement`'s function after it."""
        index = self.analysis.index
        return index.order[index.end[statement] : index.end[self.analysis.scope_of(statement)]]

    def _lead_up_in_scope(self, statement: ast.AST) -> list[ast.AST]:
        """The nodes of `statement`'s function body before it."""
        index = self.analysis.index
        body = self.analysis.scope_of(statement).body  # type: ignore[union-attr]
        return index.order[index.start[body[0]] : index.start[statement]]

    def _first_update(self, nodes: list[ast.AST]) -> ast.AST | None:
        """The first parameter update (optimizer step, in-place write to a parameter)."""
        return next(
            (node for node in nodes if _updates_parameters(self.analysis, self.provenance, node)),
            None,
        )

    def _nothing_between(self, first: _Site, second: _Site) -> bool:
        """Whether only tensor computations run between two plain `.backward()` calls (no
        step, no zero_grad, no reading of `.grad`, no control flow), so that one backward of
        the sum is equivalent."""
        plain = all(
            site.form == "backward" and not _has_arguments(site.call) for site in (first, second)
        )
        same_loops = self.analysis.enclosing_loops(first.call) == self.analysis.enclosing_loops(
            second.call
        )
        if not plain or not same_loops:
            return False
        for node in self._nodes_between(first.statement, second.statement):
            if isinstance(node, ast.Attribute) and node.attr in _GRADIENT_ATTRIBUTES:
                return False
            if isinstance(node, _COMPOUND):
                return False
            if _updates_parameters(self.analysis, self.provenance, node):
                return False
        return True

    # -- detaching instead of retaining ------------------------------------------------------
    def _detach_instead(self, site: _Site, partner: _Site) -> _Detach | None:
        """The reads to detach in `site`'s loss when that is proven to give the same update
        as retaining the graph: `site`'s loss reaches the shared graph only through one named
        value (the generator's output), the modules behind that value have their gradients
        zeroed after `site` and before `partner`, and nothing reads or steps them in between.
        Then the gradients `site` leaves there are never used, and every other gradient is the
        same (`.detach()` changes no value)."""
        if site.form != "backward" or partner.form != "backward" or _has_arguments(site.call):
            return None
        block = _block_of(self.analysis, site.statement)
        if block is None or _block_of(self.analysis, partner.statement) is not block:
            return None
        first, second = self._roots(site), self._roots(partner)
        later_graph = _graph(second, False)
        for cut in self._closest_first(list(_graph(first, False) & later_graph)):
            binding = self.provenance.binding_of(cut)
            if binding is None or binding.kind is not BindingKind.ASSIGN:
                continue
            consumers = _consumers_apart_from(first, cut, later_graph)
            if consumers is None:
                return None
            reads = self._reads_feeding(binding.key, cut, binding.statement, site, consumers)
            modules = self._modules_behind(cut)
            if not reads or not modules:
                return None
            zero_grad = self._zero_grad_between(site, partner, modules)
            if zero_grad is None or not self._recomputed_after_updates(site, partner, cut):
                return None
            return _Detach(reads, zero_grad)
        return None

    def _recomputed_after_updates(self, site: _Site, partner: _Site, cut: Origin) -> bool:
        """Whether `partner`'s graph, but for `cut`'s part, is made after any parameter
        update between the two calls: a `D(fake)` computed before `opt_d.step()` would fail
        `partner` with 'modified by an inplace operation' whatever `site` detaches, and the
        report to move the step is the useful finding there."""
        update = self._first_update(self._nodes_between(site.statement, partner.statement))
        if update is None:
            return True
        start = self.analysis.index.start
        kept = {origin for origin, _ in walk(cut)}
        return all(
            node.site is not None and start[node.site] > start[update]
            for node in _graph(self._roots(partner), False) - kept
        )

    def _reads_feeding(
        self,
        key: str,
        cut: Origin,
        bound: ast.AST,
        site: _Site,
        consumers: set[Origin],
    ) -> list[ast.Name]:
        """The reads of `key` (bound to `cut`) between its binding and `site` through which
        every one of `consumers` takes it; empty when some consumer takes it otherwise."""
        if "." in key:
            return []
        start, end = self.analysis.index.start, self.analysis.index.end
        expected = {consumer.expression for consumer in consumers}
        reads: list[ast.Name] = []
        fed: set[ast.AST] = set()
        for read in self.analysis.occurrences(key, self.analysis.scope_of(site.call)):
            if not (end[bound] <= start[read] < start[site.statement]):
                continue
            if not _is_read(self.analysis, read) or self.provenance.of(read) is not cut:
                continue
            taker = self._taker(read)
            if taker in expected:
                reads.append(read)
                fed.add(taker)
        return reads if fed == expected else []

    def _taker(self, read: ast.Name) -> ast.AST | None:
        """The expression that takes `read` as an operand (`D(fake)` for `fake`)."""
        current = self.analysis.parent(read)
        while current is not None and not isinstance(current, ast.expr):
            if isinstance(current, ast.stmt):
                return None
            current = self.analysis.parent(current)
        return current

    def _modules_behind(self, value: Origin) -> set[ast.Call]:
        """The constructors of the modules whose parameters `value`'s graph reaches; empty
        when some part of it is a leaf or a call gradfix cannot place."""
        modules: set[ast.Call] = set()
        for origin, certain in walk(value):
            if not certain or not origin.followed or _opaque(origin):
                return set()
            if origin.kind is OriginKind.LEAF or (
                origin.kind is OriginKind.FORWARD and origin.module
            ):
                call = origin.site
                constructor = (
                    self.provenance.module_constructor(call.func)
                    if isinstance(call, ast.Call) and _names_one_module(call.func)
                    else None
                )
                if constructor is None:
                    return set()
                modules.add(constructor)
        return modules

    def _zero_grad_between(
        self, site: _Site, partner: _Site, modules: set[ast.Call]
    ) -> ast.Call | None:
        """The `zero_grad()` in `site`'s block, between it and `partner`, that clears the
        gradients of all `modules`, when nothing before it reads or steps them."""
        for node in self._nodes_between(site.statement, partner.statement):
            if isinstance(node, ast.Attribute) and node.attr == "grad":
                return None
            if not isinstance(node, ast.Call):
                continue
            if _method(node) == "zero_grad" and modules <= self._cleared_by(node):
                block = _block_of(self.analysis, node)
                return node if block is _block_of(self.analysis, site.statement) else None
            if not self._leaves_gradients_of(node, modules):
                return None
        return None

    def _cleared_by(self, zero_grad: ast.Call) -> set[ast.Call]:
        """The modules `module.zero_grad()` or `optimizer.zero_grad()` clears."""
        receiver = zero_grad.func.value  # type: ignore[attr-defined]
        constructor = self.provenance.module_constructor(receiver)
        if constructor is None:
            return set()
        if (self.analysis.qualified_name(constructor.func) or "").startswith("torch.optim."):
            return self._stepped_modules(constructor)
        return {constructor}

    def _stepped_modules(self, optimizer: ast.Call) -> set[ast.Call]:
        """The constructors of the modules whose `.parameters()` `optimizer` is given."""
        owners = [
            self.provenance.module_constructor(owner) for owner in _parameter_owners(optimizer)
        ]
        return set() if None in owners else set(owners)  # type: ignore[arg-type]

    def _leaves_gradients_of(self, call: ast.Call, modules: set[ast.Call]) -> bool:
        """Whether `call` neither reads nor changes the gradients of `modules`: not a
        backward, not a step of an optimizer that may hold their parameters, not a call
        given one of them (`clip_grad_norm_(G.parameters())`), not a function of the file."""
        method = _method(call)
        if method == "backward" or self.analysis.qualified_name(call.func) in _FORMS:
            return False
        if method == "step" and _updates_parameters(self.analysis, self.provenance, call):
            receiver = call.func.value  # type: ignore[attr-defined]
            optimizers = [receiver, *_argument_values(call)]
            for optimizer in optimizers:
                constructor = self.provenance.module_constructor(optimizer)
                stepped = self._stepped_modules(constructor) if constructor else set()
                if optimizer is receiver and not stepped and _has_arguments(call):
                    continue  # `scaler.step(opt)`: the optimizer is the argument
                if not stepped or self._overlap(stepped, modules):
                    return False
            return True
        if self.analysis.function_named(self.analysis.value_of(call.func)) is not None:
            return False
        for owner in _parameter_owners(call):
            if self.provenance.module_constructor(owner) in modules | {None}:
                return False
        arguments = _argument_values(call)
        return not any(self.provenance.module_constructor(arg) in modules for arg in arguments)

    def _overlap(self, some: set[ast.Call], others: set[ast.Call]) -> bool:
        """Whether a module of `some` may share parameters with one of `others`: the same
        module, or one built with (or, for a class of this file, building) the other."""
        for module in some:
            for other in others:
                if module is other or self._may_contain(module, other):
                    return True
                if self._may_contain(other, module):
                    return True
        return False

    def _may_contain(self, container: ast.Call, module: ast.Call) -> bool:
        """`container` is given `module` (`nn.Sequential(encoder, head)`), or its class, in
        this file, builds modules of `module`'s class."""
        for node in self.analysis.descendants(container):
            if (
                isinstance(node, (ast.Name, ast.Attribute))
                and self.provenance.module_constructor(node) is module
            ):
                return True
        func = container.func
        info = self.analysis.index.classes.get(func.id) if isinstance(func, ast.Name) else None
        if info is None:
            return False
        built = self.analysis.code_of(module.func)
        return any(
            isinstance(node, ast.Call) and self.analysis.code_of(node.func) == built
            for method in info.methods.values()
            for node in self.analysis.descendants(method)
        )

    # -- findings ---------------------------------------------------------------------------
    def _repeat_finding(self, site: _Site, partner: _Site, where: str = "") -> RuleFinding:
        """The second backward differentiates the first one's loss again (the same value, or
        a sum still holding it): retaining would count that loss's gradients twice."""
        roots = ", ".join(f"`{self._code(root)}`" for root in site.roots)
        where = where or f" (line {self._line(site.call)})"
        message = (
            f"{self._label(partner.call)} backpropagates {roots} again: "
            f"{self._label(site.call)}{where} already did, and "
            f"freed its graph, so it raises {_TWICE_ERROR}. `retain_graph=True` would only "
            "add that loss's gradients twice. Restructure so that each loss is backpropagated "
            "once: remove the repeated backward, or build the second loss without the first."
        )
        return RuleFinding(partner.call, message, Tier.REPORT)

    def _pair_finding(self, site: _Site, partner: _Site, sharing: _Sharing) -> RuleFinding:
        whole = _whole_loss(site) and _whole_loss(partner)
        if whole and _repeats(self._roots(site), self._roots(partner)):
            return self._repeat_finding(site, partner)
        call, other = self._label(site.call), self._label(partner.call)
        shared = self._describe(sharing.nodes[0])
        line = self._line(partner.call)
        detach = self._detach_instead(site, partner)
        if detach is not None:
            return self._detach_finding(site, partner, detach)
        update = self._first_update(self._nodes_between(site.statement, partner.statement))
        if update is not None:
            message = (
                f"{call} and {other} (line {line}) both backpropagate through {shared}, and "
                f"`{self._code(update)}` (line {self._line(update)}) updates parameters "
                f"between them: `retain_graph=True` would only turn the {_TWICE_ERROR} error "
                "into 'modified by an inplace operation' (pytorch/pytorch#39141). Recompute "
                "what the second loss needs after the update, so that it has a graph of its "
                "own (in a GAN, the discriminator's loss from `D(fake.detach())`; with a "
                "two-step optimizer such as SAM, a fresh forward), or move the step after the "
                "last backward."
            )
            return RuleFinding(site.call, message, Tier.REPORT)
        message = (
            f"{call} frees the saved tensors of {shared}, which {other} (line {line}) "
            f"backpropagates through again: it raises {_TWICE_ERROR}. Pass "
            "`retain_graph=True` here"
        )
        if self._nothing_between(site, partner):
            message += f"; as nothing runs between them, {self._sum_hint(site, partner)}"
        return RuleFinding(site.call, message + ".", Tier.SAFE, {site.call: _retaining("True")})

    def _detach_finding(self, site: _Site, partner: _Site, detach: _Detach) -> RuleFinding:
        name = self._code(detach.reads[0])
        message = (
            f"{self._label(site.call)} backpropagates into `{name}` and frees its graph, which "
            f"{self._label(partner.call)} (line {self._line(partner.call)}) needs: it raises "
            f"{_TWICE_ERROR}. The gradients this loss leaves in the modules that made "
            f"`{name}` are cleared by `{self._code(detach.zero_grad)}` (line "
            f"{self._line(detach.zero_grad)}) before anything reads them: use "
            f"`{name}.detach()` in this loss (the discriminator's loss on a generator's "
            "output), which gives the same update without retaining the graph."
        )
        replacements: dict[ast.AST, Rewrite] = {read: calling("detach") for read in detach.reads}
        return RuleFinding(site.call, message, Tier.SAFE, replacements)

    def _sum_hint(self, first: _Site, second: _Site) -> str:
        roots = [self._code(first.roots[0]), self._code(second.roots[0])]
        if roots[0] == roots[1]:
            return "one backward of twice the loss is the cheaper equivalent"
        if max(len(root) for root in roots) > 24:
            return "one backward of the sum of both losses is the cheaper equivalent"
        return f"`({roots[0]} + {roots[1]}).backward()` is the cheaper equivalent"

    def _loop_finding(self, site: _Site, loops: list[Loop], sharing: _Sharing) -> RuleFinding:
        loop = loops[0]
        repeated = (
            f"{self._label(site.call)} runs on every iteration of the loop at line "
            f"{self._line(loop)}, and each backpropagates through "
            f"{self._describe(sharing.nodes[0])}, computed once for all of them: the second "
            f"iteration raises {_TWICE_ERROR}."
        )
        update = self._first_update(self._nodes_within(loop.body))
        if update is not None:
            message = (
                f"{repeated} `{self._code(update)}` (line {self._line(update)}) updates "
                "parameters between iterations, so retaining the graph would fail with "
                "'modified by an inplace operation' instead (pytorch/pytorch#39141): "
                "recompute the shared part inside the loop, or move the step after it."
            )
            return RuleFinding(site.call, message, Tier.REPORT)
        # Built before an outer loop too: retaining must then span that loop's iterations.
        outer = len(loops) > 1 and any(
            not evaluated_in(node, loops[1], self.analysis) for node in sharing.nodes
        )
        condition = None if outer else _last_iteration_test(self.analysis, self.provenance, loop)
        if condition is None:
            message = (
                f"{repeated} Retain the graph on every iteration but the last (gradfix cannot "
                "write that condition for this loop)."
            )
            return RuleFinding(site.call, message, Tier.REPORT)
        message = f"{repeated} Retain it on all but the last: `retain_graph={condition}`."
        return RuleFinding(site.call, message, Tier.SAFE, {site.call: _retaining(condition)})

    def _unsure_finding(self, site: _Site, partner: _Site | None, sharing: _Sharing) -> RuleFinding:
        call, shared = self._label(site.call), self._describe(sharing.nodes[0])
        if partner is None:
            later = "the next iteration of its loop"
            fix = "`retain_graph=True` on every iteration but the last"
        else:
            later = f"{self._label(partner.call)} (line {self._line(partner.call)})"
            fix = "`retain_graph=True` here"
            carried = self._accumulation_carried(site, partner)
            if carried is not None:
                return self._carried_finding(site, partner, carried, shared, sharing)
        message = (
            f"After {call}, {later} may backpropagate through {shared} again "
            f"({sharing.why_unsure}). If it raises {_TWICE_ERROR}, pass {fix}."
        )
        return RuleFinding(site.call, message, Tier.REPORT)

    def _accumulation_carried(self, site: _Site, partner: _Site) -> ast.AugAssign | None:
        """`loss += loss_t` between two backward calls over `loss`, with no `loss = ...`
        before it since the first: the second loss starts from the first one's value, and so
        from its graph (a total not reset between SAM's two forwards)."""
        if len(site.roots) != 1 or len(partner.roots) != 1:
            return None
        key = target_key(site.roots[0])
        if key is None or target_key(partner.roots[0]) != key:
            return None
        for node in self._nodes_between(site.statement, partner.statement):
            if isinstance(node, ast.Assign) and any(target_key(t) == key for t in node.targets):
                return None  # rebound first: the second total starts afresh
            if isinstance(node, ast.AugAssign) and target_key(node.target) == key:
                return node
        return None

    def _carried_finding(
        self,
        site: _Site,
        partner: _Site,
        carried: ast.AugAssign,
        shared: str,
        sharing: _Sharing,
    ) -> RuleFinding:
        key = self._code(carried.target)
        update = self._first_update(self._nodes_between(site.statement, partner.statement))
        stepped = (
            f", and `{self._code(update)}` (line {self._line(update)}) updates parameters "
            "in between, so `retain_graph=True` would only turn the error into 'modified by an "
            "inplace operation'"
            if update is not None
            else ""
        )
        message = (
            f"`{self._code(carried)}` adds to `{key}`, which still holds the graph that "
            f"{self._label(site.call)} (line {self._line(site.call)}) backpropagated: nothing "
            f"resets `{key}` in between, so {self._label(partner.call)} (line "
            f"{self._line(partner.call)}) may backpropagate through {shared} again "
            f"({sharing.why_unsure}){stepped}. If the second total is meant to start afresh, "
            f"restructure: reset it (`{key} = 0`) before it is accumulated again."
        )
        return RuleFinding(carried, message, Tier.REPORT)

    # -- message helpers --------------------------------------------------------------------
    def _describe(self, origin: Origin) -> str:
        """`h` (`h = trunk(x)`, line 12), or the expression when no name was bound to it."""
        binding = self.provenance.binding_of(origin)
        if binding is not None and binding.kind is BindingKind.ASSIGN:
            statement = binding.statement
            code = self._code(statement)
            if not isinstance(statement, (ast.Assign, ast.AnnAssign)) and binding.value:
                code = f"{binding.key} := {self._code(binding.value)}"  # a walrus in a test
            return f"`{binding.key}` (`{code}`, line {self._line(statement)})"
        node = origin.expression or origin.site
        if node is None:
            return "a common part of the graph"
        return f"`{self._code(node)}` (line {self._line(node)})"

    def _label(self, call: ast.Call) -> str:
        code = self._code(call)
        return f"`{code}`" if len(code) <= 48 else f"`{self._code(call.func)}(...)`"

    def _code(self, node: ast.AST) -> str:
        return self.analysis.code_of(node, limit=60)

    def _line(self, node: ast.AST) -> int:
        position = self.analysis.positions.get(node)
        return position.start.line if position is not None else 0


# -- detaching helpers -------------------------------------------------------------------------
def _consumers_apart_from(
    roots: list[Origin], cut: Origin, later_graph: set[Origin]
) -> set[Origin] | None:
    """The origins that take `cut` directly, in the graph of `roots` short of `cut`; None
    when that graph shares a node with `later_graph`, holds a part gradfix cannot follow, or
    does not reach `cut` at all."""
    consumers: set[Origin] = set()
    reached = False
    for root in roots:
        for origin, certain in walk(root, stop=lambda node: node is cut):
            if origin is cut:
                reached = True
                continue
            if not certain or not origin.followed or _opaque(origin):
                return None
            if origin.is_graph_node and origin in later_graph:
                return None
            if cut in origin.inputs:
                consumers.add(origin)
    return consumers if reached else None


def _opaque(origin: Origin) -> bool:
    """A value whose make-up gradfix cannot see, unless it is proven data (a function's
    parameter that every caller in the file passes data for)."""
    return origin.kind in _OPAQUE and origin.grad is not Grad.FREE


def _block_of(analysis: FileAnalysis, node: ast.AST) -> list[ast.stmt] | None:
    """The indented block (or module body) whose statements include the one holding `node`:
    the list of statements, compared by identity. Statements written on their header's line
    (`if x: y()`) belong, as they did in LibCST, to the block of that header."""
    parents, fields = analysis.index.parents, analysis.index.field
    current: ast.AST | None = node
    while current is not None:
        parent = parents.get(current)
        if isinstance(current, ast.stmt):
            if parent is None:
                return analysis.module.body if current in analysis.module.body else None
            block = getattr(parent, fields[current], None)
            if (
                isinstance(block, list)
                and not _on_header_line(analysis, block[0])
                and not _is_elif(analysis, current)
            ):
                return block
        current = parent
    return None


def _runs_later(analysis: FileAnalysis, first: ast.AST, second: ast.AST) -> bool:
    """Whether `second` runs after `first` whenever both run: it is in a later statement of
    `first`'s block (in it, or nested inside it, as under an `if`)."""
    block = _block_of(analysis, first)
    if block is None:
        return False
    first_statement = next(statement for statement in block if analysis.contains(statement, first))
    current: ast.AST | None = second
    while current is not None:
        if isinstance(current, ast.stmt) and any(current is statement for statement in block):
            start = analysis.index.start
            return start[current] > start[first_statement]
        current = analysis.parent(current)
    return False


def _on_header_line(analysis: FileAnalysis, statement: ast.stmt) -> bool:
    """Whether the first statement of a block follows its header on the same line (`if x:
    y()`, LibCST's SimpleStatementSuite, no indented block of its own)."""
    line = _line_text(analysis, statement.lineno)
    return bool(line.encode()[: statement.col_offset].strip())


def _is_elif(analysis: FileAnalysis, statement: ast.stmt) -> bool:
    """An `elif`: in LibCST a part of its `if`, in no block of its own."""
    if type(statement) is not ast.If or analysis.index.field.get(statement) != "orelse":
        return False
    line = _line_text(analysis, statement.lineno).encode()
    return line[statement.col_offset :].startswith(b"elif")


# The lines of each analysed file's source, kept while its analysis lives.
_LINES: weakref.WeakKeyDictionary[FileAnalysis, list[str]] = weakref.WeakKeyDictionary()


def _line_text(analysis: FileAnalysis, line: int) -> str:
    """Line `line` (1-based) of the source, as `ast` counts lines."""
    lines = _LINES.get(analysis)
    if lines is None:
        lines = _LINES[analysis] = analysis.lines
    return lines[line - 1]


def _self_method(call: ast.Call, info: ClassInfo) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The method of `info` that `self.<method>(...)` calls."""
    func = call.func
    if isinstance(func, ast.Attribute) and dotted_name(func.value) == "self":
        return info.methods.get(func.attr)
    return None


def _method(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _names_one_module(func: ast.expr) -> bool:
    """`generator` or `self.netG`: a module named on its own, not a part of another one."""
    if isinstance(func, ast.Name):
        return True
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
    )


# -- sharing helpers ---------------------------------------------------------------------------
def _whole_loss(site: _Site) -> bool:
    """A backward of a loss into everything it reaches (no `inputs`, no gradient given):
    doing it twice adds the same gradients twice. Two `autograd.grad` calls, or backward
    calls with different gradients (Jacobian rows), differentiate the same output on purpose."""
    if site.relays is not None:
        return True
    return site.form == "backward" and site.inputs is None and not _gradient_given(site.call)


def _gradient_given(call: ast.Call) -> bool:
    """Whether `.backward(...)` may be given a gradient: as its first argument or `gradient=`
    (not a literal None), or through arguments gradfix cannot place (`*args`, `**kwargs`).
    `retain_graph=True` and `create_graph=True` differentiate the whole loss all the same."""
    if any(isinstance(arg, ast.Starred) for arg in call.args):
        return True
    if any(keyword.arg is None for keyword in call.keywords):
        return True
    gradient = _argument(call, (0, "gradient"))
    return gradient is not None and not (
        isinstance(gradient, ast.Constant) and gradient.value is None
    )


def _repeats(first: list[Origin], second: list[Origin]) -> bool:
    """Whether `second` certainly goes through every node `first` certainly goes through:
    the second backward differentiates the first loss again (the same value, or a sum that
    still holds it)."""
    nodes = _graph(first, True)
    return bool(nodes) and nodes <= _graph(second, True)


def _graph(roots: list[Origin], certain_only: bool) -> set[Origin]:
    nodes: set[Origin] = set()
    for root in roots:
        nodes |= reachable_graph_nodes(root, certain_only)
    return nodes


def _tensors_of(origin: Origin) -> Iterator[Origin]:
    """The values a collection expression holds (itself, for a single tensor)."""
    structure = (OriginKind.COLLECTION, OriginKind.ITEM, OriginKind.CHOICE)
    for node, _ in walk(origin, stop=lambda node: node.kind not in structure):
        if node.kind not in structure:
            yield node


def _evaluated_once(
    root: Origin, loop: Loop, analysis: FileAnalysis
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
            common_certain, common_possible = _common_to_elements(origin.inputs[0], analysis)
            possible |= common_possible
            if is_certain:
                certain |= common_certain
        elif origin.is_graph_node and not evaluated_in(origin, loop, analysis):
            possible.add(origin)
            if is_certain:
                certain.add(origin)
    return certain, possible


def _common_to_elements(
    collection: Origin, analysis: FileAnalysis
) -> tuple[set[Origin], set[Origin]]:
    """Graph nodes different elements of `collection` share (certainly, possibly): for an
    element made by a comprehension or loop, what is evaluated outside it; across the items
    of a literal, what they have in common."""
    if collection.kind is not OriginKind.COLLECTION:
        return set(), set()
    certain: set[Origin] = set()
    possible: set[Origin] = set()
    for item in collection.inputs:
        if item.repeats_in is not None:
            for origin, is_certain in walk(item.inputs[0]):
                if origin.is_graph_node and not evaluated_in(origin, item.repeats_in, analysis):
                    possible.add(origin)
                    if is_certain:
                        certain.add(origin)
    literal = [item.inputs[0] for item in collection.inputs if item.repeats_in is None]
    if len(literal) >= 2:
        certain |= set.intersection(*(_graph([value], True) for value in literal))
        loose = [_graph([value], False) for value in literal]
        for position, nodes in enumerate(loose):
            for other in loose[position + 1 :]:
                possible |= nodes & other
    return certain, possible


# -- order, branches, updates ------------------------------------------------------------------
def _parameter_owners(node: ast.expr) -> list[ast.expr]:
    """`model` for each `model.parameters()` / `model.named_parameters()` in `node`."""
    owners: list[ast.expr] = []
    for call in ast.walk(node):  # an expression, not the file
        if type(call) is not ast.Call:
            continue
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in ("parameters", "named_parameters"):
            owners.append(func.value)
    return owners


def _expects_error(analysis: FileAnalysis, node: ast.AST) -> bool:
    """Whether `node` runs where the code expects an exception: under `with
    self.assertRaises(...)` / `pytest.raises(...)`, or in the body of a `try`."""
    child, current = node, analysis.parent(node)
    while current is not None and not isinstance(current, _FUNCTIONS):
        if isinstance(current, _WITHS):
            for item in current.items:
                context = item.context_expr
                callee = context.func if isinstance(context, ast.Call) else context
                if _EXPECTS_ERROR.search(dotted_name(callee) or ""):
                    return True
        if isinstance(current, ast.Try) and analysis.index.field.get(child) == "body":
            return True
        child, current = current, analysis.parent(current)
    return False


def _updates_parameters(analysis: FileAnalysis, provenance: Provenance, node: ast.AST) -> bool:
    """An in-place write to a parameter, or a call that may update parameters (an optimizer's
    method, a function of the file that writes tensors in place)."""
    if isinstance(node, ast.Call):
        func = node.func
        writes_parameter = (
            isinstance(func, ast.Attribute)
            and torch_api.writes_data(func.attr)
            and _is_parameter(analysis, provenance, func.value)
        )
        return writes_parameter or analysis.training.may_update_parameters(node)
    if isinstance(node, ast.AugAssign):
        return _is_parameter(analysis, provenance, node.target)
    return False


def _is_parameter(analysis: FileAnalysis, provenance: Provenance, node: ast.expr) -> bool:
    """`p.data`, `layer.weight`, `layer.bias`, a loop variable over `.parameters()`, or a
    value whose provenance is a parameter."""
    if isinstance(node, ast.Attribute):
        if node.attr == "data":
            return _is_parameter(analysis, provenance, node.value)
        if node.attr in ("weight", "bias"):
            return True
    if isinstance(node, ast.Name):
        for binding in provenance.reaching(node.id, node):
            iterable = binding.value
            if (
                binding.kind is BindingKind.LOOP_TARGET
                and iterable is not None
                and "parameters(" in _segment(analysis, iterable)
            ):
                return True
    return provenance.of(node).kind is OriginKind.LEAF


# -- how it rewrites ---------------------------------------------------------------------------
def _retaining(value: str) -> Rewrite:
    """The rewrite of a backward call that appends `retain_graph=<value>` (source text)."""

    def rewrite(node: cst.CSTNode) -> cst.CSTNode:
        return _with_retain_graph(node, cst.parse_expression(value))  # type: ignore[arg-type]

    return rewrite


def _with_retain_graph(call: cst.Call, value: cst.BaseExpression) -> cst.Call:
    """`call` with `retain_graph=<value>` appended in the layout of its other arguments: on the
    same line, or on a line of its own when they are one per line; comments stay where they
    are, a trailing comma stays trailing."""
    no_space = cst.SimpleWhitespace("")
    new = cst.Arg(
        value=value,
        keyword=cst.Name("retain_graph"),
        equal=cst.AssignEqual(whitespace_before=no_space, whitespace_after=no_space),
    )
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new], whitespace_before_args=no_space)
    last = args[-1]
    between = args[-2].comma if len(args) > 1 else None
    separator = _bare(between) if isinstance(between, cst.Comma) else _comma(" ")
    # What separated the last argument from `)` now follows the new one.
    new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
    old_comma = separator
    trailing = last.comma
    if isinstance(trailing, cst.Comma):
        closing = trailing.whitespace_after
        indent = between.whitespace_after if isinstance(between, cst.Comma) else None
        if not isinstance(indent, cst.ParenthesizedWhitespace):
            indent = call.whitespace_before_args
        if isinstance(closing, cst.ParenthesizedWhitespace) and isinstance(
            indent, cst.ParenthesizedWhitespace
        ):
            # One argument per line: the old comma (and its comment) stays, now followed by
            # the arguments' indentation; the new argument ends the way the old one did.
            old_comma = trailing.with_changes(
                whitespace_after=closing.with_changes(
                    indent=indent.indent, last_line=indent.last_line
                )
            )
            trailing = _bare(trailing)
        new = new.with_changes(comma=trailing)
    args[-1] = last.with_changes(comma=old_comma, whitespace_after_arg=no_space)
    return call.with_changes(args=[*args, new])


def _comma(space: str) -> cst.Comma:
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(space))


def _bare(comma: cst.Comma) -> cst.Comma:
    """`comma` without the comment and blank lines that may follow it."""
    after = comma.whitespace_after
    if isinstance(after, cst.ParenthesizedWhitespace):
        after = after.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    return comma.with_changes(whitespace_after=after)


def _last_iteration_test(analysis: FileAnalysis, provenance: Provenance, loop: Loop) -> str | None:
    """An expression true on every iteration of `loop` but the last: `i < len(xs) - 1` with an
    `enumerate` or `range` index, `x is not xs[-1]` over a list of distinct tensors or
    modules; None when gradfix cannot write one. What it reads must not change in the loop.
    Its text, from the source of the loop header's parts."""
    if not isinstance(loop, _FORS) or loop.orelse:
        return None
    target, iterable = loop.target, loop.iter
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name):
        builtin = iterable.func.id
        if iterable.keywords or any(isinstance(arg, ast.Starred) for arg in iterable.args):
            return None
        args = iterable.args
        if builtin == "enumerate" and len(args) == 1 and isinstance(target, ast.Tuple):
            index = _unstarred(target.elts[0]) if target.elts else None
            sequence = args[0]
            if (
                isinstance(index, ast.Name)
                and _is_sized(analysis, provenance, sequence)
                and _unchanged_in(analysis, sequence, loop)
            ):
                return _less_than_last(index, f"len({_segment(analysis, sequence)})")
        if (
            builtin == "range"
            and len(args) in (1, 2)
            and isinstance(target, ast.Name)
            and _unchanged_in(analysis, args[-1], loop)
        ):
            stop = args[-1]
            text = _segment(analysis, stop)
            if not _is_atom(stop):
                text = f"({text})"
            return _less_than_last(target, text)
        return None
    if (
        isinstance(target, ast.Name)
        and isinstance(iterable, (ast.Name, ast.Attribute))
        and _distinct_items(analysis, provenance, iterable)
        and _unchanged_in(analysis, iterable, loop)
    ):
        return f"{target.id} is not {_segment(analysis, iterable)}[-1]"
    return None


def _less_than_last(index: ast.Name, stop: str) -> str:
    """`index < stop - 1`, `stop` being the text of an atom (or parenthesised)."""
    return f"{index.id} < {stop} - 1"


def _is_atom(node: ast.expr) -> bool:
    """What `- 1` can follow without parentheses: a name, attribute, call, subscript, integer."""
    if isinstance(node, ast.Constant):
        return not isinstance(node.value, (float, complex, str, bytes))
    return isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))


def _segment(analysis: FileAnalysis, node: ast.AST) -> str:
    """`node`'s exact source text."""
    return ast.get_source_segment(analysis.source, node) or analysis.code_of(node)


def _unchanged_in(analysis: FileAnalysis, expression: ast.expr, loop: Loop) -> bool:
    """Whether no name `expression` reads is rebound, or mutated as a list, in `loop`'s body:
    re-evaluated there, the condition must still mean what it did at the loop header."""
    names: list[str] = []
    for node in ast.walk(expression):  # an expression, not the file
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)  # LibCST's visitor saw the attribute's name too
    scope = analysis.scope_of(loop)
    for name in names:
        for occurrence in analysis.occurrences(name, scope):
            if not _inside(analysis, occurrence, loop.body):
                continue
            parent = analysis.parent(occurrence)
            stored = not _is_read(analysis, occurrence)
            mutated = (
                isinstance(parent, ast.Attribute)
                and parent.value is occurrence
                and parent.attr in _MUTATING_METHODS
            )
            if stored or mutated:
                return False
    return True


def _is_read(analysis: FileAnalysis, name: ast.Name) -> bool:
    """Not a store or `del` target (of an assignment, augmented or annotated assignment,
    `for`, comprehension, walrus, unpacking)."""
    return not isinstance(name.ctx, (ast.Store, ast.Del))


def _inside(analysis: FileAnalysis, node: ast.AST, region: list[ast.stmt]) -> bool:
    """Whether `node` is in one of the statements of `region` (a loop's body)."""
    if not region:
        return False
    start, end = analysis.index.start, analysis.index.end
    return start[region[0]] <= start[node] < end[region[-1]]


def _is_sized(analysis: FileAnalysis, provenance: Provenance, node: ast.expr) -> bool:
    """A list, tuple, tensor or ModuleList: `len()` works on it."""
    if analysis.value_of(node).kind in (Kind.LIST, Kind.TUPLE, Kind.TENSOR):
        return True
    origin = provenance.of(node)
    if origin.kind is OriginKind.COLLECTION and isinstance(
        origin.expression, (ast.List, ast.Tuple, ast.ListComp)
    ):
        return True
    return _is_module_list(analysis, provenance, node)


def _distinct_items(analysis: FileAnalysis, provenance: Provenance, node: ast.expr) -> bool:
    """A list or tuple whose elements are distinct tensors or modules, so that `x is xs[-1]`
    holds for the last one only: a comprehension or appended list of tensors, a literal of
    different tensors, a list appended with new instances of the file's classes (loss
    objects), or a ModuleList."""
    if _is_module_list(analysis, provenance, node):
        return True
    origin = provenance.of(node)
    if origin.kind is not OriginKind.COLLECTION or not isinstance(
        origin.expression, (ast.List, ast.Tuple, ast.ListComp)
    ):
        return False
    values = [item.inputs[0] for item in origin.inputs]
    if all(_new_instance(analysis, value) for value in values):
        return True  # every evaluation of a constructor makes another object
    tensors = (OriginKind.OP, OriginKind.FORWARD, OriginKind.LOSS)
    return all(value.kind in tensors for value in values) and len(set(values)) == len(values)


def _new_instance(analysis: FileAnalysis, value: Origin) -> bool:
    """A call of a class of the file that defines no `__new__`: a new object each time."""
    call = value.expression
    if not isinstance(call, ast.Call):
        return False
    made = analysis.value_of(call.func)
    info = analysis.index.classes.get(made.cls) if made.kind is Kind.CLASS and made.cls else None
    return info is not None and "__new__" not in info.methods


def _is_module_list(analysis: FileAnalysis, provenance: Provenance, node: ast.expr) -> bool:
    constructor = provenance.module_constructor(node)
    return (
        constructor is not None
        and analysis.qualified_name(constructor.func) == "torch.nn.ModuleList"
    )


# -- for `gradfix trace` --------------------------------------------------------------------
def fix_at(analysis: FileAnalysis, statement: ast.stmt, repeated: bool) -> dict[ast.AST, Rewrite]:
    """The fix of the backward call in `statement`, which `gradfix trace` saw free a graph
    that a later backward went through again, with nothing updating parameters between them:
    `retain_graph=True`, or, for a backward that a loop repeats over one graph (`repeated`),
    the loop condition `check` writes (`retain_graph=i < len(losses) - 1`). {} when the
    statement holds no backward call gradfix can rewrite, or the loop's condition is beyond
    it."""
    sites = [
        site
        for node in ast.walk(statement)
        if isinstance(node, ast.Call) and (site := _site(analysis, node)) is not None
    ]
    if len(sites) != 1 or sites[0].retains:
        return {}
    call = sites[0].call
    if not repeated:
        return {call: _retaining("True")}
    loops = analysis.enclosing_loops(statement)
    condition = _last_iteration_test(analysis, Provenance(analysis), loops[0]) if loops else None
    return {call: _retaining(condition)} if condition is not None else {}
