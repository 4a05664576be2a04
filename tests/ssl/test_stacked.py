"""Stacking K networks into one (pipeline_lib.models.stacked): same outputs, exact copies."""

from __future__ import annotations

import pytest
import torch

from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.models.stacked import (
    stack_inputs,
    stack_models,
    unload_stacked,
    unstack_outputs,
)
from pipeline_lib.ssl.tasks.denoising import decode

#: Grouped convolutions and batched matrix products add in another order than the separate
#: layers: float32 rounding, measured at most ~7e-6 absolute on outputs of order 1.
ATOL = 1e-4


def _models(method: str, k: int = 3, seed: int = 0) -> list:
    torch.manual_seed(seed)
    options = {} if method in ("rotnet", "denoising") else {"head_depth": 2, "head_hidden": 16}
    if method == "denoising_spatial":
        method, options = "denoising", {"denoising_decoder": "spatial"}
    return [build_proxy_model(method, width=8, **options) for _ in range(k)]


def _outputs(model, x: torch.Tensor, method: str) -> torch.Tensor:
    if method.startswith("denoising"):
        return decode(model, x)
    return model.head(model.backbone(x))


@pytest.mark.parametrize("method", ["rotation", "contrastive", "denoising", "denoising_spatial"])
def test_stacked_network_computes_each_model(method: str) -> None:
    models = _models(method)
    state = torch.random.get_rng_state()
    stacked = stack_models(models)
    assert torch.equal(torch.random.get_rng_state(), state)  # building draws nothing
    inputs = [torch.rand(4, 3, 32, 32) for _ in models]
    for train in (True, False):
        for model in [*models, stacked]:
            model.train(train)
        outputs = unstack_outputs(_outputs(stacked, stack_inputs(inputs), method), len(models))
        for model, x, out in zip(models, inputs, outputs, strict=True):
            torch.testing.assert_close(out, _outputs(model, x, method), rtol=0, atol=ATOL)
    # Training-mode passes updated every model's own BatchNorm statistics.
    copies = _models(method, seed=1)
    unload_stacked(stacked, copies)
    for model, copy in zip(models, copies, strict=True):
        pairs = zip(model.state_dict().items(), copy.state_dict().values(), strict=True)
        for (name, a), b in pairs:
            torch.testing.assert_close(a, b, rtol=0, atol=ATOL, msg=name)


def test_stack_and_unload_copy_exactly() -> None:
    models = _models("rotation")
    copies = _models("rotation", seed=1)
    unload_stacked(stack_models(models), copies)
    for model, copy in zip(models, copies, strict=True):
        for a, b in zip(model.state_dict().values(), copy.state_dict().values(), strict=True):
            assert torch.equal(a, b)


def test_only_equal_models_stack() -> None:
    with pytest.raises(ValueError, match="model 1 is not shaped like model 0"):
        stack_models([build_proxy_model("rotnet", width=8), build_proxy_model("rotnet", width=4)])
    with pytest.raises(ValueError, match="at least one"):
        stack_models([])
    with pytest.raises(TypeError, match="cannot stack layer"):
        stack_models([torch.nn.Sequential(torch.nn.LayerNorm(4))] * 2)
