"""ImageNet-pretrained backbones: the input preprocessing they were trained with.

The pipeline's images are in [0, 1] and small (32x32 or 64x64); an ImageNet network expects
``size x size`` inputs normalised with the ImageNet channel mean and standard deviation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

#: Channel mean and standard deviation of ImageNet (torchvision's ``IMAGENET1K_V1``
#: transforms), for inputs in [0, 1].
IMAGENET_MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
IMAGENET_STD: tuple[float, float, float] = (0.229, 0.224, 0.225)


class ImageNetInput(nn.Module):
    """Resize and normalise images in [0, 1] as ImageNet models expect, then run ``backbone``.

    Parameters
    ----------
    backbone : nn.Module
        An ImageNet network mapping normalised ``(n, 3, size, size)`` images to features.
    size : int, default=224
        Side of the square input the backbone sees (bilinear resize, no antialiasing, no
        crop: the whole image is kept).
    mean, std : tuple of float, default=IMAGENET_MEAN, IMAGENET_STD
        Per-channel normalisation ``(x - mean) / std``.

    Raises
    ------
    ValueError
        If ``size`` < 1.
    """

    def __init__(
        self,
        backbone: nn.Module,
        *,
        size: int = 224,
        mean: tuple[float, float, float] = IMAGENET_MEAN,
        std: tuple[float, float, float] = IMAGENET_STD,
    ) -> None:
        super().__init__()
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self.backbone = backbone
        self.size = size
        # Buffers (not parameters): they follow .to(device) and are not trained.
        self.register_buffer("mean", torch.tensor(mean).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, 3, 1, 1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (n, 3, h, w) in [0, 1] -> (n, 3, size, size) normalised -> backbone features
        if x.shape[-2:] != (self.size, self.size):
            x = F.interpolate(
                x,
                size=(self.size, self.size),
                mode="bilinear",
                align_corners=False,
                antialias=False,
            )
        return self.backbone((x - self.mean) / self.std)
