"""Abstract interpretation of one scope: which names hold graph-attached values at each
statement, in which grad mode each statement runs, and what flowed into each loop.

The interpreter walks statements in order, joins environments where control flow meets
(branches, loop back edges) and runs loop bodies to a fixpoint. It is deliberately modest:
anything it cannot follow becomes `UNKNOWN`, and rules never rewrite on `UNKNOWN`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, islice
from operator import is_not

from codemods.analysis import torch_api
from codemods.analysis.syntax import has_star, is_true, keyword_argument, string_value
from codemods.analysis.values import (
    FREE_TENSOR,
    NUMBER,
    UNKNOWN,
    Grad,
    Kind,
    Value,
    container_of,
)

Env = dict[str, Value]  # keys: local names and `self.<attribute>` paths
# The key under which an `nn.ModuleDict` subclass's own entries are tracked, as an attribute
# no source can spell: `super().__init__(metrics)` stores them, `self.items()` reads them.
MODULE_ENTRIES = "<entries>"

# Parameters called like this are probably losses; only the unsafe tier may act on that.
CONVENTIONAL_CRITERIA = frozenset({"criterion", "loss_fn", "loss_func", "loss_function"})
_LOOP_PASSES = 3
# Statements that bind nothing the environment tracks (`pass`, `import`, `raise`, ...).
_SIMPLE_STATEMENTS = frozenset(
    {
        ast.Pass,
        ast.Import,
        ast.ImportFrom,
        ast.Raise,
        ast.Global,
        ast.Nonlocal,
        ast.Delete,
        ast.Assert,
        ast.Break,
        ast.Continue,
        ast.Return,
    }
)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Dict methods that may remove entries or store under keys the call does not spell.
_DICT_REMOVERS = frozenset({"pop", "popitem", "setdefault", "clear", "__setitem__"})
_FOR_LOOPS = (ast.For, ast.AsyncFor)
_WITHS = (ast.With, ast.AsyncWith)


def target_key(node: ast.expr) -> str | None:
    """The environment key a store target writes: `x` or `self.x`."""
    kind = type(node)  # `is` on the exact class: cheaper than `isinstance` on hot paths
    if kind is ast.Name:
        return node.id  # type: ignore[attr-defined]
    if kind is ast.Attribute:
        base = node.value  # type: ignore[attr-defined]
        if type(base) is ast.Name and base.id == "self":
            return f"self.{node.attr}"  # type: ignore[attr-defined]
    return None


def argument_values(call: ast.Call) -> list[ast.expr]:
    """The expressions passed to `call`, positional (`*xs` as `xs`) then keyword (`**kw` as
    `kw`): the order of the argument values `Interpreter.call` computes and passes on."""
    values = [arg.value if type(arg) is ast.Starred else arg for arg in call.args]  # type: ignore[attr-defined]
    if call.keywords:
        values.extend(keyword.value for keyword in call.keywords)
    return values


def first_argument(call: ast.Call) -> ast.expr | None:
    """The first argument's expression (`*xs` as `xs`), keyword arguments included."""
    if call.args:
        first = call.args[0]
        return first.value if type(first) is ast.Starred else first  # type: ignore[attr-defined]
    if call.keywords:
        return call.keywords[0].value
    return None


def super_class(func: ast.Attribute) -> str | None:
    """For `super().m` and `super(Cls, self).m`: the class whose bases define `m` ("" when it
    is the class of the method the call is in), else None."""
    call = func.value
    if type(call) is not ast.Call or not isinstance(call.func, ast.Name) or call.func.id != "super":
        return None
    if not call.args:
        return ""
    first = call.args[0]
    return first.id if isinstance(first, ast.Name) else None


def _is_self(node: ast.expr) -> bool:
    return type(node) is ast.Name and node.id == "self"  # type: ignore[attr-defined]


def _any_value_of(mapping: Value) -> Value:
    """What any entry of `mapping` may hold, as `d.update(mapping)` copies it."""
    return mapping.element_read() if mapping.kind is Kind.DICT else UNKNOWN


def _constant_key(node: ast.expr | None) -> str | None:
    """The key of `d["loss"]` or `{"loss": ...}`, None when it is not a constant string."""
    if type(node) is ast.Constant and type(node.value) is str:  # type: ignore[union-attr]
        return node.value  # type: ignore[union-attr]
    return None


def _argument_count(call: ast.Call) -> int:
    return len(call.args) + len(call.keywords)


def join_envs(left: Env, right: Env, base: Env | None = None) -> Env:
    """The environment where the paths that left `left` and `right` meet. `base`: an
    environment both grew from (`left` itself when omitted): environments only grow along a
    path, each statement rebinding keys in place or adding keys after the others (`dict(env)`,
    `{**env, key: value}`), so the first `len(base)` keys of both are `base`'s, in its order."""
    joined = dict(left)
    shared = len(left if base is None else base)
    # The shared keys whose values differ: found by identity in C (`map(is_not, ...)`), not
    # by a Python loop over every key, which made the module's environment (hundreds of
    # names) cost a pass per module-level `if`. A key both paths left alone holds the same
    # object on both, which the join would keep: skipping it is exact.
    changed = compress(
        left if base is None else base,
        map(is_not, islice(left.values(), shared), islice(right.values(), shared)),
    )
    for key in changed:
        joined[key] = left[key].join(right[key])
    if len(right) > shared:  # keys `right`'s path added, in its order, as the loop adds them
        for key in islice(right, shared, None):
            value = right[key]
            known = joined.get(key)
            if known is None:
                joined[key] = value.join(UNKNOWN)
            elif known is not value:
                joined[key] = known.join(value)
    if len(left) > shared:  # keys only `left`'s path added
        for key in islice(left, shared, None):
            if key not in right:
                joined[key] = left[key].join(UNKNOWN)
    return joined


def rebound(before: Env, after: Env) -> Iterator[str]:
    """The keys of `after`, an environment grown from `before`, that hold another object
    than in `before` (new keys included), in `after`'s order. Exact as `join_envs` is: the
    first `len(before)` keys of `after` are `before`'s, in its order."""
    shared = len(before)
    return chain(
        compress(before, map(is_not, islice(after.values(), shared), before.values())),
        islice(after, shared, None),
    )


@dataclass
class ScopeFacts:
    """What the interpreter learnt about one scope, keyed by statement node."""

    env_before: dict[ast.AST, Env] = field(default_factory=dict)
    grad_enabled: dict[ast.AST, bool] = field(default_factory=dict)
    loop_entry: dict[ast.AST, Env] = field(default_factory=dict)
    returned: Value | None = None
    final_env: Env = field(default_factory=dict)


class Interpreter:
    """Runs one scope. `call_value` answers for calls into functions of the same file."""

    def __init__(
        self,
        qualify: Callable[[ast.expr], str | None],
        # (call, callee or receiver, argument values, grad mode, method name) -> result of a
        # call into this file's functions, classes and methods, or None. The argument values
        # are in the order of `argument_values(call)`: positional, then keyword.
        call_value: Callable[[ast.Call, Value, list[Value], bool, str | None], Value | None],
        lookup_global: Callable[[str], Value],
        # (name, assignment) -> "scalar" / "tensor" when a backward runs on what the
        # assignment stored, before the name is rebound; None otherwise
        backward_evidence: Callable[[str, ast.stmt], str | None],
        # module names bound once to an integer literal
        integer_constants: Mapping[str, int],
        # (class of the file, attribute) -> what its instances' `self.<attribute>` holds
        member_value: Callable[[str, str], Value],
        grad_enabled: bool,
        # names the class body (of the scope's class and the file's classes it derives
        # from) binds: `self.<name>` may read them when no method bound it
        class_attributes: frozenset[str] = frozenset(),
        # the scope is a method of a subclass of `nn.ModuleDict`
        holds_modules: bool = False,
    ) -> None:
        self.qualify = qualify
        self.call_value = call_value
        self.lookup_global = lookup_global
        self.backward_evidence = backward_evidence
        self.integer_constants = integer_constants
        self.member_value = member_value
        self.initial_grad_enabled = grad_enabled
        self.class_attributes = class_attributes
        self.holds_modules = holds_modules
        self.facts = ScopeFacts()

    # -- statements -------------------------------------------------------------------
    def run(self, body: Sequence[ast.stmt], env: Env) -> ScopeFacts:
        self.facts.final_env = self.block(body, env, self.initial_grad_enabled)
        return self.facts

    def block(self, statements: Sequence[ast.stmt], env: Env, grad: bool) -> Env:
        for statement in statements:
            env = self.statement(statement, env, grad)
        return env

    def statement(self, node: ast.stmt, env: Env, grad: bool) -> Env:
        self.facts.env_before[node] = env
        self.facts.grad_enabled[node] = grad
        kind = type(node)  # the commonest statements by `is`, as in `value`
        if kind is ast.Assign or kind is ast.AnnAssign or kind is ast.AugAssign:
            return self.assignment(node, env, grad)  # type: ignore[arg-type]
        if kind is ast.Expr:
            return self.expression_statement(node.value, env, grad)  # type: ignore[attr-defined]
        if kind is ast.Return and node.value is not None:  # type: ignore[attr-defined]
            value = self.value(node.value, env, grad)  # type: ignore[attr-defined]
            returned = self.facts.returned
            self.facts.returned = value if returned is None else returned.join(value)
            return env
        if kind in _SIMPLE_STATEMENTS:
            return env  # `pass`, `import`, `raise`: nothing the environment tracks
        if isinstance(node, ast.If):
            taken = self.block(node.body, dict(env), grad)
            other = self.block(node.orelse, dict(env), grad)  # `else:`, or a lone `elif`
            return self.join_branches(env, taken, other)
        if isinstance(node, (*_FOR_LOOPS, ast.While)):
            return self.loop(node, env, grad)
        if isinstance(node, _WITHS):
            return self.with_statement(node, env, grad)
        if isinstance(node, ast.Try):
            after_body = self.block(node.body, dict(env), grad)
            merged = join_envs(env, after_body)
            for handler in node.handlers:
                merged = join_envs(merged, self.block(handler.body, dict(merged), grad))
            if node.orelse:
                merged = join_envs(merged, self.block(node.orelse, dict(merged), grad))
            if node.finalbody:
                merged = self.block(node.finalbody, merged, grad)
            return merged
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            kind = Kind.FUNCTION if isinstance(node, _FUNCTIONS) else Kind.CLASS
            return {**env, node.name: Value(Grad.FREE, kind, cls=node.name)}
        return env

    def join_branches(self, before: Env, taken: Env, other: Env) -> Env:
        """The environment after an `if`. An attribute of `self` that one branch binds and
        nothing bound before (`if use_ffn: self.drop = nn.Dropout(p, inplace=True)`) holds
        that branch's value wherever it is read: on the other path the read raises
        AttributeError, unless the class body binds the name (`drop = None`)."""
        joined = join_envs(taken, other, before)
        for branch, missing in ((taken, other), (other, taken)):
            # environments only grow: the keys a branch added follow `before`'s
            for key in islice(branch, len(before), None):
                if (
                    key not in missing
                    and key.startswith("self.")
                    and key[5:] not in self.class_attributes
                ):
                    joined[key] = branch[key]
        return joined

    def loop(self, node: ast.For | ast.AsyncFor | ast.While, env: Env, grad: bool) -> Env:
        self.facts.loop_entry[node] = env
        current = env
        element = UNKNOWN
        is_for = isinstance(node, _FOR_LOOPS)
        if is_for:
            iterable = self.value(node.iter, env, grad)  # type: ignore[union-attr]
            if iterable.kind is not Kind.DICT:  # iterating a dict gives its keys
                element = iterable.element_read()
        for _ in range(_LOOP_PASSES):
            start = dict(current)
            if is_for:
                start = self.bind(node.target, element, start)  # type: ignore[union-attr]
            after = self.block(node.body, start, grad)
            widened = join_envs(current, after)
            if widened == current:
                if self.runs_at_least_once(node):
                    # No path skips the body: what flows out is what an iteration leaves
                    # (`log_a = torch.zeros(T)`, then `log_a[t] = ...` for t in range(T)).
                    current = after
                break
            current = widened
        if node.orelse:
            current = self.block(node.orelse, dict(current), grad)
        return current

    def runs_at_least_once(self, node: ast.For | ast.AsyncFor | ast.While) -> bool:
        """`for t in range(5)`, `for t in range(T)` with a module constant `T = 5`, `while
        True`: loops whose body surely runs."""
        if isinstance(node, ast.While):
            return type(node.test) is ast.Constant and node.test.value is True
        iterable = node.iter
        if not (
            type(iterable) is ast.Call
            and type(iterable.func) is ast.Name
            and iterable.func.id == "range"
            and 1 <= len(iterable.args) <= 2
            and not iterable.keywords
        ):
            return False
        bounds = [self.integer(argument) for argument in iterable.args]
        if any(bound is None for bound in bounds):
            return False
        low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
        return low < high  # type: ignore[operator]

    def integer(self, node: ast.expr) -> int | None:
        if type(node) is ast.Constant and type(node.value) is int:
            return node.value
        if type(node) is ast.Name:
            return self.integer_constants.get(node.id)
        return None

    def with_statement(self, node: ast.With | ast.AsyncWith, env: Env, grad: bool) -> Env:
        inner_grad = grad
        for item in node.items:
            inner_grad = self.grad_mode_after(item.context_expr, inner_grad)
            if item.optional_vars is not None:
                env = self.bind(item.optional_vars, UNKNOWN, env)
        return self.block(node.body, env, inner_grad)

    def grad_mode_after(self, context: ast.expr, grad: bool) -> bool:
        """Grad mode inside `with <context>:`."""
        callee = context.func if isinstance(context, ast.Call) else context
        name = self.qualify(callee)
        if torch_api.disables_grad(name):
            return False
        if name in torch_api.GRAD_ENABLING:
            return True
        if name in torch_api.SET_GRAD_ENABLED and isinstance(context, ast.Call):
            flag = first_argument(context)
            if type(flag) is ast.Constant and type(flag.value) is bool:  # type: ignore[union-attr]
                return flag.value  # type: ignore[union-attr]
        return grad

    def assignment(
        self,
        node: ast.Assign | ast.AnnAssign | ast.AugAssign,
        env: Env,
        grad: bool,
    ) -> Env:
        if type(node) is ast.AugAssign:
            current = self.value(node.target, env, grad)
            value = self.arithmetic(current, self.value(node.value, env, grad), grad)
            if current.kind is Kind.TENSOR and not grad:
                # `p -= lr * p.grad` under no_grad works in place: the tensor keeps its
                # history, and a leaf keeps requiring grad.
                value = current
            return self.bind(node.target, value, env, grad)
        if node.value is None:
            return env
        value = self.value(node.value, env, grad)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            # Only a tensor's own backward is evidence: `acc.backward(loss)` on an object of
            # the file's own class differentiates `loss`, not `acc`.
            if type(target) is ast.Name and value.grad is not Grad.ATTACHED:
                evidence = self.backward_evidence(target.id, node)
                if evidence == "element" and value.kind in _HOLDERS:
                    # `out["loss"].backward()`, `output.loss.backward()`: one value it holds
                    # is differentiated; which one the analysis does not track, so what it
                    # holds is attached by this evidence only (a lower tier).
                    if value.element in (None, Grad.UNKNOWN):
                        value = value.with_(
                            element=Grad.LIKELY,
                            element_value=Value(
                                Grad.LIKELY,
                                Kind.TENSOR,
                                loss=True,
                                evidence=f"a value `{target.id}` holds is backpropagated",
                            ),
                        )
                elif evidence and evidence != "element" and value.kind in _TENSOR_LIKE:
                    value = value.with_(
                        grad=Grad.ATTACHED,
                        kind=Kind.TENSOR,
                        loss=True,
                        scalar=value.scalar or evidence == "scalar",
                        evidence=f"`{target.id}.backward()` is called on it",
                    )
            env = self.bind(target, value, env, grad)
        return env

    def expression_statement(self, value: ast.expr, env: Env, grad: bool) -> Env:
        """Calls run for their effect: list appends, in-place detaches, backward evidence."""
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            method = value.func.attr
            if (
                self.holds_modules
                and method == "__init__"
                and super_class(value.func) is not None
                and len(value.args) == 1
                and not value.keywords
                and type(value.args[0]) is not ast.Starred
            ):
                # `super().__init__(modules)` of an `nn.ModuleDict`: its entries are those
                entries = self.value(value.args[0], env, grad)
                if entries.kind is not Kind.DICT:
                    entries = Value(Grad.FREE, Kind.DICT, element=Grad.UNKNOWN)
                return {**env, f"self.{MODULE_ENTRIES}": entries}
            key = target_key(value.func.value)
            if key is not None and key in env:
                receiver = env[key]
                if method == "append" and (value.args or value.keywords):
                    item = self.value(first_argument(value), env, grad)  # type: ignore[arg-type]
                    return {**env, key: receiver.storing(item)}
                if method == "detach_":
                    return {**env, key: receiver.with_(grad=Grad.FREE)}
                if method == "update" and receiver.kind is Kind.DICT:
                    return {**env, key: self.dict_update(value, receiver, env, grad)}
                if method in _DICT_REMOVERS and receiver.entries is not None:
                    # `d.pop("loss")`: the known entries may have changed
                    self.value(value, env, grad)
                    return {**env, key: receiver.with_(entries=None)}
        self.value(value, env, grad)
        return env

    def dict_update(self, call: ast.Call, receiver: Value, env: Env, grad: bool) -> Value:
        """The dict `receiver` after `call`, its `.update(...)`: `d.update(loss=x)` and
        `d.update({"loss": x})` replace that entry; any other argument may replace any."""
        updated = receiver
        for arg in call.args:
            given = self.value(arg.value if type(arg) is ast.Starred else arg, env, grad)
            if type(arg) is ast.Starred or given.kind is not Kind.DICT or given.entries is None:
                updated = updated.storing(_any_value_of(given))
                continue
            for name, entry in given.entries:
                updated = updated.storing_entry(name, entry)
        for keyword in call.keywords:
            given = self.value(keyword.value, env, grad)
            if keyword.arg is None:
                updated = updated.storing(_any_value_of(given))
            else:
                updated = updated.storing_entry(keyword.arg, given)
        return updated

    def bind(self, target: ast.expr, value: Value, env: Env, grad: bool = True) -> Env:
        """`env` after `value` is stored into `target`; `grad`: the grad mode of the store."""
        env = dict(env)
        if type(target) is ast.Name:  # the commonest target, ahead of `target_key`'s tests
            env[target.id] = value  # type: ignore[attr-defined]
            return env
        key = target_key(target)
        if key is not None:
            env[key] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            part = value.element_read() if value.element is not None else Value(value.grad)
            if value.kind is Kind.DICT:
                part = UNKNOWN  # unpacking a dict gives its keys
            parts = value.parts
            if parts is None or len(parts) != len(target.elts):
                parts = tuple(part for _ in target.elts)
            for element, element_value in zip(target.elts, parts, strict=True):
                # `a, *rest = ...`: `rest` is bound like the other elements
                inner = element.value if type(element) is ast.Starred else element  # type: ignore[attr-defined]
                env = self.bind(inner, element_value, env)
        elif isinstance(target, ast.Starred):
            env = self.bind(target.value, UNKNOWN, env)
        elif isinstance(target, ast.Subscript):
            container = target_key(target.value)
            if container is not None and container in env:
                held = env[container]
                if held.kind is Kind.TENSOR and grad and value.grad is Grad.ATTACHED:
                    # `values[t] = v`: the copy into the tensor is recorded (CopySlices), so
                    # the whole tensor now has a history.
                    env[container] = held.with_(grad=Grad.ATTACHED, evidence=value.evidence)
                else:
                    key = _constant_key(target.slice)
                    stored = held.storing(value) if key is None else held.storing_entry(key, value)
                    env[container] = stored
        return env

    # -- expressions ------------------------------------------------------------------
    def value(self, node: ast.expr, env: Env, grad: bool) -> Value:
        # The commonest expressions first, by `type(...) is` (cheaper than `isinstance`): a
        # fifth of the analysis is spent here.
        kind = type(node)
        if kind is ast.Name:
            name = node.id  # type: ignore[attr-defined]
            known = env.get(name)
            return known if known is not None else self.lookup_global(name)
        if kind is ast.Attribute:
            return self.attribute(node, env, grad)  # type: ignore[arg-type]
        if kind is ast.Call:
            return self.call(node, env, grad)  # type: ignore[arg-type]
        if kind is ast.Constant:
            constant = type(node.value)  # type: ignore[attr-defined]
            if constant is int or constant is float or constant is bool:
                return NUMBER  # `True`, `False` included
            if constant is str or constant is bytes:
                return Value(Grad.FREE)
            return UNKNOWN  # `None`, `...`, imaginary numbers
        if kind is ast.BinOp:
            left = self.value(node.left, env, grad)  # type: ignore[attr-defined]
            right = self.value(node.right, env, grad)  # type: ignore[attr-defined]
            if type(node.op) is ast.MatMult:  # type: ignore[attr-defined]
                return self.tensor_result(left.grad.combine(right.grad), grad)
            return self.arithmetic(left, right, grad)
        if kind is ast.Subscript:
            return self.subscript(node, env, grad)  # type: ignore[arg-type]
        if kind is ast.UnaryOp:
            if type(node.op) is ast.Not:  # type: ignore[attr-defined]
                return NUMBER
            operand = self.value(node.operand, env, grad)  # type: ignore[attr-defined]
            return self.arithmetic(operand, NUMBER, grad)
        if kind is ast.Compare or kind is ast.BoolOp:
            return Value(Grad.FREE)
        if kind is ast.JoinedStr:
            return Value(Grad.FREE)
        if kind is ast.IfExp:
            return self.value(node.body, env, grad).join(self.value(node.orelse, env, grad))  # type: ignore[attr-defined]
        if kind is ast.List or kind is ast.Tuple:
            elements = node.elts  # type: ignore[attr-defined]
            items = [
                self.value(item.value if type(item) is ast.Starred else item, env, grad)
                for item in elements
            ]
            starred = any(type(item) is ast.Starred for item in elements)
            if kind is ast.List:
                return container_of(Kind.LIST, items, unpacked=starred)
            parts = None if starred else tuple(items)
            return container_of(Kind.TUPLE, items, unpacked=starred).with_(parts=parts)
        if kind is ast.ListComp or kind is ast.GeneratorExp or kind is ast.DictComp:
            return self.comprehension(node, env, grad)  # type: ignore[arg-type]
        if kind is ast.Dict:
            keys = node.keys  # type: ignore[attr-defined]
            values = [
                self.value(entry, env, grad)
                for key, entry in zip(keys, node.values, strict=True)  # type: ignore[attr-defined]
                if key is not None
            ]
            unpacked = len(values) < len(node.values)  # type: ignore[attr-defined]  # `{**other}`
            literal = container_of(Kind.DICT, values, unpacked=unpacked)
            names = [_constant_key(key) for key in keys]
            if unpacked or None in names:
                return literal
            return literal.with_(entries=tuple(zip(names, values, strict=True)))  # type: ignore[arg-type]
        return UNKNOWN

    def subscript(self, node: ast.Subscript, env: Env, grad: bool) -> Value:
        container = self.value(node.value, env, grad)
        key = _constant_key(node.slice)
        entry = container.entry(key) if key is not None else None
        if entry is not None:
            return entry
        if container.element is not None:
            return container.element_read()
        if container.kind is Kind.TENSOR:
            return self.tensor_result(container.grad, grad)
        return UNKNOWN

    def comprehension(
        self, node: ast.ListComp | ast.GeneratorExp | ast.DictComp, env: Env, grad: bool
    ) -> Value:
        """`[crit(o, t) for o, t in pairs]`: a list whose elements are what `elt` gives, with
        each `for` target bound to an element of its iterable (unknown when it is not known);
        `{k: m(x) for k, m in metrics.items()}`: a dict whose values are what `m(x)` gives."""
        inner = self.generators_bound(node.generators, env, grad)
        if type(node) is ast.DictComp:
            self.value(node.key, inner, grad)
            stored = self.value(node.value, inner, grad)
            return Value(Grad.FREE, Kind.DICT, element=stored.grad, element_value=stored)
        return Value(Grad.FREE, Kind.LIST, element=self.value(node.elt, inner, grad).grad)

    def generators_bound(
        self, generators: Sequence[ast.comprehension], env: Env, grad: bool
    ) -> Env:
        """`env` with each `for` target of `generators` bound, in order, to an element of its
        iterable (unknown when it is not known)."""
        inner = env
        for generator in generators:
            iterable = self.value(generator.iter, inner, grad)
            element = Value(iterable.element) if iterable.element is not None else UNKNOWN
            if iterable.kind is Kind.DICT:
                element = UNKNOWN  # iterating a dict gives its keys
            elif iterable.element_value is not None:
                element = iterable.element_value  # `for k, m in metrics.items()`: the pairs
            inner = self.bind(generator.target, element, inner)
        return inner

    def tensor_result(self, inputs: Grad, grad: bool, scalar: bool = False) -> Value:
        """The result of a differentiable tensor operation on inputs that are `inputs`."""
        if not grad:
            return FREE_TENSOR.with_(scalar=scalar)
        return Value(inputs, Kind.TENSOR, scalar=scalar)

    def arithmetic(self, left: Value, right: Value, grad: bool) -> Value:
        if left.kind is Kind.NUMBER and right.kind is Kind.NUMBER:
            return NUMBER
        combined = left.grad.combine(right.grad)
        if not grad and combined is not Grad.UNKNOWN:
            combined = Grad.FREE
        scalar = left.scalar and right.scalar
        kind = Kind.TENSOR if Kind.TENSOR in (left.kind, right.kind) else Kind.UNKNOWN
        if combined.attached:
            kind = Kind.TENSOR
        evidence = left.evidence if left.grad.attached else right.evidence
        loss = left.loss or right.loss
        some_path = grad and (left.attached_on_some_path or right.attached_on_some_path)
        return Value(
            combined,
            kind,
            scalar=scalar,
            evidence=evidence,
            loss=loss,
            attached_on_some_path=some_path,
        )

    def attribute(self, node: ast.Attribute, env: Env, grad: bool) -> Value:
        owner = node.value
        if type(owner) is ast.Name and owner.id == "self":  # `target_key`, inlined: hot
            key = f"self.{node.attr}"
            known = env.get(key)
            return known if known is not None else self.lookup_global(key)
        return self.attribute_of(self.value(owner, env, grad), node.attr, grad)

    def attribute_of(self, base: Value, attr: str, grad: bool) -> Value:
        """What `<base>.<attr>` gives, for an owner that is not `self`."""
        if base.kind is Kind.TENSOR:
            if attr in ("T", "mT", "H", "real", "imag"):
                return self.tensor_result(base.grad, grad)
            if attr in ("shape", "dtype", "device", "requires_grad", "is_leaf", "data", "grad"):
                return Value(Grad.FREE)
            if base.grad is Grad.ATTACHED and not torch_api.is_tensor_method(attr):
                # `outputs.loss` of a model's output: no tensor has that attribute, so the
                # output is an object whose fields come from the forward (a lower tier).
                return Value(
                    Grad.LIKELY,
                    Kind.TENSOR,
                    evidence=f"it is a field of an output computed in the graph (`.{attr}`)",
                )
        if base.kind in (Kind.MODULE, Kind.OBJECT) and base.cls is not None:
            member = self.member_value(base.cls, attr)  # `self.net.D`, `trainer.meter`
            if member.kind is Kind.UNKNOWN and base.element is not None:
                return base.element_read()  # a field of an output whose loss is backpropagated
            return member
        if base.kind is Kind.TUPLE and base.cls is not None and base.element is not None:
            return base.element_read()  # `state.v` of a NamedTuple of tensors
        if base.kind is Kind.UNKNOWN and base.element is not None:
            return base.element_read()  # `output.loss` of an output whose loss is differentiated
        return UNKNOWN

    def call(self, node: ast.Call, env: Env, grad: bool) -> Value:
        lookup = self.lookup_global
        args = [
            # a name, as `value` reads it, without a call (a `Value` is always true)
            env.get(argument.id) or lookup(argument.id)  # type: ignore[attr-defined]
            if type(argument) is ast.Name
            else self.value(argument, env, grad)
            for argument in argument_values(node)
        ]
        name = self.qualify(node.func)
        if name == "collections.defaultdict":
            return self.defaultdict(node)
        if name is not None:
            known = self.library_call(name, node, args, grad)
            if known is not None:
                return known
        owner: Value | None = None  # what `x` is in `x.m(...)`, evaluated once
        if type(node.func) is ast.Attribute:
            receiver = owner = self.value(node.func.value, env, grad)  # type: ignore[attr-defined]
            if super_class(node.func) is not None and "self" in env:  # type: ignore[arg-type]
                # `super().__init__(net, printer)`: the analysis runs the base's method on
                # this object (a method's `self` is of the class that defines it)
                receiver = env["self"]
            method = self.method_call(node, receiver, args, grad)
            if method is not None:
                return method
            if receiver.cls is not None and receiver.kind in (Kind.OBJECT, Kind.MODULE):
                local = self.call_value(node, receiver, args, grad, node.func.attr)  # type: ignore[attr-defined]
                if local is not None:
                    return local
            if receiver.kind is Kind.MODULE and node.func.attr in torch_api.MODULE_RETURNS_SELF:  # type: ignore[attr-defined]
                return receiver  # `Net().to(device)`, unless the file's class overrides it
        if owner is None or _is_self(node.func.value):  # type: ignore[attr-defined]
            callee = self.value(node.func, env, grad)
        else:
            # Not `self.value(node.func, ...)`: evaluating the owner again doubled the work
            # at each link of a chain (`text.strip().lower().split()`).
            callee = self.attribute_of(owner, node.func.attr, grad)  # type: ignore[attr-defined]
        if callee.kind is Kind.MODULE:
            return self.module_output(node, callee, args, grad)
        if callee.kind is Kind.PASSTHROUGH:
            return self.tensor_result(joined_grad(args), grad)
        if callee.kind is Kind.CRITERION:
            return self.loss_result(args, grad, not callee.reduction_none)
        local = self.call_value(node, callee, args, grad, None)
        if local is not None:
            return local
        if (
            isinstance(node.func, ast.Name)
            and node.func.id in CONVENTIONAL_CRITERIA
            and callee.grad is Grad.UNKNOWN
            and grad
        ):
            return Value(
                Grad.LIKELY,
                Kind.TENSOR,
                evidence=f"it is the result of `{node.func.id}(...)`",
                loss=True,
            )
        if isinstance(node.func, ast.Name):
            return self.builtin_call(node.func.id, args)
        return UNKNOWN

    def module_output(self, node: ast.Call, callee: Value, args: list[Value], grad: bool) -> Value:
        """What calling the module `callee` at `node` gives: a recurrent module's `(output,
        state)`, the file's own module's `forward` run on `args`, an `nn.Sequential`'s
        layers each run on the previous one's output; otherwise an output in the graph."""
        if callee.parts is not None and len(args) == 1:
            output = args[0]  # `nn.Sequential(nn.Linear(...), Leaky(...))(x)`
            for layer in callee.parts:
                if layer.kind is Kind.PASSTHROUGH:
                    output = self.tensor_result(output.grad, grad)
                elif layer.kind is Kind.MODULE:
                    output = self.module_output(node, layer, [output], grad)
                else:
                    output = self.module_output(node, Value(Grad.FREE, Kind.MODULE), [], grad)
            return output
        output = self.tensor_result(Grad.ATTACHED, grad).with_(
            evidence="it is the output of a module call"
        )
        if callee.cls in torch_api.RECURRENT_MODULES:
            state = output
            if torch_api.RECURRENT_MODULES[callee.cls] == 2:
                state = Value(Grad.FREE, Kind.TUPLE, element=output.grad, parts=(output,) * 2)
            return Value(Grad.FREE, Kind.TUPLE, element=output.grad, parts=(output, state))
        forward = self.call_value(node, callee, args, grad, "forward")
        if forward is not None and forward.kind is Kind.TUPLE:
            return forward.with_(element=forward.element or output.grad)
        if forward is not None and forward.kind is Kind.DICT and forward.element is not None:
            return forward  # a dict of outputs or losses (`{"cls": ..., "box": ...}`)
        if forward is not None and forward.grad is Grad.ATTACHED and grad:
            return output.with_(scalar=forward.scalar, loss=forward.loss)
        return output

    def loss_result(self, args: list[Value], grad: bool, scalar: bool) -> Value:
        inputs = joined_grad(args[:2])
        if not grad or inputs is Grad.FREE:
            return FREE_TENSOR.with_(scalar=scalar)
        # A loss is attached only when its inputs are: over values the file does not trace
        # (a test's fixed tensors, a parameter) it is attached by convention only.
        if inputs is not Grad.ATTACHED:
            return Value(
                Grad.LIKELY,
                Kind.TENSOR,
                scalar=scalar,
                evidence="it is a loss over inputs gradfix cannot trace",
                loss=True,
            )
        return Value(
            Grad.ATTACHED,
            Kind.TENSOR,
            scalar=scalar,
            evidence="it is the result of a loss function",
            loss=True,
        )

    def library_call(
        self, name: str, node: ast.Call, args: list[Value], grad: bool
    ) -> Value | None:
        short = name.rsplit(".", 1)[-1]
        if name in torch_api.FUNCTIONAL_LOSSES:
            return self.loss_result(args, grad, not _reduction_none(node))
        if name.startswith("torch.nn.") and short[:1].isupper():
            if short.endswith("Loss"):
                return Value(Grad.FREE, Kind.CRITERION, reduction_none=_reduction_none(node))
            if name in torch_api.PARAMETERLESS_MODULES:
                return Value(Grad.FREE, Kind.PASSTHROUGH)
            if short == "Parameter":
                return Value(Grad.ATTACHED, Kind.TENSOR, evidence="it is a parameter", leaf=True)
            if name == "torch.nn.Sequential" and not node.keywords and not has_star(node):
                # its layers, in order: calling it calls each on the previous one's output
                return Value(Grad.FREE, Kind.MODULE, cls=name, parts=tuple(args))
            if name == "torch.nn.ModuleDict" and len(args) == 1 and args[0].kind is Kind.DICT:
                # `nn.ModuleDict({"trunk": ...})`: its entries, by key, as the dict's
                return args[0].with_(kind=Kind.MODULE, cls=name)
            if (
                name == "torch.nn.ModuleList"
                and len(args) == 1
                and args[0].kind is Kind.LIST
                and args[0].element_value is not None
            ):
                # `nn.ModuleList([A(), B()])`: what going over it gives, as the list's
                return Value(
                    Grad.FREE,
                    Kind.MODULE,
                    cls=name,
                    element=args[0].element,
                    element_value=args[0].element_value,
                )
            return Value(Grad.FREE, Kind.MODULE, cls=name)
        if name.startswith("torch.optim.") and short[:1].isupper():
            return Value(Grad.FREE, Kind.OPTIMIZER)
        if name in torch_api.TENSOR_FACTORIES:
            requires = keyword_argument(node, "requires_grad")
            if is_true(requires):
                return Value(Grad.ATTACHED, Kind.TENSOR, evidence="it requires grad", leaf=True)
            first = first_argument(node)
            scalar = first is None or (
                short in ("tensor", "as_tensor")
                and type(first) is ast.Constant
                and type(first.value) in (int, float)  # a number literal, not `True`/`False`
            )
            return FREE_TENSOR.with_(scalar=scalar)
        if name in torch_api.GRAPH_LEAVING_FUNCTIONS:
            return FREE_TENSOR
        if name.startswith("torch.") and not short[:1].isupper():
            reducing = short in torch_api.REDUCING_METHODS and _argument_count(node) == 1
            return self.tensor_result(joined_grad(args), grad, scalar=reducing)
        return None

    def method_call(
        self, node: ast.Call, receiver: Value, args: list[Value], grad: bool
    ) -> Value | None:
        method = node.func.attr  # type: ignore[attr-defined]
        if receiver.kind is Kind.UNKNOWN and method in _LEAVE_ON_ANY_RECEIVER:
            # Whatever gradfix does not know of the receiver, these leave the graph: only a
            # tensor (or the file's own class, which is not UNKNOWN) has them.
            return FREE_TENSOR if method == "detach" else NUMBER
        if receiver.kind in (Kind.TENSOR, Kind.UNKNOWN) and receiver.grad is not Grad.UNKNOWN:
            if method in torch_api.GRAPH_LEAVING_METHODS:
                if method in torch_api.TO_PYTHON_METHODS:
                    return NUMBER
                return FREE_TENSOR.with_(scalar=receiver.scalar)
            if method in torch_api.GRAPH_KEEPING_METHODS:
                reducing = method in torch_api.REDUCING_METHODS and not _argument_count(node)
                inputs = receiver.grad.combine(joined_grad(args)) if args else receiver.grad
                result = self.tensor_result(
                    inputs,
                    grad,
                    scalar=reducing or (receiver.scalar and method not in ("expand", "repeat")),
                )
                return result.with_(evidence=receiver.evidence, loss=receiver.loss)
        if (
            receiver.kind is Kind.TENSOR
            and receiver.grad is not Grad.UNKNOWN
            and torch_api.is_tensor_method(method)
        ):
            # Any other tensor method: attached in, attached out (`zeros.scatter_add(1, i, h)`,
            # `x.index_add(0, i, h)`); the methods whose results carry no graph leave above.
            inputs = receiver.grad.combine(joined_grad(args)) if args else receiver.grad
            return self.tensor_result(inputs, grad)
        if receiver.kind is Kind.CLASS and method == "apply":
            # `MyFunction.apply(x)`: the analysis answers for the file's autograd Functions.
            return self.call_value(node, receiver, args, grad, method)
        if receiver.kind is Kind.MODULE and method == "forward":
            return self.tensor_result(Grad.ATTACHED, grad)
        if receiver.kind is Kind.DICT and receiver.element is not None:
            return _dict_view(method, receiver, args)
        if receiver.kind is Kind.MODULE and receiver.element is not None and method in _ENTRY_VIEWS:
            return _dict_view(method, receiver, args)  # `nn.ModuleDict({...})`: its entries
        if receiver.kind is Kind.MODULE and receiver.cls is not None and method in _ENTRY_VIEWS:
            entries = self.member_value(receiver.cls, MODULE_ENTRIES)  # an `nn.ModuleDict`'s
            if entries.kind is Kind.DICT and entries.element is not None:
                return _dict_view(method, entries, args)
        return None

    def builtin_call(self, name: str, args: list[Value]) -> Value:
        if name in ("float", "int", "len", "round", "bool"):
            return NUMBER
        if name in ("list", "sorted") and args:
            # A dict's elements are its keys: only a view or a sequence passes its values on.
            element_value = args[0].element_value if args[0].kind is not Kind.DICT else None
            return Value(Grad.FREE, Kind.LIST, element=args[0].element, element_value=element_value)
        if name == "list" or name == "dict":
            return Value(Grad.FREE, Kind.LIST if name == "list" else Kind.DICT)
        if name == "sum" and args and args[0].element is not None:
            element = args[0].element
            if element is Grad.FREE:
                return NUMBER
            terms = args[0].element_read()  # a sum of losses is a loss, of scalars a scalar
            return Value(
                element, Kind.TENSOR, scalar=terms.scalar, loss=terms.loss, evidence=terms.evidence
            )
        return UNKNOWN

    def defaultdict(self, node: ast.Call) -> Value:
        """`defaultdict(float)` starts empty and holds numbers, `defaultdict(list)` empty
        lists; `defaultdict(AverageMeter)` holds instances of the file's class."""
        empty = Value(Grad.FREE, Kind.DICT)
        factory = first_argument(node) if node.args else None  # not a keyword argument
        if isinstance(factory, ast.Name) and factory.id in ("int", "float"):
            return empty
        if isinstance(factory, ast.Name) and factory.id == "list":
            lists = Value(Grad.FREE, Kind.LIST)
            return empty.with_(element=Grad.FREE, element_value=lists)
        if isinstance(factory, ast.Name):
            made = self.lookup_global(factory.id)
            if made.kind is Kind.CLASS:
                instance = Value(Grad.FREE, Kind.OBJECT, cls=made.cls)
                return empty.with_(element=Grad.FREE, element_value=instance)
        return Value(Grad.FREE, Kind.DICT, element=Grad.UNKNOWN)


def _dict_view(method: str, receiver: Value, args: list[Value]) -> Value | None:
    """`d.values()`, `d.items()` (pairs of an unknown key and a value), `d.get(k, default)`."""
    stored = receiver.element_read()
    if method == "values":
        return Value(Grad.FREE, Kind.LIST, element=stored.grad, element_value=stored)
    if method == "items":
        pair = Value(Grad.FREE, Kind.TUPLE, element=Grad.UNKNOWN, parts=(UNKNOWN, stored))
        return Value(Grad.FREE, Kind.LIST, element=Grad.FREE, element_value=pair)
    if method == "get" and len(args) == 2:
        return stored.join(args[1])
    return None


def joined_grad(values: list[Value]) -> Grad:
    result = Grad.FREE
    for value in values:
        if value.kind in (Kind.MODULE, Kind.CRITERION, Kind.OPTIMIZER, Kind.FUNCTION):
            continue
        result = result.combine(value.grad)
        if value.kind in (Kind.LIST, Kind.TUPLE) and value.element is not None:
            result = result.combine(value.element)  # `torch.stack([a, b])`, `torch.cat((x, h))`
    return result


def _reduction_none(node: ast.Call) -> bool:
    return string_value(keyword_argument(node, "reduction")) == "none"


# What an `nn.ModuleDict` shows of its entries, as a dict does.
_ENTRY_VIEWS = frozenset({"values", "items"})
# Methods whose result carries no graph, whatever the receiver: only a tensor has them.
_LEAVE_ON_ANY_RECEIVER = frozenset({"detach", *torch_api.TO_PYTHON_METHODS})
# What a backward's own evidence may make attached: a tensor, or a value gradfix does not know
# (not an object of the file's own class: `acc.backward(loss)` differentiates `loss`)...
_TENSOR_LIKE = (Kind.TENSOR, Kind.UNKNOWN)
# ...and what may hold the value a backward runs on (`out["loss"]`, `output.loss`).
_HOLDERS = (Kind.DICT, Kind.LIST, Kind.TUPLE, Kind.OBJECT, Kind.UNKNOWN)


def backward_holder(node: ast.expr) -> str | None:
    """The name whose value holds what a backward runs on: `out` in `out["loss"].backward()`
    and in `out.loss.backward()`."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        return node.value.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id
    return None


def backward_root(node: ast.expr) -> str | None:
    """The name a backward runs on: `loss` in `loss.backward()` and in
    `scaler.scale(loss).backward()`."""
    if isinstance(node, ast.Name):
        return node.id
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "scale"
    ):
        first = first_argument(node)
        if isinstance(first, ast.Name):
            return first.id
    return None
