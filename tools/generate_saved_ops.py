"""Generate `codemods/data/saved_ops.json`: what autograd saves for each op form users write.

Nothing in the table is typed in by hand. For every op form below the script runs the op on
small CPU tensors and decides each fact with a probe:

* mutate-then-backward: build the graph, build the loss (sum of every output that requires
  grad), bump the version counter of one tensor in place (`add_(0)`; parameters and buffers
  under `no_grad`, as an optimizer does), then call `backward()`. "one of the variables
  needed for gradient computation has been modified by an inplace operation" means autograd
  saved that tensor. Done for every output, every tensor input position and (modules) every
  parameter and buffer, separately, under every requires-grad pattern of the inputs.
* backward twice: `backward()`, then `backward()` again without `retain_graph`; "Trying to
  backward through the graph a second time" means the graph holds saved tensors (GF003).
* alias: bump each input under `no_grad` and see whether the output's version moves; if it
  does the output is a view (or the input itself) and shares its version counter.

Differentiable float inputs are made non-leaf (`leaf.clone()`: CloneBackward saves nothing)
so that in-place ops on them are allowed. Any other error aborts the run: a surprise must be
looked at, not recorded. The table format is documented in `codemods/analysis/saved_ops.py`.

    python tools/generate_saved_ops.py           # rewrite the JSON
    python tools/generate_saved_ops.py --check   # exit 1 if the committed JSON is stale
"""

from __future__ import annotations

import argparse
import itertools
import json
import operator
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

FORMAT = 1
OUTPUT = Path(__file__).resolve().parent.parent / "codemods" / "data" / "saved_ops.json"

# Input kinds. Only "float" inputs are probed both with and without requires_grad.
FLOAT = "float"  # differentiable floating-point tensor
CONST = "const"  # floating-point tensor that never requires grad (running statistics)
LONG = "long"  # integer indices / class targets
BOOL = "bool"  # masks and conditions

_INPLACE_MSG = "modified by an inplace operation"
_VIEW_BASE_MSG = "its base or another view of its base has been modified inplace"
_MULTI_VIEW_MSG = "returns multiple views"
_TWICE_MSG = "backward through the graph a second time"
_OVERLAP_MSG = "more than one element of the written-to tensor refers to a single memory location"


# -- op catalogue ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Arg:
    kind: str
    make: Callable[[], Tensor]


def f(*shape: int, low: float = 0.5, high: float = 1.5) -> Arg:
    """A float input with values in [low, high): positive, so log/sqrt/pow are defined."""
    shape = shape or (3, 4)
    return Arg(FLOAT, lambda: torch.rand(shape) * (high - low) + low)


def const(*shape: int) -> Arg:
    return Arg(CONST, lambda: torch.rand(shape) + 0.5)


def long(high: int, *shape: int) -> Arg:
    return Arg(LONG, lambda: torch.randint(0, high, shape))


def mask(*shape: int) -> Arg:
    shape = shape or (3, 4)
    return Arg(BOOL, lambda: torch.arange(torch.Size(shape).numel()).reshape(shape) % 2 == 0)


@dataclass(frozen=True)
class Spec:
    key: str
    call: Callable[..., Any]  # (*tensor inputs) -> output(s), or (module, *inputs) for modules
    args: tuple[Arg, ...]
    module: Callable[[], nn.Module] | None = None
    sequence: bool = False  # output is a homogeneous sequence of views (chunk, split, unbind)


X = f()
SPECS: list[Spec] = []


def add(key: str, call: Callable[..., Any], *args: Arg, sequence: bool = False) -> None:
    SPECS.append(Spec(key, call, args or (X,), sequence=sequence))


def module(name: str, make: Callable[[], nn.Module], *args: Arg) -> None:
    SPECS.append(Spec(f"torch.nn.{name}", lambda m, *xs: m(*xs), args or (X,), module=make))


NAMESPACES: tuple[tuple[str, Any], ...] = (
    ("torch", torch),
    ("torch.nn.functional", F),
    ("Tensor", Tensor),
)


def forms(
    name: str,
    *params: Any,
    args: Sequence[Arg] = (X,),
    where: str = "torch torch.nn.functional Tensor",
    suffix: str = "",
    sequence: bool = False,
    **kwargs: Any,
) -> None:
    """Every existing form of `name` among `where`: `torch.name(*tensors, *params, **kwargs)`,
    `torch.nn.functional.name(...)`, `tensors[0].name(*tensors[1:], *params, **kwargs)`."""
    found = False
    for prefix, namespace in NAMESPACES:
        if prefix not in where.split() or not hasattr(namespace, name):
            continue
        found = True
        call = (
            _method(name, params, kwargs)
            if namespace is Tensor
            else _function(getattr(namespace, name), params, kwargs)
        )
        add(f"{prefix}.{name}{suffix}", call, *args, sequence=sequence)
    if not found:
        raise LookupError(f"{name} exists in none of {where}")


def _method(name: str, params: Sequence[Any], kwargs: dict[str, Any]) -> Callable[..., Any]:
    return lambda *xs: getattr(xs[0], name)(*xs[1:], *params, **kwargs)


def _function(fn: Any, params: Sequence[Any], kwargs: dict[str, Any]) -> Callable[..., Any]:
    return lambda *xs: fn(*xs, *params, **kwargs)


def _joined(fn: Any) -> Callable[..., Any]:
    return lambda a, b: fn([a, b])


def names(text: str) -> list[str]:
    return text.split()


def catalogue() -> None:
    # Unary element-wise ops and activations.
    for name in names(
        "sigmoid tanh exp exp2 log log2 log10 log1p expm1 sqrt rsqrt reciprocal square sin cos "
        "tan sinh cosh atan erf abs neg negative sign floor ceil round trunc frac relu relu6 "
        "gelu silu elu selu celu leaky_relu hardtanh softplus mish hardswish hardsigmoid "
        "logsigmoid softsign tanhshrink"
    ):
        forms(name)
    for name in names("relu_ sigmoid_ tanh_ exp_ log_ sqrt_ abs_ neg_ clamp_min_"):
        forms(name, *([0.6] if name == "clamp_min_" else []))
    forms("clamp", min=0.6, max=1.4)
    forms("clamp", suffix="[min]", min=0.6)
    forms("clip", min=0.6, max=1.4)
    forms("clamp_", min=0.6, max=1.4)
    forms("softmax", dim=-1)
    forms("log_softmax", dim=-1)
    forms("normalize", dim=1)
    forms("dropout", 0.5, True)

    # Reductions and scans.
    for name in names("sum mean prod norm var std"):
        forms(name)
        forms(name, suffix="[dim]", dim=1)
    for name in ("norm", "vector_norm"):  # `torch.linalg.norm(x, dim=-1, keepdim=True)`
        norm = getattr(torch.linalg, name)
        add(f"torch.linalg.{name}", lambda x, norm=norm: norm(x))
        add(f"torch.linalg.{name}[dim]", lambda x, norm=norm: norm(x, dim=1, keepdim=True))
    for name in names("logsumexp cumsum cumprod amax amin argmax"):
        forms(name, dim=1)
    for name in ("max", "min"):
        forms(name)
        forms(name, 1, suffix="[dim]")
        forms(name, suffix="[other]", args=(X, X))
    forms("topk", 2, dim=1)
    forms("sort", dim=1)

    # Binary ops, tensor with tensor, tensor with a Python number.
    for name in names("add sub mul div true_divide pow maximum minimum atan2"):
        forms(name, args=(X, X))
    for name in names("add sub mul div pow"):
        forms(name, 2.0, suffix="[scalar]")
    add("torch.pow[rscalar]", lambda x: torch.pow(2.0, x))
    forms("matmul", args=(f(3, 4), f(4, 5)))
    forms("mm", args=(f(3, 4), f(4, 5)))
    forms("bmm", args=(f(2, 3, 4), f(2, 4, 5)))
    forms("mv", args=(f(3, 4), f(4)))
    forms("dot", args=(f(4), f(4)))
    forms("outer", args=(f(3), f(4)))
    add("torch.einsum", lambda a, b: torch.einsum("ij,jk->ik", a, b), f(3, 4), f(4, 5))
    for name in names("add_ sub_ mul_ div_"):
        forms(name, args=(X, X))
        forms(name, 2.0, suffix="[scalar]")
    forms("copy_", args=(X, X))

    # Joining, copying, selecting.
    for name in ("cat", "concat", "stack"):
        add(f"torch.{name}", _joined(getattr(torch, name)), X, X)
    forms("clone")
    forms("where", where="torch", args=(mask(), X, X))
    forms("where", where="Tensor", args=(X, mask(), X))
    add("torch.where[scalar]", lambda c, x: torch.where(c, x, 0.0), mask(), X)
    forms("masked_fill", 0.0, args=(X, mask()))
    forms("masked_fill_", 0.0, args=(X, mask()))
    add("torch.gather", lambda x, i: torch.gather(x, 1, i), X, long(4, 3, 2))
    add("Tensor.gather", lambda x, i: x.gather(1, i), X, long(4, 3, 2))
    add("torch.index_select", lambda x, i: torch.index_select(x, 0, i), X, long(3, 2))
    add("Tensor.index_select", lambda x, i: x.index_select(0, i), X, long(3, 2))
    forms("flip", (0,))
    forms("roll", 1, 1)
    forms("repeat", (2, 1))

    # Views, reshapes, conversions.
    forms("view", -1)
    forms("view", 4, 3)
    add("Tensor.view_as", lambda x, y: x.view_as(y), X, f(4, 3))
    forms("reshape", (-1,))
    add("Tensor.reshape_as", lambda x, y: x.reshape_as(y), X, f(4, 3))
    forms("transpose", 0, 1)
    forms("t")
    add("Tensor.T", lambda x: x.T)
    add("Tensor.mT", lambda x: x.mT)
    forms("permute", (1, 0), where="torch")
    forms("permute", 1, 0, where="Tensor")
    forms("movedim", 0, 1)
    forms("unsqueeze", 0)
    forms("squeeze", args=(f(3, 1, 4),))
    forms("squeeze", 1, args=(f(3, 1, 4),))
    forms("expand", 2, 3, 4)
    add("Tensor.expand_as", lambda x, y: x.expand_as(y), f(1, 4), X)
    forms("narrow", 0, 0, 2)
    forms("select", 0, 1)
    forms("flatten")
    forms("unflatten", 1, (2, 2))
    forms("contiguous")
    forms("detach")
    forms("split", 2, sequence=True)
    forms("chunk", 2, sequence=True)
    forms("unbind", sequence=True)
    for name in ("float", "double", "half", "long", "bool", "cpu"):
        forms(name, where="Tensor")
    for target in (torch.float32, torch.float64, "cpu"):
        forms("to", target, where="Tensor")

    # Python operators and subscripts, keyed as `operator.<name>`.
    for name in names("add sub mul truediv pow"):
        fn = getattr(operator, name)
        add(f"operator.{name}", fn, X, X)
        add(f"operator.{name}[scalar]", lambda x, _fn=fn: _fn(x, 2.0))
        add(f"operator.{name}[rscalar]", lambda x, _fn=fn: _fn(2.0, x))
    for name in names("iadd isub imul itruediv"):
        fn = getattr(operator, name)
        add(f"operator.{name}", fn, X, X)
        add(f"operator.{name}[scalar]", lambda x, _fn=fn: _fn(x, 2.0))
    add("operator.matmul", operator.matmul, f(3, 4), f(4, 5))
    add("operator.neg", operator.neg)
    add("operator.pos", operator.pos)
    for index in (
        0,
        (slice(None), 0),
        slice(1, None),
        (Ellipsis, 1),
        None,
        (slice(None), slice(1, 3)),
    ):
        add("operator.getitem", lambda x, _i=index: x[_i])
    add("operator.getitem[mask]", lambda x, m: x[m], X, mask())
    add("operator.getitem[mask]", lambda x, m: x[m], X, mask(3))
    add("operator.getitem[tensor-index]", lambda x, i: x[i], X, long(3, 2))
    add("operator.getitem[tensor-index]", lambda x, i: x[:, i], X, long(4, 2))

    # Losses and layers in functional form.
    for name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):
        forms(name, where="torch.nn.functional", args=(X, X))
    forms("binary_cross_entropy_with_logits", where="torch.nn.functional", args=(X, X))
    forms("binary_cross_entropy", where="torch.nn.functional", args=(f(low=0.1, high=0.9),) * 2)
    forms("kl_div", reduction="batchmean", where="torch.nn.functional", args=(X, X))
    forms("cross_entropy", where="torch.nn.functional", args=(f(3, 5), long(5, 3)))
    forms("nll_loss", where="torch.nn.functional", args=(f(3, 5), long(5, 3)))
    forms("cosine_similarity", where="torch.nn.functional", args=(X, X))
    forms("linear", where="torch.nn.functional", args=(f(3, 4), f(5, 4), f(5)))
    forms("conv1d", where="torch.nn.functional", args=(f(1, 2, 8), f(3, 2, 3), f(3)))
    forms("conv2d", where="torch.nn.functional", args=(f(1, 2, 5, 5), f(3, 2, 3, 3), f(3)))
    add(
        "torch.nn.functional.layer_norm",
        lambda x, w, b: F.layer_norm(x, (4,), w, b),
        f(3, 4),
        f(4),
        f(4),
    )
    add(
        "torch.nn.functional.batch_norm",
        lambda x, rm, rv, w, b: F.batch_norm(x, rm, rv, w, b, training=True),
        f(3, 4),
        const(4),
        const(4),
        f(4),
        f(4),
    )
    forms("embedding", where="torch.nn.functional", args=(long(10, 3), f(10, 4)))
    forms("max_pool2d", 2, where="torch.nn.functional", args=(f(1, 2, 4, 4),))
    forms("avg_pool2d", 2, where="torch.nn.functional", args=(f(1, 2, 4, 4),))
    forms("adaptive_avg_pool2d", 1, where="torch.nn.functional", args=(f(1, 2, 4, 4),))
    forms(
        "scaled_dot_product_attention",
        where="torch.nn.functional",
        args=(f(1, 3, 4), f(1, 3, 4), f(1, 3, 4)),
    )

    # nn modules (train mode; parameters require grad).
    module("Linear", lambda: nn.Linear(4, 5))
    module("Conv1d", lambda: nn.Conv1d(2, 3, 3), f(1, 2, 8))
    module("Conv2d", lambda: nn.Conv2d(2, 3, 3), f(1, 2, 5, 5))
    module("BatchNorm1d", lambda: nn.BatchNorm1d(4))
    module("BatchNorm2d", lambda: nn.BatchNorm2d(2), f(2, 2, 3, 3))
    module("LayerNorm", lambda: nn.LayerNorm(4))
    module("GroupNorm", lambda: nn.GroupNorm(2, 4), f(2, 4, 3))
    module("Dropout", lambda: nn.Dropout(0.5))
    for name in names(
        "ReLU ReLU6 Sigmoid Tanh GELU SiLU ELU SELU LeakyReLU Softplus Hardtanh Mish "
        "Hardswish Identity Flatten"
    ):
        module(name, getattr(nn, name))
    module("Softmax", lambda: nn.Softmax(dim=-1))
    module("LogSoftmax", lambda: nn.LogSoftmax(dim=-1))
    module("MaxPool2d", lambda: nn.MaxPool2d(2), f(1, 2, 4, 4))
    module("AvgPool2d", lambda: nn.AvgPool2d(2), f(1, 2, 4, 4))
    module("AdaptiveAvgPool2d", lambda: nn.AdaptiveAvgPool2d(1), f(1, 2, 4, 4))
    module("Embedding", lambda: nn.Embedding(10, 4), long(10, 3))
    for name in ("MSELoss", "L1Loss", "SmoothL1Loss", "BCEWithLogitsLoss"):
        module(name, getattr(nn, name), X, X)
    module("BCELoss", nn.BCELoss, f(low=0.1, high=0.9), f(low=0.1, high=0.9))
    module("CrossEntropyLoss", nn.CrossEntropyLoss, f(3, 5), long(5, 3))
    module("NLLLoss", nn.NLLLoss, f(3, 5), long(5, 3))
    module("LSTM", lambda: nn.LSTM(4, 3), f(2, 3, 4))
    module("GRU", lambda: nn.GRU(4, 3), f(2, 3, 4))
    module(
        "MultiheadAttention",
        lambda: nn.MultiheadAttention(4, 2),
        f(2, 3, 4),
        f(2, 3, 4),
        f(2, 3, 4),
    )


# -- probes ------------------------------------------------------------------------------------
@dataclass
class Run:
    inputs: list[Tensor]
    module: nn.Module | None
    outputs: list[Tensor]
    loss: Tensor | None


def _flatten(value: Any) -> Iterator[Tensor]:
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _flatten(item)
    elif value is not None:
        raise TypeError(f"unexpected output {type(value).__name__}")


def _run(spec: Spec, pattern: str) -> Run:
    torch.manual_seed(0)
    inputs = []
    for arg, bit in zip(spec.args, pattern, strict=True):
        tensor = arg.make()
        inputs.append(tensor.requires_grad_().clone() if bit == "1" else tensor)
    mod = None
    if spec.module is not None:
        mod = spec.module().train()
        out = spec.call(mod, *inputs)
    else:
        out = spec.call(*inputs)
    outputs = list(_flatten(out))
    terms = [t.sum() for t in outputs if t.requires_grad]
    loss = torch.stack(terms).sum() if terms else None
    return Run(inputs, mod, outputs, loss)


def _bump(tensor: Tensor) -> None:
    """Bump the version counter in place without changing the value."""
    if tensor.dtype == torch.bool:
        tensor.logical_and_(tensor)
    else:
        tensor.add_(0)


def _state(mod: nn.Module) -> dict[str, Tensor]:
    return dict(itertools.chain(mod.named_parameters(), mod.named_buffers()))


def _mutation_breaks(spec: Spec, pattern: str, where: str, index: int | str) -> bool:
    run = _run(spec, pattern)
    if run.loss is None:
        return False
    if where == "param":
        assert run.module is not None and isinstance(index, str)
        with torch.no_grad():
            _bump(_state(run.module)[index])
    else:
        assert isinstance(index, int)
        target = run.outputs[index] if where == "output" else run.inputs[index]
        try:
            _bump(target)
        except RuntimeError as error:
            if _MULTI_VIEW_MSG in str(error):
                return True  # refused at once: in-place on one of several views
            if _OVERLAP_MSG in str(error):
                return False  # no in-place op can write to it (expand): nothing to break
            raise
    try:
        run.loss.backward()
    except RuntimeError as error:
        if _INPLACE_MSG in str(error) or _VIEW_BASE_MSG in str(error):
            return True
        raise
    return False


def _second_backward_fails(spec: Spec, pattern: str) -> bool:
    run = _run(spec, pattern)
    if run.loss is None:
        return False
    run.loss.backward()
    try:
        run.loss.backward()
    except RuntimeError as error:
        if _TWICE_MSG in str(error):
            return True
        raise
    return False


def _multi_view_refusal(spec: Spec, pattern: str) -> bool:
    run = _run(spec, pattern)
    try:
        _bump(run.outputs[0])
    except RuntimeError as error:
        if _MULTI_VIEW_MSG in str(error):
            return True
        if _OVERLAP_MSG in str(error):
            return False
        raise
    return False


def _view_of_input(spec: Spec, pattern: str) -> int | None:
    run = _run(spec, pattern)
    out = run.outputs[0]
    for position, tensor in enumerate(run.inputs):
        before = out._version
        with torch.no_grad():
            _bump(tensor)
        if out._version != before:
            return position
    return None


def _patterns(spec: Spec, has_parameters: bool) -> Iterator[str]:
    """Requires-grad patterns: one character per tensor input, "1" requires grad, "0" does
    not, "-" cannot (not a float input). Unless parameters require grad, a pattern where no
    input does builds no graph and is left out."""
    choices = ["10" if arg.kind == FLOAT else "-" for arg in spec.args]
    for combo in itertools.product(*choices):
        pattern = "".join(combo)
        if "1" in pattern or has_parameters:
            yield pattern


def probe(spec: Spec) -> dict[str, Any]:
    patterns: dict[str, Any] = {}
    views = set()
    multi_view = False
    mod = spec.module() if spec.module is not None else nn.Module()
    params = sorted(_state(mod))
    for pattern in _patterns(spec, any(p.requires_grad for p in mod.parameters())):
        run = _run(spec, pattern)
        count = 1 if spec.sequence else len(run.outputs)
        outputs = [_mutation_breaks(spec, pattern, "output", i) for i in range(len(run.outputs))]
        if spec.sequence and len(set(outputs)) != 1:
            raise AssertionError(f"{spec.key}: sequence elements differ: {outputs}")
        record: dict[str, Any] = {
            "inputs": [_mutation_breaks(spec, pattern, "input", k) for k in range(len(pattern))],
            "outputs": outputs[:count],
            "second_backward_fails": _second_backward_fails(spec, pattern),
        }
        if spec.module is not None:
            record["params"] = [p for p in params if _mutation_breaks(spec, pattern, "param", p)]
        patterns[pattern] = record
        views.add(_view_of_input(spec, pattern))
        multi_view |= _multi_view_refusal(spec, pattern)
    if len(views) != 1:
        raise AssertionError(f"{spec.key}: aliasing depends on requires_grad: {views}")
    entry: dict[str, Any] = {
        "inputs": [arg.kind for arg in spec.args],
        "multi_output_view": multi_view,
        "patterns": patterns,
        "view_of_input": views.pop(),
    }
    if spec.module is not None:
        entry["params"] = params
    return entry


def _merge(key: str, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Several call shapes probed under one key must agree on everything but aliasing, which
    is kept as "may alias" (`x.to(torch.float32)` returns `x`, `x.to(torch.float64)` copies)."""
    a, b = dict(old), dict(new)
    view_a, view_b = a.pop("view_of_input"), b.pop("view_of_input")
    if a != b or (None not in (view_a, view_b) and view_a != view_b):
        raise AssertionError(f"{key}: call shapes disagree:\n{old}\n{new}")
    return {**old, "view_of_input": view_b if view_a is None else view_a}


def torch_version() -> str:
    return torch.__version__.split("+")[0]


def generate() -> dict[str, Any]:
    if not SPECS:
        catalogue()
    ops: dict[str, Any] = {}
    threads = torch.get_num_threads()
    # Tiny tensors: intra-op threads only add contention (100x slower on a busy machine).
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for spec in SPECS:
                try:
                    entry = probe(spec)
                except Exception as error:
                    error.add_note(f"while probing {spec.key}")
                    raise
                ops[spec.key] = _merge(spec.key, ops[spec.key], entry) if spec.key in ops else entry
    finally:
        torch.set_num_threads(threads)
    return {
        "format": FORMAT,
        "generated_by": "tools/generate_saved_ops.py",
        "ops": dict(sorted(ops.items())),
        "torch": torch_version(),
    }


# -- output ------------------------------------------------------------------------------------
def dumps(value: Any, depth: int = 0) -> str:
    """Stable JSON: sorted keys; objects expanded down to the per-pattern records, which (like
    all lists) stay on one line."""
    if isinstance(value, dict) and value and depth < 4:
        pad = "  " * (depth + 1)
        items = [f"{pad}{json.dumps(k)}: {dumps(value[k], depth + 1)}" for k in sorted(value)]
        return "{\n" + ",\n".join(items) + "\n" + "  " * depth + "}"
    return json.dumps(value, sort_keys=True)


def diff_summary(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    lines = []
    for field_name in ("format", "torch"):
        if old.get(field_name) != new.get(field_name):
            lines.append(f"{field_name}: {old.get(field_name)!r} -> {new.get(field_name)!r}")
    old_ops, new_ops = old.get("ops", {}), new.get("ops", {})
    lines += [f"+ {key}" for key in sorted(new_ops.keys() - old_ops.keys())]
    lines += [f"- {key}" for key in sorted(old_ops.keys() - new_ops.keys())]
    for key in sorted(old_ops.keys() & new_ops.keys()):
        if old_ops[key] != new_ops[key]:
            lines.append(f"~ {key}: {', '.join(_changed(old_ops[key], new_ops[key]))}")
    return lines


def _changed(old: Any, new: Any, path: str = "") -> list[str]:
    """Paths of the leaves that differ, e.g. `patterns.10.inputs`."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [path] if old != new else []
    return [
        change
        for k in sorted(old.keys() | new.keys())
        for change in _changed(old.get(k), new.get(k), f"{path}.{k}" if path else k)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    options = parser.parse_args(argv)
    table = generate()
    text = dumps(table) + "\n"
    if options.check:
        try:
            committed = json.loads(options.output.read_text())
        except FileNotFoundError:
            committed = {}
        changes = diff_summary(committed, table)
        if changes or committed != table:
            print(f"{options.output} is stale ({len(changes)} differences):", file=sys.stderr)
            print("\n".join(changes), file=sys.stderr)
            print("regenerate with: python tools/generate_saved_ops.py", file=sys.stderr)
            return 1
        print(f"{options.output} is up to date ({len(table['ops'])} ops)")
        return 0
    options.output.parent.mkdir(parents=True, exist_ok=True)
    options.output.write_text(text)
    print(f"wrote {options.output} ({len(table['ops'])} ops, torch {table['torch']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
