"""Which module calls run once per training step, and which module classes compute without
weights (analysis/training.py, analysis/weights.py)."""

from __future__ import annotations

import ast
import textwrap

from codemods.analysis import FileAnalysis

_METRIC = """
import torch
from torch import nn

class Metric(nn.Module):
    def __init__(self):
        super().__init__()
        self.total = torch.zeros(())

    def forward(self, p, t):
        self.total = self.total + (p - t).abs().mean()
"""


def _analysis(body: str) -> FileAnalysis:
    source = textwrap.dedent(_METRIC) + textwrap.dedent(body)
    return FileAnalysis(ast.parse(source), source)


def _once(analysis: FileAnalysis, text: str) -> bool:
    (call,) = [
        node
        for node in analysis.index.of_types(ast.Call)
        if isinstance(node, ast.Call) and ast.unparse(node) == text
    ]
    return analysis.training.runs_once_per_step(call)  # type: ignore[arg-type]


_LOOP = """
net = nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
metrics = nn.ModuleDict({"a": Metric(), "b": Metric()})
for x, y in [(torch.randn(2, 3), torch.randn(2, 1))] * 3:
    out = net(x)
    out.sum().backward()
    opt.step()
"""


def test_an_entry_of_a_module_collection_runs_once_per_training_iteration() -> None:
    analysis = _analysis(_LOOP + "    for name, m in metrics.items():\n        m(out, y)\n")
    assert _once(analysis, "m(out, y)")


def test_a_loop_over_time_steps_inside_the_step_runs_it_several_times() -> None:
    analysis = _analysis(_LOOP + "    for t in range(2):\n        metrics['a'](out, y)\n")
    assert not _once(analysis, "metrics['a'](out, y)")


def test_a_comprehension_over_anything_but_module_entries_repeats_the_call() -> None:
    analysis = _analysis(_LOOP + "    vals = [metrics['a'](o, y) for o in (out, out)]\n")
    assert not _once(analysis, "metrics['a'](o, y)")


def test_a_training_step_method_called_by_a_trainer_loop_one_level_up() -> None:
    analysis = _analysis(
        """
        class Lit(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(3, 1)
                self.metric = Metric()
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

            def training_step(self, x, y):
                out = self.net(x)
                out.sum().backward()
                self.opt.step()
                self.metric(out, y)

        def fit(model, batches):
            for x, y in batches:
                model.training_step(x, y)

        fit(Lit(), [(torch.randn(2, 3), torch.randn(2, 1))])
        """
    )
    assert _once(analysis, "self.metric(out, y)")


def test_a_step_method_nothing_in_the_file_calls_is_not_proven() -> None:
    analysis = _analysis(
        """
        class Lit(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(3, 1)
                self.metric = Metric()

            def training_step(self, x, y):
                out = self.net(x)
                self.metric(out, y)
                return out.sum()
        """
    )
    assert not _once(analysis, "self.metric(out, y)")


def test_a_loop_inside_a_forward_is_never_a_training_loop() -> None:
    analysis = _analysis(
        """
        class Seq(nn.Module):
            def __init__(self):
                super().__init__()
                self.metric = Metric()

            def forward(self, xs, y):
                for x in xs:
                    self.metric(x, y)
                    x.sum().backward()
        """
    )
    assert not _once(analysis, "self.metric(x, y)")


def test_weights_of_a_module_class() -> None:
    analysis = _analysis(
        """
        class Collection(nn.ModuleDict):
            def forward(self, p, t):
                return {k: m(p, t) for k, m in self.items()}

        class Projected(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(3, 3)

        class Learned(Projected):
            def forward(self, p):
                return p

        metrics = Collection({"a": Metric()})
        """
    )
    weights = analysis.weights
    assert weights.computes_without_weights("Collection")
    assert not weights.computes_without_weights("Learned")  # its base binds a Linear
    assert not weights.computes_without_weights("Projected")  # a class deriving from it too


def test_a_lightning_training_step_runs_once_per_step_by_contract() -> None:
    analysis = _analysis(
        """
        import pytorch_lightning as pl

        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(3, 1)
                self.metric = Metric()

            def training_step(self, batch, batch_idx):
                x, y = batch
                out = self.net(x)
                self.metric(out, y)
                return (out - y).pow(2).mean()

            def validation_step(self, batch, batch_idx):
                x, y = batch
                self.metric(self.net(x), y)
        """
    )
    assert _once(analysis, "self.metric(out, y)")
    assert not _once(analysis, "self.metric(self.net(x), y)")
