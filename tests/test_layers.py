"""The layer order of an nn.Sequential, however the file builds it (analysis/layers.py)."""

from __future__ import annotations

import ast
import textwrap

from codemods.analysis import FileAnalysis
from codemods.analysis.layers import INPUT, adjacent_layers, sequential_layer_classes


def _pairs(body: str) -> set[tuple[str, str]] | None:
    """The (previous, layer) pairs of the file's last Sequential, as source text."""
    source = "import torch\nfrom torch import nn\n" + textwrap.dedent(body)
    tree = ast.parse(source)
    analysis = FileAnalysis(tree, source)
    call = analysis.index.calls_by_name["Sequential"][-1]
    adjacent = adjacent_layers(analysis, call)
    if adjacent is None:
        return None
    return {
        ("INPUT" if pair.previous is INPUT else ast.unparse(pair.previous), ast.unparse(pair.layer))
        for pair in adjacent
    }


def test_spelled_layers_follow_each_other() -> None:
    pairs = _pairs("net = nn.Sequential(nn.Linear(2, 3), nn.Tanh())\n")
    assert pairs == {("INPUT", "nn.Linear(2, 3)"), ("nn.Linear(2, 3)", "nn.Tanh()")}


def test_a_list_built_under_ifs_and_in_a_loop_gives_every_path() -> None:
    pairs = _pairs(
        """
        def build(sizes, act, drop):
            layers = []
            for i in range(len(sizes) - 1):
                layers.append(nn.Linear(sizes[i], sizes[i + 1]))
                if act:
                    layers.append(nn.ReLU() if act == "relu" else nn.Tanh())
                if drop:
                    layers.append(nn.Dropout(drop, inplace=True))
            return nn.Sequential(*layers)
        """
    )
    assert pairs is not None
    dropout = "nn.Dropout(drop, inplace=True)"
    previous = {before for before, layer in pairs if layer == dropout}
    assert previous == {"nn.ReLU()", "nn.Tanh()", "nn.Linear(sizes[i], sizes[i + 1])"}
    assert (dropout, "nn.Linear(sizes[i], sizes[i + 1])") in pairs  # the next iteration
    assert ("INPUT", dropout) not in pairs


def test_add_module_grows_a_sequential_after_it_is_built() -> None:
    pairs = _pairs(
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential()
                self.body.add_module("fc", nn.Linear(2, 2))
                self.body.add_module("act", nn.Sigmoid())
        """
    )
    assert pairs == {("INPUT", "nn.Linear(2, 2)"), ("nn.Linear(2, 2)", "nn.Sigmoid()")}


def test_appends_after_the_sequential_copied_the_list_do_not_count() -> None:
    pairs = _pairs(
        """
        layers = [nn.Linear(2, 2)]
        net = nn.Sequential(*layers)
        layers.append(nn.ReLU(inplace=True))
        """
    )
    assert pairs == {("INPUT", "nn.Linear(2, 2)")}


def test_an_order_changed_by_insert_is_not_followed() -> None:
    pairs = _pairs(
        """
        layers = [nn.Linear(2, 2), nn.Tanh(), nn.Dropout(inplace=True)]
        layers.insert(2, nn.Linear(2, 2))
        net = nn.Sequential(*layers)
        """
    )
    assert pairs is None


def _layer_classes(body: str) -> frozenset[str]:
    source = "import torch\nfrom torch import nn\n" + textwrap.dedent(body)
    return sequential_layer_classes(FileAnalysis(ast.parse(source), source))


def test_classes_added_to_a_sequential_are_its_layer_classes() -> None:
    classes = _layer_classes(
        """
        class Probe(nn.Module):
            def forward(self, x):
                return x

        class Head(nn.Module):
            def forward(self, x):
                return x

        net = nn.Sequential()
        net.add_module("probe", Probe())
        head = Head()
        """
    )
    assert classes == {"Probe"}
