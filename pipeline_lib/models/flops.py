"""Model FLOPs of a training step, to state throughput as a share of a device's peak.

Counted, not estimated: :class:`torch.utils.flop_counter.FlopCounterMode` runs one view
through the backbone, head and proxy module (rotation classifier or denoising decoder) on
the meta device and counts convolutions and matrix products at 2 FLOPs per multiply-add, as
a GPU's peak does (BatchNorm, activations and the view augmentations are not counted, as in
MFU figures). A training step is 3x its forward pass (backward = 2x forward). For the
paper's ResNet-18 (width 64) at 32x32 the backbone alone is 1.11 GFLOP per view, the
"0.56 GFLOPs" (multiply-adds) usually quoted for CIFAR ResNet-18.
"""

from __future__ import annotations

import functools

import torch
from torch.utils.flop_counter import FlopCounterMode

from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.registry import method_spec

__all__ = ["forward_flops_per_view", "training_tflops"]


@functools.cache
def forward_flops_per_view(
    method: str, *, width: int, image_size: int = 32, backbone_only: bool = False
) -> int:
    """Forward FLOPs of one view through backbone, head and proxy module."""
    with torch.device("meta"):
        model = build_proxy_model(method, width=width, image_size=image_size).eval()
        x = torch.empty(1, 3, image_size, image_size)
    with FlopCounterMode(display=False) as counter:
        features = model.backbone(x)
        if not backbone_only:
            head = model.head(features) if model.head is not None else features
            if model.proxy is not None:  # the rotation classifier reads g, the decoder f
                model.proxy(head if method_spec(method).rotation_classifier else features)
    return int(counter.get_total_flops())


def training_tflops(
    method: str, *, width: int, instances_per_s: float, image_size: int = 32
) -> float:
    """Model TFLOP/s of training ``method`` at ``instances_per_s`` training instances/s.

    Each instance is :attr:`~pipeline_lib.registry.MethodSpec.views_per_instance` views
    through the network (4 rotations, 1 corrupted image, 2 augmented views).
    """
    views = method_spec(method).views_per_instance
    per_instance = 3 * forward_flops_per_view(method, width=width, image_size=image_size)
    return per_instance * views * instances_per_s / 1e12
