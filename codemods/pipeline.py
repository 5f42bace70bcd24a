"""One file's bytes in, findings and (in fix mode) new bytes out.

The flow for one file: a text pre-check for any evidence of an autograd graph, then each
selected rule's own cheap text pre-check; parse once; build the shared
analysis once; run the rules; drop suppressed findings; locate the rest; apply the allowed
fixes with one LibCST transformer; re-parse the result before handing it back.
"""

from __future__ import annotations

import ast
import gc
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import CodeRange

from codemods import cst_speedups, screen
from codemods.analysis import FileAnalysis, torch_api
from codemods.findings import Edit, Finding, Tier
from codemods.rules import RULES, Rule, RuleFinding
from codemods.suppressions import is_suppressed


@dataclass(frozen=True)
class RunOptions:
    select: frozenset[str]  # rule codes to run on this file
    fix: bool = False  # apply fixes (safe ones, and unsafe ones with unsafe_fixes)
    unsafe_fixes: bool = False


@dataclass
class SourceResult:
    findings: list[Finding] = field(default_factory=list)  # on the original source, unsuppressed
    fixed: list[Finding] = field(default_factory=list)  # those whose edit was applied
    new_source: bytes | None = None  # the rewritten file, when fix=True changed something
    error: str | None = None  # "LINE:COL: parse error: ..." when the file does not parse
    parsed: bool = False  # False when no rule's text pre-check matched


# LibCST and the analysis recurse once per nesting level (an `elif` chain, a chain of
# rebindings); generated files nest hundreds deep. Python frames cost no C stack since 3.11.
RECURSION_LIMIT = 20_000

# Fix rounds after the first: a fix skipped because it overlapped another is tried again on
# the rewritten file, so that one `gradfix fix` reaches what a second run would.
MAX_EXTRA_ROUNDS = 3


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while one file is parsed and analysed: its trees,
    indexes and values are hundreds of thousands of small objects that the collector would
    traverse again and again, though reference counting frees them (about 8% of the time on
    model code). It runs again between files, and collects whatever cycles the analysis left."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def process_source(
    source: bytes, options: RunOptions, *, notebook: bool = False, round_: int = 0
) -> SourceResult:
    with collector_paused():
        return _process_source(source, options, notebook=notebook, round_=round_)


def _process_source(
    source: bytes, options: RunOptions, *, notebook: bool, round_: int
) -> SourceResult:
    """`notebook`: the joined code cells of a notebook, each compile-checked on its own already
    (IPython compiles cell by cell: `await` at the top level, `from __future__` in a later
    cell), so the joined code is not. `round_`: how many fix rounds ran before this one."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
    text = source.decode("utf-8", errors="replace")
    rules = [RULES[code] for code in sorted(options.select) if code in RULES]
    if torch_api.GRAPH_EVIDENCE.search(text):
        rules = [rule for rule in rules if rule.may_apply(text)]
    else:
        rules = []  # nothing here can be proven graph-attached
    tree: ast.Module | None = None
    if notebook:
        error = None
    elif rules and screen.ENABLED:
        tree, error = checked_tree(source)  # the screens read the tree
    else:
        error = syntax_error(source)
    if error is not None or not rules:
        return SourceResult(error=error)  # a file Python refuses is never rewritten
    rules = screen.rules_wanted(source, text, rules, tree)
    del tree  # not needed past the screens: freed before LibCST builds its own tree
    if not rules:
        return SourceResult()
    try:
        module = cst_speedups.parse_module(source)
    except (cst.ParserSyntaxError, SyntaxError, UnicodeDecodeError, LookupError) as error:
        return SourceResult(error=_parse_error_text(source, error), parsed=True)

    analysis = FileAnalysis(module)
    try:
        return _report(module, source, analysis, rules, options, notebook, round_)
    finally:
        analysis.release()


def _report(
    module: cst.Module,
    source: bytes,
    analysis: FileAnalysis,
    rules: list[Rule],
    options: RunOptions,
    notebook: bool,
    round_: int,
) -> SourceResult:
    """The rules' findings on the analysed file, and (in fix mode) the file they fix."""
    found = [(rule.code, finding) for rule in rules for finding in rule.check(analysis)]
    if not found:
        return SourceResult(parsed=True)

    positions = analysis.positions
    lines = module.code.splitlines()
    result = SourceResult(parsed=True)
    to_apply: dict[cst.CSTNode, cst.CSTNode] = {}
    overlapped = False
    for code, rule_finding in found:
        where = positions[rule_finding.node]
        if is_suppressed(lines, where.start.line, where.end.line, code):
            continue
        finding = _finding(module, code, rule_finding, where, positions)
        result.findings.append(finding)
        wanted = options.fix and _allowed(finding.tier, options) and finding.edit is not None
        if wanted and not overlaps(rule_finding.replacements, to_apply, positions):
            to_apply.update(rule_finding.replacements)
            result.fixed.append(finding)
        elif wanted:
            overlapped = True
    result.findings.sort(key=lambda f: (f.line, f.column, f.rule))
    if to_apply:
        new_source = module.visit(ReplaceNodes(to_apply)).bytes
        try:
            cst.parse_module(new_source)
        except cst.ParserSyntaxError as error:  # a bug in a rule: never hand it back
            raise RuntimeError(f"gradfix produced code that does not parse: {error}") from error
        if new_source != source:
            result.new_source = new_source
    if overlapped and result.new_source is not None and round_ < MAX_EXTRA_ROUNDS:
        again = process_source(result.new_source, options, notebook=notebook, round_=round_ + 1)
        if again.new_source is not None:
            result.new_source = again.new_source
            result.fixed.extend(again.fixed)  # at their positions in the intermediate file
    return result


def checked_tree(source: bytes) -> tuple[ast.Module | None, str | None]:
    """The file's `ast` tree, for the screens, and `syntax_error`'s verdict, from one parse:
    Python's compiler checks the tree its parser built, as compiling the source would, without
    parsing it a second time. A file it refuses gets `syntax_error`'s own words."""
    try:
        with warnings.catch_warnings():  # the compiler's SyntaxWarnings are not ours to print
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
            compile(tree, "<file>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, syntax_error(source)
    return tree, None


def syntax_error(source: bytes, *, top_level_await: bool = False) -> str | None:
    """Why CPython refuses to compile the file, if it does: its parser (C, many times faster
    than LibCST) and its compiler, which also rejects what parses (more than 20 nested blocks,
    `return` outside a function). LibCST accepts some of that, and a file that cannot run is
    reported, not fixed; only syntax newer than the running Python's (which LibCST's grammar
    knows) is left to LibCST."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if top_level_await else 0
    try:
        with warnings.catch_warnings():  # the compiler's SyntaxWarnings are not ours to print
            warnings.simplefilter("ignore")
            compile(source, "<file>", "exec", flags=flags, dont_inherit=True)
    except SyntaxError as error:
        if _newer_syntax(source, error):
            return None
        line, column = error.lineno or 1, error.offset or 1
        return f"{line}:{column}: parse error: {error.msg}"
    except (ValueError, RecursionError, MemoryError) as error:  # NUL bytes, deep nesting
        return f"1:1: parse error: {error or type(error).__name__}"
    return None


def _newer_syntax(source: bytes, error: SyntaxError) -> bool:
    """Whether the grammar of the running Python rejects what LibCST's accepts (a 3.12 `def
    f[T]()` checked under 3.11), as opposed to a limit every CPython has or a compiler check."""
    if "too many" in error.msg or "null bytes" in error.msg:
        return False
    try:
        ast.parse(source)
    except SyntaxError:
        try:
            cst.parse_module(source)
        except Exception:  # any failure: not a file LibCST reads either
            return False
        return True
    return False  # it parses: the compiler refused it


def _parse_error_text(source: bytes, error: Exception) -> str:
    """`LINE:COL: parse error: what`, in Python's words when its parser agrees (they are
    clearer than LibCST's), else in LibCST's."""
    try:
        ast.parse(source)
    except SyntaxError as python_error:
        line, column = python_error.lineno or 1, python_error.offset or 1
        return f"{line}:{column}: parse error: {python_error.msg}"
    except ValueError:
        pass
    if isinstance(error, cst.ParserSyntaxError):
        return f"{error.raw_line}:{error.raw_column + 1}: parse error: {error.message}"
    return f"1:1: parse error: {error}"


def _allowed(tier: Tier, options: RunOptions) -> bool:
    return tier is Tier.SAFE or (tier is Tier.UNSAFE and options.unsafe_fixes)


def _finding(
    module: cst.Module,
    code: str,
    rule_finding: RuleFinding,
    where: CodeRange,
    positions: Mapping[cst.CSTNode, CodeRange],
) -> Finding:
    edit = None
    if rule_finding.replacements and rule_finding.tier is not Tier.REPORT:
        edit = _edit(module, rule_finding, where, positions)
    return Finding(
        rule=code,
        line=where.start.line,
        column=where.start.column + 1,
        end_line=where.end.line,
        end_column=where.end.column + 1,
        message=rule_finding.message,
        tier=rule_finding.tier,
        edit=edit,
    )


def _edit(
    module: cst.Module,
    rule_finding: RuleFinding,
    where: CodeRange,
    positions: Mapping[cst.CSTNode, CodeRange],
) -> Edit:
    """The finding's fix as one text edit: over the reported node when the replacements are
    inside it, else over the span from the first replaced or reported text to the last (a
    `.clone()` where a tensor is bound, reported at the write lines below)."""
    if _inside(rule_finding.node, rule_finding.replacements):
        replaced = rule_finding.node.visit(ReplaceNodes(rule_finding.replacements))
        text = module.code_for_node(replaced)
        return Edit(
            where.start.line, where.start.column + 1, where.end.line, where.end.column + 1, text
        )
    spans = [where, *(positions[node] for node in rule_finding.replacements)]
    start = min((span.start.line, span.start.column) for span in spans)
    end = max((span.end.line, span.end.column) for span in spans)
    old = module.code
    new = module.visit(ReplaceNodes(rule_finding.replacements)).code
    first, last = _offset(old, start), _offset(old, end)
    text = new[first : last + len(new) - len(old)]
    return Edit(start[0], start[1] + 1, end[0], end[1] + 1, text)


def _inside(node: cst.CSTNode, replaced: dict[cst.CSTNode, cst.CSTNode]) -> bool:
    """Whether every replaced node is `node` or one of its descendants."""
    found: set[cst.CSTNode] = set()

    class Collect(cst.CSTVisitor):
        def on_visit(self, visited: cst.CSTNode) -> bool:
            if visited in replaced:
                found.add(visited)
            return True

    node.visit(Collect())
    return len(found) == len(replaced)


def _offset(code: str, position: tuple[int, int]) -> int:
    """The index in `code` of a (1-based line, 0-based column) position."""
    line, column = position
    return sum(len(text) for text in code.splitlines(keepends=True)[: line - 1]) + column


def overlaps(
    new: dict[cst.CSTNode, cst.CSTNode],
    taken: dict[cst.CSTNode, cst.CSTNode],
    positions: Mapping[cst.CSTNode, CodeRange],
) -> bool:
    """Whether any node `new` replaces shares source text with one already being replaced."""
    for node in new:
        a = positions[node]
        for other in taken:
            b = positions[other]
            if (a.start.line, a.start.column) < (b.end.line, b.end.column) and (
                b.start.line,
                b.start.column,
            ) < (a.end.line, a.end.column):
                return True
    return False


class ReplaceNodes(cst.CSTTransformer):
    """Swap nodes, found by identity, for their replacements."""

    def __init__(self, replacements: dict[cst.CSTNode, cst.CSTNode]) -> None:
        self.replacements = replacements

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        return self.replacements.get(original_node, updated_node)
