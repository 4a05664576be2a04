"""ResNet backbones for small images (docs/protocol.md, "Training recipe").

The paper's ResNet-18 differs from the ImageNet one only in its stem: a 3x3 stride-1
convolution and no max-pool, so 32x32 inputs keep enough spatial resolution.
"""

from __future__ import annotations

import torch
from torch import nn

from pipeline_lib.models.init import check_init, released_init_


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with an identity (or 1x1 projection) shortcut."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class SmallImageResNet(nn.Module):
    """ResNet with BasicBlocks, a 3x3 stride-1 stem and global average pooling.

    Parameters
    ----------
    blocks : tuple of int, default=(2, 2, 2, 2)
        Blocks per stage; the default is ResNet-18.
    width : int, default=64
        Channels of the first stage; stages double it (64..512 in the paper). Tests use a
        narrow network (e.g. 8) to stay fast on CPU.
    stem_width : int or None, default=None
        Channels of the stem; None: ``width``. The released code's stem has 64 channels at
        every width (``model/resnet_util.py``), so its narrow networks start their first
        block with a 1x1 projection shortcut; ``stem_width=64`` is their counterpart.
    in_channels : int, default=3
    init : {"released", "torch"}, default="released"
        Initial weights (:mod:`pipeline_lib.models.init`): the released code's (convolutions
        truncated-normal ``VarianceScaling(2, fan_out)``, BatchNorm 1 and 0) or torchvision's
        ResNet rule (Kaiming normal, fan-out, not truncated; BatchNorm 1 and 0).

    Notes
    -----
    ``forward`` returns the pooled feature ``f`` of shape ``(n, 8 * width)``.
    """

    def __init__(
        self,
        blocks: tuple[int, ...] = (2, 2, 2, 2),
        *,
        width: int = 64,
        stem_width: int | None = None,
        in_channels: int = 3,
        init: str = "released",
    ) -> None:
        super().__init__()
        check_init(init)
        stem_width = width if stem_width is None else stem_width
        if width < 1 or stem_width < 1:
            raise ValueError(f"width and stem_width must be >= 1, got {width}, {stem_width}")
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, stem_width, 3, 1, 1, bias=False),
            nn.BatchNorm2d(stem_width),
            nn.ReLU(inplace=True),
        )
        stages = []
        channels = stem_width
        for stage, n_blocks in enumerate(blocks):
            out_channels = width * 2**stage
            for block in range(n_blocks):
                stride = 2 if stage > 0 and block == 0 else 1
                stages.append(BasicBlock(channels, out_channels, stride))
                channels = out_channels
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.feature_dim = channels
        if init == "released":
            released_init_(self)
        else:
            self._torchvision_init()

    def _torchvision_init(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        """The last stage's map before pooling: ``(n, feature_dim, h / 8, w / 8)``."""
        return self.stages(self.stem(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (n, c, h, w) in [0, 1] -> f: (n, feature_dim)
        return torch.flatten(self.pool(self.feature_map(x)), 1)


def resnet18_small(
    *, width: int = 64, stem_width: int | None = None, init: str = "released"
) -> SmallImageResNet:
    """ResNet-18 for 32x32 / 64x64 images (BasicBlocks [2, 2, 2, 2]), initialised by ``init``."""
    return SmallImageResNet((2, 2, 2, 2), width=width, stem_width=stem_width, init=init)
