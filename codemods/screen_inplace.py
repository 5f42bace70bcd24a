"""GF004's screen: an in-place write whose tensor an op in the same function may have saved.

GF004 reports a write only when the written storage is a graph leaf, or when an op of the
write's own function (scope), evaluated before it or in a loop around both, saved that storage:
as its output, or as one of its inputs. Provenance finds the storage by following names to
their bindings, views (the op table's `view_of_input`, `x[i]`, `.T`), `.detach()`, in-place
layers, and calls of the file's own functions. The screen follows the same paths coarsely: per
scope, a binding links each version it binds to every name its value may alias; a write may
break a saved tensor only when what it writes and what an op of its scope reads (or binds its
result to) reach a common name through those links, as a view of `x` and `x` both reach `x`
(two values bound from one call's arguments `a` and `b` do not: each reaches its own), and
what is stored into an object through one of its names (`q[0] = y`) every name of it reaches. A
function whose decorator turns grad mode off saves nothing and may write its leaves. Whatever
the screen cannot follow lets the file through.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from itertools import pairwise

from codemods.analysis import saved_ops
from codemods.analysis.provenance import FREE_ATTRIBUTES
from codemods.analysis.torch_api import (
    GRAD_ENABLING,
    GRAPH_KEEPING_METHODS,
    INPLACE_FLAG_POSITION,
    NON_WRITING_UNDERSCORE_METHODS,
    PARAMETERLESS_MODULES,
    SET_GRAD_ENABLED,
    disables_grad,
)

# A layer built to work in place (`nn.ReLU(inplace=True)`, `nn.ReLU(True)`): a call of any
# module may then write its first argument.
_INPLACE_LAYER_TEXT = re.compile(r"inplace\s*=\s*True|\(\s*True\s*[,)]")
# A graph leaf (`_Checker._is_leaf`): a module's `weight`/`bias`, `nn.Parameter`, a factory with
# `requires_grad=True`, `.requires_grad_()`, an element of `.parameters()`.
_LEAF = "<leaf>"
_LEAF_ATTRIBUTES = frozenset({"weight", "bias"})
_LEAF_CALLS = frozenset({"Parameter", "requires_grad_", "parameters"})
# Methods through which a container's element comes out (`provenance._ELEMENT_METHODS`).
_ELEMENT_METHODS = frozenset({"pop", "get", "popleft", "__getitem__"})
# Builtins whose result is a number, a string or an iterator, never a saving op.
_NOT_OPS = frozenset(
    {"len", "isinstance", "range", "print", "str", "int", "float", "bool", "getattr", "hasattr"}
    | {"setattr", "enumerate", "zip", "list", "tuple", "dict", "set", "sorted", "type", "id"}
    | {"repr", "format", "super", "callable", "iter", "next", "any", "all", "round", "hash"}
)
# Builtins whose result is one of their arguments' values or elements.
_PASSING_BUILTINS = frozenset(
    {"list", "tuple", "sorted", "reversed", "min", "max", "getattr", "next", "iter"}
    | {"enumerate", "zip", "dict", "set"}
)

_DISPLAYS = (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp)
# What a plain name's assignment may give `provenance.module_constructor` (`_assigned_values`).
_CONSTRUCTOR_PATHS = (ast.Call, ast.Name, ast.Attribute)
# The table's ops, without call-shape suffixes (`operator.mul[scalar]`).
_OP_KEYS = frozenset(key.split("[")[0] for key in saved_ops.op_keys())
# Those that save a tensor under some requires-grad pattern: only these, modules built from
# them, and the file's own functions (provenance follows them) can save what a write breaks.
_SAVING_KEYS = frozenset(
    key.split("[")[0] for key in saved_ops.op_keys() if saved_ops.saves_anything(key)
)
_OUTPUT_SAVING_KEYS = frozenset(
    name
    for key in saved_ops.op_keys()
    if any(any(saving.outputs) for saving in saved_ops.op_saving(key).patterns.values())  # type: ignore[union-attr]
    for name in (key, key.split("[")[0])
)
# Operators by their exact call shape (`operator.mul[scalar]` for `x * 2`), which save an input.
_INPUT_SAVING_KEYS = frozenset(
    key
    for key in saved_ops.op_keys()
    if any(any(saving.inputs) for saving in saved_ops.op_saving(key).patterns.values())  # type: ignore[union-attr]
)


def _first_saved_inputs() -> dict[str, int]:
    """The ops that save an input, whatever their call shape, with the first tensor input
    position some requires-grad pattern saves (a method's receiver is position 0)."""
    first: dict[str, int] = {}
    for key in _INPUT_SAVING_KEYS:
        position = min(
            index
            for saving in saved_ops.op_saving(key).patterns.values()  # type: ignore[union-attr]
            for index, saved in enumerate(saving.inputs)
            if saved
        )
        base = key.split("[")[0]
        first[base] = min(position, first.get(base, position))
    return first


_FIRST_SAVED_INPUT = _first_saved_inputs()
_CONTAINER_MODULES = frozenset(
    {"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"}
)
_OPERATOR_NAMES: dict[type[ast.operator], str] = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "truediv",
    ast.MatMult: "matmul",
    ast.Pow: "pow",
}

_BINDING_NODES = (
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.For,
    ast.AsyncFor,
    ast.comprehension,
    ast.withitem,
    ast.NamedExpr,
)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# `interpreter.builtin_call`: what these builtins return.
_BUILTIN_KINDS = {
    **dict.fromkeys(("len", "int", "float", "round", "bool"), "number"),
    "dict": "dict",
    "list": "list",
    "sorted": "list",
}
# Fields holding `Load`/`Store`, `Add`, `Eq` and the like: about a third of an `ast` tree's
# nodes, none of which the screen reads.
_OPERATOR_FIELDS = frozenset({"ctx", "op", "ops"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_Env = dict[str, str]  # a name -> its version where a statement runs
_Scope = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def may_break_saved(module: ast.Module, imports: dict[str, str], text: str) -> bool:
    """Whether some in-place write of the file may break a tensor GF004 sees saved."""
    screen = _InplaceScreen(module, imports, text)
    try:
        sequential = "Sequential" in text and _INPLACE_LAYER_TEXT.search(text)
        if sequential and _sequential_may_break(screen.survey.calls, imports):
            return True
        return screen.may_break()
    finally:
        screen.survey.release()


def _sequential_may_break(calls: list[ast.Call], imports: dict[str, str]) -> bool:
    """`_Checker._sequential`: an `nn.Sequential` with a layer built in place right after one
    that saves its output."""
    for node in calls:
        if qualified_name(node.func, imports) != "torch.nn.Sequential":
            continue
        layers = [arg for arg in node.args if not isinstance(arg, ast.Starred)]
        for previous, layer in pairwise(layers):
            if not isinstance(previous, ast.Call) or not isinstance(layer, ast.Call):
                continue
            key = qualified_name(previous.func, imports)
            op = saved_ops.op_saving(key) if key is not None else None
            if _has_inplace_flag(layer) and op is not None and op.saves_output_when([True]):
                return True
    return False


class _Classes:
    """Union-find over `self.x` keys (and `<leaf>`), for the whole file."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, key: str) -> str:
        parent = self.parent.setdefault(key, key)
        while parent != key:
            grand = self.parent[parent]
            self.parent[key] = grand
            key, parent = parent, grand
        return key

    def union(self, keys: set[str]) -> None:
        roots = [self.find(key) for key in keys]
        for root in roots[1:]:
            if root != roots[0]:
                self.parent[root] = roots[0]

    def groups(self) -> dict[str, set[str]]:
        groups: dict[str, set[str]] = {}
        for key in self.parent:
            groups.setdefault(self.find(key), set()).add(key)
        return groups


class _Scan:
    """One scope's own nodes, in source order, with the statement each is in and the
    outermost loop of the scope whose body holds it. Nested functions, classes and lambdas
    are listed, not entered: they are scopes of their own."""

    def __init__(self, scope: _Scope, outer: _Scan | None) -> None:
        self.scope = scope
        self.outer = outer
        self.nodes: list[ast.AST] = []
        self.statement: dict[ast.AST, ast.stmt] = {}
        self.loop_of: dict[ast.AST, ast.stmt] = {}
        self.inner: list[_Scan] = []
        self.body: list[ast.stmt] = []
        self.flow: _Flow | None = None
        self.grad_off: set[ast.AST] = set()  # nodes a `with` block runs with grad mode off


class _Survey:
    """One walk over the file: every scope's nodes, the file's classes, functions and
    bindings, and the names each function's body reads."""

    def __init__(self, module: ast.Module, imports: dict[str, str]) -> None:
        self.imports = imports
        self.class_names: set[str] = set()
        self.reads: dict[str, set[str]] = {}  # function name -> names, `self.x` keys, `<leaf>`
        self.bindings: list[ast.AST] = []
        self.binding_scan: dict[ast.AST, _Scan] = {}  # a binding -> its scope's scan
        # Statements whose own expressions (a lambda's included) hold a `:=` or comprehension.
        self.inner_binders: set[ast.stmt] = set()
        self.calls: list[ast.Call] = []
        self.function_scans: dict[str, list[_Scan]] = {}  # a def's name -> its scans
        self.imported: set[str] = set()  # names an import binds, in any scope
        self.assigned: set[str] = set()  # names anything else binds, in any scope
        self.root = self._scope(module, None, [])
        self.bound_names = self.imported | self.assigned
        # Names bound by imports only: another package's callables, which provenance does not
        # follow.
        self.imported_only = self.imported - self.assigned

    def release(self) -> None:
        """Unlink the scans (each links its inner scopes, its outer one and its flow, which
        links the screen): reference counting then frees them and the file's `ast` tree at
        once, where the cyclic collector would traverse the whole tree first."""
        pending = [self.root]
        while pending:
            scan = pending.pop()
            pending.extend(scan.inner)
            scan.inner, scan.outer, scan.flow = [], None, None

    def _scope(
        self,
        scope: _Scope,
        outer: _Scan | None,
        functions: list[set[str]],
        enclosing: tuple[ast.stmt, ...] = (),
    ) -> _Scan:
        """Pre-order over the scope's own nodes, iteratively: the screen's largest walk, so
        classes are tested by `is` and set membership, and fields read from a table. A
        definition's decorators, defaults and bases belong to the scope it is in, which
        evaluates them. `enclosing`: the statements a lambda's body is part of."""
        scan = _Scan(scope, outer)
        inner_binders = self.inner_binders
        body = [ast.Expr(scope.body)] if isinstance(scope, ast.Lambda) else scope.body
        scan.body = body
        nodes, statement_of, loop_of = scan.nodes, scan.statement, scan.loop_of
        bindings, binding_scan = self.bindings, self.binding_scan
        imported, assigned, calls = self.imported, self.assigned, self.calls
        # Each node, with its statement, the outermost loop around it and whether a `with`
        # block of the scope turns grad mode off around it.
        pending: list[tuple[ast.AST, ast.stmt, ast.stmt | None, bool]] = [
            (s, s, None, False) for s in reversed(body)
        ]
        grad_off = scan.grad_off
        while pending:
            node, statement, outer_loop, off = pending.pop()
            nodes.append(node)
            statement_of[node] = statement
            if outer_loop is not None:
                loop_of[node] = outer_loop
            if off:
                grad_off.add(node)
            kind = type(node)
            if kind in _SCOPE_KINDS:
                inner_functions = functions
                lambda_of: tuple[ast.stmt, ...] = ()
                if kind is ast.ClassDef:
                    self.class_names.add(node.name)  # type: ignore[attr-defined]
                elif kind is not ast.Lambda:
                    reads = self.reads.setdefault(node.name, set())  # type: ignore[attr-defined]
                    inner_functions = [*functions, reads]
                else:
                    lambda_of = (*enclosing, statement)
                if kind is not ast.Lambda:
                    assigned.add(node.name)  # type: ignore[attr-defined]
                inner = self._scope(node, scan, inner_functions, lambda_of)  # type: ignore[arg-type]
                scan.inner.append(inner)
                if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                    self.function_scans.setdefault(node.name, []).append(inner)  # type: ignore[attr-defined]
                header = [
                    (child, statement, outer_loop, off)
                    for field in ast_fields(kind)
                    if field != "body"
                    for value in (getattr(node, field, None),)
                    for child in (value if type(value) is list else [value])
                    if isinstance(child, ast.AST)
                ]
                pending.extend(reversed(header))
                continue
            if kind is ast.Name:
                if functions:
                    for names in functions:
                        names.add(node.id)  # type: ignore[attr-defined]
                if type(node.ctx) is not ast.Load:  # type: ignore[attr-defined]
                    assigned.add(node.id)  # type: ignore[attr-defined]
            elif kind is ast.Attribute:
                key = _self_key(node) if functions else None
                if key is not None:
                    for names in functions:
                        names.add(key)
            elif kind is ast.Call:
                calls.append(node)  # type: ignore[arg-type]
                if functions and _makes_leaf(node):  # type: ignore[arg-type]
                    for names in functions:
                        names.add(_LEAF)
            elif kind is ast.arg:
                assigned.add(node.arg)  # type: ignore[attr-defined]
            elif kind is ast.alias:
                imported.add(node.asname or node.name.split(".")[0])  # type: ignore[attr-defined]
            if kind in _BINDING_KINDS:
                bindings.append(node)
                binding_scan[node] = scan
                if kind is ast.NamedExpr or kind is ast.comprehension:
                    inner_binders.add(statement)
                    inner_binders.update(enclosing)
            loop = kind in _LOOP_KINDS
            body_off = off
            if kind is ast.With or kind is ast.AsyncWith:
                body_off = not grad_inside(node, not off, self.imports)  # type: ignore[arg-type]
            # Children pushed last field first, each list backwards: popped in source order.
            for field in _REVERSED_FIELDS.get(kind) or _reversed_fields(kind):
                value = getattr(node, field, None)
                inside = outer_loop
                if inside is None and loop and field == "body":
                    inside = node  # type: ignore[assignment]
                child_off = body_off if field == "body" else off
                if type(value) is list:
                    for child in reversed(value):
                        if isinstance(child, ast.AST):
                            here = child if type(child) in _STATEMENT_KINDS else statement
                            pending.append((child, here, inside, child_off))  # type: ignore[arg-type]
                elif isinstance(value, ast.AST):
                    here = value if type(value) in _STATEMENT_KINDS else statement
                    pending.append((value, here, inside, child_off))  # type: ignore[arg-type]
        return scan


def ast_fields(kind: type) -> tuple[str, ...]:
    fields = _AST_FIELDS.get(kind)
    if fields is None:
        fields = _AST_FIELDS[kind] = tuple(
            name
            for name in kind._fields  # type: ignore[attr-defined]
            if name not in _OPERATOR_FIELDS
        )
    return fields


def _reversed_fields(kind: type) -> tuple[str, ...]:
    fields = _REVERSED_FIELDS[kind] = tuple(reversed(ast_fields(kind)))
    return fields


def reversed_fields(kind: type) -> tuple[str, ...]:
    """`ast_fields`, last first: a walk that pushes children on a stack pops them in order."""
    return _REVERSED_FIELDS.get(kind) or _reversed_fields(kind)


def _subclasses(base: type) -> frozenset[type]:
    found: set[type] = set()
    pending = [base]
    while pending:
        kind = pending.pop()
        found.add(kind)
        pending.extend(kind.__subclasses__())
    return frozenset(found)


_AST_FIELDS: dict[type, tuple[str, ...]] = {}
_REVERSED_FIELDS: dict[type, tuple[str, ...]] = {}
_STATEMENT_KINDS = _subclasses(ast.stmt)
_SCOPE_KINDS = frozenset(_SCOPES)
_BINDING_KINDS = frozenset(_BINDING_NODES)
_LOOP_KINDS = frozenset({ast.For, ast.AsyncFor, ast.While})
# The statements `_Flow._loop` versions every name they bind in.
_REBINDING_BLOCKS = frozenset({ast.For, ast.AsyncFor, ast.While, ast.Try, ast.TryStar})


class _InplaceScreen:
    def __init__(self, module: ast.Module, imports: dict[str, str], text: str) -> None:
        self.imports = imports
        self.inplace_layers = bool(_INPLACE_LAYER_TEXT.search(text))
        self.survey = survey = _Survey(module, imports)
        self.function_names = set(survey.reads)
        self._computing: dict[str, bool] = {}  # `_computes`, once per name
        self.class_names = survey.class_names
        module_names = {
            name.id
            for statement in module.body
            for targets, _ in _bindings(statement)
            for target in targets
            for name in ast.walk(target)
            if isinstance(name, ast.Name)
        }
        # What a call of one of the file's functions or methods may return (provenance follows
        # them): the `self.x` keys and module globals its body names, and a leaf it makes.
        self.returns = {
            name: {k for k in reads if k[:5] == "self." or k == _LEAF or k in module_names}
            for name, reads in survey.reads.items()
        }
        # Names and attributes bound (anywhere) to a module whose call may save: one of the
        # table's, a container of layers, or a class of the file (followed into `forward`).
        self.saving_modules: set[str] = set()
        # Of those, the ones that may save their output (`nn.Sigmoid()`, `nn.ReLU()`, a class
        # or container of the file).
        self.output_modules: set[str] = set()
        # Names only ever bound to a module whose output provenance takes as new storage: a
        # layer of torch's, or what another package's callable built.
        self.fresh_layers: set[str] = set()
        # ...and the `self` attributes only ever assigned one by `self.x = ...` (provenance
        # finds the module of `self.x(...)` among its class's `self.x` assignments, whatever
        # `a.b.x = ...` assigns elsewhere).
        self.self_fresh_layers: set[str] = set()
        other_modules: set[str] = set()
        other_self_modules: set[str] = set()
        # Every attribute name the file binds (`self.softmax = ...`, `a.b.norm = ...`): a call
        # of one may be a module's, whatever tensor method it is named like.
        self.bound_attributes: set[str] = set()
        attribute_bindings = []
        for node in survey.bindings:
            for targets, value in _bindings(node):
                stored_attributes = [
                    inner
                    for target in targets
                    for inner in ast.walk(target)
                    if type(inner) is ast.Attribute and type(inner.ctx) is ast.Store
                ]
                self.bound_attributes.update(inner.attr for inner in stored_attributes)
                identifiers = {_identifier(target) for target in targets}
                attributes = {key[5:] for key in map(_self_key, targets) if key}
                if isinstance(value, ast.Call) and self._builds_saving_module(value):
                    self.saving_modules |= identifiers
                    if self._builds_output_saving_module(value):
                        self.output_modules |= identifiers
                if isinstance(value, ast.Call) and self._builds_fresh_layer(value):
                    self.fresh_layers |= identifiers
                    self.self_fresh_layers |= attributes
                else:
                    other_modules |= identifiers
                    other_self_modules |= attributes
                keys = {k for k in map(_self_key, stored_attributes) if k}
                if keys:
                    attribute_bindings.append((keys, value))
        self.fresh_layers -= other_modules
        self.self_fresh_layers -= other_self_modules
        # The builtins `interpreter.builtin_call` types, unless the file binds their names.
        self.builtins = set(_BUILTIN_KINDS) - (
            survey.bound_names | set(imports) | self.function_names | self.class_names
        )
        # Module-level tables of modules with an entry built in place (`_inplace_table_entry`).
        self.inplace_tables = {
            target.id
            for statement in module.body
            for targets, table in _bindings(statement)
            if isinstance(table, ast.Dict)
            and any(isinstance(e, ast.Call) and _has_inplace_flag(e) for e in table.values)
            for target in targets
            if isinstance(target, ast.Name)
        }
        # What `_layer_call` may find a constructor through. Besides a table's entry,
        # `_Checker._inplace_flag` needs the called module's value to be a parameterless one
        # of torch's (`Kind.PASSTHROUGH`, which only a call of `nn.ReLU` and the like makes).
        passthrough = any(
            qualified_name(call.func, imports) in PARAMETERLESS_MODULES for call in survey.calls
        )
        self.layer_names: set[str] = set()
        self.layer_attributes: set[str] = set()
        for node in survey.bindings:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            if isinstance(value, ast.Call) and not (
                _has_inplace_flag(value) and self._may_build_passthrough(value)
            ):
                continue  # no `True` for `_flag_argument`, or no parameterless module built
            if isinstance(value, ast.Subscript) and not self._inplace_table(value.value):
                continue
            if not isinstance(value, ast.Subscript) and not passthrough:
                continue
            for target in targets:
                if isinstance(target, ast.Name) and isinstance(value, _CONSTRUCTOR_PATHS):
                    self.layer_names.add(target.id)
                elif isinstance(target, ast.Attribute) and (
                    isinstance(value, (ast.Call, ast.Subscript))
                    or (isinstance(value, ast.Name) and self._passed_in(node, value.id))
                ):
                    self.layer_attributes.add(target.attr)
        # `self.x` keys joined by a binding anywhere in the file (provenance follows an
        # attribute to its bindings in other methods), with `<leaf>` for a leaf's.
        attributes = _Classes()
        for keys, value in attribute_bindings:
            linked = {k for k in self.aliases(value) if k[:5] == "self." or k == _LEAF}
            attributes.union(keys | linked)
        self.attribute_groups = {
            key: group for group in attributes.groups().values() for key in group
        }

    def may_break(self) -> bool:
        return self._scope_may_break(self.survey.root)

    def kind_of(self, value: ast.expr) -> str | None:
        """What kind of value `interpreter.value` gives `value` when it is no tensor: a
        number (a literal, `len(...)`, arithmetic on numbers), a dict or a list (a display,
        `dict(...)`, `list(...)`); None otherwise."""
        if isinstance(value, ast.Constant):
            return "number" if type(value.value) in (int, float, bool) else None
        if isinstance(value, ast.UnaryOp):
            if isinstance(value.op, ast.Not):
                return "number"
            return "number" if self.kind_of(value.operand) == "number" else None
        if isinstance(value, ast.BinOp) and not isinstance(value.op, ast.MatMult):
            numbers = self.kind_of(value.left) == self.kind_of(value.right) == "number"
            return "number" if numbers else None
        if isinstance(value, ast.Dict):
            return "dict"
        if isinstance(value, (ast.List, ast.ListComp, ast.GeneratorExp)):
            return "list"
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            builtin = value.func.id
            if builtin not in self.builtins:
                return None
            if builtin == "sorted" and not value.args and not value.keywords:
                return None  # `builtin_call` types `sorted` by its argument
            return _BUILTIN_KINDS[builtin]
        return None

    # -- scopes ---------------------------------------------------------------------------
    def _scope_may_break(self, scan: _Scan) -> bool:
        scope = scan.scope
        grad_off = isinstance(scope, _FUNCTIONS) and decorated_without_grad(scope, self.imports)
        writes = [] if grad_off else list(self._writes(scan))
        if writes:
            flow = self._flow(scan)
            # An op run with grad mode off saves nothing (`provenance._grad_of`).
            ops = [
                (op, flow.reach(self._op_names(op, scan, flow)))
                for op in scan.nodes
                if op not in scan.grad_off
                and self._saves(op, self._number_in(flow, flow.before[scan.statement[op]]))
            ]
            for call, target in writes:
                env = flow.before[scan.statement[call]]
                if isinstance(target, ast.Name) and flow.kind(target.id, env) is not None:
                    continue  # `_Checker.findings`: a number, dict or list is no tensor
                written = self._written(target, flow, env)
                if written is None:
                    return True
                if _LEAF in written and call not in scan.grad_off:
                    return True  # a leaf written with grad mode on (`_Checker._judge`)
                loop = scan.loop_of.get(call)
                for op, names in ops:
                    if op is call:
                        continue
                    # `_saved_until`: an op that does not run before the write saved what it
                    # writes only in the next iteration of a loop around both.
                    if not _runs_before(op, call) and (
                        loop is None or scan.loop_of.get(op) is not loop
                    ):
                        continue
                    if not names.isdisjoint(written):
                        return True
        return any(self._scope_may_break(inner) for inner in scan.inner)

    def _flow(self, scan: _Scan) -> _Flow:
        """The scope's versions of its names and their classes (computed once)."""
        if scan.flow is None:
            scan.flow = _Flow(self, scan)
        return scan.flow

    def _written(self, target: ast.expr, flow: _Flow, env: _Env) -> set[str] | None:
        """What the written tensor may share storage with; None when the screen cannot tell."""
        keys = self.aliases(target, env)
        if not keys:
            # `w.data[i] = v`, `p.grad.zero_()`: storage without history, which no op saved.
            # An op in the written expression (`x.sigmoid().mul_(2)`) may have saved it.
            ops = any(self._saves(node) for node in ast.walk(target))
            return None if ops else set()
        return flow.reach(keys)

    # -- writes -----------------------------------------------------------------------------
    def _writes(self, scan: _Scan) -> Iterator[tuple[ast.AST, ast.expr]]:
        """`_Checker._writes`: the writing node and the written expression."""
        for node in scan.nodes:
            kind = type(node)
            if kind is ast.Call:
                for written in self._call_writes(node):  # type: ignore[arg-type]
                    yield node, written
            elif kind is ast.AugAssign:
                target = node.target  # type: ignore[attr-defined]
                if isinstance(target, ast.Subscript):
                    if not _string_index(target):
                        yield node, target.value
                elif not isinstance(node.value, _DISPLAYS):  # type: ignore[attr-defined]
                    yield node, target
            elif kind is ast.Assign:
                for target in node.targets:  # type: ignore[attr-defined]
                    if isinstance(target, ast.Subscript) and not _string_index(target):
                        yield node, target.value

    def _call_writes(self, call: ast.Call) -> Iterator[ast.expr]:
        func = call.func
        positional = [arg for arg in call.args if not isinstance(arg, ast.Starred)]
        qualified = qualified_name(func, self.imports)
        if isinstance(func, ast.Attribute) and _writes_data(func.attr) and qualified is None:
            yield func.value
        if positional and (self._in_place_flag(call, qualified) or self._layer_call(call)):
            yield positional[0]
        out = next((k.value for k in call.keywords if k.arg == "out"), None)
        if out is not None:
            yield out

    def _in_place_flag(self, call: ast.Call, qualified: str | None) -> bool:
        """`inplace=True`, or `True` at the position the op table knows, passed to a functional
        (`_Checker._inplace_flag`): any other callee works in place only when the module it
        calls was built so (`_layer_call`)."""
        if qualified is None or not qualified.startswith("torch.nn.functional."):
            return False
        if any(k.arg == "inplace" and _is_true(k.value) for k in call.keywords):
            return True
        position = INPLACE_FLAG_POSITION.get(qualified or "")
        positional = [arg for arg in call.args if not isinstance(arg, ast.Starred)]
        return (
            position is not None and position < len(positional) and _is_true(positional[position])
        )

    def _layer_call(self, call: ast.Call) -> bool:
        """A call that may be of a module built with `inplace=True` (`_Checker._inplace_flag`,
        `_shared_inplace_entry`): provenance finds the module's constructor only through a
        name plainly assigned (`act = nn.ReLU(True)`, `act = self.act`), an attribute some
        class assigns (`self.act = nn.ReLU(inplace=True)`, `self.act = act`,
        `self.act = ACTS[name]`), or a lookup in a module-level table of the file
        (`ACTS[name](x)`) that has an entry built in place."""
        if not self.inplace_layers:
            return False
        func = call.func
        if isinstance(func, ast.Name):
            return func.id in self.layer_names
        if isinstance(func, ast.Attribute):
            return func.attr in self.layer_attributes
        return isinstance(func, ast.Subscript) and self._inplace_table(func.value)

    def _passed_in(self, binding: ast.AST, name: str) -> bool:
        """`self.act = act` in `__init__`: provenance finds the module the class's callers pass
        as that parameter (`_passed_constructor`), and the interpreter knows its value only
        from callers passing it by position (`_parameter_env`)."""
        scan = self.survey.binding_scan[binding]
        init = scan.scope
        owner = scan.outer.scope if scan.outer is not None else None
        if not isinstance(init, _FUNCTIONS) or init.name != "__init__":
            return False
        if not isinstance(owner, ast.ClassDef):
            return False
        params = [arg.arg for arg in (*init.args.posonlyargs, *init.args.args)]
        if name not in params[1:]:
            return False
        position = params.index(name) - 1
        return any(
            called_name(call) == owner.name
            and not any(isinstance(arg, ast.Starred) for arg in call.args)
            and len(call.args) > position
            for call in self.survey.calls
        )

    def _may_build_passthrough(self, call: ast.Call) -> bool:
        """Whether the call may give a parameterless module of torch's: it builds one, or the
        interpreter follows it into the file's own function, which may return one."""
        if qualified_name(call.func, self.imports) in PARAMETERLESS_MODULES:
            return True
        return called_name(call) in self.function_names

    def _inplace_table(self, table: ast.expr) -> bool:
        return isinstance(table, ast.Name) and table.id in self.inplace_tables

    # -- ops that may save -------------------------------------------------------------------
    def _saves(self, node: ast.AST, number: Callable[[ast.expr], bool] | None = None) -> bool:
        """Whether the node may be an op that saves a tensor (`_Checker._input_savers`,
        `_output_saver`): a saving op of the table, or a call provenance follows into.
        `number`: whether an operand is a Python number (default: as `kind_of` tells it)."""
        if isinstance(node, ast.BinOp):
            key = self._operator_key(node, number or self._is_number)
            return key in _INPUT_SAVING_KEYS or key in _OUTPUT_SAVING_KEYS
        return isinstance(node, ast.Call) and self._call_in(node, _SAVING_KEYS, self.saving_modules)

    def _is_number(self, operand: ast.expr) -> bool:
        return self.kind_of(operand) == "number"

    def _number_in(self, flow: _Flow, env: _Env) -> Callable[[ast.expr], bool]:
        """Whether an operand is a Python number where `env` holds, names included."""

        def number(operand: ast.expr) -> bool:
            if isinstance(operand, ast.Name):
                return flow.kind(operand.id, env) == "number"
            return self.kind_of(operand) == "number"

        return number

    def _operator_key(self, operation: ast.BinOp, number: Callable[[ast.expr], bool]) -> str | None:
        """The op table's key for an operator (`provenance._scalar_suffix`, `_table_key`):
        `operator.mul[scalar]` for `x * 2`, `[rscalar]` for `2 * x`; None for an operator the
        table does not know, and for arithmetic on numbers, which no graph records."""
        name = _OPERATOR_NAMES.get(type(operation.op))
        if name is None:
            return None
        key = f"operator.{name}"
        left, right = number(operation.left), number(operation.right)
        if left and right:
            return None
        suffix = "[scalar]" if right else "[rscalar]" if left else None
        if suffix is not None and saved_ops.op_saving(key + suffix) is not None:
            return key + suffix
        return key

    def _call_in(self, call: ast.Call, keys: frozenset[str], modules: set[str]) -> bool:
        """Whether the call may be an op of `keys` (the table's), a call of a module bound to
        a name of `modules`, or a call provenance follows into (the file's functions)."""
        func = call.func
        qualified = qualified_name(func, self.imports)
        if qualified is not None and qualified.startswith("torch."):
            # `provenance._torch_call`: `nn.Linear(...)` builds a module, it does not run one.
            return qualified in keys and not qualified.rsplit(".", 1)[-1][:1].isupper()
        if isinstance(func, ast.Name):
            return self._computes(func.id) or func.id in modules
        if isinstance(func, ast.Attribute):
            return (
                f"Tensor.{func.attr}" in keys
                or self._computes(func.attr)
                or func.attr in modules
                or func.attr == "forward"
            )
        if isinstance(func, ast.Subscript):
            return _identifier(func.value) in modules
        return True  # `self.get_embeddings()(ids)`: provenance may find the module

    def _computes(self, name: str) -> bool:
        """Whether a call of the file's function or method `name` may give what an op
        computed (provenance follows it to what it returns): not when every `return` of every
        function so named gives a constant, a class or module being built, or another
        package's result, which no op of the table saves."""
        known = self._computing.get(name)
        if known is None:
            self._computing[name] = False  # a recursion adds nothing
            known = self._computing[name] = any(
                self._returns_computed(scan) for scan in self.survey.function_scans.get(name, ())
            )
        return known

    def _returns_computed(self, scan: _Scan) -> bool:
        function = scan.scope
        assert isinstance(function, _FUNCTIONS)
        parameters = {arg.arg for arg in ast.walk(function.args) if isinstance(arg, ast.arg)}
        values: dict[str, list[ast.expr] | None] = {}  # a name -> what plain `=` binds it to
        for node in scan.nodes:
            if type(node) in (ast.Yield, ast.YieldFrom):
                return True
            if type(node) is ast.AugAssign:  # `h += r`: an operator's result (`_augmented`)
                values.update((n.id, None) for n in ast.walk(node.target) if type(n) is ast.Name)  # type: ignore[attr-defined]
            for targets, value in _bindings(node):
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name) and type(name.ctx) is ast.Store:
                            plain = type(node) in (ast.Assign, ast.AnnAssign) and target is name
                            known = values.get(name.id, [])
                            values[name.id] = (
                                [*known, value] if plain and known is not None else None
                            )
        returns = [node.value for node in scan.nodes if type(node) is ast.Return and node.value]  # type: ignore[attr-defined]
        return any(self._may_compute(value, parameters, values, set()) for value in returns)

    def _may_compute(
        self,
        value: ast.expr,
        parameters: set[str],
        values: dict[str, list[ast.expr] | None],
        seen: set[str],
    ) -> bool:
        """Whether `value`, returned by a function, may be what an op computed."""
        kind = type(value)
        if kind is ast.Constant or kind is ast.JoinedStr or kind is ast.Lambda:
            return False
        if kind is ast.Name:
            name = value.id  # type: ignore[attr-defined]
            if name in seen:
                return False
            bound = values.get(name)
            if name in parameters or bound is None:
                return True  # a parameter, or bound otherwise than by `=` (or not here)
            return any(self._may_compute(v, parameters, values, seen | {name}) for v in bound)
        if kind in (ast.Tuple, ast.List, ast.Set):
            return any(self._may_compute(v, parameters, values, seen) for v in value.elts)  # type: ignore[attr-defined]
        if kind is ast.IfExp:
            branches = (value.body, value.orelse)  # type: ignore[attr-defined]
            return any(self._may_compute(v, parameters, values, seen) for v in branches)
        if kind is not ast.Call:
            return True
        func = value.func  # type: ignore[attr-defined]
        qualified = qualified_name(func, self.imports)
        if qualified is not None and qualified.startswith("torch."):
            return not qualified.rsplit(".", 1)[-1][:1].isupper()  # a module is built
        if isinstance(func, ast.Name):
            # A class of the file is built; another package's function is followed nowhere.
            return func.id not in self.class_names and func.id not in self.survey.imported_only
        root = func
        while isinstance(root, ast.Attribute):
            root = root.value
        tensor_method = isinstance(func, ast.Attribute) and (
            f"Tensor.{func.attr}" in _OP_KEYS or func.attr in GRAPH_KEEPING_METHODS
        )
        return tensor_method or not (
            isinstance(root, ast.Name) and root.id in self.survey.imported_only
        )

    def _builds_saving_module(self, call: ast.Call) -> bool | None:
        """Whether the call builds a module whose call may save; None when it does not build
        a module of torch's or of the file."""
        func = call.func
        if isinstance(func, ast.Name) and func.id in self.class_names:
            return True
        qualified = qualified_name(func, self.imports)
        if qualified is None or not qualified.startswith("torch.nn."):
            return None
        if not qualified.rsplit(".", 1)[-1][:1].isupper():
            return None
        return qualified in _SAVING_KEYS or qualified in _CONTAINER_MODULES

    def _builds_output_saving_module(self, call: ast.Call) -> bool:
        qualified = qualified_name(call.func, self.imports)
        if qualified == "torch.nn.Sequential" and call.args:
            # `provenance._sequential`: its output is its last layer's (a view of the one
            # before when that layer is a view of the table's).
            last = call.args[-1]
            if not isinstance(last, ast.Call):
                return False  # a layer of unknown kind, which the table has no entry for
            key = qualified_name(last.func, self.imports)
            op = saved_ops.op_saving(key) if key is not None else None
            return key in _OUTPUT_SAVING_KEYS or (op is not None and op.view_of_input is not None)
        if qualified is None or qualified in _CONTAINER_MODULES:
            return True  # a class of the file, a container of layers
        return qualified in _OUTPUT_SAVING_KEYS

    def _builds_fresh_layer(self, call: ast.Call) -> bool:
        """A module whose output provenance takes as new storage: a layer of torch's
        (`nn.Linear(...)`; not a container, not a view of the table's such as `nn.Identity`,
        not built in place), or what another package's callable builds (`timm.create_model`,
        `from .layers import Block`): provenance does not follow its call, whose result is
        then a new value that no op of the table saves."""
        qualified = qualified_name(call.func, self.imports) or ""
        if not qualified.startswith("torch."):
            root = call.func
            while isinstance(root, ast.Attribute):
                root = root.value
            return isinstance(root, ast.Name) and root.id in self.survey.imported_only
        short = qualified.rsplit(".", 1)[-1]
        if not qualified.startswith("torch.nn.") or not short[:1].isupper():
            return False
        if qualified == "torch.nn.Sequential" and call.args:
            # `provenance._sequential`: one output per layer, the last one's unless it is a
            # view of the table's (a starred list of layers is one layer of unknown kind).
            last = call.args[-1]
            key = qualified_name(last.func, self.imports) if isinstance(last, ast.Call) else None
            op = saved_ops.op_saving(key) if key is not None else None
            return op is None or op.view_of_input is None
        if qualified in _CONTAINER_MODULES:
            return False
        op = saved_ops.op_saving(qualified)
        in_place = any(k.arg == "inplace" for k in call.keywords) or any(
            _is_true(arg) for arg in call.args
        )
        return (op is None or op.view_of_input is None) and not in_place

    # -- names ------------------------------------------------------------------------------
    def aliases(
        self, expression: ast.AST, env: _Env | None = None, passed: set[ast.AST] | None = None
    ) -> set[str]:
        """The names (their versions in `env`) and `self.x` keys whose storage the
        expression's value may share (as provenance follows it), with `<leaf>` when it may be
        a graph leaf. `passed` collects the subexpressions whose value it may be."""
        env = env or {}
        names: set[str] = set()
        stack: list[ast.AST] = [expression]
        while stack:
            node = stack.pop()
            if passed is not None:
                passed.add(node)
            if isinstance(node, ast.Name):
                if node.id != "self" and node.id not in self.imports:
                    names.add(env.get(node.id, node.id))
            elif isinstance(node, ast.Attribute):
                if node.attr in FREE_ATTRIBUTES:
                    continue  # `w.data`, `x.shape`: no history, storage of its own
                if node.attr in _LEAF_ATTRIBUTES:
                    names.add(_LEAF)
                key = _self_key(node)
                if key is not None:
                    names.add(key)
                else:
                    stack.append(node.value)
            elif isinstance(node, ast.Subscript):
                stack.append(node.value)  # a view; the index is not aliased
            elif isinstance(node, ast.Call):
                stack.extend(self._call_aliases(node, names))
            elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
                stack.append(node.elt)
            elif isinstance(node, ast.DictComp):
                stack.append(node.value)
            elif isinstance(node, ast.Dict):
                stack.extend(value for value in node.values if value is not None)
            elif isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.Lambda)):
                continue  # a new value
            elif isinstance(node, (ast.Constant, ast.JoinedStr)):
                continue
            else:  # tuples, lists, `a if c else b`, `a or b`, `x := v`, `*xs`, `await x`
                stack.extend(
                    child
                    for child in ast.iter_child_nodes(node)
                    if not isinstance(child, (ast.expr_context, ast.boolop))
                    and not (isinstance(node, ast.IfExp) and child is node.test)
                )
        return names

    def _call_aliases(self, call: ast.Call, names: set[str]) -> list[ast.AST]:
        """What a call's value may alias (`provenance._call`); adds the names it adds itself."""
        func = call.func
        arguments: list[ast.AST] = list(call.args) + [k.value for k in call.keywords]
        qualified = qualified_name(func, self.imports)
        if _makes_leaf(call):
            names.add(_LEAF)
        if qualified is not None:
            if self._in_place_flag(call, qualified):
                return call.args[:1]
            op = saved_ops.op_saving(qualified)
            viewed = op is not None and op.view_of_input is not None
            return list(call.args) if viewed else []
        if isinstance(func, ast.Name):
            if func.id in self.function_names:
                names |= self.returns[func.id]
                return arguments
            if func.id in _NOT_OPS and func.id not in _PASSING_BUILTINS:
                return []
            if func.id in self.fresh_layers:
                return []
            return arguments  # a builtin passing values, a module, a class, a callable
        if isinstance(func, ast.Attribute):
            method = func.attr
            names |= self.returns.get(method, set())
            layers = self.self_fresh_layers if _is_self(func.value) else self.fresh_layers
            if method in layers and method not in self.function_names:
                return []  # `self.fc(x)` with `self.fc = nn.Linear(...)`: new storage
            if _self_key(func) is not None or method in self.function_names:
                return arguments  # a module or a method of the file, followed inside
            op = saved_ops.op_saving(f"Tensor.{method}")
            if (op is not None and op.view_of_input is not None) or method in _ELEMENT_METHODS:
                return [func.value]
            if method == "forward" or (
                self.inplace_layers and isinstance(func.value, ast.Attribute)
            ):
                return arguments  # a module's forward; `self.layers.act(x)` built in place
            return []
        return [func, *arguments]  # `self.layers[i](x)`, `f()(x)`

    def _op_names(self, op: ast.AST, scan: _Scan, flow: _Flow) -> set[str]:
        """What an op reads (its inputs' aliases), and what its result is bound to when it
        may save its output."""
        statement = scan.statement[op]
        env = flow.before[statement]
        if isinstance(op, ast.Call):
            inputs: list[ast.AST] = list(op.args)
            if isinstance(op.func, ast.Attribute):
                inputs.insert(0, op.func.value)
            first = self._first_saved_input(op)
            inputs = [] if first is None else inputs[first:]
            names = set().union(*(self.aliases(i, env) for i in inputs)) if inputs else set()
            key = _self_key(op.func)
            if key is not None:
                names.add(key)  # `self.embed()`: a module's parameters, without an argument
        elif isinstance(op, ast.BinOp):
            names = set()
            if self._operator_key(op, self._number_in(flow, env)) in _INPUT_SAVING_KEYS:
                names = self.aliases(op.left, env) | self.aliases(op.right, env)
        else:
            names = self.aliases(op.operand, env)  # type: ignore[attr-defined]
        if self._saves_output(op, self._number_in(flow, env)) and flow.may_bind(op, statement):
            names |= flow.bound_by.get(statement, set())
        return names

    def _first_saved_input(self, call: ast.Call) -> int | None:
        """The first input (a method's receiver first, then the positional arguments) that the
        op may save, as the table tells it for its ops; None when it saves none of them
        (`x.sigmoid()` saves only its output). Numbers and strings are no positions for the
        table, so an argument's table position is at most its place here."""
        func = call.func
        qualified = qualified_name(func, self.imports)
        if any(isinstance(arg, ast.Starred) for arg in call.args):
            return 0
        if qualified is not None and qualified.startswith("torch."):
            first = _FIRST_SAVED_INPUT.get(qualified)
            return None if first is None else first + isinstance(func, ast.Attribute)
        if (
            isinstance(func, ast.Attribute)
            and f"Tensor.{func.attr}" in _SAVING_KEYS
            and not _is_self(func.value)
            and func.attr not in self.bound_attributes
            and func.attr not in self.function_names
        ):
            return _FIRST_SAVED_INPUT.get(f"Tensor.{func.attr}")
        return 0  # the file's function or module, or a call the table does not know

    def _saves_output(self, op: ast.AST, number: Callable[[ast.expr], bool] | None = None) -> bool:
        """Whether the op may save its own output (sigmoid, exp, softmax, an in-place ReLU
        layer), or is a call provenance follows into."""
        if isinstance(op, ast.BinOp):
            return self._operator_key(op, number or self._is_number) in _OUTPUT_SAVING_KEYS
        return isinstance(op, ast.Call) and self._call_in(
            op, _OUTPUT_SAVING_KEYS, self.output_modules
        )


class _Flow:
    """A scope's names, versioned where they are bound (as reaching bindings tell them
    apart), with what each version and `self.x` key may share storage with."""

    def __init__(self, screen: _InplaceScreen, scan: _Scan) -> None:
        self.screen = screen
        # Version or `self.x` key -> the keys it was bound from, whose storage it may share.
        self.links: dict[str, set[str]] = {}
        self._reach: dict[str, frozenset[str]] = {}
        # Stores into an object (`q[0] = y`, `self.h = y`, `xs += [y]`): what was stored into,
        # and what it then holds.
        self._stores: list[tuple[set[str], set[str]]] = []
        self.before: dict[ast.AST, _Env] = {}  # the versions each statement reads
        self.bound_by: dict[ast.AST, set[str]] = {}  # the versions a statement binds
        self.versions: dict[str, set[str]] = {}  # name -> its versions
        # What the interpreter knows a version holds when it is no tensor (`_kind_of`): from
        # its binding, or from the versions a branch or loop joins (None: one was unbound).
        self._kinds: dict[str, str | None] = {}
        self._joins: dict[str, list[str] | None] = {}
        self._resolved: dict[str, str | None] = {}
        self._passed: dict[ast.stmt, set[ast.AST]] = {}  # `may_bind`, once asked
        self._loop_names: dict[ast.stmt, set[str]] = {}  # `_bound_names`, once per loop
        self._count = 0
        self._run(scan.body, {})
        self._scan = scan
        for node in scan.nodes:
            if _appends(node):
                env = self.before[scan.statement[node]]
                func = node.func  # type: ignore[attr-defined]
                value = screen.aliases(node.args[0], env)  # type: ignore[attr-defined]
                self._store(screen.aliases(func.value, env), value)
        self._rebound: dict[str, str] | None = None  # `_rebound_in_place`, once asked
        mentioned = set(self.links).union(*self.links.values())
        for key in mentioned:
            if key[:5] == "self.":
                # Any `self.x` a binding of the file links to this one, either way.
                group = screen.attribute_groups.get(key, set())
                self._link({key}, group)
                self._link(group, {key})
            elif key not in self.versions and "@" not in key:
                # A name this scope never binds lives in an enclosing one (a closure, a global).
                outer = scan.outer
                while outer is not None:
                    outer_flow = screen._flow(outer)
                    if key in outer_flow.versions:
                        self._link({key}, outer_flow.reach(outer_flow.versions[key]))
                    outer = outer.outer
        self._spread_stores()

    def may_bind(self, op: ast.AST, statement: ast.stmt) -> bool:
        """Whether the statement may bind the op's own result (`y = torch.sigmoid(x)`, or a
        view of it), not only a value made from it (`y = conv(torch.relu(x))`)."""
        if not isinstance(statement, (ast.Assign, ast.AnnAssign)) or statement.value is None:
            return True
        passed = self._passed.get(statement)
        if passed is None:
            passed = self._passed[statement] = set()
            self.screen.aliases(statement.value, self.before[statement], passed)
        return op in passed

    def _store(self, stored: set[str], value: set[str]) -> None:
        self._link(stored, value)
        self._stores.append((stored, value))

    def _spread_stores(self) -> None:
        """What is stored into an object through one name is in it for every name of that
        object: after `q = p` and `q[0] = y`, `p[0]` may be `y` too. Each store links every key
        its container reaches to what it stored, until no store adds a link."""
        spreading = True
        while spreading:
            spreading = False
            for stored, value in self._stores:
                for key in set().union(*(self._walk(container) for container in stored)):
                    known = self.links.setdefault(key, set())
                    added = value - known - {key}
                    if added:
                        known |= added
                        spreading = True

    def _link(self, keys: set[str], sources: set[str]) -> None:
        """Each of `keys` may share the storage of each of `sources` (it was bound from them,
        holds them, or is one of them after a branch or loop)."""
        for key in keys:
            self.links.setdefault(key, set()).update(sources - {key})

    def reach(self, keys: set[str]) -> set[str]:
        """The keys whose storage one of `keys` may share: themselves, what they were bound
        from, and so on. Two expressions may share storage only when their keys reach a
        common key (a view of `x` and `x` itself both reach `x`; two views of `x` do too)."""
        reached: set[str] = set()
        for key in keys:
            known = self._reach.get(key)
            if known is None:
                known = self._reach[key] = frozenset(self._walk(key))
            reached |= known
        return reached

    def _walk(self, key: str) -> set[str]:
        seen = {key}
        pending = [key]
        links = self.links
        while pending:
            for source in links.get(pending.pop(), ()):
                if source not in seen:
                    seen.add(source)
                    pending.append(source)
        return seen

    # -- versions -----------------------------------------------------------------------
    def _new(self, name: str, joined: set[str]) -> str:
        self._count += 1
        version = f"{name}@{self._count}"
        self.versions.setdefault(name, set()).add(version)
        self._link({version}, joined)
        return version

    def kind(self, name: str, env: _Env) -> str | None:
        """`number`, `dict` or `list` when the interpreter's value of `name` where `env`
        holds is one (`_Checker.findings` then skips a write to it); None when it may be a
        tensor or the screen cannot tell."""
        version = env.get(name)
        if self._rebound is None:
            self._rebound = _rebound_in_place(self._scan, self.screen.kind_of)
        rebound = self._rebound.get(name)
        if version is None or rebound == "any":
            return None
        kind = self._kind(version, set())
        return None if rebound == "number" and kind != "number" else kind

    def _kind(self, version: str, visiting: set[str]) -> str | None:
        if version in self._resolved:
            return self._resolved[version]
        if version in self._kinds:
            return self._kinds[version]
        sources = self._joins.get(version)
        if sources is None:
            return None
        # A loop's entry joins versions its body makes from it: a cycle adds nothing.
        visiting = visiting | {version}
        kinds = {self._kind(source, visiting) for source in sources if source not in visiting}
        kind = kinds.pop() if len(kinds) == 1 else None
        if not visiting - {version}:
            self._resolved[version] = kind
        return kind

    def _bind(
        self,
        statement: ast.AST,
        target: ast.AST,
        value: set[str],
        env: _Env,
        expression: ast.expr | None = None,
    ) -> None:
        """Bind `target` (in place in `env`) to a value aliasing `value`; `expression`: what
        a plain `name = expression` assigns."""
        bound = self.bound_by.setdefault(statement, set())
        if isinstance(target, ast.Name):
            env[target.id] = version = self._new(target.id, value)
            self._kinds[version] = None if expression is None else self.screen.kind_of(expression)
            bound.add(version)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._bind(statement, element, value, env)
        elif isinstance(target, ast.Starred):
            self._bind(statement, target.value, value, env)
        elif not isinstance(target, ast.Subscript):
            # `self.x = v`, `a.b = v`: stored into what the target names. Provenance follows
            # no store by index (`a[i] = v`): an element comes out only of a list display
            # (`_literal`) or what `append` added (`_appended`).
            stored = self.screen.aliases(target, env)
            self._store(stored, value)
            bound |= {key for key in stored if key[:5] == "self."}

    def _run(self, body: list[ast.stmt], env: _Env) -> _Env:
        for statement in body:
            env = self._statement(statement, env)
        return env

    def _statement(self, node: ast.stmt, env: _Env) -> _Env:
        aliases = self.screen.aliases
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.Try, ast.TryStar)):
            return self._loop(node, env)
        self.before[node] = env
        self._inner_bindings(node, env)
        env = dict(env)
        if isinstance(node, ast.If):
            return self._merge([self._run(node.body, env), self._run(node.orelse, env)])
        if isinstance(node, ast.Match):
            branches = [self._run(case.body, self._case(node, case, env)) for case in node.cases]
            return self._merge([*branches, env])
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    self._bind(node, item.optional_vars, aliases(item.context_expr, env), env)
            return self._run(node.body, env)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._bind(node, ast.Name(node.name), set(), env)
            return env
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                self._bind(node, ast.Name(alias.asname or alias.name.split(".")[0]), set(), env)
            return env
        before = self.before[node]
        if isinstance(node, ast.Assign):
            value = aliases(node.value, before)
            for target in node.targets:
                self._bind(node, target, value, env, node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            self._bind(node, node.target, aliases(node.value, before), env, node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.value, _DISPLAYS):
            # `xs += [x]` extends in place; `h += r` keeps `h`'s own storage either way.
            self._store(aliases(node.target, before), aliases(node.value, before))
        return env

    def _inner_bindings(self, statement: ast.stmt, env: _Env) -> None:
        """`:=` and comprehension targets in what a statement evaluates, joined by name with
        what they are bound to."""
        if statement not in self.screen.survey.inner_binders:
            return
        aliases = self.screen.aliases
        for expression in _evaluated_first(statement):
            for inner in ast.walk(expression):
                if isinstance(inner, ast.NamedExpr):
                    target = aliases(inner.target, env)
                    self.bound_by.setdefault(statement, set()).update(target)
                    self._link(target, aliases(inner.value, env))
                elif isinstance(inner, ast.comprehension):
                    self._link(aliases(inner.target, env), aliases(inner.iter, env))

    def _case(self, node: ast.Match, case: ast.match_case, env: _Env) -> _Env:
        env = dict(env)
        subject = self.screen.aliases(node.subject, env)
        for pattern in ast.walk(case.pattern):
            name = getattr(pattern, "name", None) or getattr(pattern, "rest", None)
            if name:
                self._bind(node, ast.Name(name), subject, env)
        return env

    def _loop(self, node: ast.stmt, env: _Env) -> _Env:
        """A loop (or a `try`, whose handlers may start anywhere in its body): every name it
        binds has one version for the whole statement, joined with the one before it."""
        entry = dict(env)
        for name in sorted(_bound_names(node, self._loop_names)):
            entry[name] = self._new(name, {env[name]} if name in env else set())
            self._joins[entry[name]] = [env[name]] if name in env else None
        self.before[node] = entry if isinstance(node, (ast.While, ast.Try, ast.TryStar)) else env
        self._inner_bindings(node, self.before[node])
        inside = dict(entry)
        if isinstance(node, (ast.For, ast.AsyncFor)):
            self._bind(node, node.target, self.screen.aliases(node.iter, env), inside)
        parts: list[list[ast.stmt]] = [node.body]
        if isinstance(node, (ast.Try, ast.TryStar)):
            parts += [handler.body for handler in node.handlers] + [node.finalbody]
        parts.append(node.orelse)
        for part in parts:
            inside = self._run(part, inside)
        for name, version in inside.items():
            if name in entry and version != entry[name]:
                self._link({entry[name]}, {version})
                joined = self._joins.get(entry[name])
                if joined is not None:
                    joined.append(version)
        return entry

    def _merge(self, branches: list[_Env]) -> _Env:
        merged: _Env = {}
        for name in {name for branch in branches for name in branch}:
            versions = {branch[name] for branch in branches if name in branch}
            if len(versions) == 1 and all(name in branch for branch in branches):
                merged[name] = versions.pop()
            else:
                merged[name] = self._new(name, versions)
                # Unbound on some branch: the interpreter joins what it knows with UNKNOWN.
                bound_everywhere = all(name in branch for branch in branches)
                self._joins[merged[name]] = sorted(versions) if bound_everywhere else None
        return merged


def _rebound_in_place(scan: _Scan, kind_of: Callable[[ast.expr], str | None]) -> dict[str, str]:
    """Names of the scope whose values change without a new version, so that a version's
    kind may not hold: "number" for `n += 1` (the interpreter's number arithmetic keeps only
    a number a number), "any" for `:=`, comprehension and `except ... as` targets, `del`,
    `global` and `nonlocal`, and any other augmented assignment (`xs += ys`)."""
    rebound: dict[str, str] = {}
    for node in scan.nodes:
        names: list[str] = []
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if kind_of(node.value) == "number":
                rebound.setdefault(node.target.id, "number")
                continue
            names = [node.target.id]
        elif isinstance(node, (ast.NamedExpr, ast.comprehension, ast.Delete)):
            targets = [node.target] if not isinstance(node, ast.Delete) else node.targets
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names = [node.name]
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names = node.names
        for name in names:
            rebound[name] = "any"
    return rebound


def _evaluated_first(node: ast.stmt) -> list[ast.AST]:
    """What a statement evaluates itself, before (or apart from) the statements it holds: the
    whole of a simple statement, the test of an `if`, the iterable of a `for`."""
    if isinstance(node, (ast.If, ast.While)):
        return [node.test]
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [node.iter]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [item.context_expr for item in node.items]
    if isinstance(node, ast.Match):
        return [node.subject, *(case.guard for case in node.cases if case.guard is not None)]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(node.decorator_list)
    if isinstance(node, (ast.Try, ast.TryStar)):
        return []
    return [node]


def _bound_names(node: ast.stmt, known: dict[ast.stmt, set[str]]) -> set[str]:
    """The names a compound statement binds anywhere in its body (not in nested scopes).
    `known`: those of the loops and `try` statements already asked about, which the loops
    around them reuse."""
    names = known.get(node)
    if names is not None:
        return names
    names = set()
    stack: list[ast.AST] = [node]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is ast.Name:
            if type(current.ctx) is ast.Store:  # type: ignore[attr-defined]
                names.add(current.id)  # type: ignore[attr-defined]
            continue
        if kind in _SCOPE_KINDS:
            if kind is not ast.Lambda:
                names.add(current.name)  # type: ignore[attr-defined]
            continue
        if current is not node and kind in _REBINDING_BLOCKS:
            names |= _bound_names(current, known)  # type: ignore[arg-type]
            continue
        if kind is ast.alias:
            names.add(current.asname or current.name.split(".")[0])  # type: ignore[attr-defined]
        elif kind is ast.ExceptHandler and current.name:  # type: ignore[attr-defined]
            names.add(current.name)  # type: ignore[attr-defined]
        for field in reversed_fields(kind):
            value = getattr(current, field, None)
            if type(value) is list:
                stack.extend(child for child in value if isinstance(child, ast.AST))
            elif isinstance(value, ast.AST):
                stack.append(value)
    known[node] = names
    return names


def _bindings(node: ast.AST) -> Iterator[tuple[list[ast.expr], ast.AST]]:
    """What one node binds, and from what."""
    if isinstance(node, ast.Assign):
        yield node.targets, node.value
    elif isinstance(node, ast.AugAssign) and isinstance(node.value, _DISPLAYS):
        yield [node.target], node.value  # `xs += [x]`; `h += r` keeps `h`'s own storage
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        yield [node.target], node.value
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        yield [node.target], node.iter
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        yield [node.optional_vars], node.context_expr
    elif isinstance(node, ast.NamedExpr):
        yield [node.target], node.value


def _string_index(target: ast.Subscript) -> bool:
    """`gf004_inplace_on_saved._string_index`: `d["key"]`, an index no tensor takes."""
    index = target.slice
    return isinstance(index, ast.JoinedStr) or (
        isinstance(index, ast.Constant) and isinstance(index.value, (str, bytes))
    )


def _makes_leaf(call: ast.Call) -> bool:
    func = call.func
    callee = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if callee in _LEAF_CALLS:
        return True
    return any(k.arg == "requires_grad" and _is_true(k.value) for k in call.keywords)


def _identifier(node: ast.AST) -> str:
    """The last name of `x`, `self.x` or `a.b.x`."""
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _self_key(node: ast.AST) -> str | None:
    value = node.value if isinstance(node, ast.Attribute) else None
    if isinstance(value, ast.Name) and value.id == "self":
        return f"self.{node.attr}"  # type: ignore[union-attr]
    return None


def qualified_name(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """`imports.qualify`: the name a dotted expression spells through the imports."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(parts)])


def _writes_data(method: str) -> bool:
    """`gf004_inplace_on_saved._writes_data`."""
    return (
        method.endswith("_")
        and not method.startswith("_")
        and method not in NON_WRITING_UNDERSCORE_METHODS
    )


def _has_inplace_flag(call: ast.Call) -> bool:
    """`inplace=True`, or a literal `True` at any position (`nn.ReLU(True)`)."""
    return any(k.arg == "inplace" and _is_true(k.value) for k in call.keywords) or any(
        _is_true(arg) for arg in call.args
    )


def _is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def called_name(call: ast.Call) -> str | None:
    """`f` in `f(...)` and in `obj.f(...)`."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def decorated_without_grad(
    function: ast.FunctionDef | ast.AsyncFunctionDef, imports: dict[str, str]
) -> bool:
    """`@torch.no_grad()`, `@torch.inference_mode()` (`grad_disabled_by_decorator`)."""
    return any(
        disables_grad(qualified_name(d.func if isinstance(d, ast.Call) else d, imports))
        for d in function.decorator_list
    )


def grad_inside(statement: ast.With | ast.AsyncWith, grad: bool, imports: dict[str, str]) -> bool:
    """Grad mode in the body of a `with` (`interpreter.grad_mode_after`, item by item)."""
    for item in statement.items:
        context = item.context_expr
        callee = context.func if isinstance(context, ast.Call) else context
        name = qualified_name(callee, imports)
        if disables_grad(name):
            grad = False
        elif name in GRAD_ENABLING:
            grad = True
        elif name in SET_GRAD_ENABLED and isinstance(context, ast.Call) and context.args:
            flag = context.args[0]
            if isinstance(flag, ast.Constant) and type(flag.value) is bool:
                grad = flag.value
    return grad


def _appends(node: ast.AST) -> bool:
    """`xs.append(v)`: an element `provenance._appended` may take out of `xs` again."""
    return (
        type(node) is ast.Call
        and type(node.func) is ast.Attribute  # type: ignore[attr-defined]
        and node.func.attr == "append"  # type: ignore[attr-defined]
        and len(node.args) == 1  # type: ignore[attr-defined]
    )


def _runs_before(op: ast.AST, write: ast.AST) -> bool:
    """`_Checker._evaluated_before`, by position: the op ends before the write starts, or is
    one of its operands (the write's statement, or its call, contains it)."""
    start = (write.lineno, write.col_offset)  # type: ignore[attr-defined]
    op_end = (op.end_lineno, op.end_col_offset)  # type: ignore[attr-defined]
    if op_end <= start:
        return True
    op_start = (op.lineno, op.col_offset)  # type: ignore[attr-defined]
    return start <= op_start and op_end <= (write.end_lineno, write.end_col_offset)  # type: ignore[attr-defined]


def end_line(node: ast.AST) -> int:
    return getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
