"""This project's side of a comparison: our network with the released weights, our outputs.

Torch and NumPy, no TensorFlow: imported by the ``compare_*.py`` modules that
tests/reference/ runs in CI.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from networks import RELEASED_STEM

from pipeline_lib.models.keras_weights import convert_released_weights
from pipeline_lib.models.proxy import ProxyModel, build_proxy_model


def load_keras_weights(model: torch.nn.Module, weights: Mapping[str, np.ndarray]) -> None:
    """Load the released ``{keras_name: array}`` into ``model`` (strict: every tensor named)."""
    converted = convert_released_weights(weights)
    model.load_state_dict({key: torch.from_numpy(value) for key, value in converted.items()})


def our_network(
    head: Mapping[str, Any], width: int, weights: Mapping[str, np.ndarray]
) -> ProxyModel:
    """Our model of a released head (a trace's ``heads`` entry) at ``width``, 64-channel stem.

    Built on the meta device (no initial weights drawn) and filled from ``weights``.
    """
    with torch.device("meta"):
        model = build_proxy_model(
            str(head["method"]),
            width=width,
            stem_width=RELEASED_STEM,
            head_depth=int(head["head_depth"]),
        )
    model = model.to_empty(device="cpu")
    load_keras_weights(model, weights)
    return model


def nchw(images: np.ndarray) -> torch.Tensor:
    """Keras' NHWC float32 images -> torch's NCHW."""
    return torch.from_numpy(np.ascontiguousarray(np.asarray(images).transpose(0, 3, 1, 2)))


def released_outputs(
    model: ProxyModel, x: torch.Tensor, *, pools: torch.Tensor | None = None
) -> dict[str, torch.Tensor]:
    """The released model's three outputs from one forward pass of ours.

    ``pools`` is ``f`` (given: the backbone's output already computed on ``x``), ``embeds``
    the head's output (``f`` for RotNet's identity head) and ``logits`` the rotation
    classifier's (the contrastive model has none: its ``embeds``).
    """
    pools = model.backbone(x) if pools is None else pools
    embeds = model.head(pools)
    logits = model.proxy(embeds) if model.proxy is not None else embeds
    return {"pools": pools, "embeds": embeds, "logits": logits}
