"""One file's bytes in, findings and (in fix mode) new bytes out.

The flow for one file: a text pre-check for any evidence of an autograd graph, then each
selected rule's own cheap text pre-check; one parse with Python's `ast`, which CPython's
compiler also checks; the shared analysis, built once on that tree; the rules; suppressed
findings dropped; and only when a finding has a fix, LibCST (`codemods.rewrite`) to write it:
the fixes to apply in one transformer, the result re-parsed before it is handed back.
"""

from __future__ import annotations

import ast
import gc
import io
import sys
import tokenize
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from codemods.analysis import FileAnalysis, torch_api
from codemods.analysis.index import Index, build_index
from codemods.analysis.refusals import compiler_may_refuse
from codemods.findings import Edit, Finding, Tier
from codemods.rules import RULES, Rule, RuleFinding
from codemods.rules.base import Rewrite
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
    libcst_parsed: bool = False  # True when a fix to write made LibCST parse the file


# The analysis recurses once per nesting level (an `elif` chain, a chain of rebindings), and
# so does LibCST; generated files nest hundreds deep. Python frames cost no C stack since 3.11.
RECURSION_LIMIT = 20_000

# Fix rounds after the first: the rewritten file is checked again, and fixed again until a
# round changes nothing, so that one `gradfix fix` reaches what a second run would: a fix
# skipped because it overlapped another, and what a first fix uncovers (a second in-place
# write into a tensor whose first write's fix gave it storage of its own).
MAX_EXTRA_ROUNDS = 3


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while one file is parsed and analysed: its tree,
    index and values are hundreds of thousands of small objects that the collector would
    traverse again and again, though reference counting frees them. It runs again between
    files, and collects whatever cycles the analysis left."""
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
    cell), so the joined code is only parsed. `round_`: how many fix rounds ran before this
    one."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
    text = source.decode("utf-8", errors="replace")
    rules = [RULES[code] for code in sorted(options.select) if code in RULES]
    if torch_api.GRAPH_EVIDENCE.search(text):
        rules = [rule for rule in rules if rule.may_apply(text)]
    else:
        rules = []  # nothing here can be proven graph-attached
    if not rules:
        return SourceResult(error=None if notebook else syntax_error(source, text=text))
    decoded = source_text(source)
    if notebook:
        tree, error = parsed_tree(source)
        index = None
    else:
        tree, index, error = checked_tree(source, decoded)
    if error is not None or tree is None:
        # A file Python refuses is never rewritten; one in syntax newer than the running
        # Python's, which only LibCST reads, is not analysed.
        return SourceResult(error=error)
    analysis = FileAnalysis(tree, decoded, index)
    del tree, index
    try:
        return _report(source, analysis, rules, options, notebook, round_)
    finally:
        analysis.release()


def source_text(source: bytes) -> str:
    """The file's text as Python decodes it (its encoding declaration or BOM honoured), with
    the line endings it has: what the analysis's positions and quoted code are counted in."""
    try:
        text = source.decode(_encoding(source))
    except (LookupError, UnicodeDecodeError):
        text = source.decode("utf-8", errors="replace")
    return text.removeprefix("\ufeff")


def _encoding(source: bytes) -> str:
    """The file's encoding as Python reads it: `utf-8-sig` when it starts with a BOM."""
    try:
        return tokenize.detect_encoding(io.BytesIO(source).readline)[0]
    except SyntaxError:
        return "utf-8"


def encoded_as(source: bytes, text: str) -> bytes:
    """`text` in `source`'s encoding, with its BOM when it had one."""
    return text.encode(_encoding(source))


def _report(
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
    lines = analysis.lines
    result = SourceResult(parsed=True)
    kept = []
    for code, rule_finding in found:
        where = positions[rule_finding.node]
        if not is_suppressed(lines, where.start.line, where.end.line, code):
            kept.append((code, rule_finding))
    editor = None
    if any(_has_fix(f) for _, f in kept):
        from codemods.rewrite import SourceEditor  # LibCST: loaded only to write a fix

        editor = SourceEditor(analysis)
    to_apply: dict[ast.AST, Rewrite] = {}
    applied: list[RuleFinding] = []
    for code, rule_finding in kept:
        where = positions[rule_finding.node]
        edit: Edit | None = None
        if editor is not None and _has_fix(rule_finding):
            spans = [where, *(positions[node] for node in rule_finding.replacements)]
            edit = editor.edit(rule_finding.replacements, spans)
        finding = Finding(
            rule=code,
            line=where.start.line,
            column=where.start.column + 1,
            end_line=where.end.line,
            end_column=where.end.column + 1,
            message=rule_finding.message,
            tier=rule_finding.tier,
            edit=edit,
        )
        result.findings.append(finding)
        wanted = options.fix and _allowed(finding.tier, options) and edit is not None
        if wanted and not overlaps(rule_finding, applied, analysis):
            to_apply.update(rule_finding.replacements)
            applied.append(rule_finding)
            result.fixed.append(finding)
    result.findings.sort(key=lambda f: (f.line, f.column, f.rule))
    if to_apply and editor is not None:
        new_source = encoded_as(source, editor.rewritten(to_apply))
        try:
            ast.parse(new_source)
        except SyntaxError as error:  # a bug in a rule: never hand it back
            raise RuntimeError(f"gradfix produced code that does not parse: {error}") from error
        if new_source != source:
            result.new_source = new_source
    result.libcst_parsed = editor is not None and editor.libcst_parsed
    if result.new_source is not None and round_ < MAX_EXTRA_ROUNDS:
        again = process_source(result.new_source, options, notebook=notebook, round_=round_ + 1)
        if again.new_source is not None:
            result.new_source = again.new_source
            result.fixed.extend(again.fixed)  # at their positions in the intermediate file
    return result


def _has_fix(rule_finding: RuleFinding) -> bool:
    return bool(rule_finding.replacements) and rule_finding.tier is not Tier.REPORT


def overlaps(new: RuleFinding, taken: list[RuleFinding], analysis: FileAnalysis) -> bool:
    """Whether any node `new` replaces shares source text with one already being replaced."""
    return nodes_overlap(
        new.replacements, [other for finding in taken for other in finding.replacements], analysis
    )


def nodes_overlap(new: Iterable[ast.AST], taken: Iterable[ast.AST], analysis: FileAnalysis) -> bool:
    """Whether any node of `new` shares source text with any node of `taken`."""
    positions = analysis.positions
    taken_spans = [positions[other] for other in taken]
    for node in new:
        a = positions[node]
        for b in taken_spans:
            if (a.start.line, a.start.column) < (b.end.line, b.end.column) and (
                b.start.line,
                b.start.column,
            ) < (a.end.line, a.end.column):
                return True
    return False


def parsed_tree(source: bytes) -> tuple[ast.Module | None, str | None]:
    """A notebook's joined cells as one `ast` tree: each cell compiled on its own already."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source), None
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return None, f"1:1: parse error: {error}"


def checked_tree(source: bytes, text: str) -> tuple[ast.Module | None, Index | None, str | None]:
    """The file's `ast` tree and its index, for the analysis, and `syntax_error`'s verdict,
    from one parse (`text`: the source decoded). Python's compiler checks the tree its parser
    built, as compiling the source would, without parsing it a second time, and only when the
    tree holds something it could refuse (`refusals`). A file it refuses gets `syntax_error`'s
    own words."""
    refused = (SyntaxError, ValueError, RecursionError, MemoryError)
    with warnings.catch_warnings():  # the parser's and compiler's warnings are not ours
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(parser_input(source, text))
        except refused:
            return None, None, syntax_error(source)
        index = build_index(tree)
        try:
            if compiler_may_refuse(tree, index, text):
                compile(tree, "<file>", "exec", dont_inherit=True)
        except refused:
            return None, None, syntax_error(source)
    return tree, index, None


def syntax_error(
    source: bytes, *, top_level_await: bool = False, text: str | None = None
) -> str | None:
    """Why CPython refuses to compile the file, if it does: its parser (C, many times faster
    than LibCST) and its compiler, which also rejects what parses (more than 20 nested blocks,
    `return` outside a function). LibCST accepts some of that, and a file that cannot run is
    reported, not fixed; only syntax newer than the running Python's (which LibCST's grammar
    knows) is left to LibCST. `text`: the source decoded as UTF-8, when the caller has it
    (`parser_input`)."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if top_level_await else 0
    code = source if text is None else parser_input(source, text)
    try:
        with warnings.catch_warnings():  # the compiler's SyntaxWarnings are not ours to print
            warnings.simplefilter("ignore")
            compile(code, "<file>", "exec", flags=flags, dont_inherit=True)
    except SyntaxError as error:
        if _newer_syntax(source, error):
            return None
        line, column = error.lineno or 1, error.offset or 1
        return f"{line}:{column}: parse error: {error.msg}"
    except (ValueError, RecursionError, MemoryError) as error:  # NUL bytes, deep nesting
        return f"1:1: parse error: {error or type(error).__name__}"
    return None


def parser_input(source: bytes, text: str) -> str | bytes:
    """What CPython's parser is given for `source`, with `text` the source decoded as UTF-8
    (replacing what is not): the text when it is exactly what the parser would decode the
    bytes into (UTF-8 declared or implied, every byte valid), which spares the parser
    decoding and checking them again (about 6% of a parse, 3% of a compile); the bytes
    otherwise, so that the parser's own verdict on another encoding, or on a declaration or
    bytes it rejects, stands. A text source has its encoding declaration ignored."""
    if "\ufffd" in text:  # a byte that is not UTF-8 (or the character itself): the parser's call
        return source
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(source).readline)[0]
    except SyntaxError:  # a declaration the parser rejects too
        return source
    if encoding == "utf-8-sig":
        return text.removeprefix("\ufeff")
    return text if encoding == "utf-8" else source


def _newer_syntax(source: bytes, error: SyntaxError) -> bool:
    """Whether the grammar of the running Python rejects what LibCST's accepts (a 3.12 `def
    f[T]()` checked under 3.11), as opposed to a limit every CPython has or a compiler check."""
    if "too many" in error.msg or "null bytes" in error.msg:
        return False
    try:
        ast.parse(source)
    except SyntaxError:
        import libcst  # only here: a file the running Python cannot parse

        try:
            libcst.parse_module(source)
        except Exception:  # any failure: not a file LibCST reads either
            return False
        return True
    return False  # it parses: the compiler refused it


def _allowed(tier: Tier, options: RunOptions) -> bool:
    return tier is Tier.SAFE or (tier is Tier.UNSAFE and options.unsafe_fixes)
