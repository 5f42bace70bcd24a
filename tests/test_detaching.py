"""The file's detaching helpers (codemods/analysis/detaching.py): their results are FREE for
every rule, whatever form the detach takes; a helper that may hand back its argument is not one."""

from __future__ import annotations

import ast
import textwrap

import pytest

from codemods.analysis import FileAnalysis, Grad

HEADER = """\
import torch
from torch import nn
from torch.autograd import Variable

rnn = nn.LSTM(3, 4)
out, state = rnn(torch.randn(2, 1, 3))
"""


def _value_of_last(helper: str) -> Grad:
    source = HEADER + textwrap.dedent(helper) + "result = helper(state)\n"
    tree = ast.parse(source)
    analysis = FileAnalysis(tree, source)
    last = tree.body[-1]
    assert isinstance(last, ast.Assign)
    value = analysis.value_of(last.value)
    grads = {value.grad, value.element} | {part.grad for part in value.parts or ()}
    return Grad.FREE if grads <= {Grad.FREE, None} else Grad.UNKNOWN


@pytest.mark.parametrize(
    "helper",
    [
        "def helper(h):\n    return tuple(v.detach() for v in h)\n",
        "def helper(states):\n    return [Variable(s.data) for s in states]\n",
        "def helper(h):\n"
        "    if isinstance(h, torch.Tensor):\n"
        "        return h.detach()\n"
        "    return tuple(helper(v) for v in h)\n",
        "def helper(h):\n"
        "    if h is None:\n"
        "        return None\n"
        "    return tuple(v.data.cuda() for v in h)\n",
    ],
)
def test_detaching_helper_result_is_free(helper: str) -> None:
    assert _value_of_last(helper) is Grad.FREE


@pytest.mark.parametrize(
    "helper",
    [
        # hands the state back unchanged on one path
        "def helper(h):\n    if h is None:\n        return h\n    return h\n",
        # detaches one element of the pair only
        "def helper(h):\n    return h[0].detach(), h[1]\n",
        # two parameters: not a one-argument helper
        "def helper(h, keep=False):\n    return h if keep else h.detach()\n",
    ],
)
def test_helper_that_may_keep_the_graph_is_not_detaching(helper: str) -> None:
    assert _value_of_last(helper) is not Grad.FREE
