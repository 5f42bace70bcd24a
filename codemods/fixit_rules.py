"""gradfix's rules as Fixit 2 lint rules, for projects that already run Fixit.

    [tool.fixit]
    enable = ["codemods.fixit_rules"]          # every gradfix rule
    enable = ["codemods.fixit_rules:GF001"]    # or one at a time

Each class is a thin adapter named after its rule's code, so that Fixit prints `GF001` and
`# lint-ignore: GF001` / `# lint-fixme: GF001` silence it. It runs the gradfix rule itself
(no second implementation): the shared analysis reads the `ast` tree of the module's code,
and each finding and fix is located on the very tree Fixit parsed by its source range
(`codemods.rewrite.CstFile`), so it reports what `gradfix check` reports; safe findings carry
the fix `gradfix fix` applies, unsafe and report-only ones carry none (as without `--unsafe-fixes`).

What the adapters enabled for one file share: one `FileAnalysis`, the same cheap text
pre-checks as `gradfix` (`GRAPH_EVIDENCE`, each rule's `may_apply`), and the choice of which
fixes to apply when two overlap, made across rules in gradfix's order. Fixit visits every
rule's `visit_Module` before any `leave_Module`, so the first adapter to leave knows every
adapter enabled for the file and does the work for all of them.

Fixit replaces exactly the node a violation is reported on. A fix that edits the finding's own
node is reported on it; a fix elsewhere (GF004 adds `.clone()` where an alias is bound) is
reported on the smallest node holding every edit, at the finding's position. A reported node's
replacement includes every other applied fix inside it, so that `fixit fix --automatic` writes
exactly what `gradfix fix` writes even when one reported node contains another.

gradfix's own settings (`[tool.gradfix]`) do not apply here: Fixit's `enable`/`disable`/
`overrides` choose the rules. gradfix's suppression comments (`# gradfix: ignore[GF001]`,
`# noqa: GF001`) are honoured as well as Fixit's.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import libcst as cst
from fixit import Invalid, LintRule, Valid
from libcst.metadata import CodeRange, ParentNodeProvider, PositionProvider

from codemods.analysis import FileAnalysis, torch_api
from codemods.findings import Tier
from codemods.pipeline import overlaps
from codemods.rewrite import CstFile, ReplaceNodes, cst_replacements
from codemods.rules import RULES, RuleFinding
from codemods.suppressions import is_suppressed

# The adapter mixin must not itself be a LintRule at runtime: Fixit collects every LintRule
# subclass it finds in this module as a rule.
_Base = LintRule if TYPE_CHECKING else object


@dataclass
class _Planned:
    finding: RuleFinding
    node: cst.CSTNode  # the finding's node in Fixit's tree
    replacements: dict[cst.CSTNode, cst.CSTNode]  # its fix, on Fixit's tree
    fixed: bool  # `gradfix fix` applies it: safe, and not overlapping an earlier fix


@dataclass
class _FileRun:
    """The adapters enabled for one file, and what gradfix found in it."""

    module: cst.Module
    adapters: dict[str, GradfixAdapter] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)  # adapters yet to leave the module
    planned: dict[str, list[_Planned]] | None = None  # by rule code, once computed
    applied: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)  # every fix applied


# One file at a time per thread (Fixit lints a file's rules together, files one after another
# or in separate processes); holding only the current run keeps no module alive for long.
_CURRENT = threading.local()


class GradfixAdapter(_Base):
    """Runs the gradfix rule named by the class (`class GF001(GradfixAdapter, LintRule)`)."""

    code: ClassVar[str]
    METADATA_DEPENDENCIES = (PositionProvider, ParentNodeProvider)
    VALID: ClassVar[list[str | Valid]] = []
    INVALID: ClassVar[list[str | Invalid]] = []
    _run: _FileRun | None = None  # the file being linted, between visit_ and leave_Module
    _reporting = False  # inside `report()`, see `ignore_lint`

    def __init_subclass__(cls, **kwargs: object) -> None:
        cls.code = cls.__name__  # Fixit's rule name, matched by `# lint-ignore: GF001`
        super().__init_subclass__(**kwargs)  # LintRule sets AUTOFIX from INVALID

    def visit_Module(self, node: cst.Module) -> None:
        run: _FileRun | None = getattr(_CURRENT, "run", None)
        if run is None or run.module is not node:
            run = _CURRENT.run = _FileRun(node)
        run.adapters[self.code] = self
        run.pending.add(self.code)
        self._run = run

    def leave_Module(self, original_node: cst.Module) -> None:
        run = self._run
        assert run is not None and run.module is original_node
        try:
            if run.planned is None:
                run.planned = _plan(run, self.metadata[PositionProvider])
            for planned in run.planned.get(self.code, ()):
                self._report(run, planned)
        finally:
            run.pending.discard(self.code)
            if not run.pending and getattr(_CURRENT, "run", None) is run:
                _CURRENT.run = None
            self._run = None

    def ignore_lint(self, node: cst.CSTNode) -> bool:
        # Asked by `_plan` about the finding's own node. `report()` asks again about the node it
        # replaces, which may be another statement: the finding's answer stands.
        return False if self._reporting else super().ignore_lint(node)

    def _report(self, run: _FileRun, planned: _Planned) -> None:
        node: cst.CSTNode = planned.node
        position = self.get_metadata(PositionProvider, node)
        replacement = None
        if planned.fixed:
            node = self._fixed_node(planned)
            replacement = node.visit(ReplaceNodes(run.applied))
        self._reporting = True
        try:
            self.report(node, planned.finding.message, position=position, replacement=replacement)
        finally:
            self._reporting = False

    def _fixed_node(self, planned: _Planned) -> cst.CSTNode:
        """The node to replace: the finding's own when it holds every edit, otherwise the
        smallest node that does."""
        chains = [self._ancestors(node) for node in planned.replacements]
        if all(planned.node in chain for chain in chains):
            return planned.node
        common = set(chains[0]).intersection(*chains[1:])
        return next(node for node in chains[0] if node in common)

    def _ancestors(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """`node`, its parent, ... up to the module."""
        parents = self.metadata[ParentNodeProvider]
        chain = [node]
        while node in parents:
            node = parents[node]
            chain.append(node)
        return chain


def _plan(run: _FileRun, positions: Mapping[cst.CSTNode, CodeRange]) -> dict[str, list[_Planned]]:
    """What `codemods.pipeline.process_source` reports and fixes in the module, for the rules
    of the adapters enabled here, in the same order and with the same checks."""
    text = run.module.code
    if not torch_api.GRAPH_EVIDENCE.search(text):
        return {}
    rules = [RULES[code] for code in sorted(run.adapters) if code in RULES]
    rules = [rule for rule in rules if rule.may_apply(text)]
    if not rules:
        return {}
    analysis = FileAnalysis(ast.parse(text), text)
    cst_file = CstFile(run.module, positions)
    planned: dict[str, list[_Planned]] = {}
    applied: list[RuleFinding] = []
    for rule in rules:
        adapter = run.adapters[rule.code]
        for finding in rule.check(analysis):
            where = analysis.positions[finding.node]
            if is_suppressed(analysis.lines, where.start.line, where.end.line, rule.code):
                continue
            node = cst_file.twin(finding.node, where)
            if adapter.ignore_lint(node):  # `# lint-ignore` / `# lint-fixme`
                continue
            fixed = (
                finding.tier is Tier.SAFE
                and bool(finding.replacements)
                and not overlaps(finding, applied, analysis)
            )
            replacements: dict[cst.CSTNode, cst.CSTNode] = {}
            if fixed:
                replacements = cst_replacements(cst_file, finding.replacements, analysis.positions)
                run.applied.update(replacements)
                applied.append(finding)
            planned.setdefault(rule.code, []).append(_Planned(finding, node, replacements, fixed))
    return planned


# -- the rules: one class each, named after the code; cases shortened from tests/fixtures --


class GF001(GradfixAdapter, LintRule):
    """accumulated-graph-loss: a graph-attached loss accumulated across loop iterations."""

    VALID: ClassVar[list[str | Valid]] = [
        Valid(  # fixtures/GF001/grad_accum_total_backward: the total is backpropagated
            """
            import torch
            from torch import nn

            model = nn.Linear(10, 2)
            criterion = nn.CrossEntropyLoss()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
            for step in range(3):
                optimizer.zero_grad()
                total = 0
                for k in range(4):
                    x, y = torch.randn(8, 10), torch.randint(0, 2, (8,))
                    total = total + criterion(model(x), y) / 4
                total.backward()
                optimizer.step()
            """
        ),
    ]
    INVALID: ClassVar[list[str | Invalid]] = [
        Invalid(  # fixtures/GF001/augassign_float_item: a float total, only printed
            """
            import torch
            from torch import nn

            model = nn.Linear(8, 1)
            criterion = nn.MSELoss()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
            running_loss = 0.0
            for step in range(4):
                x, y = torch.randn(16, 8), torch.randn(16, 1)
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                running_loss += loss
            print(running_loss / 4)
            """,
            expected_replacement="""
            import torch
            from torch import nn

            model = nn.Linear(8, 1)
            criterion = nn.MSELoss()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
            running_loss = 0.0
            for step in range(4):
                x, y = torch.randn(16, 8), torch.randn(16, 1)
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                running_loss += loss.item()
            print(running_loss / 4)
            """,
        ),
        Invalid(  # fixtures/GF001/tensor_zeros_acc_detach: a tensor total stays a tensor
            """
            import torch
            from torch import nn

            model = nn.Linear(5, 1)
            criterion = nn.L1Loss()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
            total_loss = torch.zeros(())
            for step in range(20):
                x = torch.randn(32, 5)
                loss = criterion(model(x), x.sum(dim=1, keepdim=True))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total_loss += loss
            print((total_loss / 20).item())
            """,
            expected_replacement="""
            import torch
            from torch import nn

            model = nn.Linear(5, 1)
            criterion = nn.L1Loss()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
            total_loss = torch.zeros(())
            for step in range(20):
                x = torch.randn(32, 5)
                loss = criterion(model(x), x.sum(dim=1, keepdim=True))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total_loss += loss.detach()
            print((total_loss / 20).item())
            """,
        ),
    ]


class GF002(GradfixAdapter, LintRule):
    """carried-graph-tensor: a graph-attached tensor carried into the next iteration."""

    VALID: ClassVar[list[str | Valid]] = [
        Valid(  # fixtures/GF002/hidden_reinit_each_batch: the state starts anew each batch
            """
            import torch
            from torch import nn

            gru = nn.GRU(6, 20, batch_first=True)
            head = nn.Linear(20, 3)
            optimizer = torch.optim.Adam([*gru.parameters(), *head.parameters()], lr=1e-3)
            criterion = nn.CrossEntropyLoss()
            batches = [(torch.randn(8, 12, 6), torch.randint(0, 3, (8,))) for _ in range(5)]
            for x, y in batches:
                hidden = torch.zeros(1, x.size(0), 20)
                out, hidden = gru(x, hidden)
                loss = criterion(head(hidden[-1]), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """
        ),
    ]
    INVALID: ClassVar[list[str | Invalid]] = [
        Invalid(  # fixtures/GF002/lstm_hidden_tuple: the (h, c) tuple carried across windows
            """
            import torch
            from torch import nn

            lstm = nn.LSTM(input_size=3, hidden_size=12, num_layers=2, batch_first=True)
            proj = nn.Linear(12, 3)
            optimizer = torch.optim.Adam([*lstm.parameters(), *proj.parameters()], lr=5e-3)
            criterion = nn.SmoothL1Loss()
            readings = torch.randn(2, 41, 3)
            hidden = (torch.zeros(2, 2, 12), torch.zeros(2, 2, 12))
            for start in range(0, 40, 8):
                window = readings[:, start : start + 8]
                nxt = readings[:, start + 1 : start + 9]
                out, hidden = lstm(window, hidden)
                loss = criterion(proj(out), nxt)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
            expected_replacement="""
            import torch
            from torch import nn

            lstm = nn.LSTM(input_size=3, hidden_size=12, num_layers=2, batch_first=True)
            proj = nn.Linear(12, 3)
            optimizer = torch.optim.Adam([*lstm.parameters(), *proj.parameters()], lr=5e-3)
            criterion = nn.SmoothL1Loss()
            readings = torch.randn(2, 41, 3)
            hidden = (torch.zeros(2, 2, 12), torch.zeros(2, 2, 12))
            for start in range(0, 40, 8):
                window = readings[:, start : start + 8]
                nxt = readings[:, start + 1 : start + 9]
                out, hidden = lstm(window, tuple(s.detach() for s in hidden))
                loss = criterion(proj(out), nxt)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
        ),
    ]


class GF003(GradfixAdapter, LintRule):
    """shared-graph-backward: a second backward through a graph already freed."""

    VALID: ClassVar[list[str | Valid]] = [
        Valid(  # fixtures/GF003/separate_forwards: each backward has its own forward pass
            """
            import torch
            from torch import nn

            model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
            criterion = nn.MSELoss()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            for step in range(4):
                x = torch.randn(16, 8)
                y = x.sum(dim=1, keepdim=True)
                first, second = x.chunk(2), y.chunk(2)
                optimizer.zero_grad()
                loss_a = criterion(model(first[0]), second[0])
                loss_a.backward()
                loss_b = criterion(model(first[1]), second[1])
                loss_b.backward()
                optimizer.step()
            """
        ),
    ]
    INVALID: ClassVar[list[str | Invalid]] = [
        Invalid(  # fixtures/GF003/two_slices_of_output: two losses read one forward pass
            """
            import torch
            import torch.nn.functional as F
            from torch import nn

            model = nn.Sequential(nn.Linear(5, 16), nn.SiLU(), nn.Linear(16, 2))
            optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
            for step in range(4):
                x = torch.randn(32, 5)
                out = model(x)
                optimizer.zero_grad()
                F.mse_loss(out[:, 0], x[:, 0]).backward()
                F.l1_loss(out[:, 1], x[:, 1]).backward()
                optimizer.step()
            """,
            expected_replacement="""
            import torch
            import torch.nn.functional as F
            from torch import nn

            model = nn.Sequential(nn.Linear(5, 16), nn.SiLU(), nn.Linear(16, 2))
            optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
            for step in range(4):
                x = torch.randn(32, 5)
                out = model(x)
                optimizer.zero_grad()
                F.mse_loss(out[:, 0], x[:, 0]).backward(retain_graph=True)
                F.l1_loss(out[:, 1], x[:, 1]).backward()
                optimizer.step()
            """,
        ),
        Invalid(  # fixtures/GF003/unknown_op_in_shared_part_report: reported, not rewritten
            """
            import torch
            from torch import nn

            prior_logits = nn.Parameter(torch.zeros(5))
            target = torch.softmax(torch.randn(5), dim=0)
            optimizer = torch.optim.SGD([prior_logits], lr=0.1)
            probs = torch.special.expit(prior_logits)
            entropy = -(probs * probs.log()).sum()
            divergence = (probs * (probs / target).log()).sum()
            optimizer.zero_grad()
            entropy.backward()
            divergence.backward()
            optimizer.step()
            """
        ),
    ]


class GF004(GradfixAdapter, LintRule):
    """inplace-on-saved-tensor: an in-place write to a tensor autograd saved for backward."""

    VALID: ClassVar[list[str | Valid]] = [
        Valid(  # fixtures/GF004/manual_sgd_under_no_grad: in-place updates under no_grad
            """
            import torch

            x = torch.randn(64, 3)
            y = (x @ torch.tensor([[1.0], [-2.0], [0.5]]) > 0).float()
            w = torch.zeros(3, 1, requires_grad=True)
            b = torch.zeros(1, requires_grad=True)
            for step in range(5):
                p = torch.sigmoid(x @ w + b)
                loss = -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()
                loss.backward()
                with torch.no_grad():
                    w -= 0.5 * w.grad
                    b.sub_(0.5 * b.grad)
                w.grad.zero_()
                b.grad.zero_()
            """
        ),
    ]
    INVALID: ClassVar[list[str | Invalid]] = [
        Invalid(  # fixtures/GF004/pseudo_label_detach_sharpen: the fix goes where it is bound
            """
            import torch
            from torch import nn

            model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            unlabeled = torch.randn(64, 8)
            for step in range(3):
                probs = torch.softmax(model(unlabeled), dim=1)
                targets = probs.detach()
                targets.pow_(2.0)
                targets /= targets.sum(dim=1, keepdim=True)
                loss = -(targets * torch.log(probs)).sum(dim=1).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
            expected_replacement="""
            import torch
            from torch import nn

            model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            unlabeled = torch.randn(64, 8)
            for step in range(3):
                probs = torch.softmax(model(unlabeled), dim=1)
                targets = probs.detach().clone()
                targets.pow_(2.0)
                targets /= targets.sum(dim=1, keepdim=True)
                loss = -(targets * torch.log(probs)).sum(dim=1).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
        ),
        Invalid(  # fixtures/GF004/leaf_weight_update_outside_no_grad: reported, not rewritten
            """
            import torch

            x = torch.randn(50, 4)
            y = x @ torch.tensor([[0.5], [-1.0], [2.0], [0.0]])
            w = torch.randn(4, 1, requires_grad=True)
            for step in range(5):
                loss = ((x @ w - y) ** 2).mean()
                loss.backward()
                w -= 0.1 * w.grad
                w.grad.zero_()
            """
        ),
    ]


ADAPTERS: dict[str, type[GradfixAdapter]] = {
    adapter.code: adapter for adapter in GradfixAdapter.__subclasses__()
}
"""Every adapter by rule code; `tests/test_fixit_rules.py` checks it matches `RULES`."""
