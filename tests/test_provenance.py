"""The shared provenance analysis (codemods/analysis/provenance.py), on small sources."""

from __future__ import annotations

import ast
import textwrap

from codemods.analysis import FileAnalysis, Grad
from codemods.analysis.provenance import (
    Origin,
    OriginKind,
    Provenance,
    call_arguments,
    evaluated_in,
    reachable_graph_nodes,
    saves_tensors,
    walk,
)

HEADER = """\
import torch
import torch.nn.functional as F
from torch import nn

trunk = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
head = nn.Linear(8, 1)
"""


class Source:
    def __init__(self, body: str) -> None:
        self.source = HEADER + textwrap.dedent(body)
        module = ast.parse(self.source)
        self.analysis = FileAnalysis(module, self.source)
        self.provenance = Provenance(self.analysis)
        self.module = module

    def code(self, node: ast.AST) -> str | None:
        return ast.get_source_segment(self.source, node)

    def nodes(self, code: str) -> list[ast.expr]:
        """Every expression whose source is `code`, in source order."""
        found = [
            node
            for node in self.analysis.index.parents
            if isinstance(node, ast.expr) and self.code(node) == code
        ]
        return sorted(found, key=self.analysis.index.start.__getitem__)

    def of(self, code: str) -> Origin:
        """The provenance of the last occurrence of `code` (write a use of it last)."""
        return self.provenance.of(self.nodes(code)[-1])


def keys(origin: Origin) -> set[str | None]:
    return {node.key for node, _ in walk(origin) if node.kind is not OriginKind.DATA}


def test_names_bound_to_one_evaluation_share_it() -> None:
    source = Source("""
        x = torch.randn(2, 4)
        h = trunk(x)
        a = head(h).sum()
        b = (h * 2).mean()
        a, b, h
    """)
    shared = reachable_graph_nodes(source.of("a")) & reachable_graph_nodes(source.of("b"))
    assert shared == reachable_graph_nodes(source.of("h"))
    assert {node.key for node in shared} == {"torch.nn.Linear", "torch.nn.ReLU"}
    assert source.provenance.binding_of(source.of("h")).key == "h"


def test_two_forwards_share_nothing_and_each_starts_a_forward() -> None:
    source = Source("""
        x = torch.randn(2, 4)
        a = head(trunk(x)).sum()
        b = head(trunk(x)).sum()
        a, b
    """)
    assert not reachable_graph_nodes(source.of("a")) & reachable_graph_nodes(source.of("b"))
    first_layer = [node for node, _ in walk(source.of("a")) if node.key == "torch.nn.Linear"]
    assert any(node.starts_forward for node in first_layer)


def test_op_keys_follow_the_table() -> None:
    source = Source("""
        x = torch.randn(2, 4, requires_grad=True)
        y = x * 2
        z = 2 * x
        s = torch.sigmoid(x).sum(dim=1)
        r = F.relu(x)[:, 0]
        m = x[x > 0]
        x, y, z, s, r, m
    """)
    assert source.of("y").key == "operator.mul[scalar]"
    assert source.of("z").key == "operator.mul[rscalar]"
    assert source.of("s").key == "Tensor.sum[dim]"
    assert source.of("s").inputs[0].key == "torch.sigmoid"
    assert source.of("r").key == "operator.getitem"
    assert source.of("r").inputs[0].key == "torch.nn.functional.relu"
    assert source.of("m").key == "operator.getitem[mask]"
    assert source.of("x").kind is OriginKind.LEAF


def test_saves_tensors() -> None:
    source = Source("""
        x = torch.randn(2, 4, requires_grad=True)
        total = x.sum()
        squashed = x.sigmoid()
        unknown = torch.special.expit(x)
        features = trunk(torch.randn(2, 4))
        x, total, squashed, unknown, features
    """)
    assert saves_tensors(source.of("total")) is False
    assert saves_tensors(source.of("squashed")) is True
    assert saves_tensors(source.of("unknown")) is None
    assert saves_tensors(source.of("features")) is True  # nn.ReLU on an attached input
    assert saves_tensors(source.of("x")) is False  # a leaf


def test_detached_and_no_grad_values_are_data() -> None:
    source = Source("""
        x = torch.randn(2, 4)
        d = trunk(x).detach()
        with torch.no_grad():
            n = trunk(x)
        d, n
    """)
    assert source.of("d").kind is OriginKind.DATA
    assert all(node.grad is Grad.FREE for node, _ in walk(source.of("n")))
    assert not reachable_graph_nodes(source.of("n"))


def test_loop_bindings_per_iteration_and_carried() -> None:
    source = Source("""
        x = torch.randn(2, 4)
        shared = trunk(x)
        state = torch.zeros(2, 1)
        for step in range(3):
            fresh = head(shared)
            state = head(trunk(x)) + state
            fresh
    """)
    loop = next(node for node in source.analysis.index.parents if isinstance(node, ast.For))
    fresh = source.of("fresh")
    assert evaluated_in(fresh, loop, source.analysis)
    assert not evaluated_in(fresh.inputs[0], loop, source.analysis)  # `shared`
    read = source.of("state")  # `+ state`: the one before the loop, or the previous iteration's
    assert read.kind is OriginKind.CHOICE
    assert {alternative.kind for alternative in read.inputs} == {
        OriginKind.DATA,
        OriginKind.CARRIED,
    }


def test_list_elements_and_loop_targets() -> None:
    source = Source("""
        x = torch.randn(2, 4)
        h = trunk(x)
        heads = nn.ModuleList([nn.Linear(8, 1) for _ in range(3)])
        losses = [head(h).sum() for head in heads]
        for loss in losses:
            loss
    """)
    element = source.of("loss")
    assert element.kind is OriginKind.ELEMENT
    collection = element.inputs[0]
    assert collection.kind is OriginKind.COLLECTION
    (item,) = collection.inputs
    assert item.repeats_in is source.nodes("[head(h).sum() for head in heads]")[0]
    assert reachable_graph_nodes(source.of("h")) <= reachable_graph_nodes(element)


def test_forward_of_a_module_class_is_followed() -> None:
    source = Source("""
        class TwoHeads(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 8)
                self.a = nn.Linear(8, 1)
                self.b = nn.Linear(8, 2)

            def forward(self, x):
                h = self.body(x)
                return self.a(h), self.b(h)

        model = TwoHeads()
        out_a, out_b = model(torch.randn(2, 4))
        out_a, out_b
    """)
    a, b = source.of("out_a"), source.of("out_b")
    assert a.kind is OriginKind.FORWARD and b.kind is OriginKind.FORWARD
    assert a is not b
    (shared,) = reachable_graph_nodes(a) & reachable_graph_nodes(b)
    assert source.code(shared.expression) == "self.body(x)"
    assert keys(a) == {"torch.nn.Linear"}


def test_an_objects_call_is_followed_into_its_dunder_call() -> None:
    source = Source("""
        class HeadLoss:
            def __call__(self, features):
                inner = head(features).sum()
                return inner

        loss_fn = HeadLoss()
        h = trunk(torch.randn(2, 4))
        loss = loss_fn(h)
        loss.backward()
        """)
    shared = reachable_graph_nodes(source.of("h"), True)
    assert shared and shared <= reachable_graph_nodes(source.of("loss"), True)
    call = source.nodes("loss_fn(h)")[0]
    inner = source.provenance.of_in_call(source.nodes("head(features).sum()")[0], call)
    assert inner is source.of("loss")
    assert source.provenance.of_in_call(source.nodes("h")[-1], call) is None


def test_call_arguments_in_source_order() -> None:
    source = Source("""
        def f(*args, **kwargs):
            return args

        a = b = c = d = 1
        f(a, *b, k=c, **d)
        f(k=c, *b)
    """)
    first, second = source.nodes("f(a, *b, k=c, **d)")[0], source.nodes("f(k=c, *b)")[0]
    assert [(source.code(v), named) for v, named in call_arguments(first)] == [
        ("a", False),
        ("b", False),
        ("c", True),
        ("d", False),
    ]
    assert [(source.code(v), named) for v, named in call_arguments(second)] == [
        ("c", True),
        ("b", False),
    ]


def test_index_keys_read_the_subscript_parts() -> None:
    source = Source("""
        x = torch.randn(2, 4, requires_grad=True)
        i, j = 0, 1
        basic = x[i, j]
        sliced = x[:, 0]
        tupled = x[(i, j)]
        masked = x[:, x[0] > 0]
        basic, sliced, tupled, masked
    """)
    assert source.of("basic").key == "operator.getitem"
    assert source.of("sliced").key == "operator.getitem"
    assert source.of("tupled").key == "operator.getitem[?]"  # one index, a tuple
    assert source.of("masked").key == "operator.getitem[mask]"


def test_op_key_family_is_the_key_its_provenance_has_less_the_call_shape() -> None:
    source = Source("""
        def step(x, n, s):
            h = head(x)
            return h + 1, h * h, h.view(n), torch.zeros(n), h.sum(1), n.view(2), x | n, s.scale(h)
        """)
    family = source.provenance.op_key_family
    for code, key in [
        ("h + 1", "operator.add"),
        ("h * h", "operator.mul"),
        ("h.view(n)", "Tensor.view"),
        ("torch.zeros(n)", "torch.zeros"),
        ("h.sum(1)", "Tensor.sum"),
        ("n.view(2)", "Tensor.view"),  # not known to be a tensor: the same op
        ("s.scale(h)", None),  # a multiplication, as for a GradScaler
        ("x | n", None),
    ]:
        node = source.nodes(code)[-1]
        assert family(node) == key, code
        origin = source.provenance.of(node)
        if key is not None and origin.key is not None:
            assert origin.key.split("[")[0] == key, code
