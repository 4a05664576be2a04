"""Rotation prediction (Gidaris et al.): the task of ``rotation`` and, with a linear
classifier on ``f`` (its head kind ``rotation_linear``), of RotNet (Golan et al.).

Training: four independently augmented views of every image, rotated by 0/90/180/270
degrees, and cross-entropy of the 4-way classifier ``proxy(g(f(view)))`` against the
rotation. The classifier's one-class scores live in :mod:`pipeline_lib.ssl.rotation`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pipeline_lib.models.proxy import rotation_logits
from pipeline_lib.ssl.augment import ViewAugment, rotation_views
from pipeline_lib.ssl.settings import TrainSettings
from pipeline_lib.ssl.tasks.base import ProxyTask, StepParts, at_least_float32

__all__ = ["TASK", "rotation_loss"]


def rotation_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``(n, 4)`` rotation logits against labels in 0..3 (float32, or
    float64 for float64 logits)."""
    if logits.ndim != 2 or logits.shape[1] != 4 or labels.shape != logits.shape[:1]:
        raise ValueError(
            f"need logits (n, 4) and labels (n,), got {tuple(logits.shape)}, {tuple(labels.shape)}"
        )
    return F.cross_entropy(at_least_float32(logits), labels)


def _bind(settings: TrainSettings, augment: ViewAugment | None) -> StepParts:
    """``4 n`` rotated views of a batch of ``n`` and their rotations; the classifier's loss."""
    return StepParts(
        inputs=lambda batch, generator: rotation_views(batch, augment, generator),
        forward=rotation_logits,
        loss=rotation_loss,
    )


TASK = ProxyTask("rotation prediction", _bind)
