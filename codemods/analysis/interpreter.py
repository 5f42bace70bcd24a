"""Abstract interpretation of one scope: which names hold graph-attached values at each
statement, in which grad mode each statement runs, and what flowed into each loop.

The interpreter walks statements in order, joins environments where control flow meets
(branches, loop back edges) and runs loop bodies to a fixpoint. It is deliberately modest:
anything it cannot follow becomes `UNKNOWN`, and rules never rewrite on `UNKNOWN`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import libcst as cst

from codemods.analysis import torch_api
from codemods.analysis.imports import dotted_name
from codemods.analysis.syntax import keyword_argument
from codemods.analysis.values import (
    FREE_TENSOR,
    NUMBER,
    UNKNOWN,
    Grad,
    Kind,
    Value,
    container_of,
)
from codemods.cst_speedups import node_classes

Env = dict[str, Value]  # keys: local names and `self.<attribute>` paths

# Parameters called like this are probably losses; only the unsafe tier may act on that.
CONVENTIONAL_CRITERIA = frozenset({"criterion", "loss_fn", "loss_func", "loss_function"})
_LOOP_PASSES = 3
# `value`'s less common expressions, as sets of classes for `type(node) in ...`.
_SMALL_STATEMENTS = node_classes(cst.BaseSmallStatement)
_BINARY = node_classes(cst.BinaryOperation)
_SUBSCRIPT = node_classes(cst.Subscript)
_UNARY = node_classes(cst.UnaryOperation)
_TESTS = node_classes(cst.Comparison, cst.BooleanOperation)
_TEXT = node_classes(cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)


def target_key(node: cst.BaseExpression) -> str | None:
    """The environment key a store target writes: `x` or `self.x`."""
    kind = type(node)  # LibCST's node classes are final: `is` spares the ABC's isinstance
    if kind is cst.Name:
        return node.value  # type: ignore[attr-defined]
    if kind is cst.Attribute and dotted_name(node.value) == "self":  # type: ignore[attr-defined]
        return f"self.{node.attr.value}"  # type: ignore[attr-defined]
    return None


def join_envs(left: Env, right: Env) -> Env:
    joined = dict(left)
    for key, value in right.items():
        joined[key] = joined[key].join(value) if key in joined else value.join(UNKNOWN)
    for key in left.keys() - right.keys():
        joined[key] = left[key].join(UNKNOWN)
    return joined


@dataclass
class ScopeFacts:
    """What the interpreter learnt about one scope, keyed by statement node."""

    env_before: dict[cst.CSTNode, Env] = field(default_factory=dict)
    grad_enabled: dict[cst.CSTNode, bool] = field(default_factory=dict)
    loop_entry: dict[cst.CSTNode, Env] = field(default_factory=dict)
    returned: Value | None = None
    final_env: Env = field(default_factory=dict)


class Interpreter:
    """Runs one scope. `call_value` answers for calls into functions of the same file."""

    def __init__(
        self,
        qualify: Callable[[cst.BaseExpression], str | None],
        # (call, callee or receiver, argument values, grad mode, method name) -> result of a
        # call into this file's functions, classes and methods, or None
        call_value: Callable[[cst.Call, Value, list[Value], bool, str | None], Value | None],
        lookup_global: Callable[[str], Value],
        # (name, assignment) -> "scalar" / "tensor" when a backward runs on what the
        # assignment stored, before the name is rebound; None otherwise
        backward_evidence: Callable[[str, cst.CSTNode], str | None],
        grad_enabled: bool,
    ) -> None:
        self.qualify = qualify
        self.call_value = call_value
        self.lookup_global = lookup_global
        self.backward_evidence = backward_evidence
        self.initial_grad_enabled = grad_enabled
        self.facts = ScopeFacts()

    # -- statements -------------------------------------------------------------------
    def run(self, body: Sequence[cst.BaseStatement], env: Env) -> ScopeFacts:
        self.facts.final_env = self.block(body, env, self.initial_grad_enabled)
        return self.facts

    def block(self, statements: Sequence[cst.CSTNode], env: Env, grad: bool) -> Env:
        for statement in statements:
            env = self.statement(statement, env, grad)
        return env

    def statement(self, node: cst.CSTNode, env: Env, grad: bool) -> Env:
        self.facts.env_before[node] = env
        self.facts.grad_enabled[node] = grad
        kind = type(node)  # the commonest statements by `is`, as in `value`
        if kind is cst.SimpleStatementLine:
            for small in node.body:  # type: ignore[attr-defined]
                env = self.statement(small, env, grad)
            return env
        if kind is cst.Assign or kind is cst.AnnAssign or kind is cst.AugAssign:
            return self.assignment(node, env, grad)  # type: ignore[arg-type]
        if kind is cst.Expr:
            return self.expression_statement(node.value, env, grad)  # type: ignore[attr-defined]
        if kind is cst.Return and node.value is not None:  # type: ignore[attr-defined]
            value = self.value(node.value, env, grad)
            returned = self.facts.returned
            self.facts.returned = value if returned is None else returned.join(value)
            return env
        if kind in _SMALL_STATEMENTS:
            return env  # `pass`, `import`, `raise`: nothing the environment tracks
        if isinstance(node, cst.If):
            taken = self.block(node.body.body, dict(env), grad)
            if node.orelse is None:
                return join_envs(env, taken)
            other = self.statement(node.orelse, dict(env), grad)
            return join_envs(taken, other)
        if isinstance(node, cst.Else):
            return self.block(node.body.body, env, grad)
        if isinstance(node, (cst.For, cst.While)):
            return self.loop(node, env, grad)
        if isinstance(node, cst.With):
            return self.with_statement(node, env, grad)
        if isinstance(node, cst.Try):
            after_body = self.block(node.body.body, dict(env), grad)
            merged = join_envs(env, after_body)
            for handler in node.handlers:
                merged = join_envs(merged, self.block(handler.body.body, dict(merged), grad))
            if node.orelse is not None:
                merged = join_envs(merged, self.block(node.orelse.body.body, dict(merged), grad))
            if node.finalbody is not None:
                merged = self.block(node.finalbody.body.body, merged, grad)
            return merged
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            kind = Kind.FUNCTION if isinstance(node, cst.FunctionDef) else Kind.CLASS
            return {**env, node.name.value: Value(Grad.FREE, kind, cls=node.name.value)}
        return env

    def loop(self, node: cst.For | cst.While, env: Env, grad: bool) -> Env:
        self.facts.loop_entry[node] = env
        current = env
        element = UNKNOWN
        if isinstance(node, cst.For):
            iterable = self.value(node.iter, env, grad)
            if iterable.kind is not Kind.DICT:  # iterating a dict gives its keys
                element = iterable.element_read()
        for _ in range(_LOOP_PASSES):
            start = dict(current)
            if isinstance(node, cst.For):
                start = self.bind(node.target, element, start)
            after = self.block(node.body.body, start, grad)
            widened = join_envs(current, after)
            if widened == current:
                break
            current = widened
        if node.orelse is not None:
            current = self.block(node.orelse.body.body, dict(current), grad)
        return current

    def with_statement(self, node: cst.With, env: Env, grad: bool) -> Env:
        inner_grad = grad
        for item in node.items:
            inner_grad = self.grad_mode_after(item.item, inner_grad)
            if item.asname is not None:
                env = self.bind(item.asname.name, UNKNOWN, env)
        return self.block(node.body.body, env, inner_grad)

    def grad_mode_after(self, context: cst.BaseExpression, grad: bool) -> bool:
        """Grad mode inside `with <context>:`."""
        callee = context.func if isinstance(context, cst.Call) else context
        name = self.qualify(callee)
        if torch_api.disables_grad(name):
            return False
        if name in torch_api.GRAD_ENABLING:
            return True
        if name in torch_api.SET_GRAD_ENABLED and isinstance(context, cst.Call) and context.args:
            flag = context.args[0].value
            if isinstance(flag, cst.Name) and flag.value in ("True", "False"):
                return flag.value == "True"
        return grad

    def assignment(
        self,
        node: cst.Assign | cst.AnnAssign | cst.AugAssign,
        env: Env,
        grad: bool,
    ) -> Env:
        if type(node) is cst.AugAssign:
            current = self.value(node.target, env, grad)
            value = self.arithmetic(current, self.value(node.value, env, grad), grad)
            return self.bind(node.target, value, env)
        if node.value is None:
            return env
        value = self.value(node.value, env, grad)
        targets = (
            [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        )
        for target in targets:
            if type(target) is cst.Name and value.grad is not Grad.ATTACHED:
                evidence = self.backward_evidence(target.value, node)
                if evidence:
                    value = replace(
                        value,
                        grad=Grad.ATTACHED,
                        kind=Kind.TENSOR,
                        loss=True,
                        scalar=value.scalar or evidence == "scalar",
                        evidence=f"`{target.value}.backward()` is called on it",
                    )
            env = self.bind(target, value, env)
        return env

    def expression_statement(self, value: cst.BaseExpression, env: Env, grad: bool) -> Env:
        """Calls run for their effect: list appends, in-place detaches, backward evidence."""
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            method = value.func.attr.value
            key = target_key(value.func.value)
            if key is not None and key in env:
                receiver = env[key]
                if method == "append" and value.args:
                    item = self.value(value.args[0].value, env, grad)
                    return {**env, key: receiver.storing(item)}
                if method == "detach_":
                    return {**env, key: replace(receiver, grad=Grad.FREE)}
        self.value(value, env, grad)
        return env

    def bind(self, target: cst.BaseExpression, value: Value, env: Env) -> Env:
        env = dict(env)
        key = target_key(target)
        if key is not None:
            env[key] = value
        elif isinstance(target, (cst.Tuple, cst.List)):
            part = value.element_read() if value.element is not None else Value(value.grad)
            if value.kind is Kind.DICT:
                part = UNKNOWN  # unpacking a dict gives its keys
            parts = value.parts
            if parts is None or len(parts) != len(target.elements):
                parts = tuple(part for _ in target.elements)
            for element, element_value in zip(target.elements, parts, strict=True):
                env = self.bind(element.value, element_value, env)
        elif isinstance(target, cst.StarredElement):
            env = self.bind(target.value, UNKNOWN, env)
        elif isinstance(target, cst.Subscript):
            container = target_key(target.value)
            if container is not None and container in env:
                env[container] = env[container].storing(value)
        return env

    # -- expressions ------------------------------------------------------------------
    def value(self, node: cst.BaseExpression, env: Env, grad: bool) -> Value:
        # The commonest expressions first, by `type(...) is` (LibCST's node classes are final,
        # and `isinstance` goes through their ABC): a fifth of the analysis is spent here.
        kind = type(node)
        if kind is cst.Name:
            name = node.value  # type: ignore[attr-defined]
            if name in env:
                return env[name]
            if name in ("True", "False"):
                return NUMBER
            return self.lookup_global(name)
        if kind is cst.Attribute:
            return self.attribute(node, env, grad)  # type: ignore[arg-type]
        if kind is cst.Call:
            return self.call(node, env, grad)  # type: ignore[arg-type]
        if kind is cst.Integer or kind is cst.Float:
            return NUMBER
        if kind in _BINARY:
            left = self.value(node.left, env, grad)  # type: ignore[attr-defined]
            right = self.value(node.right, env, grad)  # type: ignore[attr-defined]
            if isinstance(node.operator, cst.MatrixMultiply):  # type: ignore[attr-defined]
                return self.tensor_result(left.grad.combine(right.grad), grad)
            return self.arithmetic(left, right, grad)
        if kind in _SUBSCRIPT:
            return self.subscript(node, env, grad)  # type: ignore[arg-type]
        if kind in _UNARY:
            if isinstance(node.operator, cst.Not):  # type: ignore[attr-defined]
                return NUMBER
            operand = self.value(node.expression, env, grad)  # type: ignore[attr-defined]
            return self.arithmetic(operand, NUMBER, grad)
        if kind in _TESTS:
            return Value(Grad.FREE)
        if kind in _TEXT:
            return Value(Grad.FREE)
        if kind is cst.IfExp:
            return self.value(node.body, env, grad).join(self.value(node.orelse, env, grad))  # type: ignore[attr-defined]
        if isinstance(node, (cst.List, cst.Tuple)):
            items = [self.value(item.value, env, grad) for item in node.elements]
            starred = any(isinstance(item, cst.StarredElement) for item in node.elements)
            if isinstance(node, cst.List):
                return container_of(Kind.LIST, items, unpacked=starred)
            parts = None if starred else tuple(items)
            return replace(container_of(Kind.TUPLE, items, unpacked=starred), parts=parts)
        if isinstance(node, (cst.ListComp, cst.GeneratorExp)):
            return self.comprehension(node, env, grad)
        if isinstance(node, cst.Dict):
            values = [
                self.value(entry.value, env, grad)
                for entry in node.elements
                if isinstance(entry, cst.DictElement)
            ]
            unpacked = len(values) < len(node.elements)  # `{**other, ...}`
            return container_of(Kind.DICT, values, unpacked=unpacked)
        return UNKNOWN

    def subscript(self, node: cst.Subscript, env: Env, grad: bool) -> Value:
        container = self.value(node.value, env, grad)
        if container.element is not None:
            return container.element_read()
        if container.kind is Kind.TENSOR:
            return self.tensor_result(container.grad, grad)
        return UNKNOWN

    def comprehension(self, node: cst.ListComp | cst.GeneratorExp, env: Env, grad: bool) -> Value:
        """`[crit(o, t) for o, t in pairs]`: a list whose elements are what `elt` gives, with
        each `for` target bound to an element of its iterable (unknown when it is not known)."""
        inner: Env = env
        comp_for: cst.CompFor | None = node.for_in
        while comp_for is not None:
            iterable = self.value(comp_for.iter, inner, grad)
            element = Value(iterable.element) if iterable.element is not None else UNKNOWN
            inner = self.bind(comp_for.target, element, inner)
            comp_for = comp_for.inner_for_in
        return Value(Grad.FREE, Kind.LIST, element=self.value(node.elt, inner, grad).grad)

    def tensor_result(self, inputs: Grad, grad: bool, scalar: bool = False) -> Value:
        """The result of a differentiable tensor operation on inputs that are `inputs`."""
        if not grad:
            return replace(FREE_TENSOR, scalar=scalar)
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
        return Value(combined, kind, scalar=scalar, evidence=evidence, loss=loss)

    def attribute(self, node: cst.Attribute, env: Env, grad: bool) -> Value:
        key = target_key(node)
        if key is not None and key in env:
            return env[key]
        if key is not None:
            return self.lookup_global(key)
        base = self.value(node.value, env, grad)
        attr = node.attr.value
        if base.kind is Kind.TENSOR:
            if attr in ("T", "mT", "H", "real", "imag"):
                return self.tensor_result(base.grad, grad)
            if attr in ("shape", "dtype", "device", "requires_grad", "is_leaf", "data", "grad"):
                return Value(Grad.FREE)
        return UNKNOWN

    def call(self, node: cst.Call, env: Env, grad: bool) -> Value:
        args = [self.value(arg.value, env, grad) for arg in node.args]
        name = self.qualify(node.func)
        if name == "collections.defaultdict":
            return self.defaultdict(node)
        if name is not None:
            known = self.library_call(name, node, args, grad)
            if known is not None:
                return known
        if type(node.func) is cst.Attribute:
            receiver = self.value(node.func.value, env, grad)  # type: ignore[attr-defined]
            method = self.method_call(node, receiver, args, grad)
            if method is not None:
                return method
            if receiver.cls is not None and receiver.kind in (Kind.OBJECT, Kind.MODULE):
                local = self.call_value(node, receiver, args, grad, node.func.attr.value)
                if local is not None:
                    return local
        callee = self.value(node.func, env, grad)
        if callee.kind is Kind.MODULE:
            output = replace(
                self.tensor_result(Grad.ATTACHED, grad),
                evidence="it is the output of a module call",
            )
            if callee.cls in torch_api.RECURRENT_MODULES:
                state = output
                if torch_api.RECURRENT_MODULES[callee.cls] == 2:
                    state = Value(Grad.FREE, Kind.TUPLE, element=output.grad, parts=(output,) * 2)
                return Value(Grad.FREE, Kind.TUPLE, element=output.grad, parts=(output, state))
            forward = self.call_value(node, callee, args, grad, "forward")
            if forward is not None and forward.kind is Kind.TUPLE:
                return replace(forward, element=forward.element or output.grad)
            if forward is not None and forward.kind is Kind.DICT and forward.element is not None:
                return forward  # a dict of outputs or losses (`{"cls": ..., "box": ...}`)
            if forward is not None and forward.grad is Grad.ATTACHED and grad:
                return replace(output, scalar=forward.scalar, loss=forward.loss)
            return output
        if callee.kind is Kind.PASSTHROUGH:
            return self.tensor_result(_joined_grad(args), grad)
        if callee.kind is Kind.CRITERION:
            return self.loss_result(args, grad, not callee.reduction_none)
        local = self.call_value(node, callee, args, grad, None)
        if local is not None:
            return local
        if (
            isinstance(node.func, cst.Name)
            and node.func.value in CONVENTIONAL_CRITERIA
            and callee.grad is Grad.UNKNOWN
            and grad
        ):
            return Value(
                Grad.LIKELY,
                Kind.TENSOR,
                evidence=f"it is the result of `{node.func.value}(...)`",
                loss=True,
            )
        if isinstance(node.func, cst.Name):
            return self.builtin_call(node.func.value, args)
        return UNKNOWN

    def loss_result(self, args: list[Value], grad: bool, scalar: bool) -> Value:
        inputs = _joined_grad(args[:2])
        if not grad or inputs is Grad.FREE:
            return replace(FREE_TENSOR, scalar=scalar)
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
        self, name: str, node: cst.Call, args: list[Value], grad: bool
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
            return Value(Grad.FREE, Kind.MODULE, cls=name)
        if name.startswith("torch.optim.") and short[:1].isupper():
            return Value(Grad.FREE, Kind.OPTIMIZER)
        if name in torch_api.TENSOR_FACTORIES:
            requires = keyword_argument(node, "requires_grad")
            if isinstance(requires, cst.Name) and requires.value == "True":
                return Value(Grad.ATTACHED, Kind.TENSOR, evidence="it requires grad", leaf=True)
            scalar = not node.args or (
                short in ("tensor", "as_tensor")
                and isinstance(node.args[0].value, (cst.Integer, cst.Float))
            )
            return replace(FREE_TENSOR, scalar=scalar)
        if name in torch_api.GRAPH_LEAVING_FUNCTIONS:
            return FREE_TENSOR
        if name.startswith("torch.") and not short[:1].isupper():
            reducing = short in torch_api.REDUCING_METHODS and len(node.args) == 1
            return self.tensor_result(_joined_grad(args), grad, scalar=reducing)
        return None

    def method_call(
        self, node: cst.Call, receiver: Value, args: list[Value], grad: bool
    ) -> Value | None:
        method = node.func.attr.value  # type: ignore[attr-defined]
        if receiver.kind in (Kind.TENSOR, Kind.UNKNOWN) and receiver.grad is not Grad.UNKNOWN:
            if method in torch_api.GRAPH_LEAVING_METHODS:
                if method in torch_api.TO_PYTHON_METHODS:
                    return NUMBER
                return replace(FREE_TENSOR, scalar=receiver.scalar)
            if method in torch_api.GRAPH_KEEPING_METHODS:
                reducing = method in torch_api.REDUCING_METHODS and not node.args
                inputs = receiver.grad.combine(_joined_grad(args)) if args else receiver.grad
                result = self.tensor_result(
                    inputs,
                    grad,
                    scalar=reducing or (receiver.scalar and method not in ("expand", "repeat")),
                )
                return replace(result, evidence=receiver.evidence, loss=receiver.loss)
        if receiver.kind is Kind.MODULE and method == "forward":
            return self.tensor_result(Grad.ATTACHED, grad)
        if receiver.kind is Kind.DICT and receiver.element is not None:
            return _dict_view(method, receiver, args)
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

    def defaultdict(self, node: cst.Call) -> Value:
        """`defaultdict(float)` starts empty and holds numbers, `defaultdict(list)` empty
        lists; `defaultdict(AverageMeter)` holds instances of the file's class."""
        empty = Value(Grad.FREE, Kind.DICT)
        factory = node.args[0].value if node.args and not node.args[0].keyword else None
        if isinstance(factory, cst.Name) and factory.value in ("int", "float"):
            return empty
        if isinstance(factory, cst.Name) and factory.value == "list":
            lists = Value(Grad.FREE, Kind.LIST)
            return replace(empty, element=Grad.FREE, element_value=lists)
        if isinstance(factory, cst.Name):
            made = self.lookup_global(factory.value)
            if made.kind is Kind.CLASS:
                instance = Value(Grad.FREE, Kind.OBJECT, cls=made.cls)
                return replace(empty, element=Grad.FREE, element_value=instance)
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


def _joined_grad(values: list[Value]) -> Grad:
    result = Grad.FREE
    for value in values:
        if value.kind in (Kind.MODULE, Kind.CRITERION, Kind.OPTIMIZER, Kind.FUNCTION):
            continue
        result = result.combine(value.grad)
        if value.kind in (Kind.LIST, Kind.TUPLE) and value.element is not None:
            result = result.combine(value.element)  # `torch.stack([a, b])`, `torch.cat((x, h))`
    return result


def _reduction_none(node: cst.Call) -> bool:
    reduction = keyword_argument(node, "reduction")
    return isinstance(reduction, cst.SimpleString) and reduction.evaluated_value == "none"


def backward_root(node: cst.BaseExpression) -> str | None:
    """The name a backward runs on: `loss` in `loss.backward()` and in
    `scaler.scale(loss).backward()`."""
    if isinstance(node, cst.Name):
        return node.value
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "scale"
        and node.args
        and isinstance(node.args[0].value, cst.Name)
    ):
        return node.args[0].value.value
    return None
