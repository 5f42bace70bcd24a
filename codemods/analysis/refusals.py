"""Whether CPython's compiler could refuse a tree its parser accepted.

A file that cannot run is reported, never analysed or rewritten. The parser finds most such
files; the compiler finds the rest (`return` outside a function, `break` outside a loop, a
keyword argument given twice, 21 nested blocks), and compiling a large tree costs nearly what
parsing it did. Every error the compiler of CPython 3.10 to 3.13 raises on a tree its parser
built is about one of the constructs below, so a tree with none of them compiles, and is not
compiled again to learn it (tests/test_syntax_check.py holds one refused file per error, and
checks every one in the test suites of those Pythons). Under any other Python every tree is
compiled.
"""

from __future__ import annotations

import ast
import sys
import unicodedata

from codemods.analysis.index import FUNCTION_TYPES, LOOP_TYPES, Index

# The compilers checked against their own test suites (tests/test_syntax_check.py).
CHECKED_PYTHON = (3, 10) <= sys.version_info[:2] <= (3, 13)

# Refused in some uses, and rare in model code: their presence is enough to compile.
# (`await`, `async for` and `async with` outside the function kinds that allow them, `global`
# and `nonlocal` conflicts, `match` patterns that bind a name twice or make later cases
# unreachable, `break` in an `except*` block.)
_RARE_RISKY = tuple(
    getattr(ast, name)
    for name in ("Await", "AsyncFor", "AsyncWith", "Global", "Nonlocal", "Match", "TryStar")
    if hasattr(ast, name)  # `except*` is 3.11's
)
# Every compiler error about a walrus is about one inside a comprehension (in a class body,
# in an iterable, rebinding an iteration variable); a `yield` is refused outside a function's
# body, in a comprehension, and is where an async function's `return` or `yield from` is.
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_YIELDS = (ast.Yield, ast.YieldFrom)
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# A tree deeper than a quarter of the recursion limit is compiled: the compiler of 3.10 and
# 3.11 checks it against that limit (`RecursionError` at about the limit's depth), where the
# parser, which built the tree, did not. (3.12 and 3.13 compile a source within a fixed limit
# of their own that their parser's is under.)
_DEPTH_SHARE = 4
# The compiler keeps at most 20 blocks (loops, `try`, `with` items) open in one function; a
# body nested in more than this many is compiled. Each `try` counts 3 (its body, a handler
# and its clean-up inside a `finally`), each `with` one per item, each loop 1.
_MOST_BLOCKS = 10
_UNITS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)
_BLOCKS = (ast.For, ast.While, ast.Try, ast.With)
_STARRED_LOAD_PARENTS = (ast.Call, ast.List, ast.Tuple, ast.Set)
_STAR_TARGETS = (ast.List, ast.Tuple)
# Features whose import the compiler accepts at the top of a file (`braces` and unknown names
# are refused; `barry_as_FLUFL` changes what the parser accepts).
_PLAIN_FUTURES = frozenset(
    {
        "nested_scopes",
        "generators",
        "division",
        "absolute_import",
        "with_statement",
        "print_function",
        "unicode_literals",
        "generator_stop",
        "annotations",
    }
)


def compiler_may_refuse(tree: ast.Module, index: Index, text: str) -> bool:
    """False only when the compiler certainly accepts `tree` (parsed from `text`)."""
    if not CHECKED_PYTHON or index.depth > sys.getrecursionlimit() // _DEPTH_SHARE:
        return True
    of_types = index.of_types
    if any(of_types(kind) for kind in _RARE_RISKY) or _has_type_parameters(index):
        return True
    return (
        _unencodable_docstring(tree, index)
        or any(_in_comprehension(node, index) for node in of_types(ast.NamedExpr))
        or any(_misplaced_yield(node, index) for kind in _YIELDS for node in of_types(kind))
        or _names_debug(text)
        or any(_misplaced_import(node, tree, index) for node in of_types(ast.ImportFrom))  # type: ignore[arg-type]
        or any(node.is_async for node in of_types(ast.comprehension))  # type: ignore[attr-defined]
        or any(
            not isinstance(_unit_of(node, index), FUNCTION_TYPES) for node in of_types(ast.Return)
        )
        or any(_outside_loop(node, index) for node in of_types(ast.Break))
        or any(_outside_loop(node, index) for node in of_types(ast.Continue))
        or any(_misplaced_star(node, index) for node in of_types(ast.Starred))  # type: ignore[arg-type]
        or any(_bare_except_not_last(node) for node in of_types(ast.Try))  # type: ignore[arg-type]
        or _repeated_name(ast.keyword, index)
        or _repeated_name(ast.arg, index)
        or _nested_too_deep(index)
    )


def _has_type_parameters(index: Index) -> bool:
    """Python 3.12's generics (`def f[T]()`, `type X = ...`): their parameters may repeat a
    name or follow a default, their bounds and aliases may not hold a walrus."""
    alias = getattr(ast, "TypeAlias", None)
    return (alias is not None and bool(index.of_types(alias))) or any(
        getattr(node, "type_params", None) for kind in _DEFINITIONS for node in index.of_types(kind)
    )


def _unencodable_docstring(tree: ast.Module, index: Index) -> bool:
    """A docstring with a lone surrogate (`"\\ud834"`): Python 3.13 compiles a docstring
    cleaned of its indentation, through UTF-8, and refuses it."""
    definitions = (node for kind in _DEFINITIONS for node in index.of_types(kind))
    for node in (tree, *definitions):
        body = node.body  # type: ignore[attr-defined]
        if body and _is_docstring(body[0]) and not body[0].value.value.isascii():
            try:
                body[0].value.value.encode()
            except UnicodeEncodeError:
                return True
    return False


def _in_comprehension(node: ast.AST, index: Index) -> bool:
    parents = index.parents
    parent = parents.get(node)
    while parent is not None:
        if isinstance(parent, _COMPREHENSIONS):
            return True
        parent = parents.get(parent)
    return False


def _misplaced_yield(node: ast.AST, index: Index) -> bool:
    """Anything but a `yield` in the body of a plain `def` (a lambda's or an async
    function's is left to the compiler)."""
    parents, fields = index.parents, index.field
    while True:
        parent = parents[node]  # the chain ends at the module, a unit
        if type(parent) is ast.FunctionDef:
            return fields[node] != "body"
        if isinstance(parent, (*_UNITS, *_COMPREHENSIONS)):
            return True
        node = parent


def _names_debug(text: str) -> bool:
    """`__debug__` assigned, deleted, imported or a parameter. Identifiers are read in NFKC
    (`__debug__` spelled with a fullwidth `d` is the same name), so a file with other
    than ASCII is searched in that form."""
    if text.isascii():
        return "__debug__" in text
    return "__debug__" in unicodedata.normalize("NFKC", text)


def _misplaced_import(node: ast.ImportFrom, tree: ast.Module, index: Index) -> bool:
    """`from m import *` inside a function or class; a `__future__` import the compiler does
    not know, or that is not at the top of the file."""
    if (
        any(alias.name == "*" for alias in node.names)
        and type(_unit_of(node, index)) is not ast.Module
    ):
        return True
    if node.module != "__future__" or node.level:
        return False
    if any(alias.name not in _PLAIN_FUTURES for alias in node.names):
        return True
    # only a docstring and other future imports may come before it, at the module's level
    for statement in tree.body:
        if statement is node:
            return False
        if type(statement) is ast.ImportFrom and statement.module == "__future__":
            continue
        if statement is tree.body[0] and _is_docstring(statement):
            continue
        return True
    return True  # not at the module's level


def _unit_of(node: ast.AST, index: Index) -> ast.AST:
    """The function, lambda, class or module whose code `node` compiles into: every node but
    the module has a parent, and the chain ends at the module."""
    parents = index.parents
    node = parents[node]
    while not isinstance(node, _UNITS):
        node = parents[node]
    return node


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        type(statement) is ast.Expr
        and type(statement.value) is ast.Constant
        and type(statement.value.value) is str
    )


def _outside_loop(node: ast.AST, index: Index) -> bool:
    """`break` / `continue` not in a loop's body (a loop's `else` is not in the loop)."""
    parents, fields = index.parents, index.field
    while True:
        parent = parents.get(node)
        if parent is None or isinstance(parent, _UNITS):
            return True
        if isinstance(parent, LOOP_TYPES) and fields[node] == "body":
            return False
        node = parent


def _misplaced_star(node: ast.Starred, index: Index) -> bool:
    """`*x` the compiler cannot place: an assignment target outside a list or tuple, a second
    one in a target, 256 targets before it, or a starred value outside a call or a display."""
    parent = index.parents[node]
    if type(node.ctx) is ast.Load:
        return not isinstance(parent, _STARRED_LOAD_PARENTS)
    if type(node.ctx) is ast.Store and isinstance(parent, _STAR_TARGETS):
        elements = parent.elts
        return len(elements) > 255 or sum(type(e) is ast.Starred for e in elements) > 1
    return True


def _bare_except_not_last(node: ast.Try) -> bool:
    return any(handler.type is None for handler in node.handlers[:-1])


def _repeated_name(kind: type[ast.keyword] | type[ast.arg], index: Index) -> bool:
    """A keyword argument named twice in one call or class header (`kind` `keyword`; `**kw`
    has no name), or a parameter name twice in one signature (`arg`, the star parameters
    included): the same name under the same parent. One pass over those nodes, not a
    function call per call and signature of a model library."""
    parents = index.parents
    named = [(parents[node], node.arg) for node in index.of_types(kind)]  # type: ignore[attr-defined]
    if kind is ast.keyword:
        named = [pair for pair in named if pair[1] is not None]
    return len(set(named)) < len(named)


def _nested_too_deep(index: Index) -> bool:
    """Whether some block sits inside more than `_MOST_BLOCKS` blocks of its function."""
    parents = index.parents
    for node in (node for kind in _BLOCKS for node in index.of_types(kind)):
        blocks = 0
        while node is not None and not isinstance(node, _UNITS):
            kind = type(node)
            if kind is ast.Try:
                blocks += 3
            elif kind is ast.With:
                blocks += len(node.items)  # type: ignore[attr-defined]
            elif kind is ast.For or kind is ast.While:
                blocks += 1
            node = parents.get(node)
        if blocks > _MOST_BLOCKS:
            return True
    return False
