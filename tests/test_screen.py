"""The `ast` screens (codemods/screen.py) and the compile check in front of LibCST.

A screen must be a necessary condition of its rule: over every fixture, the findings are the
same with and without the screens. Files CPython refuses to compile are reported as parse errors
and never rewritten, even when LibCST parses them.
"""

from __future__ import annotations

import ast
import re
import sys
import warnings
from pathlib import Path

import nbformat
import pytest

from codemods import screen
from codemods.analysis.torch_api import at_word_starts
from codemods.findings import Finding
from codemods.notebooks import process_notebook
from codemods.pipeline import (
    RunOptions,
    SourceResult,
    checked_tree,
    process_source,
    syntax_error,
)
from codemods.rules import RULES

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted(
    path
    for folder in ("tests/fixtures", "examples")
    for pattern in ("*.py", "*.ipynb")
    for path in (REPO_ROOT / folder).rglob(pattern)
)
ALL = RunOptions(frozenset(RULES), fix=True, unsafe_fixes=True)


def _run(path: Path) -> SourceResult:
    process = process_notebook if path.suffix == ".ipynb" else process_source
    return process(path.read_bytes(), ALL)


def _summary(result: SourceResult) -> tuple[list[Finding], bytes | None, str | None]:
    return result.findings, result.new_source, result.error


def test_screens_change_no_finding_or_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    screened = {path: _summary(_run(path)) for path in SAMPLES}
    monkeypatch.setattr(screen, "ENABLED", False)
    differ = [p.relative_to(REPO_ROOT) for p in SAMPLES if _summary(_run(p)) != screened[p]]
    assert not differ
    assert sum(bool(findings) for findings, _, _ in screened.values()) > 50  # not vacuous


MODEL = """\
import torch.nn as nn

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        states = ()
        for layer in self.layers:
            x = layer(x)
            states = states + (x,)
        return x, states
"""

TRAINING = """\
import torch.nn as nn

model = nn.Linear(4, 1)
total = 0
for x, y in loader:
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    total += loss
"""


def _wanted(source: str) -> set[str]:
    return {rule.code for rule in screen.rules_wanted(source.encode(), source, [*RULES.values()])}


def test_a_model_definition_needs_no_rule() -> None:
    # Its loop sums in a forward and never reaches a backward or an optimizer step.
    assert _wanted(MODEL) == set()


def test_a_training_loop_keeps_the_accumulation_rule() -> None:
    # Nothing is carried or kept, and the backward's graph is all made in the loop, so only
    # GF001 wants it; LibCST parses it for GF001, so GF004 runs too, unscreened (its screen
    # costs about what its rule does on a parsed file)...
    assert _wanted(TRAINING) == {"GF001", "GF004"}
    # ...and alone, its screen sees that `total += loss` writes a number no op saved.
    alone = [RULES["GF004"]]
    assert screen.rules_wanted(TRAINING.encode(), TRAINING, alone) == []


@pytest.mark.parametrize(
    ("operand", "wanted"),
    [
        ("float(loss) * x.size", False),  # a number times an attribute: no loss
        ("out.loss", False),  # an attribute of a tensor is its view or metadata
        ("meter.average()", False),  # a method the interpreter does not know
        ("self.criterion(x, y)", True),  # a criterion kept on the object
        ("parts.get('l', 0.0)", True),  # a dict's stored value
        ("loss * x.size", True),
        # `interpreter.value` gives no graph to a comparison or what left the graph...
        ("(model(x) == y).sum()", False),
        ("(model(x) - y).abs().numpy().mean()", False),
        ("(model(x) - y).abs().mean()", True),
        ("(model(x) == y).sum() + loss", True),  # ...but a loss added to one has one
        # A loop counter is never attached, whatever else the name holds.
        ("step", False),
        ("index", False),
        ("pair", True),
    ],
)
def test_an_accumulated_operand_that_may_be_a_loss(operand: str, wanted: bool) -> None:
    source = TRAINING.replace("total += loss", f"total += {operand}")
    source += "for step in range(3):\n    pass\nfor index, pair in enumerate(loader):\n    pass\n"
    assert ("GF001" in _wanted(source)) is wanted


STEP = """\
import torch.nn as nn

model = nn.Linear(4, 1)


def train_step(x, y):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return RETURNED


history = []
for x, y in loader:
    ACCUMULATED
"""


@pytest.mark.parametrize(
    ("returned", "accumulated", "wanted"),
    [
        # What the file's own function returns, followed as the interpreter follows it.
        ("loss.item(), len(x)", "train_loss, count = train_step(x, y)", False),
        ("loss, len(x)", "train_loss, count = train_step(x, y)", True),
        ("pair", "train_loss, count = train_step(x, y)", True),  # a tuple of unknown parts
        ("loss.item()", "train_loss = train_step(x, y)", False),
        ("loss", "train_loss = train_step(x, y)", True),
    ],
)
def test_gf001_follows_the_files_functions(returned: str, accumulated: str, wanted: bool) -> None:
    source = STEP.replace("RETURNED", returned)
    source = source.replace("ACCUMULATED", f"{accumulated}\n    history.append(train_loss)")
    assert ("GF001" in _wanted(source)) is wanted


@pytest.mark.parametrize(("added", "wanted"), [("loss.item()", False), ("loss", True)])
def test_gf001_follows_a_total_the_function_returns(added: str, wanted: bool) -> None:
    total = f"total, count = 0, 0\n    total += {added}\n    count += 1\n    return total / count"
    source = STEP.replace("return RETURNED", total)
    source = source.replace("ACCUMULATED", "history.append(train_step(x, y))")
    assert ("GF001" in _wanted(source)) is wanted


EVALUATION = """\
import torch
import torch.nn as nn

model = nn.Linear(4, 1)
total, kept = 0, []
with torch.no_grad():
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        ACCUMULATED
"""


@pytest.mark.parametrize(
    ("accumulated", "wanted"),
    [
        ("total += loss", False),  # an addition records no graph with grad mode off
        ("total = total + loss", False),
        ("kept.append(loss)", True),  # a list keeps the tensor itself: the rule decides
    ],
)
def test_gf001_with_grad_mode_off(accumulated: str, wanted: bool) -> None:
    assert ("GF001" in _wanted(EVALUATION.replace("ACCUMULATED", accumulated))) is wanted
    decorated = EVALUATION.replace("with torch.no_grad():", "@torch.no_grad()\ndef evaluate():")
    assert ("GF001" in _wanted(decorated.replace("ACCUMULATED", accumulated))) is wanted


def test_an_entry_summed_through_get_is_an_accumulation() -> None:
    summed = TRAINING.replace("total += loss", "totals[k] = totals.get(k, 0.0) + loss")
    assert "GF001" in _wanted(summed)
    assert "GF001" in _wanted(summed.replace("totals.get(k, 0.0)", "totals[k]"))
    assert "GF001" not in _wanted(summed.replace("totals.get(k, 0.0)", "other.get(k, 0.0)"))


def test_a_logger_method_appending_through_setdefault_is_an_accumulation() -> None:
    logger = (
        "class Logger:\n"
        "    def put(self, name, value):\n"
        "        self.values.setdefault(name, []).append(value)\n"
    )
    assert "GF001" not in _wanted(TRAINING.replace("total += loss", "logger.put('l', loss)"))
    assert "GF001" in _wanted(logger + TRAINING.replace("total += loss", "logger.put('l', loss)"))


def test_outputs_kept_by_an_evaluation_method_need_gf002() -> None:
    predict = (
        "import torch.nn as nn\n\n"
        "class Wrapper:\n"
        "    def __init__(self):\n"
        "        self.model = nn.Linear(4, 2)\n\n"
        "    def predict(self, graphs):\n"
        "        outs = []\n"
        "        for g in graphs:\n"
        "            outs.append(self.model(g))\n"
        "        return outs\n"
    )
    assert "GF002" in _wanted(predict)
    assert "GF002" in _wanted(
        predict.replace("outs = []", "self.model.eval()\n        outs = []").replace(
            "def predict", "def run"
        )
    )
    assert "GF002" not in _wanted(predict.replace("def predict", "def run"))


def test_a_scheduler_step_is_no_training_step() -> None:
    sampling = (
        "import torch.nn as nn\n"
        "unet = nn.Linear(4, 4)\n"
        "for t in timesteps:\n"
        "    latents = scheduler.step(unet(latents), t, latents)\n"
    )
    assert "GF002" not in _wanted(sampling)
    assert "GF002" in _wanted(sampling.replace("scheduler", "optimizer"))


def test_two_backward_calls_in_the_file() -> None:
    one = "def f(a):\n    a.backward()\n"
    assert "GF003" not in _wanted(one)
    # A function that backpropagates and its caller that backpropagates again may pair.
    assert "GF003" in _wanted(one + "\ndef g(b):\n    f(b)\n    b.backward()\n")
    assert "GF003" in _wanted("from torch.autograd import grad as g\n")


LOOP_PRELUDE = """\
import torch
from torch import nn

net = nn.Linear(4, 4)
rnn = nn.GRU(4, 4)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
"""


@pytest.mark.parametrize(
    ("lines", "wanted"),
    [
        # carried into the next iteration of a training loop
        (
            "h = torch.zeros(1, 4)\nfor x in loader:\n    out, h = rnn(x, h)\n"
            "    criterion(out, x).backward()\n    optimizer.step()",
            True,
        ),
        # rebound at the top of each iteration, by every branch of an `if`
        (
            "for x in loader:\n    if x is None:\n        h = x\n    else:\n        h = net(x)\n"
            "    h = net(h)\n    criterion(h, x).backward()",
            False,
        ),
        (
            "for x in loader:\n    if x is None:\n        h = x\n    h = net(h)\n"
            "    criterion(h, x).backward()",
            True,
        ),
        # a number carried (`best`), a value taken out of the graph
        (
            "best = 0\nfor x in loader:\n    loss = criterion(net(x), x)\n    loss.backward()\n"
            "    acc = float(loss)\n    if acc > best:\n        best = acc\n    print(best)",
            False,
        ),
        (
            "prev = None\nfor x in loader:\n    loss = criterion(net(x), x)\n    loss.backward()\n"
            "    print(prev)\n    prev = loss.item()",
            False,
        ),
        # carried by a loop that reaches no training step
        ("h = x0\nfor block in blocks:\n    h = net(h)", False),
        # kept by a training loop: a tensor, a number, a detached tensor
        (
            "outs = []\nfor x in loader:\n    out = net(x)\n    criterion(out, x).backward()\n"
            "    outs.append(out)",
            True,
        ),
        (
            "outs = []\nfor x in loader:\n    out = net(x)\n    criterion(out, x).backward()\n"
            "    outs.append(out.item())",
            False,
        ),
        (
            "outs = []\nfor x in loader:\n    out = net(x)\n    criterion(out, x).backward()\n"
            "    outs.append(out.detach())",
            False,
        ),
        # kept by a loop over batches with grad mode off: what is computed there is not
        # attached, what was computed before may be
        (
            "outs = []\nwith torch.no_grad():\n    for x in loader:\n        outs.append(net(x))",
            False,
        ),
        (
            "outs = []\nfor x in loader:\n    with torch.inference_mode():\n        out = net(x)\n"
            "    outs.append(out)",
            False,
        ),
        (
            "outs = []\nfor x in loader:\n    with torch.no_grad():\n"
            "        with torch.enable_grad():\n            out = net(x)\n    outs.append(out)",
            True,
        ),
        (
            "outs = []\nfeat = net(x0)\nwith torch.no_grad():\n    for x in loader:\n"
            "        outs.append(feat)",
            True,
        ),
        (
            "@torch.no_grad()\ndef predict(loader):\n    outs = []\n    for x in loader:\n"
            "        outs.append(net(x))\n    return outs",
            False,
        ),
        (
            "def predict(loader):\n    outs = []\n    for x in loader:\n"
            "        outs.append(net(x))\n    return outs",
            True,
        ),
    ],
)
def test_carried_and_kept_values(lines: str, wanted: bool) -> None:
    assert ("GF002" in _wanted(LOOP_PRELUDE + lines + "\n")) is wanted


@pytest.mark.parametrize(
    ("lines", "wanted"),
    [
        # every iteration backpropagates through a graph made once, before the loop
        ("feat = net(x)\nfor i in range(3):\n    (feat * i).sum().backward()", True),
        ("losses = [net(x).sum(), net(x).mean()]\nfor loss in losses:\n    loss.backward()", True),
        # ... unless the loop makes it again before reading it
        (
            "feat = net(x)\nfor i in range(3):\n    feat = net(x)\n    (feat * i).sum().backward()",
            False,
        ),
        # a module, a parameter (a leaf saves nothing), a graph made in the loop
        ("w = nn.Parameter(torch.zeros(4))\nfor x in loader:\n    (w * x).sum().backward()", False),
        ("for x in loader:\n    criterion(net(x), x).backward()", False),
        # two calls through one evaluation of an attached node, or through separate ones
        ("y = net(x)\ny.sum().backward()\ny.mean().backward()", True),
        ("net(x).sum().backward()\nnet(x).mean().backward()", False),
        # (one statement makes both: the screen cannot tell them apart and lets it through)
        ("a, b = net(x), net(x)\na.sum().backward()\nb.sum().backward()", True),
        # two training loops of one notebook reusing their names
        (
            "for x in a:\n    loss = criterion(net(x), x)\n    loss.backward()\n"
            "for x in b:\n    loss = criterion(net(x), x)\n    loss.backward()",
            False,
        ),
        # the methods of one object that each backpropagate
        (
            "class T:\n    def d(self, x):\n        x.backward()\n"
            "    def g(self, x):\n        x.backward()",
            True,
        ),
    ],
)
def test_backward_calls_that_may_share_a_graph(lines: str, wanted: bool) -> None:
    assert ("GF003" in _wanted(LOOP_PRELUDE + lines + "\n")) is wanted


GF004_PRELUDE = """\
import torch
from torch import nn
import torch.nn.functional as F

model = nn.Linear(4, 4)
x = model(torch.randn(2, 4))
"""


SQUARE = """\
class Square(nn.Module):
    def forward(self, x):
        return x * x

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.exp = Square()

    def forward(self, h):
"""


@pytest.mark.parametrize(
    ("lines", "may_break"),
    [
        ("y = torch.sigmoid(x)\ny[0] = 1", True),  # sigmoid saved its output
        ("y = x.exp()\nv = y.view(-1)\nv.add_(1)", True),  # through a view
        ("z = torch.log(x)\nx.add_(1)", True),  # log saved its input
        ("model.weight.normal_()", True),  # a leaf
        ("y = F.relu(torch.tanh(x), inplace=True)", True),
        ("y = torch.sigmoid(x)\ntorch.exp(x, out=y)", True),
        ("nn.init.normal_(model.weight)", False),  # an imported function, not a tensor method
        ("y = torch.sigmoid(x)\nz = y + 1\nz[0] = 0", False),  # `y + 1` is new storage
        ("mask = torch.zeros(4)\nmask[0] = 1", False),  # nothing saved it
        ("y = torch.sigmoid(x)\ny.data.zero_()", False),  # `.data` has no history
        ("w = x + 1\nw.add_(1)\nz = torch.log(w)", False),  # written before it is saved
        ("if (y := torch.sigmoid(x)) is not None:\n    y[0] = 1", True),  # bound in a test
        ("@torch.no_grad()\ndef f(x):\n    y = torch.sigmoid(model(x))\n    y[0] = 1", False),
        # No tensor takes a string index or a sequence added in place: a dict, a tuple.
        ("y = torch.sigmoid(x)\nout = {}\nout['gate'] = y", False),
        ("y = torch.sigmoid(x)\nfeats = ()\nfeats += (y,)", False),
        # What the interpreter knows is a number, a dict or a list is written, not a tensor.
        ("y = torch.sigmoid(x)\nout = {}\nout[0] = y", False),
        ("y = torch.sigmoid(x)\nif x is None:\n    y = {}\ny[0] = 1", True),  # one branch
        ("n = 1\ny = torch.sigmoid(x) * n\nn *= 2", False),
        ("n = 1\ny = torch.sigmoid(x) * n\nn *= x", True),  # `n` may be a tensor now
        ("n = 1\nfor i in range(3):\n    y = torch.sigmoid(x) * n\n    n += 1", False),
        # ...a tensor in the first iteration, whatever later ones bind:
        ("n = x\nfor i in range(3):\n    n *= 2\n    y = torch.sigmoid(x) * n\n    n = 2", True),
        ("def f(d):\n    norm = nn.LayerNorm(d)\n    d *= 2", False),  # built, not run
        # With an in-place layer in the file, only calls that may reach its constructor write.
        ("act = nn.ReLU(inplace=True)\ny = torch.sigmoid(x)\nz = act(y)", True),
        ("act = nn.ReLU(inplace=True)\ny = torch.sigmoid(x)\nprint(y)", False),
        ("act = nn.ReLU(inplace=True)\ny = torch.sigmoid(x)\nz = torch.cat([y])", False),
        ("ACTS = {'relu': nn.ReLU(True)}\ny = torch.sigmoid(x)\nz = ACTS['relu'](y)", True),
        # A value bound from two may share either's storage; the two do not share each other's.
        ("y = torch.sigmoid(x)\nb = torch.zeros(4)\npair = [y, b]\nb[0] = 1", False),
        ("y = torch.sigmoid(x)\nb = torch.zeros(4)\npair = [y, b]\npair[0][0] = 1", True),
        ("y = torch.sigmoid(x)\nv = y.view(-1)\nw = y.view(-1)\nw[0] = 1", True),
        # Provenance takes an element out of a list display or what `append` added to it, and
        # follows no store by index.
        ("xs = []\ny = torch.sigmoid(x)\nxs.append(y)\nxs[0].add_(1)", True),
        ("y = torch.sigmoid(x)\np = {}\nq = p\nq['y'] = y\nz = p['y']\nz.add_(1)", False),
        ("y = torch.zeros(4)\nz = torch.log(x)\ny[0] = x", False),  # the store copies `x`
        # An op saves for the write only when it runs first, or in a loop around both.
        ("y = x + 1\nfor i in range(3):\n    y[i] = 1\nz = torch.log(y)", False),
        ("y = x + 1\nfor i in range(3):\n    y[i] = 1\n    z = torch.log(y)", True),
        ("y = x + 1\nz = x.add_(1) if y is None else torch.log(x)", False),
        # An op of the table saves only the inputs it lists.
        ("y = x + 1\nx.mul_(torch.sigmoid(x))", False),  # sigmoid saves its output
        ("y = x + 1\nz = torch.log(x)\nx.mul_(2)", True),
        ("y = x + 1\nz = y / len(y)\ny[0] = 1", False),  # divided by a number
        ("y = x + 1\nz = y / y.sum()\ny[0] = 1", True),
        ("y = torch.sigmoid(x)\nz = model(torch.sigmoid(y))\nz.add_(1)", False),  # not bound
        # Only a functional's own flag writes; another package's module gives new storage.
        ("from helpers import scale\nz = torch.log(x)\nscale(x, inplace=True)", False),
        ("from helpers import Block\nb = Block()\ny = b(x)\nz = torch.log(x)\ny.add_(1)", False),
        (
            "s = nn.Sequential(nn.ReLU(), nn.Linear(4, 4))\ny = s(x)\nz = torch.log(x)\ny.add_(1)",
            False,
        ),
        (
            "s = nn.Sequential(nn.ReLU(), nn.Identity())\ny = s(x)\nz = torch.log(x)\ny.add_(1)",
            True,
        ),
        # With grad mode off an op saves nothing, and a leaf may be written; a write still
        # breaks what an op saved before.
        ("with torch.no_grad():\n    model.weight.mul_(2)", False),
        ("with torch.no_grad():\n    y = torch.sigmoid(x)\ny.mul_(2)", False),
        ("y = torch.sigmoid(x)\nwith torch.no_grad():\n    y.mul_(2)", True),
        ("z = model.weight * x\nwith torch.no_grad():\n    model.weight.add_(1)", True),
        # The file's function saves what it computes from its arguments, not what it builds.
        ("def build(n):\n    return nn.Linear(4, 4)\nh = x + 1\nnet = build(h)\nh.add_(1)", False),
        ("def build(n):\n    return torch.log(n)\nh = x + 1\nnet = build(h)\nh.add_(1)", True),
        (
            "def build(n):\n    m = 0\n    m += n\n    return m\nh = x + 1\nb = build(h)\nh[0] = 1",
            True,
        ),
        # A module named like a tensor method may save its input.
        (SQUARE + "        y = self.exp(h)\n        h.add_(1)\n        return y", True),
        (SQUARE + "        y = h.sigmoid()\n        h.add_(1)\n        return y", False),
    ],
)
def test_gf004_needs_a_write_to_what_an_op_may_have_saved(lines: str, may_break: bool) -> None:
    assert ("GF004" in _wanted(GF004_PRELUDE + lines + "\n")) is may_break


def test_gf004_needs_a_value_that_may_be_graph_attached() -> None:
    # No module, parameter, loss or backward: the analysis proves nothing attached.
    source = "import torch\nx = torch.randn(3)\ny = torch.sigmoid(x)\ny[0] = 1\n"
    assert "GF004" not in _wanted(source)
    assert "GF004" in _wanted(source.replace("randn(3)", "randn(3, requires_grad=True)"))


def test_gf001_needs_an_accumulated_value_that_may_be_a_loss() -> None:
    built = TRAINING.replace("total += loss", "layers.append(nn.Linear(4, 4))")
    assert "GF001" not in _wanted(built)
    assert "GF001" not in _wanted(TRAINING.replace("total += loss", "total += float(loss)"))
    assert "GF001" in _wanted(TRAINING.replace("total += loss", "totals.append(loss)"))
    swapped = TRAINING.replace("total += loss", "a = b\n    b = a\n    total += a")
    assert "GF001" not in _wanted(swapped)  # names bound only to each other hold no loss


@pytest.mark.parametrize(
    ("operand", "may_be_loss"),
    [
        ("loss.item()", False),  # out of the graph
        ("loss.detach().cpu()", False),
        ("torch.cat([loss, loss])", False),  # a tensor of torch's, neither a loss nor a scalar
        ("loss * 2", True),
        ("2 * len(loader)", False),
        ("loss.mean()", True),  # a reduction over all elements is a scalar
        ("torch.mean(loss)", True),
        ("loss.sum(dim=0)", True),  # the receiver is a loss
        ("model(x).sum(dim=0)", True),  # a module's output may be anything
        ("F.cross_entropy(model(x), y)", True),
    ],
)
def test_gf001_follows_what_an_accumulated_call_gives(operand: str, may_be_loss: bool) -> None:
    source = "import torch\nimport torch.nn.functional as F\n" + TRAINING.replace(
        "total += loss", f"totals.append({operand})"
    )
    assert ("GF001" in _wanted(source)) is may_be_loss


GATHERING = """\
import torch
from torch import nn

model = nn.Linear(4, 1)
outputs = []
for x in loader:
    out = model(x)
    outputs.append(out)
"""


@pytest.mark.parametrize(
    ("change", "may_be_loss"),
    [
        ("", False),  # no backward, criterion or reduction: no loss, no scalar
        ("out = model(x).mean()", True),
        ("out = torch.sum(model(x))", True),
        ("out = torch.linalg.norm(model(x))", True),
        ("out = mean(model(x))", False),  # not torch's
        ("out = model(x).mean(dim=0)", False),  # not over all elements
        ("out = criterion(model(x), x)", True),
        ("out = nn.functional.l1_loss(model(x), x)", True),
    ],
)
def test_gf001_needs_a_loss_or_a_scalar_in_the_file(change: str, may_be_loss: bool) -> None:
    source = GATHERING.replace("out = model(x)", change) if change else GATHERING
    assert ("GF001" in _wanted(source)) is may_be_loss
    imported = "from torch import mean\n" + source
    assert ("GF001" in _wanted(imported)) is (may_be_loss or "mean(model" in change)


def test_gf001_sees_stores_into_a_name_that_do_not_rebind_it() -> None:
    # `block.act = ...` stores into `block`; `block` stays the class instance it was bound to.
    built = TRAINING.replace(
        "total += loss", "block = nn.Module()\n    block.act = nn.ReLU()\n    blocks.append(block)"
    )
    assert "GF001" not in _wanted(built)


def test_disabled_screen_wants_every_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(screen, "ENABLED", False)
    assert _wanted(MODEL) == set(RULES)


# Each parses with LibCST; CPython refuses to compile every one.
NESTED_BLOCKS = "".join("    " * depth + "for i in x:\n" for depth in range(21)) + "    " * 21
REFUSED = {
    "nul byte": TRAINING.replace("total = 0", "total = 0  # \0"),
    "21 nested blocks": TRAINING + NESTED_BLOCKS + "total += loss\n",
    "nested parentheses": TRAINING + "y = " + "(" * 201 + "1" + ")" * 201 + "\n",
    "return outside a function": TRAINING + "return total\n",
}


@pytest.mark.parametrize("source", REFUSED.values(), ids=REFUSED.keys())
def test_a_file_python_refuses_is_reported_and_not_fixed(source: str) -> None:
    result = process_source(source.encode(), ALL)
    assert result.error is not None and "parse error" in result.error
    assert result.new_source is None and not result.findings


def test_a_fixable_file_is_fixed_when_python_compiles_it() -> None:
    result = process_source(TRAINING.encode(), ALL)
    assert result.error is None and result.new_source is not None


def test_top_level_await_is_allowed_only_in_notebooks() -> None:
    assert syntax_error(b"await x\n") is not None
    assert syntax_error(b"await x\n", top_level_await=True) is None


def _notebook(*cells: str) -> bytes:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(cell) for cell in cells]
    notebook.metadata["kernelspec"] = {"name": "python3", "language": "python"}
    return nbformat.writes(notebook).encode()


@pytest.mark.parametrize(
    "cell", ["await asyncio.sleep(0)", "from __future__ import print_function"]
)
def test_a_notebook_compiles_cell_by_cell(cell: str) -> None:
    # IPython compiles each cell on its own: both are fine after the first cell.
    result = process_notebook(_notebook("import asyncio", cell, TRAINING), ALL)
    assert result.error is None and result.findings


def test_the_compilers_warnings_are_not_printed() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert syntax_error(b"x = 1\nprint(x is 1)\n") is None


def test_a_notebook_cell_python_refuses_is_reported_in_its_cell() -> None:
    result = process_notebook(_notebook(TRAINING, NESTED_BLOCKS.strip() + " pass"), ALL)
    assert result.error is not None and result.error.startswith("cell 2:21:")
    assert "nested blocks" in result.error


def test_syntax_newer_than_the_running_python_is_left_to_libcst() -> None:
    # PEP 695 generics (3.12): LibCST's grammar knows them, so this is no broken file.
    source = TRAINING.encode() + b"def first[T](items: list[T]) -> T:\n    return items[0]\n"
    if sys.version_info < (3, 12):
        assert syntax_error(source) is None
    assert process_source(source, ALL).new_source is not None


@pytest.mark.parametrize("source", [*REFUSED.values(), TRAINING, "x = '\\d'\n"])
def test_one_parse_gives_the_screens_tree_and_the_compilers_verdict(source: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither prints the compiler's warnings
        tree, error = checked_tree(source.encode())
        assert error == syntax_error(source.encode())
    assert (tree is None) == (error is not None)
    if tree is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert ast.dump(tree) == ast.dump(ast.parse(source))


@pytest.mark.parametrize(
    ("text", "starts"),
    [
        ("grad(x)", [0]),
        ("torch.no_grad()", []),
        ("(grad(a), autograd.grad(b))", [1, 19]),
        ("ingrad(x)\ngrad(y)", [10]),
    ],
)
def test_matches_at_word_starts_are_those_of_a_word_boundary(text: str, starts: list[int]) -> None:
    found = [match.start() for match in at_word_starts(re.compile(r"grad\("), text)]
    assert found == starts == [m.start() for m in re.finditer(r"\bgrad\(", text)]


@pytest.mark.parametrize(
    ("text", "receiver"),
    [
        ("torch.linalg.norm(x)", "torch.linalg"),
        ("y = x .sum()", "x"),
        ("y = (a + b) \\\n    .mean()", ""),
        ("y = f(z).max(1)", ""),
    ],
)
def test_a_reductions_receiver_is_read_back_from_its_dot(text: str, receiver: str) -> None:
    match = screen._REDUCTION_CALL_TEXT.search(text)
    assert match is not None
    assert screen._receiver(text, match.start()) == receiver


@pytest.mark.parametrize(
    ("imports", "reduction", "may_be_loss"),
    [
        ("import torch", "torch.mean(values)", True),
        ("import torch as T", "T.sum(values)", True),
        ("import numpy as np", "np.mean(values)", False),
        ("from torch import sum", "sum(values)", True),
        ("import numpy as np", "sum(values)", False),
    ],
)
def test_a_reduction_is_a_loss_source_only_when_torch_makes_it(
    imports: str, reduction: str, may_be_loss: bool
) -> None:
    text = f"{imports}\nfor batch in loader:\n    total = total + {reduction}\n"
    facts = screen._Facts(imports=screen._import_aliases(ast.parse(text)))
    assert screen._loss_source(facts, text) is may_be_loss


@pytest.mark.parametrize(
    ("index", "wanted"),
    [
        ("'a'", False),  # a constant key holds one value, not one per iteration
        ("0", False),
        ("i", True),
        ("True", True),  # a name to LibCST, so a varying key to GF002
        ("'a' 'b'", True),  # two literals: no `SimpleString` to LibCST
    ],
)
def test_a_store_kept_by_a_varying_key(index: str, wanted: bool) -> None:
    # The form feed before the loop must not shift the lines the screen reads.
    lines = (
        "\x0cbank = {}\nfor i, x in enumerate(loader):\n    out = net(x)\n"
        f"    out.sum().backward()\n    bank[{index}] = out"
    )
    assert ("GF002" in _wanted(LOOP_PRELUDE + lines + "\n")) is wanted
