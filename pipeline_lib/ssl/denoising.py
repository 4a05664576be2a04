"""Denoising autoencoder (Vincent et al. 2008): reconstruct the clean image from ``f(x + noise)``.

Corruption: additive Gaussian noise of standard deviation ``noise_std`` (default 0.1 on
images in [0, 1], not clipped, drawn from the explicit CPU generator). The decoder
(:class:`~pipeline_lib.models.heads.Decoder`) maps ``f`` back to an image in [0, 1]; the
loss is the mean squared error to the clean image. By default there is no view
augmentation; with ``augment`` the clean target is one augmented view of each image.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from pipeline_lib.augment import to_unit_float
from pipeline_lib.models.proxy import ProxyModel

#: Default standard deviation of the Gaussian corruption (images in [0, 1]).
DEFAULT_NOISE_STD = 0.1


def reconstruction_loss(reconstruction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error over all pixels and channels (float32 scalar)."""
    if reconstruction.shape != target.shape:
        raise ValueError(
            f"reconstruction {tuple(reconstruction.shape)} and target {tuple(target.shape)} differ"
        )
    return F.mse_loss(reconstruction.float(), target.float())


def denoising_step(
    model: ProxyModel,
    batch: torch.Tensor,
    *,
    generator: torch.Generator,
    noise_std: float = DEFAULT_NOISE_STD,
    augment: Callable[..., torch.Tensor] | None = None,
) -> torch.Tensor:
    """One denoising loss on a uint8 batch ``(n, 3, h, w)``; scalar float32.

    Raises
    ------
    ValueError
        If ``noise_std < 0``.
    """
    if noise_std < 0:
        raise ValueError(f"noise_std must be >= 0, got {noise_std}")
    clean = augment(batch, generator) if augment is not None else to_unit_float(batch)
    noise = torch.randn(clean.shape, generator=generator).to(clean.device, non_blocking=True)
    reconstruction = model.proxy(model.backbone(clean + noise_std * noise))
    return reconstruction_loss(reconstruction, clean)
