"""The saved-ops table is what the installed PyTorch does, and says what the notes say."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from codemods.analysis.saved_ops import (
    OpSaving,
    may_save_an_input,
    op_saving,
    saves_anything,
    torch_version,
)

ROOT = Path(__file__).resolve().parent.parent
GENERATOR = ROOT / "tools" / "generate_saved_ops.py"
TABLE = ROOT / "codemods" / "data" / "saved_ops.json"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_saved_ops", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return _generator()


@pytest.fixture(scope="module")
def fresh(generator: ModuleType) -> dict[str, object]:
    """The table measured now, on the installed torch (one run for the whole module)."""
    return generator.generate()


def test_committed_table_matches_installed_torch(
    generator: ModuleType, fresh: dict[str, object]
) -> None:
    committed = json.loads(TABLE.read_text(encoding="utf-8"))
    differences = generator.diff_summary(committed, fresh)
    assert not differences, "regenerate with tools/generate_saved_ops.py:\n" + "\n".join(
        differences
    )
    assert committed == fresh
    # The file is exactly what the generator writes: stable formatting, sorted keys.
    assert TABLE.read_text(encoding="utf-8") == generator.dumps(fresh) + "\n"


def test_check_mode(
    generator: ModuleType,
    fresh: dict[str, object],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(generator, "generate", lambda: fresh)
    assert generator.main(["--check"]) == 0
    stale = json.loads(TABLE.read_text(encoding="utf-8"))
    del stale["ops"]["torch.sigmoid"]
    stale["ops"]["torch.exp"]["patterns"]["1"]["outputs"] = [False]
    path = tmp_path / "saved_ops.json"
    path.write_text(json.dumps(stale))
    assert generator.main(["--check", "--output", str(path)]) == 1
    assert generator.diff_summary(stale, fresh) == [
        "+ torch.sigmoid",
        "~ torch.exp: patterns.1.outputs",
    ]
    assert generator.main(["--output", str(path)]) == 0
    assert path.read_text(encoding="utf-8") == TABLE.read_text(encoding="utf-8")


def op(key: str) -> OpSaving:
    saving = op_saving(key)
    assert saving is not None, key
    return saving


def test_version_recorded() -> None:
    import torch

    assert torch_version() == torch.__version__.split("+")[0]


@pytest.mark.parametrize(
    "key",
    [
        "torch.sigmoid",
        "Tensor.sigmoid",
        "torch.nn.functional.sigmoid",
        "torch.tanh",
        "Tensor.exp",
        "torch.exp",
        "torch.relu",
        "torch.nn.functional.relu",
        "Tensor.relu",
        "torch.softmax",
        "torch.nn.functional.softmax",
        "torch.nn.functional.log_softmax",
        "torch.sqrt",
        "torch.nn.Sigmoid",
        "torch.nn.ReLU",
    ],
)
def test_saves_output(key: str) -> None:
    assert op(key).saves_output
    assert op(key).saves_inputs == (False,)


@pytest.mark.parametrize(
    "key",
    [
        "torch.log",
        "Tensor.log",
        "torch.sin",
        "torch.cos",
        "torch.abs",
        "torch.pow[scalar]",
        "Tensor.pow[scalar]",
        "operator.pow[scalar]",
        "torch.clamp",
        "torch.nn.functional.gelu",
        "torch.nn.functional.silu",
        "torch.nn.functional.elu",
        "torch.nn.functional.leaky_relu",
        "torch.nn.GELU",
    ],
)
def test_saves_input(key: str) -> None:
    assert op(key).saves_inputs == (True,)
    assert not op(key).saves_output


@pytest.mark.parametrize(
    "key",
    [
        "torch.add",
        "operator.add",
        "operator.sub",
        "torch.sum",
        "Tensor.sum",
        "Tensor.mean",
        "Tensor.view",
        "Tensor.reshape",
        "Tensor.permute",
        "Tensor.t",
        "Tensor.unsqueeze",
        "Tensor.expand",
        "torch.cat",
        "torch.stack",
        "torch.clone",
        "Tensor.clone",
        "operator.neg",
        "torch.cumsum",
        "operator.getitem",
    ],
)
def test_saves_nothing(key: str) -> None:
    saving = op(key)
    assert not saving.saves_anything
    assert saves_anything(key) is False
    assert not any(saving.saves_inputs)
    assert not saving.saves_output
    assert saving.fails_second_backward() is False


def test_binary_ops_save_the_other_operand() -> None:
    for key in ("operator.mul", "torch.mul", "Tensor.mul", "operator.matmul", "torch.einsum"):
        saving = op(key)
        assert saving.saves_inputs == (True, True), key
        # Only the features require grad: the plain tensor (a MoCo queue) is what is saved.
        assert saving.saves_inputs_if_only_first_requires_grad == (False, True), key
        assert saving.saves_input(1, [True, False]) is True
        assert saving.saves_input(0, [True, False]) is False
        assert saving.saves_input(0, [True, None]) is None  # depends on the unknown operand
    assert op("torch.nn.functional.mse_loss").saves_inputs == (True, True)


def test_modules_save_input_when_the_weight_requires_grad() -> None:
    for key in ("torch.nn.Linear", "torch.nn.Conv2d"):
        assert op(key).saves_inputs == (True,)
        assert op(key).saves_input(0, [False]) is True  # data input: the weight needs it
        assert op(key).saves_param("weight") is True
        assert op(key).saves_param("bias") is False
    embedding = op("torch.nn.Embedding")
    assert embedding.input_kinds == ("long",)
    assert not embedding.saves_output


def test_views() -> None:
    assert op("operator.getitem").view_of_input == 0  # x[:, 0], x[0], x[1:]
    for key in ("Tensor.view", "Tensor.transpose", "Tensor.narrow", "Tensor.detach", "Tensor.T"):
        assert op(key).view_of_input == 0, key
    for key in ("torch.sigmoid", "Tensor.clone", "operator.getitem[mask]", "torch.cat"):
        assert op(key).view_of_input is None, key
    assert op("Tensor.unbind").multi_output_view


def test_scalar_operands_are_not_saved_but_the_graph_still_holds_tensors() -> None:
    for key in ("operator.mul[scalar]", "operator.mul[rscalar]", "operator.truediv[scalar]"):
        assert op(key).saves_inputs == (False,)
        assert op(key).fails_second_backward() is True
        assert saves_anything(key) is True


def test_may_save_an_input_over_every_call_shape() -> None:
    assert may_save_an_input("operator.mul")  # `x * y`, though `x * 2` saves none
    assert may_save_an_input("operator.pow")
    assert not may_save_an_input("operator.add")
    assert not may_save_an_input("Tensor.view")
    assert not may_save_an_input("torch.no_such_op")


def test_unknown_op() -> None:
    assert op_saving("torch.no_such_op") is None
    assert saves_anything("torch.no_such_op") is None


def test_requires_grad_resolution() -> None:
    sigmoid = op("torch.sigmoid")
    assert sigmoid.saves_output_when([True]) is True
    assert sigmoid.saves_output_when([False]) is False  # no graph at all
    assert sigmoid.saves_output_when([None]) is None
    with pytest.raises(ValueError):
        sigmoid.saves_input(0, [True, True])
