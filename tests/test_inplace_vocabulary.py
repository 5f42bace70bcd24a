"""GF004's in-place vocabulary in `torch_api` matches the installed PyTorch."""

from __future__ import annotations

import inspect

import pytest

from codemods.analysis import torch_api

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("method", sorted(torch_api.INPLACE_METHODS_WITH_TWIN))
def test_inplace_method_has_out_of_place_twin(method: str) -> None:
    assert hasattr(torch.Tensor, method), f"Tensor.{method} does not exist"
    assert hasattr(torch.Tensor, method[:-1]), f"Tensor.{method[:-1]} does not exist"


@pytest.mark.parametrize("method", sorted(torch_api.NON_WRITING_UNDERSCORE_METHODS))
def test_non_writing_methods_exist(method: str) -> None:
    assert hasattr(torch.Tensor, method)


@pytest.mark.parametrize(("qualified", "position"), sorted(torch_api.INPLACE_FLAG_POSITION.items()))
def test_inplace_flag_position(qualified: str, position: int) -> None:
    owner: object = torch
    for part in qualified.split(".")[1:]:
        owner = getattr(owner, part)
    signature = inspect.signature(owner.__init__ if isinstance(owner, type) else owner)
    names = [name for name in signature.parameters if name != "self"]
    assert names[position] == "inplace", f"{qualified}: positional parameters {names}"
