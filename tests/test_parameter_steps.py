"""What an optimizer steps and which modules a graph ran, by access path
(codemods/analysis/parameter_steps.py)."""

from __future__ import annotations

import ast
import textwrap

from codemods.analysis import FileAnalysis
from codemods.analysis.parameter_steps import ParameterSteps, overlap
from codemods.analysis.provenance import Provenance


def _steps(body: str) -> tuple[ParameterSteps, str]:
    source = "import torch\nfrom torch import nn\n" + textwrap.dedent(body)
    analysis = FileAnalysis(ast.parse(source), source)
    return ParameterSteps(analysis, Provenance(analysis)), source


def _last(source: str, steps: ParameterSteps, code: str) -> ast.expr:
    found = [
        node
        for node in steps.analysis.index.parents
        if isinstance(node, ast.expr) and ast.get_source_segment(source, node) == code
    ]
    return max(found, key=steps.analysis.index.start.__getitem__)


def test_optimizer_over_lists_chains_and_param_groups() -> None:
    steps, source = _steps("""
        import itertools
        G, D, E = nn.Linear(2, 2), nn.Linear(2, 1), nn.Linear(2, 2)
        opt_a = torch.optim.Adam(list(G.parameters()) + list(E.parameters()))
        opt_b = torch.optim.Adam(itertools.chain(G.parameters(), D.parameters()))
        opt_c = torch.optim.Adam([{"params": D.parameters(), "lr": 1e-3}])
        opt_d = torch.optim.Adam(params)
        opt_a, opt_b, opt_c, opt_d
        """)
    assert steps.stepped_paths(_last(source, steps, "opt_a")) == {"G", "E"}
    assert steps.stepped_paths(_last(source, steps, "opt_b")) == {"G", "D"}
    assert steps.stepped_paths(_last(source, steps, "opt_c")) == {"D"}
    assert steps.stepped_paths(_last(source, steps, "opt_d")) is None


def test_paths_of_a_method_seen_from_the_same_object() -> None:
    steps, source = _steps("""
        class Agent:
            def __init__(self):
                self.critic = nn.Linear(3, 1)
                self.target = nn.Linear(3, 1)
                self.opt = torch.optim.Adam(self.critic.parameters())

            def learn(self, x):
                return self.opt
        """)
    assert steps.stepped_paths(_last(source, steps, "self.opt")) == {"self.critic"}


def test_module_runs_carry_paths_out_of_forwards() -> None:
    steps, source = _steps("""
        class Q(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))

            def forward(self, x):
                return self.net(x)

        class Twin(nn.Module):
            def __init__(self):
                super().__init__()
                self.q1 = Q()
                self.q2 = Q()

            def forward(self, x):
                return self.q1(x), self.q2(x)

        class Agent:
            def __init__(self):
                self.critic = Twin()
                self.target = Twin()

            def loss(self, x):
                a, b = self.critic(x)
                return b.mean()

            def learn(self):
                value = self.loss(torch.randn(4, 3))
                return value
        """)
    runs = steps.module_runs(steps.provenance.of(_last(source, steps, "value")))
    assert {run.path for run in runs} == {"self.critic.q2.net"}
    # the second Linear's input requires grad, so it saved its weight; the first's does not
    assert {run.saves for run in runs} == {True, False}


def test_overlap_is_a_path_prefix() -> None:
    assert overlap("self.critic", "self.critic.q1.net")
    assert overlap("self.critic.q1", "self.critic")
    assert not overlap("self.critic", "self.critic_target")
    assert not overlap("D", "G")
