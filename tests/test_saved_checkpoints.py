"""Representation files written by an earlier version of the library still load.

tests/fixtures/checkpoints/ holds one tiny ``model.pt`` per head kind (width 2, 8x8 images,
weights offset from their initial values so every tensor is told apart), written with
:func:`pipeline_lib.models.checkpoints.save_representation` before the networks were built
from the method table, and ``outputs.npz`` with what each network computed then on a fixed
input. Loading rebuilds the network from the file's ``arch`` alone: it must take every
saved tensor (strict keys and shapes) and compute what it computed when written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline_lib.models.checkpoints import load_trained_representation
from pipeline_lib.models.proxy import rotation_logits
from pipeline_lib.ssl.tasks.denoising import decode

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints"
OUTPUTS = np.load(FIXTURES / "outputs.npz")
NAMES = ("rotnet", "rotation", "contrastive", "contrastive_da", "denoising", "denoising_spatial")
#: The same float32 network on another CPU may sum its products in another order: each of
#: its ~20 layers adds a few float32 roundings (eps 1.2e-7) relative to the output's norm,
#: so 1e-5 of the norm bounds that with room; a wrong module or weight is off by order 1.
RELATIVE = 1e-5


def _close(got: torch.Tensor, expected: np.ndarray) -> bool:
    got_array = got.detach().numpy()
    scale = max(float(np.linalg.norm(expected)), np.finfo(np.float32).tiny)
    return got_array.shape == expected.shape and np.linalg.norm(got_array - expected) <= (
        RELATIVE * scale
    )


@pytest.mark.parametrize("name", NAMES)
def test_a_saved_representation_rebuilds_and_computes_what_it_computed(name: str) -> None:
    model = load_trained_representation(FIXTURES / f"{name}.pt")
    saved = torch.load(FIXTURES / f"{name}.pt", weights_only=True)
    assert model.arch == saved["arch"]
    assert sorted(model.state_dict()) == sorted(saved["state_dict"])
    x = torch.linspace(0, 1, 2 * 3 * 8 * 8).reshape(2, 3, 8, 8)
    expected = {key.split("/")[1]: OUTPUTS[key] for key in OUTPUTS if key.startswith(f"{name}/")}
    with torch.no_grad():
        outputs = dict(model(x))
        if "proxy" in expected:
            proxy = decode if model.arch["method"] == "denoising" else rotation_logits
            outputs["proxy"] = proxy(model, x)
    assert sorted(outputs) == sorted(expected)
    for key, values in expected.items():
        assert _close(outputs[key], values), key
