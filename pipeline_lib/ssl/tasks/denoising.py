"""Denoising autoencoder (Vincent et al. 2008): reconstruct the clean input from ``f(x + noise)``;
the task of ``denoising``.

The paper names the method and nothing of its setup; docs/denoising.md gives the reading
this module implements and the variants. Per step:

- **Input:** one view ``A(x)`` of each image, drawn by the view augmentation of the other
  methods (the paper trains every representation "under the same condition"); with
  ``augment=None`` (the ``denoising_no_views`` variant) the plain image.
- **Corruption:** additive Gaussian noise of standard deviation ``noise_std`` (the recipe's is
  ``PAPER_RECIPE["noise_std"]``, :mod:`pipeline_lib.registry`) on inputs in [0, 1], not
  clipped, drawn from the run's CPU generator.
- **Decoder** (:class:`~pipeline_lib.models.heads.Decoder`): from ``f`` (default) or from
  the feature map before pooling (the ``denoising_spatial`` variant); :func:`decode`.
- **Loss:** the mean squared error to a *target* computed from the clean input (the clean
  view, not the un-augmented image):

  - ``"pixels"`` (default): the clean input itself (decoder ends in a sigmoid).
  - ``"patch_normalized"`` (the ``denoising_patchnorm`` variant): every ``patch x patch``
    block of every channel standardised to zero mean and unit deviation, as the
    normalised-pixel targets of masked autoencoders (He et al. 2022).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from pipeline_lib.registry import DENOISING_PATCH, DENOISING_TARGETS, PAPER_RECIPE
from pipeline_lib.ssl.augment import ViewAugment, to_unit_float
from pipeline_lib.ssl.draws import Draws, as_draws
from pipeline_lib.ssl.settings import TrainSettings
from pipeline_lib.ssl.tasks.base import ProxyTask, StepParts

__all__ = [
    "TASK",
    "decode",
    "denoising_inputs",
    "denoising_target",
    "normalize_patches",
    "reconstruction_loss",
]

#: Added to a block's standard deviation so that flat blocks (sky, background) are not
#: blown up into amplified noise.
PATCH_STD_EPS = 1e-2


def normalize_patches(images: torch.Tensor, patch: int) -> torch.Tensor:
    """Standardise every ``patch x patch`` block of every channel of ``(n, c, h, w)`` images.

    Each block is shifted to mean 0 and divided by its (unbiased) standard deviation plus
    :data:`PATCH_STD_EPS`; float32 of the input's shape.

    Raises
    ------
    ValueError
        If ``patch < 2`` or does not divide both image sides.
    """
    n, c, h, w = images.shape
    if patch < 2 or h % patch or w % patch:
        raise ValueError(
            f"denoising_patch must be >= 2 and divide the image sides {h}x{w}, got {patch}"
        )
    blocks = images.float().unfold(2, patch, patch).unfold(3, patch, patch)
    mean = blocks.mean(dim=(4, 5), keepdim=True)
    std = blocks.std(dim=(4, 5), keepdim=True)
    blocks = (blocks - mean) / (std + PATCH_STD_EPS)
    # (n, c, h/p, w/p, p, p) -> (n, c, h, w)
    return blocks.permute(0, 1, 2, 4, 3, 5).reshape(n, c, h, w)


def denoising_target(
    clean: torch.Tensor, target: str, patch: int = DENOISING_PATCH
) -> torch.Tensor:
    """What the decoder must output for clean images in [0, 1] (see the module docstring)."""
    if target == "pixels":
        return clean
    if target == "patch_normalized":
        return normalize_patches(clean, patch)
    raise ValueError(
        f"unknown denoising_target {target!r}; allowed: {', '.join(DENOISING_TARGETS)}"
    )


def reconstruction_loss(reconstruction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error over all pixels and channels (float32 scalar)."""
    if reconstruction.shape != target.shape:
        raise ValueError(
            f"reconstruction {tuple(reconstruction.shape)} and target {tuple(target.shape)} differ"
        )
    return F.mse_loss(reconstruction.float(), target.float())


def decode(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The decoder's reconstruction of ``x``: from ``f``, or from the map a spatial one reads.

    ``model`` is a denoising :class:`~pipeline_lib.models.proxy.ProxyModel` or a stacked
    copy of several (:mod:`pipeline_lib.models.stacked`), whose modules keep these
    attributes. The spatial path calls ``backbone.feature_map``, which ``step_mode:
    compiled`` leaves uncompiled (it compiles the modules' ``forward``): the backbone then
    runs eager kernels inside the captured step.
    """
    if model.proxy.spatial:
        return model.proxy(model.backbone.feature_map(x))
    return model.proxy(model.backbone(x))


def denoising_inputs(
    batch: torch.Tensor,
    *,
    generator: torch.Generator | Draws,
    noise_std: float = PAPER_RECIPE["noise_std"],
    augment: Callable[..., torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The corrupted network input and the clean images of one denoising step.

    The clean images are one view of each image (``augment``), or the plain images with
    ``augment=None``; the noise is drawn from ``generator``.

    Raises
    ------
    ValueError
        If ``noise_std < 0``.
    """
    if noise_std < 0:
        raise ValueError(f"noise_std must be >= 0, got {noise_std}")
    clean = augment(batch, generator) if augment is not None else to_unit_float(batch)
    noise = as_draws(generator).randn(*clean.shape).to(clean.device, non_blocking=True)
    return clean + noise_std * noise, clean


def _bind(settings: TrainSettings, augment: ViewAugment | None) -> StepParts:
    """The corrupted view, its reconstruction, and the squared error to the clean target."""
    corrupt = functools.partial(denoising_inputs, noise_std=settings.noise_std, augment=augment)
    target = functools.partial(
        denoising_target, target=settings.denoising_target, patch=settings.denoising_patch
    )
    return StepParts(
        inputs=lambda batch, generator: corrupt(batch, generator=generator),
        forward=decode,
        loss=lambda reconstruction, clean: reconstruction_loss(reconstruction, target(clean)),
    )


def _check_patch(settings: TrainSettings, side: int) -> None:
    """A ``patch_normalized`` target needs blocks that tile the image."""
    patch = settings.denoising_patch
    if settings.denoising_target == "patch_normalized" and (patch < 2 or side % patch):
        raise ValueError(
            f"denoising_patch must be >= 2 and divide the image side {side}, got {patch}"
        )


TASK = ProxyTask("denoising autoencoder", _bind, check_data=_check_patch)
