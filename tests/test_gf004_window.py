"""GF004 looks for the ops that saved a written tensor only from the statement that made it
(`_Checker._made_at`): the findings must be those of the whole window, also where provenance
links an earlier statement to a later one (a list's later `append`, a `.detach()` reached
again through a recursive call, a global's last binding read by module-level code)."""

from __future__ import annotations

import pytest

from codemods.pipeline import RunOptions, process_source
from codemods.rules import gf004_inplace_on_saved

CASES = {
    # The cut applies: `torch.log(x * w)` comes before `h` is made and cannot hold it.
    "made_after_other_ops": b"""import torch
w = torch.randn(3, requires_grad=True)
def f(x):
    a = torch.log(x * w)
    h = x * 2
    y = torch.log(h)
    h += 1
    return a + y
f(w).sum().backward()
""",
    # `xs[1]` is the `h` appended two statements later.
    "appended_later": b"""import torch
w = torch.randn(3, requires_grad=True)
def f(a):
    a = a * w
    xs = [a]
    y = torch.log(xs[1])
    h = a * 2
    xs.append(h)
    h += 1
    return y
""",
    # The recursive call's `d * w` saved `d`, the detached `h` of the caller's own body.
    "recursive_call_detach": b"""import torch
w = torch.randn(3, requires_grad=True)
def f(x, n):
    x = x * w
    y = f(x, n - 1)
    h = x * 2
    d = h.detach()
    h += 1
    return d * w + y + h
f(w, 2).sum().backward()
""",
    # `f(w)` reads `G`, whose only binding comes after the call.
    "global_bound_later": b"""import torch
w = torch.randn(3, requires_grad=True)
def f(x):
    return torch.log(G) * x
y = f(w)
G = torch.rand(3) + w
G += 1
y.sum().backward()
""",
}


def _findings(source: bytes) -> list[tuple[int, str, str]]:
    result = process_source(source, RunOptions(frozenset({"GF004"})))
    assert result.error is None
    return [(f.line, f.tier.value, f.message) for f in result.findings]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_cut_window_finds_what_the_whole_window_finds(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cut = _findings(CASES[name])
    monkeypatch.setattr(gf004_inplace_on_saved._Checker, "_made_at", lambda *_: -1)
    whole = _findings(CASES[name])
    assert whole  # each case has a finding the window must keep
    assert cut == whole
