"""Representations: modules mapping images in [0, 1] to the feature ``f`` (and ``g(f)``).

Every representation, frozen or trained, is a :class:`Representation`, so embedding,
detectors and the DAG never need to know how the features were learned.
"""

from __future__ import annotations

import torch
from torch import nn

from pipeline_lib.models.resnet import resnet18_small

#: Representations that need no training: their features depend on the seed (random
#: initialisation) but not on the inlier class, so the DAG embeds a data set once per seed.
FROZEN_METHODS: tuple[str, ...] = ("raw", "resnet18_random")

#: Representations learned by a self-supervised proxy task, one model per (data set, inlier
#: class, contamination, seed): see :func:`pipeline_lib.train.train_representation`.
TRAINED_METHODS: tuple[str, ...] = (
    "rotnet",
    "rotation",
    "denoising",
    "contrastive",
    "contrastive_da",
)

#: Every representation id the pipeline knows (PROTOCOL.md, "Representations").
METHODS: tuple[str, ...] = FROZEN_METHODS + TRAINED_METHODS


class Representation(nn.Module):
    """A backbone ``f`` with an optional projection head ``g``.

    Parameters
    ----------
    backbone : nn.Module
        Maps ``(n, 3, h, w)`` images in [0, 1] to features of shape ``(n, d)``.
    head : nn.Module or None, default=None
        Maps ``f`` to ``g(f)``; ``None`` when the representation has no head.
    """

    def __init__(self, backbone: nn.Module, head: nn.Module | None = None) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = head

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        f = self.backbone(x)
        out = {"f": f}
        if self.head is not None:
            out["g"] = self.head(f)
        return out


def build_representation(method: str, *, seed: int, width: int = 64) -> Representation:
    """Build a frozen representation, deterministically for a given ``seed``.

    Parameters
    ----------
    method : str
        One of :data:`FROZEN_METHODS`.
    seed : int
        Seeds the random initialisation (``resnet18_random``).
    width : int, default=64
        First-stage width of the ResNet (64 in the paper).

    Returns
    -------
    Representation
        In inference mode (BatchNorm uses its running statistics).

    Raises
    ------
    ValueError
        If ``method`` is not a frozen representation.
    """
    if method == "raw":
        model = Representation(nn.Flatten())
    elif method == "resnet18_random":
        # Seed only the CPU generator the weights are drawn from, and leave the caller's
        # random state (CPU and CUDA) as it was.
        with torch.random.fork_rng(devices=[]):
            torch.random.default_generator.manual_seed(seed)
            model = Representation(resnet18_small(width=width))
    else:
        raise ValueError(
            f"unknown frozen representation {method!r}; allowed: {', '.join(FROZEN_METHODS)}"
        )
    return model.eval()
