"""Flip prediction: the network tells a view from its mirror image.

A self-supervised proxy task in the shape droc-bench's loops compose (``ProxyTask`` and its
``StepParts``): ``inputs`` draws two augmented views of each image and mirrors the second,
``forward`` runs the backbone and the MLP head, and ``loss`` is the cross-entropy of the
first two head outputs against the labels (0: as drawn, 1: mirrored), with the label
smoothing of ``train.plugin.label_smoothing``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pipeline_lib.ssl.settings import TrainSettings
from pipeline_lib.ssl.tasks import ProxyTask, StepParts

__all__ = ["TASK"]


def _bind(settings: TrainSettings, augment) -> StepParts:
    smoothing = float(settings.plugin.get("label_smoothing", 0.0))
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"train.plugin.label_smoothing must be in [0, 1), got {smoothing}")

    def inputs(batch: torch.Tensor, generator) -> tuple[torch.Tensor, torch.Tensor]:
        n = len(batch)
        views = augment(batch.repeat(2, 1, 1, 1), generator, streams=2)  # (2n, 3, h, w)
        labels = torch.arange(2, device=views.device).repeat_interleave(n)
        return torch.cat([views[:n], views[n:].flip(-1)]), labels

    def loss(output: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = output[:, :2].float()  # (2n, 2): two outputs of g as the flip logits
        return F.cross_entropy(logits, labels, label_smoothing=smoothing)

    return StepParts(
        inputs=inputs,
        forward=lambda network, x: network.head(network.backbone(x)),
        loss=loss,
    )


TASK = ProxyTask("flip prediction", _bind)
