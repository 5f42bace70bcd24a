"""GF004: an in-place write to a tensor that autograd saved for backward.

Detects in-place writes (`*_` methods such as `add_`, `masked_fill_`, `clamp_`, `normal_`;
augmented assignment `y += eps`; index assignment `y[mask] = 0`; `out=` arguments; `F.relu(t,
inplace=True)`, a module built with `inplace=True` called on `t` (also one taken from a
module-level table of instances, `self.act = ACTS[name]`), or placed right after the layer that
made `t` in an `nn.Sequential` (spelled, built from a list under `if`s and in loops, or grown
with `add_module`), or first in an `nn.Sequential` called on `t`) whose target shares storage
and version counter (through names, views, `.detach()` and earlier in-place results, as
provenance follows them) with a tensor an op saved for backward: its output (sigmoid, tanh,
exp, softmax, ...) or one of its inputs (log, pow, `Linear`, a buffer multiplied with features
that require grad), as the measured op table says. Backward then raises "one of the variables
needed for gradient computation has been modified by an inplace operation". Not a tensor's
write: an index that is a string (`out["gate"] = y`) and a sequence added in place (`feats +=
(y,)`), which no tensor takes. A write into a function's parameter that runs on every call
(`token += pos` first in a `forward(token)`) is also a write into what each of the file's calls
passes: it is judged at each call against what the caller saved before it, ops inside the
file's own functions and `forward`s it ran included (`self.dec_a(q)` whose layer norm saved
`q`, then `self.dec_b(q)`). Likewise a write into a `self` attribute the method does not rebind
(`self.queue[:, i:j] = k` in a no_grad helper: under no_grad the version still changes) is
judged at each call on the caller's own `self` (`self._enqueue(k)` after
`torch.einsum("nc,ck->nk", [q, self.queue])` saved the queue). A call of a module built with
`max_norm` (`nn.Embedding(n, d, max_norm=1)`) renormalises the rows of its weight it looks up
in place: a write into that weight.

Safe when: the saving op ran in grad mode on inputs for which the table says it saves, the write
runs after it with no backward in between (a write after the last backward is harmless), and the
edit keeps every value the program computes. A leaf that requires grad written outside
`no_grad` ("a leaf Variable that requires grad is being used in an in-place operation"), a saved
parameter, and saves gradfix cannot undo with one edit are reported only: the fixes there are
`with torch.no_grad():` and moving the update after backward, never cloning a parameter.

Rewrites with the smallest edit: the out-of-place form at the write (`y = y + eps`,
`y = y.clamp(min=0)`, `.masked_fill(...)`, `inplace=False`) when no other alias of the saved
tensor is read afterwards (for a parameter: by the function, nor by any of the file's callers,
which must all be known, after the call, but as the argument of another call whose write fails
backward anyway; a loop's later iterations reading other slices of the storage, selected by its
counter as the write's is, `x_all[i]` for `i in range(...)`, do not count; otherwise reported,
naming what gradfix could not prove). For a Sequential whose first layer (on every path of the
building code or on some) works in place, the out-of-place form is `inplace=False` on that
layer, when the Sequential has that one call, the layer is its own, and wherever the layer is
not first it follows a layer that makes a new tensor (`nn.Linear`). Otherwise `.clone()`
where the written alias is made: at the `.detach()` it was taken with (`d =
y.detach().clone()`), at the op whose saved output it is (`y = torch.sigmoid(x).clone()`), or
where the saving op reads a saved input (`q @ self.queue.T.clone()`). An in-place module
called elsewhere too (or shared through a table) given a saving op's result directly gets a
copy of it at that call (`self.act(torch.sigmoid(x).clone())`): its flag stays for its other
callers. A caller's op that saved an attribute a method then writes reads a copy (`[q,
self.queue.clone()]`), when the attribute is proven a buffer (else reported). An embedding's
weight saved before a `max_norm` lookup is read as a copy by the op that saved it
(`emb.weight.clone() @ W.t()`): the fix nn.Embedding's documentation gives, which keeps the
values and passes the gradient on to the weight, unlike cloning a parameter an optimizer
updates. One finding per saved tensor, at the first write that breaks it.

An optimizer step between a loss's forward and its backward is judged in
`gf004_step_before_backward.py`, and reported.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, replace
from enum import Enum

from codemods.analysis import FileAnalysis, Grad, Kind, saved_ops, torch_api
from codemods.analysis.counters import counter_slice
from codemods.analysis.flows import Use, follow_expression
from codemods.analysis.index import FUNCTION_TYPES, Loop, ScopeNode
from codemods.analysis.interpreter import target_key
from codemods.analysis.layers import INPUT, adjacent_layers, holding_sequentials, returns_new_tensor
from codemods.analysis.provenance import (
    CallSite,
    Origin,
    OriginKind,
    Provenance,
    evaluated_in,
    walk,
)
from codemods.analysis.syntax import is_false, keyword_argument
from codemods.analysis.training import in_inference_method
from codemods.findings import Tier
from codemods.lazy_libcst import cst
from codemods.rules.base import Rewrite, Rule, RuleFinding
from codemods.rules.edits import method_call
from codemods.rules.gf004_step_before_backward import step_before_backward

_WRITE_TEXT = re.compile(r"\w_\(|[-+*/@]=|\]\s*=[^=]|inplace\s*=\s*True|\bout\s*=|ReLU\(True")
_TORCH_TEXT = re.compile(r"torch\b|nn\.")  # at a word's start (`torch_api.at_word_starts`)
# `_WRITE_TEXT`'s first part, an in-place method's call, found from its `_(` (`re` tries a
# pattern that begins with `\w` at every word character): nearly every model file has one.
_UNDERSCORE_CALL_TEXT = re.compile(r"_\(")
_INPLACE_CALL_TEXT = re.compile(r"\w_\(")
_ERROR = (
    '"one of the variables needed for gradient computation has been modified by an '
    'inplace operation"'
)
_LEAF_ERROR = '"a leaf Variable that requires grad is being used in an in-place operation"'
# By LibCST class name (LibCST is loaded only when a fix is built): each augmented
# assignment's binary operator, and the precedence of those operators, to parenthesise the
# right operand of `y = y <op> (value)` only when needed.
_AUGMENTED_TO_BINARY = {
    "AddAssign": "Add",
    "SubtractAssign": "Subtract",
    "MultiplyAssign": "Multiply",
    "DivideAssign": "Divide",
    "FloorDivideAssign": "FloorDivide",
    "ModuloAssign": "Modulo",
    "PowerAssign": "Power",
    "MatrixMultiplyAssign": "MatrixMultiply",
}
_PRECEDENCE = {
    "Power": 4,
    "Multiply": 3,
    "Divide": 3,
    "FloorDivide": 3,
    "Modulo": 3,
    "MatrixMultiply": 3,
    "Add": 2,
    "Subtract": 2,
}
# The same operators and atoms as `ast` has them, for the text of messages: each operator's
# text and precedence; `True`, `False` and `None` were names, numbers other than complex atoms.
_OPERATOR_TEXT: dict[type[ast.operator], tuple[str, int]] = {
    ast.Pow: ("**", 4),
    ast.Mult: ("*", 3),
    ast.Div: ("/", 3),
    ast.FloorDiv: ("//", 3),
    ast.Mod: ("%", 3),
    ast.MatMult: ("@", 3),
    ast.Add: ("+", 2),
    ast.Sub: ("-", 2),
}
_AST_ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)
_ATOM_CONSTANTS = (int, float, bool, type(None))
_GRAPH_OPS = (OriginKind.OP, OriginKind.FORWARD, OriginKind.LOSS)
_NOT_TENSORS = frozenset(Kind) - {Kind.TENSOR, Kind.UNKNOWN}
# What no tensor takes, so the written object is no tensor: a sequence added in place
# (`feats += (h,)`; a tensor raises TypeError) and a string index (`out["logits"] = y`).
_SEQUENCES = (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp)

Storage = Hashable  # the base Origin, or (scope, key, reaching bindings) for a name-only tensor


class WriteKind(Enum):
    AUGMENTED = "augmented assignment"  # `y += v`
    INDEX = "index assignment"  # `y[i] = v`, `y[i] += v`
    METHOD = "in-place method"  # `y.add_(v)`
    FLAG = "inplace=True"  # `F.relu(y, inplace=True)`, `self.act(y)` with `inplace=True`
    OUT = "out= argument"  # `torch.exp(x, out=y)`
    CALL = "call"  # `self.dec(q)`, whose body writes its parameter in place: judged at the call


@dataclass(frozen=True)
class _Write:
    node: ast.AST  # what is reported: the statement or the call
    target: ast.expr  # the tensor written
    kind: WriteKind
    call: ast.Call | None = None  # METHOD, FLAG, OUT: the writing call
    flag: ast.Constant | None = None  # FLAG: the `True` that makes it in place
    # a call of an `nn.Sequential` whose first layer works in place: that layer, and whether
    # it is first on every path of the code that builds the Sequential
    layer: ast.Call | None = None
    always: bool = True


@dataclass(frozen=True)
class _Alias:
    """The storage an expression's value lives in, and the origins on the way to it."""

    storage: Storage
    base: Origin  # the evaluation that made the storage
    steps: tuple[Origin, ...]  # from the expression's own origin down to `base`


@dataclass(frozen=True)
class _Saver:
    origin: Origin  # the op that saved the storage
    argument: ast.expr | None  # the input it saved; None when it saved its output
    # the call of the file's own function whose body ran the op (`origin` is inside it), if any
    within: ast.Call | None = None


@dataclass(frozen=True)
class _Fix:
    tier: Tier
    advice: str
    replacements: dict[ast.AST, Rewrite]


class InplaceOnSaved(Rule):
    code = "GF004"
    name = "inplace-on-saved-tensor"
    summary = "An in-place write changes a tensor autograd saved for backward"
    explanation = (
        "Autograd keeps some tensors for the backward pass: sigmoid, tanh, exp, relu and "
        "softmax keep their output; log, pow, sin, Linear and conv keep their input; mul, div "
        "and matmul keep each operand the other one needs (so a buffer multiplied with "
        "features that require grad is kept too). Every tensor has a version counter that "
        "in-place ops bump, shared by its views and by `.detach()`; when a saved tensor was "
        "changed in place before backward, backward raises 'one of the variables needed for "
        "gradient computation has been modified by an inplace operation'. Norms save their "
        "input, so in-place L2 normalisation (`x /= torch.linalg.norm(x, dim=-1, "
        "keepdim=True)`) breaks backward; an activation working in place saves its result, so "
        "`nn.LeakyReLU(0.2, inplace=True)` followed by `nn.Dropout(inplace=True)` in an "
        "`nn.Sequential` does too, however the Sequential is built (from a list appended "
        "to under `if`s and in loops, or with `add_module`); a Sequential whose first layer "
        "works in place (`nn.Sequential(nn.ReLU(inplace=True), nn.Conv2d(...))`) overwrites "
        "the tensor it is called on.\n\n"
        "gradfix knows what each op saves from a table measured on PyTorch, follows the "
        "written tensor through names, views and `.detach()` to what made it, and rewrites "
        "with the smallest edit that keeps every computed value: the out-of-place form at "
        "the write (`y = y + eps`, `y = y.clamp(min=0)`, `.masked_fill(...)`, "
        "`inplace=False`) when no other alias of the saved tensor is read afterwards, "
        "otherwise a `.clone()` where the written alias is made (`d = y.detach().clone()`, "
        "`y = torch.sigmoid(x).clone()`) or where the saving op reads it "
        "(`q @ self.queue.T.clone()`, as MoCo does). An in-place module called elsewhere "
        "too (one `nn.ReLU(inplace=True)` used twice, or shared through a table of "
        "activations) keeps its flag: the call that overwrites a saved output gets a copy, "
        "`self.act(torch.sigmoid(x).clone())`.\n\n"
        "A write into a function's parameter (`token += pos` in `forward(token)`, "
        "`txt /= txt.norm(...)` in a helper) changes the tensor its caller passed: gradfix "
        "judges it at each call of the file against what the caller saved before the call, "
        "inside the file's own modules too (one decoder's layer norm saved `q`, a second "
        "decoder called on `q` overwrites it; a block used as the first layer of an "
        "`nn.Sequential` is called with what the Sequential is called with). A write under "
        "an `if` in the called function (`if self.preact: x = self.act(x)`) is reported. "
        "It rewrites out of place only when it sees "
        "every call and no caller reads the tensor after it; otherwise it reports. A method's "
        "write into a `self` attribute (MoCo's `self.queue[:, i:j] = keys.T` in a no_grad "
        "helper, which still changes the version) is judged the same way at each call on the "
        "caller's `self`; the caller's op then reads a copy of the buffer. A call of an "
        "`nn.Embedding` built with `max_norm` renormalises its weight in place: an op that "
        "saved `emb.weight` before it reads `emb.weight.clone()` instead, as nn.Embedding's "
        "documentation advises.\n\n"
        "Left alone: writes into dicts and sequences (`out['gate'] = y`, `feats += (y,)`), "
        "writes to outputs of ops that save nothing (`out += identity` after "
        "batch norm, `bn(x).relu_()`, add, cat, views of a sum), clones, values made under "
        "`no_grad`, writes after the last backward, `masked_fill_` on attention scores "
        "before the softmax. Reported only: a write in a method named for inference "
        "(`generate`, `sample`) that is not under `no_grad` (the name suggests nothing "
        "backpropagates through it, but proves nothing), a leaf that requires grad written outside "
        "`torch.no_grad()` (wrap the update in it) and a saved parameter (move the update "
        "after backward); gradfix never clones a parameter and never writes `.data`.\n\n"
        "An optimizer step is an in-place write too: a loss computed before `opt.step()` "
        "whose graph ran a module the optimizer holds (an actor loss through the critic "
        "before the critic's update, a GAN's `loss_G` through D before `opt_D.step()`) "
        "fails its backward after the step. gradfix reports it at the step, from the "
        "modules the optimizer was built over and the module calls of the loss's graph "
        "(through the file's helpers, `update_params(opt, net, loss)`): reorder, computing "
        "the loss after the step or moving its backward before it."
    )
    example_before = (
        "gate = torch.sigmoid(self.score(x))\ngate[gate < 0.3] = 0.0\nreturn self.head(x * gate)\n"
    )
    example_after = example_before.replace(
        "torch.sigmoid(self.score(x))", "torch.sigmoid(self.score(x)).clone()"
    )

    def may_apply(self, text: str) -> bool:
        torch = any(torch_api.at_word_starts(_TORCH_TEXT, text))
        return torch and (
            _inplace_call_in(text) or bool(_WRITE_TEXT.search(text)) or ".step(" in text
        )

    def check(self, analysis: FileAnalysis) -> Iterator[RuleFinding]:
        checker = _Checker(analysis)
        yield from checker.findings()
        yield from step_before_backward(analysis, checker.provenance)


def _inplace_call_in(text: str) -> bool:
    return any(
        match.start() and _INPLACE_CALL_TEXT.match(text, match.start() - 1)
        for match in _UNDERSCORE_CALL_TEXT.finditer(text)
    )


@dataclass(frozen=True)
class _ScopeSteps:
    ops: list[ast.AST]  # the scope's calls and operators, in program order...
    op_orders: list[int]  # ...and the program order of each one's statement
    backward_orders: list[int]  # the program order of its backward statements, sorted


class _Checker:
    """One file's writes, judged against what its ops saved."""

    def __init__(self, analysis: FileAnalysis) -> None:
        self.analysis = analysis
        self.provenance = Provenance(analysis)
        self._reaches: dict[ast.AST, bool] = {}  # op node -> its result can be differentiated
        self._aliases: dict[Origin, _Alias | None] = {}
        self._by_scope: dict[ScopeNode, list[ast.AST]] = {}
        self._load_cache: dict[ScopeNode, list[ast.expr]] = {}
        self._backwards: dict[ScopeNode, list[ast.AST]] = {}
        self._steps: dict[ScopeNode, _ScopeSteps] = {}
        self._loop_ends: dict[Loop, int] = {}
        self._link_limits: dict[ScopeNode, int | None] = {}  # `_links_back_to`, per scope
        self._linking: dict[ScopeNode, list[ast.Call]] | None = None  # `_linking_calls`
        self._letting_go: set[ast.AST] = set()  # writes whose callers are being checked
        self._first_layers: dict[ast.Call, tuple[ast.Call, bool] | None] = {}
        # Asked again for every write whose window holds the same op: remembered per op.
        self._saved_by_op: dict[ast.AST, list[tuple[_Saver, _Alias]]] = {}
        self._inputs_of: dict[Origin, list[tuple[Origin, ast.expr]] | None] = {}
        # Whether some call of the file passes a literal `True` as `inplace`: a functional
        # working in place, a module or table entry built to. Without one, no call writes
        # through a flag, and the costly search for a call's module is skipped.
        self._flagged = any(
            _flag_argument(call, analysis.qualified_name(call.func)) is not None
            for call in _calls_passing_true(analysis)
        )

    def findings(self) -> Iterator[RuleFinding]:
        broken: set[Storage] = set()
        for write in self._writes():
            if self.analysis.value_of(write.target).kind in _NOT_TENSORS:
                continue  # `count += 1`, `d[key] = v`: cheap to rule out, costly to follow
            alias = self.alias_of(write.target)
            if alias is None or alias.storage in broken:
                continue
            finding = self._judge(write, alias)
            if finding is not None:
                broken.add(alias.storage)
                yield finding
        for call in self.analysis.index.calls_by_name.get("Sequential", []):
            yield from self._sequential(call)
        for constructor in self._renormalising_constructors():
            yield from self._renormalised_weight(constructor)

    # -- what it detects ----------------------------------------------------------------
    def _writes(self) -> Iterator[_Write]:
        for node in self._writing_nodes():
            kind = type(node)  # exactly one of the three
            if kind is ast.AugAssign:
                target = node.target
                if isinstance(target, ast.Subscript):
                    if not _string_index(target):
                        yield _Write(node, target.value, WriteKind.INDEX)
                elif target_key(target) is not None and not isinstance(node.value, _SEQUENCES):
                    yield _Write(node, target, WriteKind.AUGMENTED)
            elif kind is ast.Assign:
                for written in node.targets:
                    if isinstance(written, ast.Subscript) and not _string_index(written):
                        yield _Write(node, written.value, WriteKind.INDEX)
            else:
                yield from self._call_writes(node)

    def _writing_nodes(self) -> list[ast.AST]:
        """The augmented assignments, assignments and calls that may write in place, in
        source order. Without a call passing `inplace=True`, a call writes only as an
        in-place method or through `out=`: those are looked up by name, not found among
        all of the file's calls."""
        index = self.analysis.index
        if self._flagged:
            return index.of_types(ast.AugAssign, ast.Assign, ast.Call)
        calls = [
            call
            for name, named in index.calls_by_name.items()
            if torch_api.writes_data(name)
            for call in named
        ]
        for keyword in index.of_types(ast.keyword):
            holder = index.parents[keyword]
            if keyword.arg == "out" and type(holder) is ast.Call:  # type: ignore[attr-defined]
                calls.append(holder)
        nodes = [*index.of_types(ast.AugAssign), *index.of_types(ast.Assign), *set(calls)]
        nodes.sort(key=index.start.__getitem__)
        return nodes

    def _call_writes(self, call: ast.Call) -> Iterator[_Write]:
        func = call.func
        if (
            type(func) is ast.Attribute
            and torch_api.writes_data(func.attr)
            and self.analysis.qualified_name(func) is None
        ):
            yield _Write(call, func.value, WriteKind.METHOD, call)
        if self._flagged:  # else no call writes through a flag
            yield from self._flag_writes(call)
        out = keyword_argument(call, "out")
        if out is not None and (self.analysis.qualified_name(func) or "").startswith("torch."):
            yield _Write(call, out, WriteKind.OUT, call)

    def _flag_writes(self, call: ast.Call) -> Iterator[_Write]:
        positional = _positional(call)
        if not positional:
            return
        flag = self._inplace_flag(call)
        if flag is not None:
            yield _Write(call, positional[0], WriteKind.FLAG, call, flag)
        elif self._shared_inplace_entry(call.func) is not None:
            # No flag to flip: the instance is shared with every other user of the table.
            yield _Write(call, positional[0], WriteKind.FLAG, call)
        else:
            first = self._inplace_first_layer(call.func)
            if first is not None:
                yield _Write(call, positional[0], WriteKind.FLAG, call, None, *first)

    def _inplace_flag(self, call: ast.Call) -> ast.Constant | None:
        """The `True` that makes this functional, or the module it calls, work in place."""
        if not self._flagged:
            return None
        qualified = self.analysis.qualified_name(call.func)
        if qualified is not None and qualified.startswith("torch.nn.functional."):
            return _flag_argument(call, qualified)
        if self.analysis.value_of(call.func).kind is not Kind.PASSTHROUGH:
            return None
        constructor = self.provenance.module_constructor(call.func)
        if constructor is None:
            return None
        return _flag_argument(constructor, self.analysis.qualified_name(constructor.func))

    def _inplace_first_layer(self, module: ast.expr) -> tuple[ast.Call, bool] | None:
        """For a call of an `nn.Sequential` whose first layer works in place (a
        pre-activation `nn.Sequential(nn.ReLU(inplace=True), nn.Conv2d(...))`, also built
        from a list or with `add_module`), which overwrites the Sequential's input: that
        layer, and whether it is first on every path of the building code."""
        if not self._flagged or not isinstance(module, (ast.Name, ast.Attribute)):
            return None
        constructor = self.provenance.module_constructor(module)
        if (
            constructor is None
            or self.analysis.qualified_name(constructor.func) != "torch.nn.Sequential"
        ):
            return None
        if constructor not in self._first_layers:
            adjacent = adjacent_layers(self.analysis, constructor) or []
            firsts = [pair.layer for pair in adjacent if pair.previous is INPUT]
            in_place = [
                layer
                for layer in firsts
                if isinstance(layer, ast.Call)
                and _flag_argument(layer, self.analysis.qualified_name(layer.func)) is not None
            ]
            self._first_layers[constructor] = (
                (in_place[0], len(in_place) == len(firsts)) if in_place else None
            )
        return self._first_layers[constructor]

    def _shared_inplace_entry(self, module: ast.expr) -> ast.Call | None:
        """The in-place entry (`nn.ReLU(inplace=True)`) of a module-level table of module
        instances that `module` is taken from: `ACTS[name]`, or `self.act` that its class
        only ever assigns from `ACTS[...]`."""
        if not self._flagged:
            return None
        lookups: list[ast.expr] = [module]
        key = target_key(module)
        if key is not None and not key.startswith("self."):
            return None
        if key is not None:
            info = self.analysis.class_of(self.analysis.scope_of(module))
            if info is None:
                return None
            lookups = []
            for occurrence in self.analysis.self_attribute_occurrences(info.name, key[5:]):
                assign = self.analysis.parent(occurrence)
                if (
                    isinstance(assign, ast.Assign)
                    and self.analysis.index.field.get(occurrence) == "targets"
                ):
                    lookups.append(assign.value)
                elif not self.analysis.is_load(occurrence):
                    return None
        entries = {self._inplace_table_entry(lookup) for lookup in lookups}
        return entries.pop() if len(entries) == 1 else None

    def _inplace_table_entry(self, lookup: ast.expr) -> ast.Call | None:
        """For `TABLE[...]` with `TABLE = {"relu": nn.ReLU(inplace=True), ...}` bound once at
        module level, the entry built with `inplace=True`."""
        if not isinstance(lookup, ast.Subscript) or not isinstance(lookup.value, ast.Name):
            return None
        module_bindings = self.provenance.bindings(self.analysis.module).final
        bindings = module_bindings.get(lookup.value.id, frozenset())
        table = next(iter(bindings)).value if len(bindings) == 1 else None
        if not isinstance(table, ast.Dict):
            return None
        in_place = [
            value
            for key, value in zip(table.keys, table.values, strict=True)
            if key is not None  # not a `**other` entry
            and isinstance(value, ast.Call)
            and _flag_argument(value, self.analysis.qualified_name(value.func))
        ]
        return in_place[0] if len(in_place) == 1 else None

    def _sequential(self, call: ast.Call) -> Iterator[RuleFinding]:
        """`nn.Sequential(..., nn.Tanh(), nn.ReLU(inplace=True), ...)`, also built from a
        list or with `add_module`: an in-place layer that may run right after a layer that
        saved its output overwrites it. Only between layers: the first layer's input is the
        caller's tensor, which `inplace=False` would leave unchanged."""
        if self.analysis.qualified_name(call.func) != "torch.nn.Sequential":
            return
        adjacent = adjacent_layers(self.analysis, call) or []
        flagged = {pair.layer for pair in adjacent if pair.previous is INPUT}
        for pair in adjacent:
            layer, previous = pair.layer, pair.previous
            if layer in flagged or previous is INPUT or not isinstance(layer, ast.Call):
                continue
            if not isinstance(previous, ast.Call) or not pair.parameters_before:
                continue  # without a layer with parameters before, its input may not require grad
            flag = _flag_argument(layer, self.analysis.qualified_name(layer.func))
            if flag is None or not self._saves_its_output(previous):
                continue
            flagged.add(layer)
            always = all(
                isinstance(other.previous, ast.Call) and self._saves_its_output(other.previous)
                for other in adjacent
                if other.layer is layer
            )
            overwrites = (
                "overwrites in place the output of the"
                if always
                else "may run right after (the code that builds the layers adds both on some "
                "path) and then overwrites in place the output of the"
            )
            message = (
                f"`{self._code(layer)}` {overwrites} `{self._code(previous)}` before it, which "
                f"autograd saved for backward: backward raises {_ERROR}. Use `inplace=False`."
            )
            yield RuleFinding(layer, message, Tier.SAFE, {flag: _false})

    def _renormalising_constructors(self) -> Iterator[ast.Call]:
        """`nn.Embedding(n, d, max_norm=1.0)`: a module whose every call rescales the rows
        of its weight it looks up, in place."""
        for name in ("Embedding", "EmbeddingBag"):
            for call in self.analysis.index.calls_by_name.get(name, []):
                qualified = self.analysis.qualified_name(call.func)
                position = torch_api.RENORMALISING_MODULES.get(qualified or "")
                if position is None:
                    continue
                max_norm = keyword_argument(call, "max_norm")
                positional = _positional(call)
                if max_norm is None and position < len(positional):
                    max_norm = positional[position]
                if max_norm is not None and not (
                    isinstance(max_norm, ast.Constant) and max_norm.value is None
                ):
                    yield call

    def _renormalised_weight(self, constructor: ast.Call) -> Iterator[RuleFinding]:
        """The first call of the module that renormalises its weight after an op saved the
        weight, with no backward in between: the nn.Embedding documentation's own case,
        whose fix is to let the op save a copy (`embedding.weight.clone() @ W.t()`)."""
        statement = self.analysis.parent(constructor)
        if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
            return
        key = target_key(statement.targets[0])
        if key is None:
            return
        for call in self.analysis.index.calls_by_name.get(key.rsplit(".", 1)[-1], []):
            if not isinstance(call.func, (ast.Name, ast.Attribute)):
                continue
            if self.provenance.module_constructor(call.func) is not constructor:
                continue
            write = _Write(call, call.func, WriteKind.CALL, call)
            savers = self._weight_savers(write, constructor)
            if not savers:
                continue
            shown = ", ".join(
                f"`{self._cloned_code(saver.argument)}`"
                for saver in savers
                if saver.argument is not None
            )
            saving = savers[0].origin.expression
            assert isinstance(saving, ast.expr)  # an op's call or operator
            message = (
                f"`{self._code(call)}` renormalises in place the rows of "
                f"`{self._code(call.func)}.weight` it looks up (the module is built with "
                f"`max_norm`), which `{self._code(saving)}` (line {saving.lineno})"
                f" saved for backward: backward raises {_ERROR}."
            )
            if any(saver.within is not None for saver in savers):
                advice = "Pass a copy of the weight (`.clone()`) to the call that saves it."
                yield RuleFinding(call, f"{message} {advice}", Tier.REPORT)
            else:
                # A copy saves the values the op used and passes the gradient on to the weight:
                # the fix the nn.Embedding documentation gives, not a parameter silenced.
                replacements: dict[ast.AST, Rewrite] = {
                    saver.argument: _cloned for saver in savers if saver.argument is not None
                }
                advice = f"Let the op save a copy, as nn.Embedding's note advises: {shown}."
                yield RuleFinding(call, f"{message} {advice}", Tier.SAFE, replacements)
            return

    def _weight_savers(self, write: _Write, constructor: ast.Call) -> list[_Saver]:
        """The ops that saved the `.weight` of the module `constructor` built (read by any
        name of it, through views and `.detach()`) and still hold it when `write` runs."""
        savers = []
        for node in self._candidate_savers(write):
            for saver, saved in self._saved_inputs(node):
                weight = saved.base.expression
                if (
                    isinstance(weight, ast.Attribute)
                    and weight.attr == "weight"
                    and self.provenance.module_constructor(weight.value) is constructor
                    and self._saved_until(node, write, saved)
                    and self._reaches_a_graph(node)
                ):
                    savers.append(saver)
        return savers

    def _saves_its_output(self, layer: ast.Call) -> bool:
        """A layer whose backward reads its output: the table's ops that save their output
        (`nn.Tanh()`, `nn.Sigmoid()`), and any activation working in place
        (`nn.LeakyReLU(0.2, inplace=True)`): its input is gone, so it saves its result.
        Dropout in place saves only its mask."""
        key = self.analysis.qualified_name(layer.func)
        op = saved_ops.op_saving(key) if key is not None else None
        if op is not None and op.saves_output_when([True]):
            return True
        in_place = _flag_argument(layer, key) is not None
        return in_place and key is not None and "Dropout" not in key

    # -- which storage a value lives in ---------------------------------------------------
    def alias_of(self, expression: ast.expr) -> _Alias | None:
        return self._resolve(self.provenance.of(expression))

    def _resolve(self, origin: Origin) -> _Alias | None:
        """Follow views, `.detach()` and in-place results down to what made the storage."""
        if origin in self._aliases:
            return self._aliases[origin]
        self._aliases[origin] = None  # a cycle resolves to nothing
        resolved = self._resolve_uncached(origin)
        self._aliases[origin] = resolved
        return resolved

    def _resolve_uncached(self, origin: Origin) -> _Alias | None:
        if origin.kind is OriginKind.CHOICE:
            alternatives = [o for o in origin.inputs if not self._carried_in_place(o)]
            resolved = [self._resolve(o) for o in alternatives]
            if not resolved or any(r is None for r in resolved):
                return None
            if len({r.storage for r in resolved if r is not None}) != 1:
                return None
            first = resolved[0]
            assert first is not None
            return replace(first, steps=(origin, *first.steps))
        aliased = self._aliased_input(origin)
        if aliased is not None:
            inner = self._resolve(aliased)
            return None if inner is None else replace(inner, steps=(origin, *inner.steps))
        storage = self._storage_key(origin)
        return None if storage is None else _Alias(storage, origin, (origin,))

    def _aliased_input(self, origin: Origin) -> Origin | None:
        """The input whose storage `origin`'s value shares (a view, `.detach()`, the result
        of an in-place op), if any."""
        if _is_detach(origin):
            # Provenance ends a `.detach()` (no history), but it shares the version counter.
            assert isinstance(origin.expression, ast.Call)
            assert isinstance(origin.expression.func, ast.Attribute)
            return self.provenance.of(origin.expression.func.value)
        if origin.kind not in (OriginKind.OP, OriginKind.FORWARD) or not origin.inputs:
            return None
        call = origin.expression
        if isinstance(call, ast.Call) and self._inplace_flag(call) is not None:
            return origin.inputs[0]
        op = saved_ops.op_saving(origin.key) if origin.key is not None else None
        if op is None or op.view_of_input is None:
            return None
        inputs = self._tensor_inputs(origin)
        if inputs is None or op.view_of_input >= len(inputs):
            return None
        return inputs[op.view_of_input][0]

    def _carried_in_place(self, origin: Origin) -> bool:
        """A value from the previous iteration that an augmented assignment (`w -= ...`)
        made: in place, so the same storage as the other alternatives."""
        if origin.kind is not OriginKind.CARRIED or origin.expression is None:
            return False
        statement = self.analysis.parent(origin.expression)
        return isinstance(statement, ast.AugAssign) and statement.target is origin.expression

    def _storage_key(self, origin: Origin) -> Storage | None:
        if origin.kind is OriginKind.UNKNOWN and isinstance(origin.expression, ast.arg):
            return origin  # a parameter: one origin for every read of it
        if origin.kind is OriginKind.UNKNOWN:
            # Known by name only (`self.queue`, a parameter): two reads under the same
            # reaching bindings read the same object.
            key = target_key(origin.expression) if origin.expression is not None else None
            if key is None or not isinstance(origin.expression, ast.expr):
                return None
            scope = self.analysis.scope_of(origin.expression)
            return (scope, key, self.provenance.reaching(key, origin.expression))
        if origin.kind in (OriginKind.CARRIED, OriginKind.CHOICE, OriginKind.COLLECTION):
            return None
        return origin

    def _tensor_inputs(self, origin: Origin) -> list[tuple[Origin, ast.expr]] | None:
        """The op's tensor input positions, as the op table counts them (numbers, strings and
        keyword arguments are not positions), with the expression passed at each."""
        if origin in self._inputs_of:
            return self._inputs_of[origin]
        arguments = _argument_nodes(origin)
        inputs = None
        if arguments is not None and len(arguments) == len(origin.inputs):
            inputs = [
                (inner, node)
                for inner, (node, keyword) in zip(origin.inputs, arguments, strict=True)
                if not keyword and not self._is_python_value(node)
            ]
        self._inputs_of[origin] = inputs
        return inputs

    def _is_python_value(self, node: ast.expr) -> bool:
        if isinstance(node, ast.JoinedStr):
            return True
        if isinstance(node, ast.Constant) and not isinstance(node.value, complex | type(...)):
            return True  # a string, a number (not an imaginary one), `None`, `True`, `False`
        return self.analysis.value_of(node).kind is Kind.NUMBER

    def _requires_grad(self, origin: Origin, op: saved_ops.OpSaving) -> list[bool | None] | None:
        """The requires-grad pattern of the op's tensor inputs, for the table."""
        inputs = self._tensor_inputs(origin)
        if inputs is None or len(inputs) > len(op.input_kinds):
            return None
        return [_requires(inner.grad) for inner, _ in inputs]

    # -- who saved it -----------------------------------------------------------------------
    def _output_saver(self, write: _Write, alias: _Alias) -> _Saver | None:
        """The op whose saved output the write overwrites: the one that made the storage, or
        an in-place op on the way (`out = self.relu(out)` with `nn.ReLU(inplace=True)` saves
        its output in the storage `bn2` made)."""
        in_place = [
            step
            for step in alias.steps
            if step is not alias.base
            and isinstance(step.expression, ast.Call)
            and self._inplace_flag(step.expression) is not None
        ]
        for candidate in (alias.base, *in_place):
            if self._saves_output_until(candidate, write, alias):
                return _Saver(candidate, None)
        return None

    def _saves_output_until(self, origin: Origin, write: _Write, alias: _Alias) -> bool:
        if origin.kind not in _GRAPH_OPS or origin.grad is not Grad.ATTACHED or origin.key is None:
            return False
        op = saved_ops.op_saving(origin.key)
        pattern = self._requires_grad(origin, op) if op is not None else None
        if op is None or pattern is None or not op.saves_output_when(pattern):
            return False
        if origin.site is None or not self._saved_until(origin.site, write, alias):
            return False
        return self._reaches_a_graph(origin.site)

    def _reaches_a_graph(self, op_node: ast.AST) -> bool:
        """Whether the op's result can be differentiated: `x.norm().item() > 1` ends in a
        number, so no backward ever needs what the norm saved."""
        if op_node not in self._reaches:
            uses = follow_expression(self.analysis, op_node).uses  # type: ignore[arg-type]
            self._reaches[op_node] = not uses <= {Use.NEEDS_TENSOR}
        return self._reaches[op_node]

    def _input_savers(self, write: _Write, alias: _Alias) -> list[_Saver]:
        savers = []
        for node in self._candidate_savers(write, alias):
            if not self._saved_until(node, write, alias):
                continue
            for saver, saved in self._saved_inputs(node):
                if saved.storage == alias.storage and self._reaches_a_graph(node):
                    savers.append(saver)
        return savers

    def _saved_inputs(self, node: ast.AST) -> list[tuple[_Saver, _Alias]]:
        """Each input that an op run by evaluating `node` saves for backward (in grad mode,
        as the table says for the inputs that require grad), with the storage it lives in."""
        saved = self._saved_by_op.get(node)
        if saved is None:
            saved = self._saved_by_op[node] = list(self._find_saved_inputs(node))
        return saved

    def _find_saved_inputs(self, node: ast.AST) -> Iterator[tuple[_Saver, _Alias]]:
        if self.provenance.without_grad(node):
            return  # its ops are out of the graph: they save nothing
        family = self.provenance.op_key_family(node)
        if family is not None and not saved_ops.may_save_an_input(family):
            # `a + b`, `torch.zeros(n)`, `x.view(n)`: evaluating it runs that one op
            # (`_evaluated_ops`), whose key is `family` or a call shape of it, and no shape
            # saves an input; its provenance is not built (half the window's ops are these).
            return
        for origin, within in self._evaluated_ops(node):
            if origin.kind not in _GRAPH_OPS or origin.grad is not Grad.ATTACHED:
                continue
            op = saved_ops.op_saving(origin.key) if origin.key is not None else None
            inputs = self._tensor_inputs(origin)
            pattern = self._requires_grad(origin, op) if op is not None else None
            if op is None or inputs is None or pattern is None:
                continue
            for position, (inner, argument) in enumerate(inputs):
                if not op.saves_input(position, pattern):
                    continue
                resolved = self._resolve(inner)
                if resolved is not None:
                    yield _Saver(origin, argument, within), resolved

    def _evaluated_ops(self, node: ast.AST) -> list[tuple[Origin, ast.Call | None]]:
        """What evaluating `node` runs: its own op and, for a call of the file's function that
        provenance follows, the ops in that body on the way to what it returns (a `forward`'s
        layer norm saves the forward's input), each with the call it ran in."""
        top = self.provenance.of(node)  # type: ignore[arg-type]
        if not isinstance(node, ast.Call) or top.expression is node:
            return [(top, None)]
        inside = [
            origin
            for origin, _ in walk(top, stop=lambda origin: origin.site is not node)
            if origin.site is node and origin.kind in _GRAPH_OPS
        ]
        return [(origin, node) for origin in inside]

    def _candidate_savers(self, write: _Write, alias: _Alias | None = None) -> list[ast.AST]:
        """The ops of the write's scope that may still hold what they saved when it runs:
        those since the last backward before it, and, when it is in a loop, those after it in
        that loop (they run before it in the next iteration). A window, not the whole scope,
        so that a long script of steps costs linear time. Given the written `alias`, the
        window starts no earlier than the statement that made its storage (`_made_at`)."""
        scope = self.analysis.scope_of(write.node)
        statement = self.provenance.statement_of(write.node)
        if statement is None:
            return []
        steps = self._scope_steps(scope)
        last = self.provenance.bindings(scope).order[statement]
        backwards = steps.backward_orders
        previous = bisect.bisect_left(backwards, last) - 1
        since = backwards[previous] if previous >= 0 else -1
        if alias is not None:
            since = max(since, self._made_at(scope, alias))
        low = bisect.bisect_left(steps.op_orders, since)
        high = bisect.bisect_right(steps.op_orders, last)
        candidates = steps.ops[low:high]
        loops = self.analysis.enclosing_loops(write.node)
        if loops:
            loop_end = self._last_order_within(scope, loops[-1])
            after = bisect.bisect_right(steps.op_orders, loop_end)
            candidates = candidates + steps.ops[high:after]
        return candidates

    def _made_at(self, scope: ScopeNode, alias: _Alias) -> int:
        """The program order of the statement of `scope` that made the alias's storage, when
        no op of an earlier statement can have saved that storage; else -1.

        Why skipping those ops is exact: an op saves a storage only if provenance reaches the
        storage's origin from the op's inputs. In the top frame of a function, provenance
        follows a name only to the bindings that come before its statement in program order
        (a binding of a previous loop iteration is CARRIED, never a storage; one carried in
        place is dropped, leaving the earlier ones), and every origin of a call it follows
        into has the site of that call; so from an op it reaches only origins whose site's
        statement is the op's or an earlier one, however often a loop or a caller runs the
        statement again. Three links go elsewhere: `_appended` (a list's items, from its
        `append` calls anywhere in the scope), `.detach()` (resolved through the top frame of
        the scope it is written in, which may be this very function reached again by a
        recursive call: to the detach's statement) and, in module-level code, a global's
        last binding (read by a function it calls). So the cut is made only in a function
        and only for a storage made after its last `append` and `detach` statements
        (`_links_back_to`). A storage known by name only (two reads under the same reaching
        bindings are one storage) has no one origin to place. Not asking about the skipped
        ops changes only which provenance is built first, which matters only where a value
        is defined through itself (the cycle guard then stops at the first node met again):
        `tests/test_gf004_window.py` holds a case of each link."""
        base = alias.base
        if (
            alias.storage is not base
            or base.kind is OriginKind.UNKNOWN
            or base.site is None
            or self.analysis.scope_of(base.site) is not scope
        ):
            return -1
        statement = self.provenance.statement_of(base.site)
        made = self.provenance.bindings(scope).order.get(statement, -1) if statement else -1
        limit = self._links_back_to(scope)
        return made if limit is not None and made > limit else -1

    def _links_back_to(self, scope: ScopeNode) -> int | None:
        """The last program order in `scope` that provenance may reach from an earlier
        statement (`_made_at`): that of its last statement calling `append` or `detach`, -1
        without one; None when any order may be (module-level code, or such a call outside
        the scope's statements)."""
        if scope not in self._link_limits:
            limit: int | None = None
            if isinstance(scope, FUNCTION_TYPES):
                order = self.provenance.bindings(scope).order
                limit = -1
                for call in self._linking_calls().get(scope, ()):
                    statement = self.provenance.statement_of(call)
                    if statement is None or statement not in order:
                        limit = None
                        break
                    limit = max(limit, order[statement])
            self._link_limits[scope] = limit
        return self._link_limits[scope]

    def _linking_calls(self) -> dict[ScopeNode, list[ast.Call]]:
        """The file's `append` and `detach` calls by scope, found once: asking each scope to
        scan every such call of the file would be quadratic in the file's length."""
        if self._linking is None:
            self._linking = {}
            for name in ("append", "detach"):
                for call in self.analysis.index.calls_by_name.get(name, []):
                    self._linking.setdefault(self.analysis.scope_of(call), []).append(call)
        return self._linking

    def _last_order_within(self, scope: ScopeNode, loop: Loop) -> int:
        """The program order of the last statement inside `loop`."""
        if loop not in self._loop_ends:
            order = self.provenance.bindings(scope).order
            self._loop_ends[loop] = max(
                (order[n] for n in self.analysis.descendants(loop) if n in order), default=-1
            )
        return self._loop_ends[loop]

    def _saved_until(self, node: ast.AST, write: _Write, alias: _Alias) -> bool:
        """Whether what `node` evaluates (and saves) is still needed when `write` runs: it
        runs before the write, with no backward in between."""
        scope = self.analysis.scope_of(write.node)
        if self.analysis.scope_of(node) is not scope:
            return False
        node_statement = self.provenance.statement_of(node)
        write_statement = self.provenance.statement_of(write.node)
        if node_statement is None or write_statement is None:
            return False
        order = self.provenance.bindings(scope).order
        backwards = self._scope_steps(scope).backward_orders
        first, last = order[node_statement], order[write_statement]
        if first < last or (first == last and self._evaluated_before(node, write)):
            between = bisect.bisect_right(backwards, first)
            return between == len(backwards) or backwards[between] >= last
        loop = self._common_loop(node, write.node)
        if loop is None or evaluated_in(alias.base, loop, self.analysis):
            return False
        # The write runs again in the next iteration, after `node` in this one.
        inside = [b for b in self._backward_statements(scope) if self.analysis.contains(loop, b)]
        return not any(order[b] > first or order[b] < last for b in inside)

    def _scope_steps(self, scope: ScopeNode) -> _ScopeSteps:
        """The scope's ops and backward statements by program order, for bisection."""
        steps = self._steps.get(scope)
        if steps is None:
            order = self.provenance.bindings(scope).order
            placed = []
            for node in self._op_nodes(scope):
                statement = self.provenance.statement_of(node)
                if statement is not None and statement in order:
                    placed.append((order[statement], node))
            placed.sort(key=lambda pair: pair[0])  # stable: source order within a statement
            backwards = sorted(order[b] for b in self._backward_statements(scope))
            steps = self._steps[scope] = _ScopeSteps(
                [node for _, node in placed], [at for at, _ in placed], backwards
            )
        return steps

    def _evaluated_before(self, node: ast.AST, write: _Write) -> bool:
        """Within one statement: the write's own operands run before it, and so does what
        stands to its left; what encloses it runs after."""
        if node is write.node or self.analysis.contains(node, write.node):
            return False
        if self.analysis.contains(write.node, node):
            return True
        return self.analysis.index.end[node] <= self.analysis.index.start[write.node]

    def _common_loop(self, first: ast.AST, second: ast.AST) -> Loop | None:
        around = self.analysis.enclosing_loops(second)
        return next((loop for loop in self.analysis.enclosing_loops(first) if loop in around), None)

    def _op_nodes(self, scope: ScopeNode) -> list[ast.AST]:
        return [n for n in self._nodes(scope) if isinstance(n, (ast.Call, ast.BinOp))]

    def _nodes(self, scope: ScopeNode) -> list[ast.AST]:
        """The scope's calls, operators and assignments, in source order: those in its
        stretch of the source order, less those of the functions nested in it. Only the
        scopes that write are asked about."""
        nodes = self._by_scope.get(scope)
        if nodes is None:
            index = self.analysis.index
            position = index.start.__getitem__
            first, last = index.start[scope], index.end[scope]
            inside: list[ast.AST] = []
            for kind in (ast.Call, ast.BinOp, ast.Assign):
                of_kind = index.of_types(kind)  # in source order
                low = bisect.bisect_left(of_kind, first, key=position)
                inside += of_kind[low : bisect.bisect_left(of_kind, last, lo=low, key=position)]
            inside.sort(key=position)
            nodes = [node for node in inside if self.analysis.scope_of(node) is scope]
            self._by_scope[scope] = nodes
        return nodes

    def _backward_statements(self, scope: ScopeNode) -> list[ast.AST]:
        if scope not in self._backwards:
            statements = []
            for node in self._op_nodes(scope):
                if isinstance(node, ast.Call) and self._is_backward(node):
                    statement = self.provenance.statement_of(node)
                    if statement is not None:
                        statements.append(statement)
            self._backwards[scope] = statements
        return self._backwards[scope]

    def _is_backward(self, call: ast.Call) -> bool:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "backward":
            return True
        return self.analysis.qualified_name(func) in torch_api.AUTOGRAD_FUNCTIONS

    # -- judging one write ------------------------------------------------------------------
    def _judge(self, write: _Write, alias: _Alias) -> RuleFinding | None:
        through_detach = any(_is_detach(step) for step in alias.steps)
        if (
            self._is_leaf(alias.base)
            and self.analysis.grad_enabled(write.node)
            and not through_detach  # `w.detach().zero_()` writes a tensor that needs no grad
        ):
            message = (
                f"`{self._code(write.node)}` writes in place into a leaf tensor that requires "
                f"grad, outside `torch.no_grad()`: PyTorch raises {_LEAF_ERROR}. Wrap the "
                "update in `with torch.no_grad():` (rebinding the name instead would stop "
                "training that tensor)."
            )
            return RuleFinding(write.node, message, Tier.REPORT)
        output_saver = self._output_saver(write, alias)
        input_savers = self._input_savers(write, alias)
        if output_saver is not None or input_savers:
            message = (
                f"`{self._code(write.node)}` writes in place into "
                f"{self._what_was_saved(output_saver, input_savers)} for backward: backward "
                f"raises {_ERROR}."
            )
            fix = self._fix(write, alias, output_saver, input_savers)
        else:
            breaking = self._breaking_calls(write, alias)
            if not breaking:
                return None
            site, saver = breaking[0]
            output = saver if saver.argument is None else None
            attribute = self._written_attribute(write, alias)
            held = (
                f"`{attribute[1]}` of the `self` that `{self._code(site.call)}` "
                f"(line {site.call.lineno}) runs on"
                if attribute is not None
                else f"what `{self._code(site.call)}` (line {site.call.lineno}) passes"
            )
            message = (
                f"`{self._code(write.node)}` writes in place into {held}: "
                f"{self._what_was_saved(output, [saver])} for backward before that call: "
                f"backward raises {_ERROR}."
            )
            condition = self._condition(write)
            if condition is not None:
                # The write runs on some calls only: whether on these calls is not proven.
                message = message.replace(" writes in place ", " may write in place ", 1)
                fix = _Fix(
                    Tier.REPORT,
                    f"It runs when {condition}, which gradfix could not "
                    "prove for these calls; if it does, compute it out of place, or pass a "
                    "copy (`.clone()`) at the call.",
                    {},
                )
            elif attribute is not None:
                fix = self._clone_where_caller_reads(alias, [saver for _, saver in breaking])
            else:
                fix = self._fix_for_callers(write, alias, [site.call for site, _ in breaking])
        if write.layer is not None:
            layer = f"`{self._code(write.layer)}` (line {write.layer.lineno})"
            if write.always:
                message += f" Its first layer, {layer}, works in place."
            else:
                message = message.replace(" writes in place ", " may write in place ", 1)
                message += (
                    f" Its first layer may be {layer}, which works in place (the code that "
                    "builds it adds that layer first on some path)."
                )
                if not self._flips_layer(fix, write):
                    fix = _Fix(
                        Tier.REPORT,
                        "If it does, use `inplace=False` on that layer, or pass a copy "
                        "(`.clone()`).",
                        {},
                    )
        scope = self.analysis.scope_of(write.node)
        if in_inference_method(self.analysis, write.node) and isinstance(scope, FUNCTION_TYPES):
            # A name is no proof that nothing backpropagates through `generate()`, but it
            # makes a needless edit likely: reported, not rewritten.
            return RuleFinding(
                write.node,
                f"{message} Harmless if nothing backpropagates through `{scope.name}()`, as "
                f"its name suggests; otherwise: {fix.advice}",
                Tier.REPORT,
            )
        return RuleFinding(write.node, f"{message} {fix.advice}", fix.tier, fix.replacements)

    def _flips_layer(self, fix: _Fix, write: _Write) -> bool:
        """Whether `fix` is `inplace=False` on the write's in-place layer: right whether or
        not that layer comes first (`_layer_out_of_place`)."""
        assert write.layer is not None
        flag = _flag_argument(write.layer, self.analysis.qualified_name(write.layer.func))
        return fix.tier is Tier.SAFE and list(fix.replacements) == [flag]

    # -- writes into what a caller passes --------------------------------------------------
    def _written_parameter(self, write: _Write, alias: _Alias) -> tuple[ScopeNode, str] | None:
        """The function and parameter whose passed tensor the write changes: the write's
        storage is a parameter of its own function (`token += pos` in a `forward(token)`)."""
        base = alias.base
        if base.kind is not OriginKind.UNKNOWN or not isinstance(base.expression, ast.arg):
            return None
        function = self.analysis.scope_of(write.node)
        if not isinstance(function, FUNCTION_TYPES) or base.expression not in (
            *function.args.posonlyargs,
            *function.args.args,
            *function.args.kwonlyargs,
        ):
            return None
        return function, base.expression.arg

    def _written_attribute(self, write: _Write, alias: _Alias) -> tuple[ScopeNode, str] | None:
        """The method and `self` attribute whose tensor the write changes, when the method
        does not rebind it first (`self.queue[:, i] = k` in a helper of the class): the
        tensor every caller holds as that attribute of the same `self`."""
        base = alias.base
        key = target_key(base.expression) if isinstance(base.expression, ast.expr) else None
        if base.kind is not OriginKind.UNKNOWN or key is None or not key.startswith("self."):
            return None
        method = self.analysis.scope_of(write.node)
        if (
            not isinstance(method, FUNCTION_TYPES)
            or self.analysis.class_of(method) is None
            or self.analysis.scope_of(base.expression) is not method  # type: ignore[arg-type]
            or self.provenance.reaching(key, base.expression)  # bound in the method itself
        ):
            return None
        return method, key

    def _breaking_calls(self, write: _Write, alias: _Alias) -> list[tuple[CallSite, _Saver]]:
        """The calls of the write's function whose passed tensor (or, for a `self`
        attribute, the caller's own attribute) an op of the caller saved before the call,
        when the write runs on every call (a statement of the function's body before any
        `return`): each call is then a write into the caller's tensor."""
        written = self._written_parameter(write, alias) or self._written_attribute(write, alias)
        if written is None or not self._runs_on_every_call(write, written[0]):
            return []
        function, name = written
        breaking = []
        for site in self.provenance.call_sites(function) or ():  # type: ignore[arg-type]
            for held, passed in self._held_by_caller(site, function, name):
                at_call = _Write(site.call, held, WriteKind.CALL, site.call)
                saver = self._output_saver(at_call, passed)
                savers = [saver] if saver is not None else self._input_savers(at_call, passed)
                if savers:
                    breaking.append((site, savers[0]))
                    break
        return breaking

    def _held_by_caller(
        self, site: CallSite, function: ScopeNode, name: str
    ) -> list[tuple[ast.expr, _Alias]]:
        """How the caller holds the tensor the write changes: the argument it passes for
        the parameter `name`; for an attribute `self.x`, its own reads of `self.x` when it
        calls the method on its own `self` (a method of the same class)."""
        if not name.startswith("self."):
            argument = site.arguments.get(name)
            passed = self.alias_of(argument) if argument is not None else None
            if argument is None or passed is None:
                return []
            if self.analysis.value_of(argument).kind in _NOT_TENSORS:
                return []
            return [(argument, passed)]
        func = site.call.func
        caller = self.analysis.scope_of(site.call)
        if not (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
            and isinstance(caller, FUNCTION_TYPES)
            and self.analysis.class_of(caller) is self.analysis.class_of(function)
        ):
            return []  # another object's attribute, or a caller gradfix cannot tie to `self`
        held: dict[Storage, tuple[ast.expr, _Alias]] = {}
        for load in self._loads(caller):
            if target_key(load) != name:
                continue
            passed = self.alias_of(load)
            if passed is not None:
                held.setdefault(passed.storage, (load, passed))
        return list(held.values())

    def _runs_on_every_call(self, write: _Write, function: ScopeNode) -> bool:
        """A statement of the function's body, or one under `if`s there (`if self.activate:
        x = self.act(x)`: `_condition` tells), with no `return` or `raise` of the function
        before it."""
        statement = self.provenance.statement_of(write.node)
        if statement is None:
            return False
        block = self.analysis.parent(statement)
        while block is not function:
            if not isinstance(block, ast.If) or self.analysis.index.field[statement] == "test":
                return False
            statement, block = block, self.analysis.parent(block)
        start = self.analysis.index.start
        return not any(
            isinstance(node, (ast.Return, ast.Raise))
            and self.analysis.scope_of(node) is function
            and start[node] < start[statement]
            for node in self.analysis.descendants(function)
        )

    def _condition(self, write: _Write) -> str | None:
        """When the write's statement runs, if under an `if`: the innermost test's code."""
        statement = self.provenance.statement_of(write.node)
        parent = self.analysis.parent(statement) if statement is not None else None
        if not isinstance(parent, ast.If):
            return None
        holds = "holds" if self.analysis.index.field[statement] == "body" else "does not hold"
        return f"`{self._code(parent.test)}` {holds}"

    def _callers_let_go(
        self, write: _Write, alias: _Alias, breaking: tuple[ast.Call, ...] = ()
    ) -> bool:
        """Whether every call of the write's function passes a tensor its caller holds only
        in local names and does not read after the call (but as the argument of one of the
        `breaking` calls, whose write fails backward anyway): then the write's change is seen
        by no one outside the function, and the out-of-place form keeps every value."""
        written = self._written_parameter(write, alias)
        if written is None or write.node in self._letting_go:
            return False
        function, parameter = written
        sites = self.provenance.call_sites(function)  # type: ignore[arg-type]
        if not sites:
            return False  # callers gradfix cannot see may read it after the call
        self._letting_go.add(write.node)
        try:
            for site in sites:
                argument = site.arguments.get(parameter)
                if argument is None:
                    continue  # the parameter's default: no caller's tensor
                passed = self.alias_of(argument)
                at_call = _Write(site.call, argument, WriteKind.CALL, site.call)
                if passed is None or not self._held_only_here(at_call, passed):
                    return False
                ignored = tuple(
                    value
                    for call in breaking
                    if call is not site.call
                    for other in sites
                    if other.call is call
                    for value in other.arguments.values()
                )
                if self._other_alias_read_after(at_call, passed, None, ignored):
                    return False
            return True
        finally:
            self._letting_go.discard(write.node)

    def _fix_for_callers(self, write: _Write, alias: _Alias, breaking: list[ast.Call]) -> _Fix:
        """Out of place at the write when no caller sees the change; else a copy at the call."""
        out_of_place = self._out_of_place(write, alias, tuple(breaking))
        if out_of_place is not None:
            return out_of_place
        shown = ", ".join(f"line {call.lineno}" for call in breaking)
        return _Fix(
            Tier.REPORT,
            f"Compute it out of place, or pass a copy (`.clone()`) at the call ({shown}); "
            "gradfix could not prove that no caller reads the tensor after the call.",
            {},
        )

    def _clone_where_caller_reads(self, alias: _Alias, savers: list[_Saver]) -> _Fix:
        """A method's write into an attribute of `self`: the callers that saved it let the
        op save a copy (`torch.einsum("nc,ck->nk", [q, self.queue.clone()])`), which every
        later read of the attribute still sees updated."""
        if not self._clonable(alias) or any(
            saver.argument is None or saver.within is not None for saver in savers
        ):
            return _Fix(
                Tier.REPORT,
                "Clone it where the caller's op reads it, unless it is a parameter; or update "
                "it after backward.",
                {},
            )
        replacements: dict[ast.AST, Rewrite] = {}
        for saver in savers:
            assert saver.argument is not None
            replacements.setdefault(saver.argument, _cloned)
        shown = ", ".join(f"`{self._cloned_code(argument)}`" for argument in replacements)
        return _Fix(Tier.SAFE, f"Let the caller's op save a copy: {shown}.", replacements)

    def _is_leaf(self, base: Origin) -> bool:
        """A tensor that requires grad and has no history: in-place writes to it outside
        `no_grad` are refused at once."""
        if base.kind is OriginKind.LEAF:
            frozen = isinstance(base.expression, ast.Call) and is_false(
                keyword_argument(base.expression, "requires_grad")
            )
            return not frozen  # `nn.Parameter(w, requires_grad=False)`
        # `for p in model.parameters(): p -= lr * p.grad`
        if base.kind is not OriginKind.ELEMENT or not base.inputs:
            return False
        iterable = base.inputs[0].expression
        return (
            isinstance(iterable, ast.Call)
            and isinstance(iterable.func, ast.Attribute)
            and iterable.func.attr == "parameters"
            and not self._frozen_module(iterable.func.value)
        )

    def _frozen_module(self, module: ast.expr) -> bool:
        """Whether the file stops `module`'s parameters requiring grad: `for p in
        m.parameters(): p.detach_()` / `p.requires_grad = False` / `p.requires_grad_(False)`,
        or `m.requires_grad_(False)` (an EMA copy, a frozen teacher)."""
        key = self.analysis.code_of(module)
        for call in self.analysis.index.calls_by_name.get("requires_grad_", []):
            receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
            if receiver is not None and self.analysis.code_of(receiver) == key:
                return True
        for node in self.analysis.index.of_types(ast.For, ast.AsyncFor):
            if not (
                isinstance(node, (ast.For, ast.AsyncFor))
                and isinstance(node.iter, ast.Call)
                and isinstance(node.iter.func, ast.Attribute)
                and node.iter.func.attr == "parameters"
                and self.analysis.code_of(node.iter.func.value) == key
            ):
                continue
            body = " ".join(self.analysis.code_of(statement) for statement in node.body)
            if re.search(r"detach_\(|requires_grad\s*=\s*False|requires_grad_\(False\)", body):
                return True
        return False

    def _what_was_saved(self, output_saver: _Saver | None, input_savers: list[_Saver]) -> str:
        if output_saver is not None:
            return f"the output of `{self._op_name(output_saver.origin)}`, which it saved"
        saver = input_savers[0]
        within = (
            f" (in `{self._code(saver.within)}`, line {saver.within.lineno})"
            if saver.within is not None
            else ""
        )
        return (
            f"`{self._code(saver.argument)}` (or what it is a view of), which "
            f"`{self._code(saver.origin.expression)}`{within} saved"
        )

    def _op_name(self, origin: Origin) -> str:
        expression = origin.expression
        if isinstance(expression, ast.Call):
            return self._code(expression.func)
        return origin.key or self._code(expression)

    # -- how it rewrites ------------------------------------------------------------------
    def _fix(
        self,
        write: _Write,
        alias: _Alias,
        output_saver: _Saver | None,
        input_savers: list[_Saver],
    ) -> _Fix:
        if self._is_leaf(alias.base) or self._is_parameter(alias):
            return _Fix(Tier.REPORT, "It is a parameter: update it after backward instead.", {})
        fresh = output_saver is not None and self._writes_fresh_output(write, alias)
        if fresh and (write.flag is None or self._shared_instance(write)):
            return self._copy_passed(write)
        out_of_place = self._out_of_place(write, alias)
        if out_of_place is not None:
            return out_of_place
        if output_saver is not None and input_savers:
            return _Fix(
                Tier.REPORT,
                "Several ops saved it; compute the new value out of place instead.",
                {},
            )
        if output_saver is not None:
            return self._clone_where_made(alias)
        return self._clone_where_read(write, alias, input_savers)

    def _writes_fresh_output(self, write: _Write, alias: _Alias) -> bool:
        """An in-place call given the saving op's result directly (`act(torch.sigmoid(x))`):
        nothing else holds that result, so passing a copy changes no value anyone reads."""
        return write.kind is WriteKind.FLAG and alias.base.expression is write.target

    def _shared_instance(self, write: _Write) -> bool:
        """Whether the in-place module the write calls is called elsewhere too: flipping its
        `inplace` flag would change those calls as well (one that drops the result relies on
        the write), so the fix stays at this call."""
        assert write.call is not None
        func = write.call.func
        if not isinstance(func, (ast.Name, ast.Attribute)):
            return False
        constructor = self.provenance.module_constructor(func)
        qualified = self.analysis.qualified_name(constructor.func) if constructor else None
        if constructor is None or _flag_argument(constructor, qualified) is not write.flag:
            return False  # the flag is the call's own (`F.relu(x, inplace=True)`)
        name = func.id if isinstance(func, ast.Name) else func.attr
        return any(
            call is not write.call and self.provenance.module_constructor(call.func) is constructor
            for call in self.analysis.index.calls_by_name.get(name, [])
        )

    def _copy_passed(self, write: _Write) -> _Fix:
        """`act(torch.sigmoid(x).clone())`: the in-place module overwrites a copy, and keeps
        working in place wherever else it is called."""
        assert write.call is not None
        module = self._code(write.call.func)
        advice = f"Pass it a copy, `{module}({self._cloned_code(write.target)})`"
        shared = self._shared_inplace_entry(write.call.func) if write.flag is None else None
        if shared is not None:
            advice += f": `{module}` may be the shared `{self._code(shared)}`, whose other users"
        else:
            advice += f": `{module}` is called elsewhere too, and those calls"
        return _Fix(Tier.SAFE, advice + " keep working in place.", {write.target: _cloned})

    def _out_of_place(
        self, write: _Write, alias: _Alias, breaking: tuple[ast.Call, ...] = ()
    ) -> _Fix | None:
        """`y = y + eps`, `y = y.clamp(...)`, `.masked_fill(...)`, `inplace=False`: only when
        nothing reads the saved tensor through another alias afterwards (`breaking`: see
        `_callers_let_go`)."""
        parent = self.analysis.parent(write.node)
        rebinds = write.kind is WriteKind.AUGMENTED or (
            write.kind is WriteKind.METHOD
            and isinstance(parent, ast.Expr)
            and target_key(write.target) is not None
        )
        rebound = target_key(write.target) if rebinds else None
        if not self._held_only_here(write, alias, breaking) or self._other_alias_read_after(
            write, alias, rebound
        ):
            return None
        if write.kind is WriteKind.FLAG and write.flag is not None:
            if isinstance(parent, ast.Expr):
                return None  # the result is dropped: the write itself is the point
            return _Fix(Tier.SAFE, "Use `inplace=False`.", {write.flag: _false})
        if write.layer is not None:
            return self._layer_out_of_place(write)
        if isinstance(write.node, ast.AugAssign):
            if type(write.node.op) not in _OPERATOR_TEXT:
                return None  # `|=`, `<<=`: no arithmetic twin to offer; a clone still works
            assign = self._assignment_code(write.node)
            return _Fix(
                Tier.SAFE,
                f"Compute it out of place: `{_cut(assign)}`.",
                {write.node: _assignment_of},
            )
        call = write.call
        if write.kind is not WriteKind.METHOD or call is None:
            return None
        func = call.func
        assert isinstance(func, ast.Attribute)
        if func.attr not in torch_api.INPLACE_METHODS_WITH_TWIN:
            return None
        if isinstance(parent, ast.Expr):
            if rebound is None:
                return None
            assign = f"{self.analysis.code_of(write.target)} = {self._twin_code(call)}"
            return _Fix(
                Tier.SAFE,
                f"Compute it out of place: `{_cut(assign)}`.",
                {parent: _rebinding_twin},
            )
        advice = f"Use the out-of-place `.{func.attr[:-1]}(...)`."
        return _Fix(Tier.SAFE, advice, {func: _twin_method})

    def _layer_out_of_place(self, write: _Write) -> _Fix | None:
        """`inplace=False` on the in-place layer that may come first in the Sequential the
        write calls: it changes no value read anywhere when the write's call is the
        Sequential's only one (whose callers let go of what they pass, as checked before),
        the layer is that Sequential's alone, and wherever it is not first, the layer before
        it makes a new tensor that nothing else holds (`nn.Linear`)."""
        assert write.call is not None and write.layer is not None
        layer = write.layer
        flag = _flag_argument(layer, self.analysis.qualified_name(layer.func))
        sequential = self.provenance.module_constructor(write.call.func)  # type: ignore[arg-type]
        if (
            flag is None
            or sequential is None
            or isinstance(self.analysis.parent(write.call), ast.Expr)
        ):
            return None
        if holding_sequentials(self.analysis, layer) != [sequential]:
            return None  # also a layer elsewhere, or held by a name: its other users
        if self.provenance.calls_of_built(sequential) != [write.call]:
            return None
        adjacent = adjacent_layers(self.analysis, sequential)
        if adjacent is None or not all(
            pair.previous is INPUT or returns_new_tensor(self.analysis, pair.previous)
            for pair in adjacent
            if self.analysis.contains(pair.layer, layer)
        ):
            return None
        shown = f"`{self._code(layer)}` (line {layer.lineno})"
        return _Fix(Tier.SAFE, f"Use `inplace=False` on {shown}.", {flag: _false})

    def _held_only_here(
        self, write: _Write, alias: _Alias, breaking: tuple[ast.Call, ...] = ()
    ) -> bool:
        """Whether the saved tensor is made in the write's own scope (or passed for a
        parameter by callers that let it go) and not stored into an attribute or container
        there: then no caller or other method holds it, and what this scope reads afterwards
        is all that sees the write."""
        base = alias.base
        scope = self.analysis.scope_of(write.node)
        if self._written_parameter(write, alias) is not None:
            if not self._callers_let_go(write, alias, breaking):
                return False
        elif (
            base.kind not in (*_GRAPH_OPS, OriginKind.DATA)
            or base.site is None
            or self.analysis.scope_of(base.site) is not scope
        ):
            return False
        for node in self._nodes(scope):
            if isinstance(node, ast.Assign) and any(self._stores(t) for t in node.targets):
                stored = self.alias_of(node.value)
                if stored is not None and stored.storage == alias.storage:
                    return False
        return True

    def _stores(self, target: ast.expr) -> bool:
        """Whether assigning to `target` keeps the value beyond the scope's local names: not
        an index store into a tensor (`buf[:, i] = y`), which copies `y`'s values."""
        if isinstance(target, ast.Subscript):
            return self.analysis.value_of(target.value).kind is not Kind.TENSOR
        key = target_key(target)
        return key is None or key.startswith("self.")

    def _other_alias_read_after(
        self,
        write: _Write,
        alias: _Alias,
        rebound: str | None,
        ignored: tuple[ast.expr, ...] = (),
    ) -> bool:
        """Whether a read after the write sees the saved tensor other than through the
        write's own result (or the name the out-of-place form rebinds), outside the
        `ignored` expressions."""
        result = self.provenance.of(write.call) if write.call is not None else None
        for load in self._loads(self.analysis.scope_of(write.node)):
            if rebound is not None and target_key(load) == rebound:
                continue
            if any(self.analysis.contains(expression, load) for expression in ignored):
                continue
            if not self._read_after(load, write, alias):
                continue
            resolved = self.alias_of(load)
            if resolved is None:
                if self._may_hold(self.provenance.of(load), alias.storage):
                    return True  # `identity = x` on one branch only: it may be the tensor
                continue
            if resolved.storage != alias.storage:
                continue
            if result is None or result not in resolved.steps:
                return True
        return False

    def _may_hold(self, origin: Origin, storage: Storage) -> bool:
        """Whether one of the alternatives of a value whose storage is not one (`identity =
        self.conv(x)` on one branch, `x` on the other) lives in `storage`."""
        if origin.kind is not OriginKind.CHOICE:
            return False
        for alternative in origin.inputs:
            resolved = self._resolve(alternative)
            if resolved is not None and resolved.storage == storage:
                return True
            if resolved is None and self._may_hold(alternative, storage):
                return True
        return False

    def _read_after(self, load: ast.expr, write: _Write, alias: _Alias) -> bool:
        scope = self.analysis.scope_of(write.node)
        order = self.provenance.bindings(scope).order
        load_statement = self.provenance.statement_of(load)
        write_statement = self.provenance.statement_of(write.node)
        if load_statement is None or write_statement is None:
            return False
        if order[load_statement] > order[write_statement]:
            return True
        if load_statement is write_statement:
            index = self.analysis.index
            if index.start[load] >= index.end[write.node]:
                return True
            # Before the write in its statement: read again by the next iteration.
        return self._read_next_iteration(load, write, alias)

    def _read_next_iteration(self, load: ast.expr, write: _Write, alias: _Alias) -> bool:
        """Whether a later iteration of a loop around both reads, at `load`, what the write
        changed: not when each iteration makes the storage anew, nor when the write and the
        load both take the slice the loop's counter selects (`x_all[i]`: another one each
        iteration), if the loops around that one make the storage anew."""
        around = self.analysis.enclosing_loops(write.node)
        for loop in self.analysis.enclosing_loops(load):
            if loop not in around:
                continue
            if evaluated_in(alias.base, loop, self.analysis):
                return False
            if not self._own_slice(load, alias, loop):
                return True
        return False

    def _own_slice(self, load: ast.expr, alias: _Alias, loop: Loop) -> bool:
        """Whether `load` is subscripted as the written alias is (`x_all[i]`, the same view
        of the storage indexed the same way) by the counter of `loop`."""
        subscript = self.analysis.parent(load)
        if not isinstance(subscript, ast.Subscript) or subscript.value is not load:
            return False
        written = self._written_slice(alias)
        if written is None:
            return False
        selected = counter_slice(self.provenance, subscript)
        if selected is None or selected.loop is not loop:
            return False
        inner, read = self.alias_of(written.value), self.alias_of(load)
        return (
            inner is not None
            and read is not None
            and inner.steps == read.steps
            and counter_slice(self.provenance, written) == selected
        )

    def _written_slice(self, alias: _Alias) -> ast.Subscript | None:
        """The outermost basic subscript the written alias is a view of (`x_all[i]` in
        `x_all[i].squeeze(0)`), when every step down to it follows one path."""
        for step in alias.steps:
            if step.kind is OriginKind.CHOICE:
                return None
            if isinstance(step.expression, ast.Subscript) and step.key == "operator.getitem":
                return step.expression
        return None

    def _loads(self, scope: ScopeNode) -> list[ast.expr]:
        if scope not in self._load_cache:
            names: list[ast.expr] = [
                name for nodes in self.analysis.index.names[scope].values() for name in nodes
            ]
            info = self.analysis.class_of(scope)
            if info is not None:
                names += [
                    attribute
                    for nodes in self.analysis.index.self_attributes[info.name].values()
                    for attribute in nodes
                    if self.analysis.scope_of(attribute) is scope
                ]
            self._load_cache[scope] = [n for n in names if self.analysis.is_load(n)]
        return self._load_cache[scope]

    def _clone_where_made(self, alias: _Alias) -> _Fix:
        """Clone the alias the write goes through where it is bound: at its `.detach()`
        (the copy the code meant to take), else at the op whose output was saved."""
        detach = next((step for step in alias.steps if _is_detach(step)), None)
        made = detach or alias.base
        binding = self.provenance.binding_of(made)
        if (
            binding is None
            or binding.path
            or binding.value is not made.expression
            or made.site is not made.expression
        ):
            return _Fix(
                Tier.REPORT,
                "Clone it where it is made, or compute the new value out of place.",
                {},
            )
        expression = binding.value
        assert isinstance(expression, ast.expr)
        return _Fix(
            Tier.SAFE,
            f"Clone it where it is bound: `{binding.key} = {self._cloned_code(expression)}`.",
            {expression: _cloned},
        )

    def _clone_where_read(self, write: _Write, alias: _Alias, savers: list[_Saver]) -> _Fix:
        """Let each saving op save a copy: `q @ self.queue.T.clone()`."""
        if self._written_parameter(write, alias) is not None:
            return _Fix(
                Tier.REPORT,
                "Compute it out of place; gradfix could not prove that no caller reads the "
                "tensor it passes after the call (then clone it where the op reads it).",
                {},
            )
        if any(saver.within is not None for saver in savers):
            return _Fix(
                Tier.REPORT,
                "Compute it out of place, or pass a copy (`.clone()`) to the call that saves it.",
                {},
            )
        if not self._clonable(alias):
            return _Fix(
                Tier.REPORT,
                "Clone it where the op reads it, unless it is a parameter; or write after "
                "backward.",
                {},
            )
        replacements: dict[ast.AST, Rewrite] = {}
        for saver in savers:
            if saver.argument is not None and saver.argument not in replacements:
                replacements[saver.argument] = _cloned
        shown = ", ".join(f"`{self._cloned_code(argument)}`" for argument in replacements)
        return _Fix(Tier.SAFE, f"Let the op save a copy: {shown}.", replacements)

    def _clonable(self, alias: _Alias) -> bool:
        """Proven not a parameter: made by an op or a factory here, or a registered buffer."""
        base = alias.base
        if base.kind in (*_GRAPH_OPS, OriginKind.DATA):
            return True
        key = target_key(base.expression) if base.expression is not None else None
        if base.kind is not OriginKind.UNKNOWN or key is None or not key.startswith("self."):
            return False
        info = self.analysis.class_of(self.analysis.scope_of(base.expression))
        return info is not None and key[5:] in self._buffers(info.node)

    def _buffers(self, class_node: ast.ClassDef) -> set[str]:
        names = set()
        for call in self.analysis.index.calls_by_name.get("register_buffer", []):
            arguments = [*call.args, *(keyword.value for keyword in call.keywords)]
            if not self.analysis.contains(class_node, call) or not arguments:
                continue
            name = arguments[0]
            if isinstance(name, ast.Starred):
                name = name.value
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                names.add(name.value)
        return names

    def _is_parameter(self, alias: _Alias) -> bool:
        """A parameter, or another tensor that requires grad and has no history."""
        base = alias.base
        if base.kind is not OriginKind.UNKNOWN or not isinstance(base.expression, ast.Attribute):
            return False
        return self.analysis.value_of(
            base.expression
        ).leaf  # a parameter (or another tensor that requires grad and has no history)

    def _code(self, node: ast.AST | None) -> str:
        return "" if node is None else self.analysis.code_of(node, limit=80)

    # The text of a fix's code for messages, written from the source as the rewrite makes it.
    def _cloned_code(self, expression: ast.expr) -> str:
        """`expression.clone()`, parenthesised as `_cloned` does."""
        code = self.analysis.code_of(expression)  # with its own parentheses, if any
        if not self.analysis.parenthesized(expression) and not _is_atom(expression):
            code = f"({code})"
        return _cut(f"{code}.clone()")

    def _assignment_code(self, statement: ast.AugAssign) -> str:
        """`y = y + v` for `y += v`, parenthesised as `_assignment_of` does."""
        symbol, precedence = _OPERATOR_TEXT[type(statement.op)]
        value = statement.value
        code = self.analysis.code_of(value)  # with its own parentheses, if any
        if isinstance(value, ast.BinOp):
            needs = _OPERATOR_TEXT.get(type(value.op), ("", 0))[1] <= precedence
        else:
            needs = not (_is_atom(value) or isinstance(value, ast.UnaryOp))
        if needs and not self.analysis.parenthesized(value):
            code = f"({code})"
        target = self.analysis.code_of(statement.target)
        return f"{target} = {target} {symbol} {code}"

    def _twin_code(self, call: ast.Call) -> str:
        """`x.add(1)` for `x.add_(1)`: the call's source with the method's `_` dropped."""
        code = self.analysis.code_of(call)
        method = " ".join((ast.get_source_segment(self.analysis.source, call.func) or "").split())
        at = code.find(method)
        if method.endswith("_") and at >= 0:
            code = code[:at] + method[:-1] + code[at + len(method) :]
        return code


# -- syntax helpers ----------------------------------------------------------------------------
def _positional(call: ast.Call) -> list[ast.expr]:
    """The arguments passed by position, without `*args`."""
    return [arg for arg in call.args if not isinstance(arg, ast.Starred)]


def _string_index(target: ast.Subscript) -> bool:
    """`d["key"]`, `d[f"{name}_loss"]`: an index no tensor takes."""
    index = target.slice
    return isinstance(index, ast.JoinedStr) or (
        isinstance(index, ast.Constant) and isinstance(index.value, (str, bytes))
    )


def _is_atom(expression: ast.expr) -> bool:
    """What `.clone()` can follow without parentheses (`_is_cst_atom`, as `ast` has them)."""
    if isinstance(expression, ast.Constant):
        return type(expression.value) in _ATOM_CONSTANTS
    return isinstance(expression, _AST_ATOMS)


def _cut(code: str, limit: int = 80) -> str:
    """Cut as `FileAnalysis.code_of` cuts."""
    return code[: limit - 3] + "..." if len(code) > limit else code


def _is_detach(origin: Origin) -> bool:
    call = origin.expression
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "detach"
        and not call.args
        and not call.keywords
    )


def _calls_passing_true(analysis: FileAnalysis) -> Iterator[ast.Call]:
    """The calls with the literal `True` as an argument (by position or by keyword), as
    `_flag_argument` needs: found from the file's constants, which spares looking at (and
    qualifying the name of) every call."""
    parents = analysis.index.parents
    for constant in analysis.index.of_types(ast.Constant):
        if constant.value is not True:  # type: ignore[attr-defined]
            continue
        holder = parents.get(constant)
        if type(holder) is ast.keyword:
            holder = parents.get(holder)
        if type(holder) is ast.Call:
            yield holder  # type: ignore[misc]


def _flag_argument(call: ast.Call, qualified: str | None) -> ast.Constant | None:
    """The literal `True` passed as `inplace` (by keyword, or at its known position)."""
    flag = keyword_argument(call, "inplace")
    if flag is None and qualified in torch_api.INPLACE_FLAG_POSITION:
        positional = _positional(call)
        position = torch_api.INPLACE_FLAG_POSITION[qualified]
        flag = positional[position] if position < len(positional) else None
    if isinstance(flag, ast.Constant) and flag.value is True:
        return flag
    return None


def _argument_nodes(origin: Origin) -> list[tuple[ast.expr, bool]] | None:
    """The expressions provenance made `origin.inputs` from, each with whether it was passed
    by keyword."""
    node = origin.expression
    if isinstance(node, ast.BinOp):
        return [(node.left, False), (node.right, False)]
    if isinstance(node, ast.UnaryOp):
        return [(node.operand, False)]
    if isinstance(node, (ast.Subscript, ast.Attribute)):
        return [(node.value, False)]
    if isinstance(node, ast.AugAssign):
        return [(node.target, False), (node.value, False)]
    if not isinstance(node, ast.Call):
        return None
    # As provenance reads them: the positional arguments (`*xs` as `xs`; a literal list or
    # tuple of tensors as its elements, `torch.einsum("nc,ck->nk", [q, k])`), then the
    # keyword ones (`**kw`, with no name, counted as a position as before).
    arguments: list[tuple[ast.expr, bool]] = []
    for arg in node.args:
        if isinstance(arg, ast.Starred):
            arguments.append((arg.value, False))
        elif isinstance(arg, (ast.List, ast.Tuple)) and not any(
            isinstance(element, ast.Starred) for element in arg.elts
        ):
            arguments.extend((element, False) for element in arg.elts)
        else:
            arguments.append((arg, False))
    arguments += [(keyword.value, keyword.arg is not None) for keyword in node.keywords]
    method = origin.key is not None and origin.key.startswith("Tensor.")
    if method and isinstance(node.func, ast.Attribute):
        return [(node.func.value, False), *arguments]
    return arguments


def _requires(grad: Grad) -> bool | None:
    if grad is Grad.ATTACHED:
        return True
    if grad is Grad.FREE:
        return False
    return None


# -- rewrites: functions of the LibCST node the fix writer finds at the replaced node ---------
def _false(flag: cst.CSTNode) -> cst.CSTNode:
    """`inplace=True` -> `inplace=False`."""
    return cst.Name("False")


def _cloned(expression: cst.CSTNode) -> cst.CSTNode:
    assert isinstance(expression, cst.BaseExpression)
    if not _is_cst_atom(expression):
        expression = _parenthesized(expression)
    return method_call(expression, "clone")


def _twin_method(func: cst.CSTNode) -> cst.CSTNode:
    """`x.add_` -> `x.add`."""
    assert isinstance(func, cst.Attribute)
    return func.with_changes(attr=cst.Name(func.attr.value[:-1]))


def _rebinding_twin(statement: cst.CSTNode) -> cst.CSTNode:
    """The statement `x.add_(1)` -> `x = x.add(1)`."""
    assert isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call)
    call = statement.value
    func = call.func
    assert isinstance(func, cst.Attribute)
    return cst.Assign(
        targets=[cst.AssignTarget(target=func.value.deep_clone())],
        value=call.with_changes(func=_twin_method(func)),
        semicolon=statement.semicolon,
    )


def _assignment_of(statement: cst.CSTNode) -> cst.CSTNode:
    """`y += v` as `y = y + v` (parenthesising `v` where precedence needs it)."""
    assert isinstance(statement, cst.AugAssign)
    operator = getattr(cst, _AUGMENTED_TO_BINARY[type(statement.operator).__name__])()
    value = statement.value
    if isinstance(value, cst.BinaryOperation):
        inner = _PRECEDENCE.get(type(value.operator).__name__, 0)
        if inner <= _PRECEDENCE.get(type(operator).__name__, 0):
            value = _parenthesized(value)
    elif not (_is_cst_atom(value) or isinstance(value, cst.UnaryOperation)):
        value = _parenthesized(value)
    return cst.Assign(
        targets=[cst.AssignTarget(target=statement.target)],
        value=cst.BinaryOperation(
            left=statement.target.deep_clone(), operator=operator, right=value
        ),
        semicolon=statement.semicolon,
    )


def _is_cst_atom(expression: cst.CSTNode) -> bool:
    """What `.clone()` can follow without parentheses, and what needs none as an operand."""
    atoms = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)
    return isinstance(expression, atoms)


def _parenthesized(expression: cst.BaseExpression) -> cst.BaseExpression:
    if expression.lpar:
        return expression
    return expression.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


# -- for `gradfix trace` --------------------------------------------------------------------
def fix_at(analysis: FileAnalysis, statement: ast.stmt) -> dict[ast.AST, Rewrite]:
    """The fix of the in-place write in `statement`, which `gradfix trace` saw change a tensor
    an op saved: what `check` writes for a write it proves in `statement`, else the
    out-of-place form when nothing reads the saved tensor through another alias afterwards.
    {} when neither applies (the clone then needs the saving op, which `check` must find)."""
    checker = _Checker(analysis)
    for finding in checker.findings():
        if finding.replacements and analysis.contains(statement, finding.node):
            return finding.replacements
    for write in checker._writes():
        if not analysis.contains(statement, write.node):
            continue
        alias = checker.alias_of(write.target)
        fix = checker._out_of_place(write, alias) if alias is not None else None
        if fix is not None and fix.replacements:
            return fix.replacements
    return {}


def fix_inplace_module(
    analysis: FileAnalysis, class_name: str, ran_at: ast.stmt | None
) -> tuple[ast.AST | None, dict[ast.AST, Rewrite]]:
    """For a write `gradfix trace` saw a module of class `class_name` make with its
    `inplace=True` (inside `nn.Sequential`, or a layer called by attribute) from the user's
    statement `ran_at`: the constructor of the module that statement calls, when provenance
    knows it and it is one of that class (`self.activ = nn.ReLU(inplace=True)` for
    `x = self.activ(x)`), else the file's constructor calls of that class that pass a
    literal `True` as `inplace`: the first one and `inplace=False` on each (working out of
    place changes no value, only memory). (None, {}) when the file constructs none."""
    constructors = analysis.index.calls_by_name.get(class_name, [])
    if ran_at is not None:
        provenance = Provenance(analysis)
        called = {
            provenance.module_constructor(node.func)
            for node in ast.walk(ran_at)
            if isinstance(node, ast.Call)
        }
        constructors = [call for call in constructors if call in called] or constructors
    flags: dict[ast.AST, Rewrite] = {}
    first: ast.AST | None = None
    for call in constructors:
        flag = _flag_argument(call, analysis.qualified_name(call.func))
        if flag is not None:
            flags[flag] = _false
            first = first or call
    return first, flags
