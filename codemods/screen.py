"""Which rules may find something in a file, decided on Python's own `ast` tree.

LibCST parses about six times slower than Python's parser, and the analysis costs as much
again, so a file is handed to LibCST only when some selected rule may report in it. Each screen
here is a necessary condition of its rule, read off the statements of the `ast` tree (and, for
calls, the text): when it fails, the rule cannot report in the file. Anything the screen cannot
decide lets the file through. `ENABLED` (off with `GRADFIX_NO_SCREEN=1`) exists so that tests and
`bench/bench.py` can check that the screens change no finding and measure what they save.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from codemods.analysis.interpreter import CONVENTIONAL_CRITERIA
from codemods.analysis.torch_api import (
    BATCHES_TEXT,
    FORWARD_METHODS,
    FUNCTIONAL_LOSSES,
    GRAPH_KEEPING_METHODS,
    GRAPH_LEAVING_METHODS,
    REDUCING_METHODS,
    SCHEDULER_NAME,
    at_word_starts,
)
from codemods.rules import Rule
from codemods.rules.gf001_accumulated_loss import AccumulatedLoss
from codemods.rules.gf002_carried_tensor import CarriedTensor
from codemods.rules.gf003_shared_graph_backward import SharedGraphBackward
from codemods.rules.gf004_inplace_on_saved import InplaceOnSaved
from codemods.screen_inplace import (
    called_name,
    decorated_without_grad,
    end_line,
    grad_inside,
    may_break_saved,
    qualified_name,
)
from codemods.screen_loops import (
    GROWING_METHODS,
    LoopScreens,
    container_of,
    evaluates,
    is_self,
    returned,
    source_lines,
    target_key,
    yields,
)

ENABLED = not os.environ.get("GRADFIX_NO_SCREEN")

# A backward pass or optimizer step (`analysis.training.is_training_step`): `.backward(`,
# `.zero_grad(`, `autograd.grad`/`autograd.backward` under any spelling (which names the
# autograd module somewhere in the file), and `.step(` unless on a scheduler.
_TRAINING_TEXT = re.compile(r"\.\s*(?:backward|zero_grad)\s*\(|\bautograd\b")
_STEP_TEXT = re.compile(r"\.\s*step\s*\(")
_RECEIVER_TEXT = re.compile(r"(\w*)\s*$")
# GF003's backward calls: `x.backward(`, `autograd.grad(`, and the names imported from autograd.
_BACKWARD_CALL_TEXT = re.compile(r"\bbackward\s*\(|\bgrad\s*\(")
# A leaf, a backward, or a conventionally named criterion (`interpreter.CONVENTIONAL_CRITERIA`).
_SOURCE_TEXT = re.compile(
    r"Parameter|requires_grad|\.parameters\s*\(|backward|autograd"
    r"|\b(?:criterion|loss_fn|loss_func|loss_function)\s*\("
)
# What each alternative of `_SOURCE_TEXT` contains: a text without any cannot match it.
_SOURCE_WORDS = (
    "Parameter",
    "requires_grad",
    ".parameters",
    "backward",
    "autograd",
    "criterion",
    "loss_f",
)
# GF001's operand is a loss or a scalar, and the interpreter makes one only from a backward on
# a name, a criterion (`nn.*Loss`, a functional loss, a conventionally named one) or a
# reduction over all elements: `x.mean()` with no argument, or torch's `mean(x)`.
_LOSS_TEXT = re.compile(
    r"backward|Loss\b|\b(?:criterion|loss_fn|loss_func|loss_function)\s*\(|\b(?:"
    + "|".join(sorted(name.rsplit(".", 1)[1] for name in FUNCTIONAL_LOSSES))
    + r")\b"
)
# What each alternative of `_LOSS_TEXT` contains (every functional loss's name has one of the
# last three): a text without any cannot match it.
_LOSS_WORDS = ("backward", "Loss", "criterion", "loss_f", "_loss", "entropy", "kl_div")
_REDUCING = "|".join(sorted(REDUCING_METHODS))
_WHOLE_REDUCTION_TEXT = re.compile(r"\.[\s\\]*(?:" + _REDUCING + r")[\s\\]*\(\s*(?:#[^\n]*\s*)*\)")
# A reduction called on a receiver: `torch.sum(`, `x.mean (`; `_receiver` reads what it is
# called on (a pattern that started with the receiver would be tried at every position).
_REDUCTION_CALL_TEXT = re.compile(r"\.[\s\\]*(?:" + _REDUCING + r")[\s\\]*\(")
_CONTINUATION = frozenset(" \t\n\r\f\v\\")
_IDENTIFIER = re.compile(r"[^\W\d]\w*")
_NAME_REDUCTION_TEXT = re.compile(r"(?<![\w.])(" + _REDUCING + r")[\s\\]*\(")
_NEVER_LOSSES = (
    ast.Constant,
    ast.JoinedStr,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.DictComp,
    ast.SetComp,
    ast.Compare,
)
_NUMBER_BUILTINS = frozenset({"len", "int", "float", "str", "bool", "round", "repr", "range"})
# The fields of a statement that hold statements.
_BLOCKS = ("body", "orelse", "finalbody")
# What a loop counter is bound to, for `_may_be_loss`: a value never attached.
_NUMBER = ast.Constant(0)
# `interpreter._dict_view`: the methods through which a dict's stored value comes out.
_DICT_VIEWS = frozenset({"values", "items", "get"})
# `def name`: the name read ahead, so that `def def f` (`def` as a name) also gives `f`.
_DEF_TEXT = re.compile(r"def(?=\s+(\w+))")
MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})

_Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class _Context:
    function: _Function | None = None  # the innermost enclosing def
    in_loop: bool = False  # inside a loop body of that function
    in_batch_loop: bool = False  # inside a `for` over batches of that function
    in_forward: bool = False  # inside a module's `forward` (or a def nested in it)
    grad_off: bool = False  # in a `no_grad` block, or a function decorated so


@dataclass
class _Facts:
    """What one walk over the statements finds, for every rule at once."""

    accumulation: bool = False  # GF001
    meter_call: bool = False  # `obj.m(x)`: a meter, if the file has one
    meter_class: bool = False  # a method adding into `self.x`
    loop_store: bool = False  # GF002: a store in a training loop, outside a forward
    batch_loop_store: bool = False  # GF002: a kept store in an evaluation loop
    evaluation_store: bool = False  # GF002: a kept store in a loop of an evaluation function
    method_self_store: bool = False  # GF002: `self.x = ...` in a method other than __init__
    autograd_alias: bool = False  # GF003: `from torch.autograd import grad as g`
    imports: dict[str, str] = field(default_factory=dict)  # `imports.import_aliases`
    graph_source: bool | None = None  # `_graph_source`, once asked
    classes: set[str] = field(default_factory=set)  # classes defined or imported by name
    foreign: set[str] = field(default_factory=set)  # names imported from outside torch
    loops: list[tuple[int, int]] = field(default_factory=list)  # line ranges of loop bodies
    loop_screens: LoopScreens | None = None  # GF002's and GF003's, once asked


def rules_wanted(
    source: bytes, text: str, rules: Sequence[Rule], module: ast.Module | None = None
) -> list[Rule]:
    """The rules that may report in the file (which Python compiles): all of them when
    screening is off or when one has no screen (a rule of another class than the registered
    one, as tests substitute), as the file is parsed anyway. GF004 is screened only when no
    other rule wants the file: on a file LibCST parses anyway, its screen costs about what its
    rule does. `module`: the file's `ast` tree, when the caller has parsed it already."""
    if not ENABLED or not all(type(rule) in _SCREENS for rule in rules):
        return list(rules)
    if module is None:
        try:
            module = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return list(rules)  # a notebook's joined cells, which only LibCST may accept
    imports = _import_aliases(module)
    facts = _Facts(
        imports=imports,
        classes=_class_names(module),
        foreign=_foreign_names(module, imports),
    )
    _Walker(facts, text, module).statements(module.body, _Context())
    wanted = [
        rule
        for rule in rules
        if type(rule) is not InplaceOnSaved and _SCREENS[type(rule)](facts, text, module)
    ]
    inplace = [rule for rule in rules if type(rule) is InplaceOnSaved]
    # GF004's screen costs about what its rule does on a parsed file: once LibCST parses the
    # file for another rule, GF004 runs unscreened.
    if inplace and (wanted or _gf004(facts, text, module)):
        wanted += inplace
    return sorted(wanted, key=rules.index)


# -- the screens ------------------------------------------------------------------------------
def _gf001(facts: _Facts, text: str, module: ast.Module) -> bool:
    """An accumulation (`+=`, `x = x + ...`, `.append(x)`, a meter's `.update(x)`) across loop
    iterations or calls, outside a forward for a local total, of a value that may be
    graph-attached."""
    accumulates = facts.accumulation or (facts.meter_call and facts.meter_class)
    return accumulates and _graph_source(facts, text, module) and _loss_source(facts, text)


def _loss_source(facts: _Facts, text: str) -> bool:
    """Whether the file may make a loss or a scalar (`_LOSS_TEXT`): a reduction is of torch's
    when its receiver's root (one of the names before it, for this check) or its own name is
    imported from torch."""
    words = any(word in text for word in _LOSS_WORDS)
    if (words and _LOSS_TEXT.search(text)) or _WHOLE_REDUCTION_TEXT.search(text):
        return True
    imports = facts.imports
    from_torch = {name for name, qualified in imports.items() if qualified.startswith("torch")}
    if not from_torch:
        return False
    return any(
        not from_torch.isdisjoint(_IDENTIFIER.findall(_receiver(text, match.start())))
        for match in _REDUCTION_CALL_TEXT.finditer(text)
    ) or (
        not from_torch.isdisjoint(REDUCING_METHODS)
        and any(match[1] in from_torch for match in _NAME_REDUCTION_TEXT.finditer(text))
    )


def _receiver(text: str, dot: int) -> str:
    """The dotted names right before the `.` at `dot` (across spaces and line continuations):
    `torch.linalg` for `torch.linalg.norm(`."""
    start = dot
    while start and text[start - 1] in _CONTINUATION:
        start -= 1
    end = start
    while start and (text[start - 1].isalnum() or text[start - 1] in "_."):
        start -= 1
    return text[start:end]


def _gf002(facts: _Facts, text: str, module: ast.Module) -> bool:
    """A `self` attribute carried between calls of a method when the file runs a backward; or
    a store in a loop (one that reaches a training step, or an evaluation loop) that carries
    or keeps a value that may be attached (`screen_loops`)."""
    training = _training_step(text)
    if training and facts.method_self_store and "backward" in text:
        return True
    if not (facts.batch_loop_store or facts.evaluation_store or (training and facts.loop_store)):
        return False
    return _loop_screens(facts, text, module).gf002()


def _gf003(facts: _Facts, text: str, module: ast.Module) -> bool:
    """Two backward calls in the file, or one in a loop, that may share a graph node
    (`screen_loops`)."""
    if facts.autograd_alias:
        return True  # backward calls under a name the text does not show
    calls = list(_BACKWARD_CALL_TEXT.finditer(text))
    lines = [text.count("\n", 0, match.start()) + 1 for match in calls]
    in_loop = any(start <= line <= end for line in lines for start, end in facts.loops)
    return (len(calls) >= 2 or in_loop) and _loop_screens(facts, text, module).gf003()


def _loop_screens(facts: _Facts, text: str, module: ast.Module) -> LoopScreens:
    if facts.loop_screens is None:
        facts.loop_screens = LoopScreens(module, text, facts.imports, facts.classes, facts.foreign)
    return facts.loop_screens


def _gf004(facts: _Facts, text: str, module: ast.Module) -> bool:
    """An in-place write whose tensor an op of its function may have saved, or a leaf
    (`screen_inplace`), in a file where a value may be graph-attached."""
    return _graph_source(facts, text, module) and may_break_saved(module, facts.imports, text)


def _graph_source(facts: _Facts, text: str, module: ast.Module) -> bool:
    """Whether a value of the file may be graph-attached (`Grad.ATTACHED` or `LIKELY`): the
    analysis finds one only downstream of a module of torch's built here, a module class
    defined here, a leaf (`nn.Parameter`, `requires_grad`), a backward on a name, or a loss
    (a functional loss, a `*Loss` module, a conventionally named criterion)."""
    if facts.graph_source is None:
        words = any(word in text for word in _SOURCE_WORDS)
        facts.graph_source = (words and bool(_SOURCE_TEXT.search(text))) or _builds_graph(
            module, facts
        )
    return facts.graph_source


def _builds_graph(module: ast.Module, facts: _Facts) -> bool:
    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef):
            if any(qualified_name(base, facts.imports) in MODULE_BASES for base in node.bases):
                return True
        elif isinstance(node, ast.Call):
            qualified = qualified_name(node.func, facts.imports) or ""
            if qualified in FUNCTIONAL_LOSSES:
                return True
            if qualified.startswith("torch.nn.") and qualified.rsplit(".", 1)[-1][:1].isupper():
                return True
    return False


_SCREENS: dict[type[Rule], Callable[[_Facts, str, ast.Module], bool]] = {
    AccumulatedLoss: _gf001,
    CarriedTensor: _gf002,
    SharedGraphBackward: _gf003,
    InplaceOnSaved: _gf004,
}


def _training_step(text: str) -> bool:
    # Python's `re` tries every alternative at every position: the words first, in C.
    has_words = "backward" in text or "zero_grad" in text or "autograd" in text
    if has_words and _TRAINING_TEXT.search(text):
        return True
    for match in _STEP_TEXT.finditer(text):
        receiver = _RECEIVER_TEXT.search(text[max(0, match.start() - 200) : match.start()])
        if receiver is None or not SCHEDULER_NAME.search(receiver[1]):
            return True
    return False


# -- the walk ---------------------------------------------------------------------------------
class _Walker:
    """Visits statements only (expressions are far more numerous and seldom needed)."""

    def __init__(self, facts: _Facts, text: str, module: ast.Module) -> None:
        self.facts = facts
        self.text = text
        self.lines = source_lines(text)
        self.module = module
        self._defined: set[str] | None = None  # `defined`, once asked
        self._functions: dict[str, list[_Function]] | None = None  # `functions`, once asked
        self.bindings: dict[ast.AST, dict[str, list[ast.expr] | None]] = {}
        self.evaluating: dict[ast.AST, bool] = {}

    def statements(self, body: list[ast.stmt], context: _Context, owner: ast.AST | None = None):
        for statement in body:
            self.statement(statement, context, owner)

    def statement(self, node: ast.stmt, context: _Context, owner: ast.AST | None) -> None:
        facts = self.facts
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._function(node, context, owner)
            return
        if isinstance(node, ast.ClassDef):
            # A class body is in no forward, even in one (the side that lets files through).
            inner = _Context(context.function, context.in_loop, context.in_batch_loop)
            self.statements(node.body, inner, owner=node)
            return
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            facts.loops.append((node.body[0].lineno, end_line(node.body[-1])))
            batches = context.in_batch_loop or (
                isinstance(node, (ast.For, ast.AsyncFor)) and self._iterates_batches(node.iter)
            )
            inner = _Context(context.function, True, batches, context.in_forward, context.grad_off)
            self.statements(node.body, inner)
            self.statements(node.orelse, context)
            return
        if isinstance(node, (ast.With, ast.AsyncWith)):
            grad = grad_inside(node, not context.grad_off, self.facts.imports)
            self.statements(node.body, replace(context, grad_off=not grad))
            return
        if isinstance(node, ast.AugAssign):
            self._aug_assign(node, context)
        elif isinstance(node, ast.Assign):
            self._assign(node, context)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            self._call_statement(node.value, context)
        elif isinstance(node, ast.ImportFrom) and "autograd" in (node.module or ""):
            facts.autograd_alias |= any(alias.asname for alias in node.names)
        for name in ("body", "orelse", "finalbody"):
            self.statements(getattr(node, name, []), context)
        for handler in getattr(node, "handlers", []):
            self.statements(handler.body, context)
        for case in getattr(node, "cases", []):
            self.statements(case.body, context)

    def _function(self, node: _Function, context: _Context, owner: ast.AST | None) -> None:
        forward = context.in_forward or (
            node.name in FORWARD_METHODS and isinstance(owner, ast.ClassDef)
        )
        grad_off = decorated_without_grad(node, self.facts.imports)
        self.statements(node.body, _Context(node, in_forward=forward, grad_off=grad_off))

    def _iterates_batches(self, iterable: ast.expr) -> bool:
        source = "\n".join(self.lines[iterable.lineno - 1 : end_line(iterable)])
        return bool(BATCHES_TEXT.search(source))

    # GF001: `_accumulations` and `_initial_value`; GF002: `_carries` and `_kept_stores`.
    def _aug_assign(self, node: ast.AugAssign, context: _Context) -> None:
        if _self_attribute(node.target) and context.function is not None:
            self.facts.meter_class = True
        if isinstance(node.op, ast.Add):
            self._accumulation(node.target, node.value, context, stores=False)

    def _assign(self, node: ast.Assign, context: _Context) -> None:
        indexed = any(isinstance(target, ast.Subscript) for target in node.targets)
        self._store(context, kept=indexed)
        method = context.function is not None and context.function.name != "__init__"
        if method and any(_self_attribute(target) for target in node.targets):
            self.facts.method_self_store = True
        value = node.value
        if len(node.targets) != 1 or not isinstance(value, ast.BinOp):
            return
        target = node.targets[0]
        key = target_key(container_of(target))
        if not isinstance(value.op, ast.Add) or key is None:
            return
        entries = _entry_keys(target, value)
        if key in _operand_keys(value) or key in entries:
            left_entries = _entry_keys(target, value, value.left)
            reads_left = target_key(value.left) == key or key in left_entries
            operand = value.right if reads_left else value.left
            self._accumulation(target, operand, context, stores=False)

    def _call_statement(self, call: ast.Call, context: _Context) -> None:
        func = call.func
        if not isinstance(func, ast.Attribute):
            return
        if func.attr in GROWING_METHODS and (call.args or call.keywords):
            self._store(context, kept=True)
        # LibCST's first argument is positional here, or `**kwargs`.
        if not call.args and all(keyword.arg for keyword in call.keywords):
            return
        if func.attr == "append":
            operand = call.args[0] if call.args else None
            self._accumulation(_through_setdefault(func.value), operand, context, stores=True)
        else:
            self.facts.meter_call = True

    def _accumulation(
        self, accumulator: ast.expr, operand: ast.expr | None, context: _Context, stores: bool
    ) -> None:
        """`stores`: the container keeps the operand itself (`append`), as opposed to adding
        it, which records no graph with grad mode off (`gf001._judge`)."""
        if context.grad_off and not stores:
            return
        key = target_key(container_of(accumulator))
        if key is None or (operand is not None and not self._may_be_loss(operand, context)):
            return
        local = not key.startswith("self.")
        if local and context.in_forward:
            return  # a loss summed by a forward is itself a loss
        if context.in_loop or not local:
            in_init = context.function is not None and context.function.name == "__init__"
            if context.in_loop or not in_init:
                self.facts.accumulation = True

    def _may_be_loss(
        self, operand: ast.expr, context: _Context, following: frozenset[str] = frozenset()
    ) -> bool:
        """Whether the accumulated value may be a graph-attached loss or scalar (GF001's
        `operand.loss or operand.scalar`): not a literal, a display, a comparison, a number
        builtin's result, or a class built (`self.layers.append(Block(config))`).
        `following`: the names whose bindings are being read (`tmp = a; a = b; b = tmp`)."""
        if isinstance(operand, _NEVER_LOSSES):
            return False
        if isinstance(operand, ast.Name):
            values = self._plain_bindings(context).get(operand.id)
            if values is None or operand.id in following:
                return values is None
            inner = following | {operand.id}
            return any(self._may_be_loss(value, context, inner) for value in values)
        if isinstance(operand, ast.Attribute) and target_key(operand) is None:
            return False  # `interpreter.attribute`: a tensor's view or metadata, never a loss
        if isinstance(operand, ast.BinOp):
            # A loss on either side keeps `loss`; `scalar` needs both sides scalar, and an
            # attached result an attached side: either way one side may be a loss or scalar.
            return self._may_be_loss(operand.left, context, following) or self._may_be_loss(
                operand.right, context, following
            )
        if not isinstance(operand, ast.Call):
            if isinstance(operand, ast.Subscript) and isinstance(operand.value, ast.Call):
                index = operand.slice  # `f(...)[0]`, as `a, b = f(...)` binds `a`
                if isinstance(index, ast.Constant) and type(index.value) is int:
                    part = self._returns_may_be_loss(operand.value, index.value, following)
                    return True if part is None else part
            return True
        func = operand.func
        if isinstance(func, ast.Name) and func.id in _NUMBER_BUILTINS:
            return False
        if isinstance(func, ast.Name) and func.id in self.facts.classes:
            return False
        root = func
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in self.facts.foreign:
            # An imported function of another library (or a relative import) returns a value
            # the analysis does not know; a conventionally named criterion is the exception.
            return isinstance(func, ast.Name) and func.id in CONVENTIONAL_CRITERIA
        qualified = qualified_name(func, self.facts.imports) or ""
        short = qualified.rsplit(".", 1)[-1]
        if short[:1].isupper():
            return False  # `nn.Linear(...)`
        if qualified.startswith("torch."):
            # `interpreter.library_call`: a functional loss, or a reduction over all elements
            # (`torch.mean(x)`); any other function of torch's gives a tensor that is neither.
            if qualified in FUNCTIONAL_LOSSES:
                return True
            return short in REDUCING_METHODS and len(operand.args) + len(operand.keywords) == 1
        if isinstance(func, ast.Attribute) and func.attr not in self.defined:
            # `interpreter.method_call` (unless a class of the file defines the method).
            if func.attr in GRAPH_LEAVING_METHODS:
                return False  # `loss.item()`, `loss.detach()`
            if func.attr in GRAPH_KEEPING_METHODS:
                if _never_attached(operand):
                    return False
                reduces = func.attr in REDUCING_METHODS and not (operand.args or operand.keywords)
                return reduces or self._may_be_loss(func.value, context, following)
            # A dict's view may give a stored loss, and `self.criterion(...)` is a criterion's
            # call; any other method's result is unknown to the interpreter.
            return func.attr in _DICT_VIEWS or target_key(func) is not None
        whole = self._returns_may_be_loss(operand, None, following)
        return True if whole is None else whole

    def _returns_may_be_loss(
        self, call: ast.Call, index: int | None, following: frozenset[str]
    ) -> bool | None:
        """For a call of the file's own function or method (`interpreter.call_value` follows
        it): whether what it returns (its `index`th part when it returns tuples) may be a loss
        or scalar; None when no function of the file has that name."""
        functions = self.functions.get(called_name(call) or "")
        if not functions:
            return None
        for function in functions:
            marker = f"<def {id(function)}>"
            if marker in following or yields(function):
                return True
            # Names are followed per function: only the functions being followed carry over.
            inner = frozenset(key for key in following if key[:5] == "<def ") | {marker}
            context = _Context(function)
            for value in returned(function):
                if index is not None:
                    parts = value.elts if isinstance(value, ast.Tuple) else None
                    if (
                        parts is None
                        or index >= len(parts)
                        or any(isinstance(part, ast.Starred) for part in parts)
                    ):
                        return True
                    value = parts[index]
                if self._may_be_loss(value, context, inner):
                    return True
        return False

    @property
    def functions(self) -> dict[str, list[_Function]]:
        """The file's functions and methods by name."""
        if self._functions is None:
            self._functions = {}
            pending: list[ast.stmt] = list(self.module.body)
            while pending:  # statements only: no expression holds a `def`
                node = pending.pop()
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self._functions.setdefault(node.name, []).append(node)
                for name in _BLOCKS:
                    pending.extend(getattr(node, name, ()))
                for part in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
                    pending.extend(part.body)
        return self._functions

    @property
    def defined(self) -> set[str]:
        """Names the file defines a function or method under (from the text: a superset)."""
        if self._defined is None:
            self._defined = {match[1] for match in at_word_starts(_DEF_TEXT, self.text)}
        return self._defined

    def _plain_bindings(self, context: _Context) -> dict[str, list[ast.expr] | None]:
        """For the function (or module) of `context`: what each name is bound to by plain
        `name = value` statements; None for a name bound any other way too."""
        owner: ast.AST = context.function if context.function is not None else self.module
        if owner not in self.bindings:
            self.bindings[owner] = _plain_bindings(owner)
        return self.bindings[owner]

    def _store(self, context: _Context, kept: bool) -> None:
        if context.in_forward or not context.in_loop:
            return
        self.facts.loop_store = True
        if kept and context.in_batch_loop:
            self.facts.batch_loop_store = True
        if kept and context.function is not None and self._evaluates(context.function):
            self.facts.evaluation_store = True

    def _evaluates(self, function: _Function) -> bool:
        if function not in self.evaluating:  # once per function, not once per store
            # A `.eval()` call spells `eval` on one of the function's lines (its decorators').
            first = min(node.lineno for node in (function, *function.decorator_list))
            lines = self.lines[first - 1 : end_line(function)]
            calls_eval = any("eval" in line for line in lines)
            self.evaluating[function] = evaluates(function, calls_eval)
        return self.evaluating[function]


def _import_aliases(module: ast.Module) -> dict[str, str]:
    """`imports.import_aliases`: local name -> qualified name, for module-level imports."""
    aliases: dict[str, str] = {}
    for statement in module.body:
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(statement, ast.ImportFrom) and not statement.level and statement.module:
            for alias in statement.names:
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = f"{statement.module}.{alias.name}"
    return aliases


def _class_names(module: ast.Module) -> set[str]:
    """The classes the module defines, and the capitalised names it imports (`from .layers
    import Block`): calling one builds an object, never a loss."""
    names: set[str] = set()
    for statement in module.body:
        if isinstance(statement, ast.ClassDef):
            names.add(statement.name)
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            for alias in statement.names:
                name = alias.asname or alias.name.split(".")[0]
                if name[:1].isupper():
                    names.add(name)
    return names


def _foreign_names(module: ast.Module, imports: dict[str, str]) -> set[str]:
    """Names the module imports from anywhere but torch (relative imports included)."""
    names: set[str] = set()
    for statement in module.body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            for alias in statement.names:
                name = alias.asname or alias.name.split(".")[0]
                if not imports.get(name, "").startswith("torch"):
                    names.add(name)
    names.discard("*")
    return names


def _plain_bindings(owner: ast.AST) -> dict[str, list[ast.expr] | None]:
    """`_Walker._plain_bindings`: over the owner's statements, nested functions and classes
    excluded (their names are bound otherwise)."""
    bindings: dict[str, list[ast.expr] | None] = {}
    if isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)):
        arguments = owner.args
        for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
            bindings[argument.arg] = None
        for argument in (arguments.vararg, arguments.kwarg):
            if argument is not None:
                bindings[argument.arg] = None

    def bind(name: str, value: ast.expr) -> None:
        values = bindings.get(name, [])
        if values is not None:
            bindings[name] = [*values, value]

    def other(target: ast.AST) -> None:
        if isinstance(target, ast.Name):
            bindings[target.id] = None
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                other(element)
        elif isinstance(target, ast.Starred):
            other(target.value)
        elif isinstance(target, ast.pattern):
            for node in ast.walk(target):
                if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                    bindings[node.name] = None
        # `x.a = v`, `x[i] = v` store into `x`; they do not bind it.

    def visit(body: list[ast.stmt]) -> None:
        for statement in body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = statement.targets[0]
                if isinstance(target, ast.Name):
                    bind(target.id, statement.value)
                    continue
                if _unpacks_display(target, statement.value):
                    for element, part in zip(target.elts, statement.value.elts, strict=True):  # type: ignore[attr-defined]
                        bind(element.id, part)
                    continue
                if _unpacks_call(target, statement.value):
                    # `a, b = f(x)`: `a` is `f(x)[0]`, which `_may_be_loss` follows into `f`.
                    for position, element in enumerate(target.elts):  # type: ignore[attr-defined]
                        part = ast.Subscript(statement.value, ast.Constant(position), ast.Load())
                        bind(element.id, part)
                    continue
                other(target)
            elif isinstance(statement, ast.Assign):
                for target in statement.targets:
                    other(target)
            elif isinstance(statement, (ast.For, ast.AsyncFor)):
                counter = _counter(statement)
                if counter is not None:
                    # `interpreter.loop`: an element of `range(...)` or an `enumerate` index
                    # is an unknown value, never an attached one.
                    bind(counter.id, _NUMBER)
                    if isinstance(statement.target, ast.Tuple):
                        for element in statement.target.elts[1:]:
                            other(element)
                else:
                    other(statement.target)
            elif isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
                # `x += v` is `x = x + v` to the interpreter's values.
                name = statement.target.id
                bind(name, ast.BinOp(ast.Name(name, ast.Load()), statement.op, statement.value))
            elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
                other(statement.target)
            elif isinstance(statement, (ast.With, ast.AsyncWith)):
                for item in statement.items:
                    if item.optional_vars is not None:
                        other(item.optional_vars)
            elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bindings[statement.name] = None
                continue
            elif isinstance(statement, (ast.Import, ast.ImportFrom)):
                for alias in statement.names:
                    bindings[alias.asname or alias.name.split(".")[0]] = None
            for name in ("body", "orelse", "finalbody"):
                visit(getattr(statement, name, []))
            for handler in getattr(statement, "handlers", []):
                if handler.name:
                    bindings[handler.name] = None
                visit(handler.body)
            for case in getattr(statement, "cases", []):
                other(case.pattern)
                visit(case.body)

    visit(owner.body)  # type: ignore[attr-defined]
    return bindings


def _unpacks_display(target: ast.expr, value: ast.expr) -> bool:
    """`a, b = 0, 0`: plain names unpacked from a display of as many plain values."""
    return (
        isinstance(target, (ast.Tuple, ast.List))
        and isinstance(value, (ast.Tuple, ast.List))
        and len(target.elts) == len(value.elts)
        and all(isinstance(element, ast.Name) for element in target.elts)
        and not any(isinstance(part, ast.Starred) for part in value.elts)
    )


def _unpacks_call(target: ast.expr, value: ast.expr) -> bool:
    """`a, b = f(x)`: plain names unpacked from a call."""
    return (
        isinstance(target, (ast.Tuple, ast.List))
        and isinstance(value, ast.Call)
        and all(isinstance(element, ast.Name) for element in target.elts)
    )


def _counter(loop: ast.For | ast.AsyncFor) -> ast.Name | None:
    """`i` in `for i in range(n)` and in `for i, x in enumerate(xs)`."""
    iterable, target = loop.iter, loop.target
    if not isinstance(iterable, ast.Call) or not isinstance(iterable.func, ast.Name):
        return None
    if iterable.func.id == "range" and isinstance(target, ast.Name):
        return target
    if (
        iterable.func.id == "enumerate"
        and isinstance(target, ast.Tuple)
        and len(target.elts) == 2
        and isinstance(target.elts[0], ast.Name)
    ):
        return target.elts[0]
    return None


def _never_attached(value: ast.expr) -> bool:
    """`interpreter.value` gives it no graph: a literal, a comparison, a value taken out of
    the graph (`.numpy()`, `.item()`), or a tensor method on one of those with no other
    operand (`(pred == y).sum()`)."""
    if isinstance(value, (ast.Constant, ast.JoinedStr, ast.Compare)):
        return True
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not):
        return True
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
        return False
    method = value.func.attr
    if method in GRAPH_LEAVING_METHODS:
        return True
    operands = [*value.args, *(keyword.value for keyword in value.keywords)]
    return (
        method in GRAPH_KEEPING_METHODS
        and all(isinstance(operand, ast.Constant) for operand in operands)
        and _never_attached(value.func.value)
    )


def _self_attribute(target: ast.expr) -> bool:
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_self_attribute(element) for element in target.elts)
    return isinstance(target, ast.Attribute) and is_self(target.value)


def _operand_keys(operation: ast.BinOp) -> tuple[str | None, str | None]:
    return target_key(operation.left), target_key(operation.right)


def _entry_keys(
    target: ast.expr, operation: ast.BinOp, only: ast.expr | None = None
) -> set[str | None]:
    """`gf001_accumulated_loss._reads_accumulator` for an entry: the containers read by
    `acc[k]` or `acc.get(...)` operands of `acc[k] = acc.get(k, 0) + x` (of `only`, when
    given)."""
    if not isinstance(target, ast.Subscript):
        return set()
    keys: set[str | None] = set()
    for operand in (operation.left, operation.right) if only is None else (only,):
        if isinstance(operand, ast.Subscript):
            keys.add(target_key(container_of(operand)))
        elif (
            isinstance(operand, ast.Call)
            and isinstance(operand.func, ast.Attribute)
            and operand.func.attr == "get"
        ):
            keys.add(target_key(operand.func.value))
    return keys


def _through_setdefault(receiver: ast.expr) -> ast.expr:
    """`flows.through_setdefault`: `d` for `d.setdefault(k, [])`."""
    if (
        isinstance(receiver, ast.Call)
        and isinstance(receiver.func, ast.Attribute)
        and receiver.func.attr == "setdefault"
    ):
        return receiver.func.value
    return receiver
