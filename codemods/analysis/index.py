"""One pass over the tree that indexes what the analyses look up: each node's parent (and the
parent's field that holds it), the scopes (module, functions, methods), classes, and where
names and `self.x` attributes occur."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as _field
from itertools import islice, repeat

ScopeNode = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef
FUNCTION_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
LOOP_TYPES = (ast.For, ast.AsyncFor, ast.While)
# `try`, and `try` with `except*` where the running Python has it (3.11 on)
TRY_TYPES: tuple[type[ast.stmt], ...] = (ast.Try, *filter(None, [getattr(ast, "TryStar", None)]))
# What runs only on some paths through the code around it: a branch's arms, a `try`'s
# handlers (and, conservatively, its body), a `case`, an arm of a conditional expression.
BRANCH_TYPES: tuple[type[ast.AST], ...] = (ast.If, *TRY_TYPES, ast.Match, ast.IfExp)
Loop = ast.For | ast.AsyncFor | ast.While


class SubtreeEnds:
    """`end[node]`: the position after the last node of `node`'s subtree, found on the way
    down its last children to the rightmost leaf (whose end is its position plus one), and
    remembered for every node on that way. A list of every node's end cost a fifth of the
    index; a file asks it of a few nodes in a hundred."""

    __slots__ = ("_known", "_last_child", "_start")

    def __init__(self, start: dict[ast.AST, int], last_child: dict[ast.AST, ast.AST]) -> None:
        self._start = start
        self._last_child = last_child
        self._known: dict[ast.AST, int] = {}

    def __getitem__(self, node: ast.AST) -> int:
        known = self._known
        end = known.get(node)
        if end is not None:
            return end
        path = [node]
        last_child = self._last_child.get(node)
        while last_child is not None:
            end = known.get(last_child)
            if end is not None:
                break
            path.append(last_child)
            last_child = self._last_child.get(last_child)
        else:
            end = self._start[path[-1]] + 1  # KeyError for a node not in the tree
        for walked in path:
            known[walked] = end
        return end


class FieldOf:
    """`field[node]`, `field.get(node)`: the name of the parent's field that holds `node`,
    read from the parent's fields the first time one of its children is asked about (a
    file asks it of a few nodes in a thousand). The module, which has no parent, has none."""

    __slots__ = ("_known", "_parents")

    def __init__(self, parents: dict[ast.AST, ast.AST]) -> None:
        self._parents = parents
        self._known: dict[ast.AST, dict[ast.AST, str]] = {}

    def __getitem__(self, node: ast.AST) -> str:
        return self._fields(self._parents[node])[node]

    def get(self, node: ast.AST, default: str | None = None) -> str | None:
        parent = self._parents.get(node)
        return default if parent is None else self._fields(parent)[node]

    def _fields(self, parent: ast.AST) -> dict[ast.AST, str]:
        fields = self._known.get(parent)
        if fields is None:
            fields = self._known[parent] = {}
            for name in _fields_of(type(parent)):
                held = getattr(parent, name, None)
                for child in held if type(held) is list else (held,):
                    if isinstance(child, ast.AST):  # not a `None` (`{**d}`'s key)
                        fields[child] = name
        return fields


@dataclass
class ClassInfo:
    name: str
    node: ast.ClassDef
    bases: list[ast.expr]
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = _field(default_factory=dict)


# The node classes `of_types` answers for: those the analysis, the rules and the compile
# check ask about. Recording every node by its class cost a tenth of the index, a third of
# it for `Name`s that nothing asks for.
RECORDED_TYPES: frozenset[type[ast.AST]] = frozenset(
    {
        ast.Assign,
        ast.AugAssign,
        ast.Attribute,
        ast.BinOp,
        ast.Call,
        ast.Constant,
        ast.keyword,
        ast.arg,
        ast.Lambda,
        ast.NamedExpr,
        ast.ListComp,
        ast.SetComp,
        ast.GeneratorExp,
        ast.DictComp,
        ast.comprehension,
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.ClassDef,
        ast.For,
        ast.AsyncFor,
        ast.While,
        ast.With,
        ast.AsyncWith,
        ast.Try,
        ast.Match,
        ast.Return,
        ast.Break,
        ast.Continue,
        ast.Yield,
        ast.YieldFrom,
        ast.Await,
        ast.Starred,
        ast.ImportFrom,
        ast.Global,
        ast.Nonlocal,
        # `except*` (3.11 on) and `type X = ...` (3.12 on), where the running Python has them
        *filter(None, [getattr(ast, "TryStar", None), getattr(ast, "TypeAlias", None)]),
    }
)


@dataclass
class Index:
    parents: dict[ast.AST, ast.AST] = _field(default_factory=dict)
    # The name of the parent's field that holds each node but the module (`"body"`,
    # `"orelse"`, `"test"`, `"args"`, ...): with `parents`, a statement's block is
    # `(parent, field)`.
    field: FieldOf = _field(default_factory=lambda: FieldOf({}))
    # Pre-order position of each node, and the position after its last descendant: `a`
    # contains `b` when start[a] <= start[b] and end[b] <= end[a]; source order is start order.
    order: list[ast.AST] = _field(default_factory=list)  # every node, in source order
    start: dict[ast.AST, int] = _field(default_factory=dict)
    end: SubtreeEnds = _field(default_factory=lambda: SubtreeEnds({}, {}))
    # scope -> name -> its Name nodes in that scope (nested functions not included)
    names: dict[ScopeNode, dict[str, list[ast.Name]]] = _field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    # class name -> attribute -> `self.<attribute>` nodes in that class's methods
    self_attributes: dict[str, dict[str, list[ast.Attribute]]] = _field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    classes: dict[str, ClassInfo] = _field(default_factory=dict)
    # module level
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = _field(default_factory=dict)
    # method -> class name
    class_of: dict[ast.FunctionDef | ast.AsyncFunctionDef, str] = _field(default_factory=dict)
    enclosing_function: dict[ast.FunctionDef | ast.AsyncFunctionDef, ScopeNode] = _field(
        default_factory=dict
    )
    # callee name (function name, or method name for `x.name(...)`) -> calls
    calls_by_name: dict[str, list[ast.Call]] = _field(default_factory=lambda: defaultdict(list))
    # node class (of RECORDED_TYPES) -> its nodes, in source order: read by `of_types`
    by_type: dict[type, list[ast.AST]] = _field(
        default_factory=lambda: {kind: [] for kind in RECORDED_TYPES}
    )
    depth: int = 0  # of the deepest node; the module is at 0

    def of_types(self, *kinds: type[ast.AST]) -> list[ast.AST]:
        """The nodes of these (concrete) classes, in source order: what a rule looking for a
        few kinds of statements reads instead of every node of the file. A class not in
        RECORDED_TYPES is refused (KeyError), not answered with no nodes."""
        by_type = self.by_type
        if len(kinds) == 1:
            return by_type[kinds[0]]
        nodes = [node for kind in kinds for node in by_type[kind]]
        nodes.sort(key=self.start.__getitem__)
        return nodes


# Fields that never hold a node the index records: identifiers and flags (`Name.id`,
# `Attribute.attr`, `FunctionDef.name`, ...), and the contexts and operators CPython shares
# between all the nodes of a tree (one `ast.Load()`, one `ast.Add()`): they are not recorded.
_SKIPPED_FIELDS = frozenset(
    {
        "ctx",
        "op",
        "ops",
        "id",
        "attr",
        "name",
        "arg",
        "module",
        "level",
        "kind",
        "type_comment",
        "type_ignores",
        "conversion",
        "is_async",
        "simple",
        "asname",
        "tag",
        "kwd_attrs",
        "rest",
    }
)
# Children of a node, in source order.
Children = list[ast.AST]
# Per node class: the fields that may hold nodes, in source order (`_fields_of`), or a
# function that lists the children of the classes whose fields interleave in the source
# (None: not this time, the fields' order will do).
_FIELDS: dict[type, tuple[str, ...]] = {}
_SPECIAL: dict[type, Callable[[ast.AST], Children | None]] = {}


def _fields_of(kind: type) -> tuple[str, ...]:
    names = _FIELDS.get(kind)
    if names is None:
        names = tuple(name for name in kind._fields if name not in _SKIPPED_FIELDS)
        if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            # decorators come first in the source, then the header, then the body
            order = ("decorator_list", "type_params", "args", "bases", "keywords", "returns")
            names = tuple(n for n in order if n in names) + tuple(
                n for n in names if n not in order
            )
        elif kind is ast.IfExp:  # `body if test else orelse`
            names = ("body", "test", "orelse")
        elif kind in (ast.Constant, ast.MatchSingleton, ast.Global, ast.Nonlocal):
            # no node below (`Global.names` are strings)
            names = ()
        _FIELDS[kind] = names
    return names


def _dict_children(node: ast.Dict) -> Children:  # type: ignore[misc]
    """`{k: v, **d}`: keys and values interleaved (a `None` key stands for `**`)."""
    children: Children = []
    for key, value in zip(node.keys, node.values, strict=True):
        if key is not None:
            children.append(key)
        children.append(value)
    return children


def _match_mapping_children(node: ast.MatchMapping) -> Children:  # type: ignore[misc]
    """`case {k: pattern, **rest}`: keys and patterns interleaved."""
    children: Children = []
    for key, pattern in zip(node.keys, node.patterns, strict=True):
        children.append(key)
        children.append(pattern)
    return children


def _arguments_children(node: ast.arguments) -> Children:  # type: ignore[misc]
    """Parameters with their defaults after them, as the source writes them; the defaults
    align to the end of `posonlyargs + args`."""
    children: Children = []
    positional = [*node.posonlyargs, *node.args]
    first_default = len(positional) - len(node.defaults)
    for position, param in enumerate(positional):
        children.append(param)
        if position >= first_default:
            children.append(node.defaults[position - first_default])
    if node.vararg is not None:
        children.append(node.vararg)
    for param, default in zip(node.kwonlyargs, node.kw_defaults, strict=True):
        children.append(param)
        if default is not None:
            children.append(default)
    if node.kwarg is not None:
        children.append(node.kwarg)
    return children


def _call_children(node: ast.Call) -> Children | None:  # type: ignore[misc]
    """`f(a, k=1, *b)`: a keyword may come before a starred argument. None for the usual
    call, whose keywords all follow its positional arguments (field order is source order)."""
    args, keywords = node.args, node.keywords
    if not (args and keywords and _before(keywords[0], args[-1])):
        return None
    mixed: Children = [*args, *keywords]
    mixed.sort(key=lambda child: (child.lineno, child.col_offset))  # type: ignore[attr-defined]
    return [node.func, *mixed]


def _before(a: ast.AST, b: ast.AST) -> bool:
    return (a.lineno, a.col_offset) < (b.lineno, b.col_offset)  # type: ignore[attr-defined]


_SPECIAL[ast.Dict] = _dict_children  # type: ignore[assignment]
_SPECIAL[ast.MatchMapping] = _match_mapping_children  # type: ignore[assignment]
_SPECIAL[ast.arguments] = _arguments_children  # type: ignore[assignment]
_SPECIAL[ast.Call] = _call_children  # type: ignore[assignment]


class _Indexer:
    """Walks the tree by its fields, iteratively: `ast.walk` and `ast.NodeVisitor` neither
    give source order nor spare the recursion."""

    def __init__(self, module: ast.Module) -> None:
        self.index = Index()
        self.scopes: list[ScopeNode] = [module]
        self.classes: list[ClassInfo | None] = [None]

    def walk(self, root: ast.Module) -> None:
        """Pre-order, iteratively: deeply nested expressions must not hit the recursion limit.
        Nodes and their parents are kept in two lists while walking and made dicts at the
        end (in C); ends and fields are found when asked (`SubtreeEnds`, `FieldOf`): a model
        library has millions of nodes, and only scopes need a step on the way out."""
        index = self.index
        order = index.order
        record = order.append
        parent_nodes: list[ast.AST | None] = []
        record_parent = parent_nodes.append
        by_type = index.by_type
        AST = ast.AST
        # (node, its parent, its depth), or (None, what was entered, 0) to leave a scope.
        pending: list[tuple[ast.AST | None, ast.AST | str | None, int]] = [(root, None, 0)]
        deepest = 0
        pop, push, extend = pending.pop, pending.append, pending.extend
        names_of = index.names
        scopes = self.scopes
        names_here = names_of[root]  # those of the scope the walk is in
        plans = _PLANS
        # local: compared for every node
        Name, Constant, Attribute, Call = ast.Name, ast.Constant, ast.Attribute, ast.Call
        constants = by_type[Constant]
        classes = self.classes
        self_attributes = index.self_attributes
        calls_by_name = index.calls_by_name
        while pending:
            node, parent, depth = pop()
            if node is None:
                if parent == "function":
                    scopes.pop()
                    names_here = names_of[scopes[-1]]
                self.classes.pop()
                continue
            record(node)
            record_parent(parent)  # type: ignore[arg-type]
            if depth > deepest:
                deepest = depth
            kind = type(node)
            if kind is Name:
                # Every `Name` is a variable: parameters are `ast.arg`, and the names of
                # definitions, attributes, keywords and imports are plain strings.
                names_here[node.id].append(node)  # type: ignore[attr-defined]
                continue  # `ctx` is its only node, shared: nothing below
            if kind is Constant:
                constants.append(node)
                continue  # a leaf
            plan = plans.get(kind)
            if plan is None:
                plan = plans[kind] = _plan(kind)
            names, special, entering, recorded = plan
            if recorded:
                by_type[kind].append(node)
            if entering:
                # `x.attr` and calls, the most frequent, here; definitions in `enter`
                if kind is Attribute:
                    owner = classes[-1]
                    value = node.value  # type: ignore[attr-defined]
                    if owner is not None and type(value) is Name and value.id == "self":
                        self_attributes[owner.name][node.attr].append(node)  # type: ignore[attr-defined]
                elif kind is Call:
                    callee = node.func  # type: ignore[attr-defined]
                    if type(callee) is Name:
                        calls_by_name[callee.id].append(node)  # type: ignore[arg-type]
                    elif type(callee) is Attribute:
                        calls_by_name[callee.attr].append(node)  # type: ignore[arg-type]
                else:
                    entered = self.enter(node, parent)  # type: ignore[arg-type]
                    push((None, entered, 0))
                    if entered == "function":
                        names_here = names_of[node]
            depth += 1
            if special is not None:
                found = special(node)
                if found is not None:
                    found.reverse()
                    extend(zip(found, repeat(node), repeat(depth)))
                    continue
            # Children are pushed last first, so that they are popped in source order.
            for name in names:
                child = getattr(node, name, None)
                if child is None:
                    continue
                if type(child) is list:
                    if child:
                        extend(zip(reversed(child), repeat(node), repeat(depth)))
                elif isinstance(child, AST):
                    push((child, node, depth))
        index.start = dict(zip(order, range(len(order)), strict=True))
        # The module, first, has no parent.
        children, parents = islice(order, 1, None), islice(parent_nodes, 1, None)
        index.parents = dict(zip(children, parents, strict=True))
        # A parent's children come in source order: the last one stored for it is its last.
        children, parents = islice(order, 1, None), islice(parent_nodes, 1, None)
        last_child = dict(zip(parents, children, strict=True))
        index.end = SubtreeEnds(index.start, last_child)  # type: ignore[arg-type]
        index.field = FieldOf(index.parents)
        index.depth = deepest

    def enter(self, node: ast.AST, parent: ast.AST | None) -> str:
        """A definition: its scope (functions) or class is entered until the walk leaves it."""
        scope = self.scopes[-1]
        if type(node) is ast.ClassDef:
            info = ClassInfo(node.name, node, list(node.bases))  # type: ignore[attr-defined,arg-type]
            self.index.classes.setdefault(info.name, info)
            self.classes.append(info)
            return "class"
        self.index.enclosing_function[node] = scope  # type: ignore[index]
        owner = self.classes[-1]
        if owner is not None and parent is owner.node:  # in the class's body
            owner.methods.setdefault(node.name, node)  # type: ignore[attr-defined,arg-type]
            self.index.class_of[node] = owner.name  # type: ignore[index]
        elif type(scope) is ast.Module and owner is None:
            self.index.functions.setdefault(node.name, node)  # type: ignore[attr-defined,arg-type]
        self.scopes.append(node)  # type: ignore[arg-type]
        self.classes.append(owner)
        return "function"


_ENTERED = frozenset({ast.Attribute, ast.Call, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
# Per node class, what the walk does with its nodes: the fields to push (last first), the
# function that lists interleaved children, whether `enter` records it, whether `by_type`
# does. Looked up once per node.
_Plan = tuple[tuple[str, ...], Callable[[ast.AST], Children | None] | None, bool, bool]
_PLANS: dict[type, _Plan] = {}


def _plan(kind: type) -> _Plan:
    return (
        tuple(reversed(_fields_of(kind))),
        _SPECIAL.get(kind),
        kind in _ENTERED,
        kind in RECORDED_TYPES,
    )


def build_index(tree: ast.Module) -> Index:
    indexer = _Indexer(tree)
    indexer.walk(tree)
    _inherit_methods(indexer.index.classes)
    return indexer.index


def _inherit_methods(classes: dict[str, ClassInfo]) -> None:
    """Give each class the methods it inherits from the file's own classes (`class
    GanTrainer(BaseTrainer)` gets `BaseTrainer.__init__` unless it defines one): a call on an
    instance runs them. `class_of` still names the class that defines each method."""
    done: set[str] = set()
    for name in classes:
        _inherit(name, classes, done, frozenset())


def _inherit(
    name: str, classes: dict[str, ClassInfo], done: set[str], seen: frozenset[str]
) -> None:
    # A function of the module, not a closure that calls itself: that closure would be a
    # reference cycle holding the classes, so the whole tree, for the cyclic collector.
    if name in done or name in seen:
        return
    info = classes[name]
    for base in info.bases:
        if isinstance(base, ast.Name) and base.id in classes and base.id != name:
            _inherit(base.id, classes, done, seen | {name})
            for method, node in classes[base.id].methods.items():
                info.methods.setdefault(method, node)
    done.add(name)
