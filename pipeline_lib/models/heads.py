"""Projection heads, the rotation classifier and the denoising decoder (nn.Module only).

The released code's ``get_head(dims, num_class)`` (``model/resnet_util.py``): for every entry
of ``dims`` but the last, ``Linear(no bias) -> BatchNorm1d -> ReLU``; then a ``Linear`` to
``dims[-1]`` (with a bias only for a classifier); then, for a classifier, a ``Linear`` to the
class logits. The paper's head depth ``d`` is the notation ``[512 x d, 128]``:

======================  ======================================  ===========================
proxy task              ``g`` (the head) at depth ``d``          on top of ``g``
======================  ======================================  ===========================
contrastive (+ DA)      ``d`` hidden layers, Linear(128, no bias)  nothing (loss on ``g``)
                        (``d = 0``: one Linear(f, 128))
rotation prediction     ``d - 1`` hidden layers, Linear(512)       ``Linear(512, 4)`` logits
                        (released ``--head_dims`` of ``d`` 512s)
RotNet                  depth 0: identity, ``g = f``               ``Linear(dim(f), 4)`` logits
denoising               none                                       ``Decoder`` on ``f``
======================  ======================================  ===========================
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from pipeline_lib.registry import MLP_HEAD_DEPTH


class HeadBatchNorm(nn.BatchNorm1d):
    """The head's BatchNorm: moving variance towards the *biased* batch variance.

    Keras' BatchNormalization on the head's 2-D input (``model/resnet_util.py``, ``get_head``)
    cannot use the fused kernel: it normalises with the biased batch variance, as torch does,
    and also moves its moving variance towards it, where torch's ``BatchNorm1d`` moves it
    towards the unbiased one, ``n / (n - 1)`` times larger (1.6 % at the 64 views of a
    contrastive batch). The convolutions' BatchNorm is fused in Keras and uses the unbiased
    one, as torch's ``BatchNorm2d`` (tests/reference/test_network.py measures both).

    Takes ``BatchNorm1d``'s arguments; ``momentum`` must be a number (Keras has no cumulative
    average, and ``None`` would need the step count on the host).
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        if self.momentum is None:
            raise ValueError("HeadBatchNorm needs a momentum (an exponential moving average)")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and self.track_running_stats):
            return super().forward(x)
        # x: (n, c). Normalise with the batch statistics; move the moving ones here.
        out = F.batch_norm(x, None, None, self.weight, self.bias, True, 0.0, self.eps)
        with torch.no_grad():
            var, mean = torch.var_mean(x.to(self.running_var.dtype), dim=0, correction=0)
            self.running_mean.lerp_(mean, self.momentum)
            self.running_var.lerp_(var, self.momentum)
            self.num_batches_tracked.add_(1)
        return out


def mlp_head(
    in_dim: int,
    *,
    depth: int,
    hidden: int = 512,
    out_dim: int | None = None,
    out_bias: bool = True,
) -> nn.Module:
    """``depth`` hidden layers ``Linear(no bias) -> BatchNorm -> ReLU``, then a Linear.

    The BatchNorm is :class:`HeadBatchNorm`, the released head's.

    Parameters
    ----------
    in_dim : int
        Dimension of the input (``f``: 512 for ResNet-18).
    depth : int
        Number of hidden layers.
    hidden : int, default=512
        Width of the hidden layers.
    out_dim : int or None, default=None
        Width of a final ``Linear`` after the hidden layers; ``None`` for no final layer.
    out_bias : bool, default=True
        Whether that final Linear has a bias (the released code: only for classifiers).

    Returns
    -------
    nn.Module
        ``nn.Identity()`` when ``depth == 0`` and ``out_dim is None``; otherwise an
        ``nn.Sequential`` with attribute ``out_dim`` (the dimension it outputs). Use
        :func:`head_output_dim` to get the output dimension of any head.

    Raises
    ------
    ValueError
        If ``depth < 0``, ``hidden < 1``, ``in_dim < 1`` or ``out_dim < 1``.
    """
    if in_dim < 1 or hidden < 1:
        raise ValueError(f"in_dim and hidden must be >= 1, got {in_dim} and {hidden}")
    if depth < 0:
        raise ValueError(f"head depth must be >= 0, got {depth}")
    if out_dim is not None and out_dim < 1:
        raise ValueError(f"out_dim must be >= 1 or None, got {out_dim}")
    if depth == 0 and out_dim is None:
        return nn.Identity()
    layers: list[nn.Module] = []
    dim = in_dim
    for _ in range(depth):
        layers += [
            nn.Linear(dim, hidden, bias=False),
            HeadBatchNorm(hidden),
            nn.ReLU(inplace=True),
        ]
        dim = hidden
    if out_dim is not None:
        layers.append(nn.Linear(dim, out_dim, bias=out_bias))
        dim = out_dim
    head = nn.Sequential(*layers)
    head.out_dim = dim
    return head


def contrastive_head(
    in_dim: int, *, depth: int = MLP_HEAD_DEPTH, hidden: int = 512, out_dim: int = 128
) -> nn.Module:
    """Contrastive projection ``[hidden x depth, out_dim]``: the released ``get_head``.

    ``depth`` hidden layers, then ``Linear(out_dim)`` without bias (the released contrastive
    model has no classifier, so its last Linear has no bias); depth 0 is that single Linear.
    """
    return mlp_head(in_dim, depth=depth, hidden=hidden, out_dim=out_dim, out_bias=False)


def rotation_head(in_dim: int, *, depth: int = MLP_HEAD_DEPTH, hidden: int = 512) -> nn.Module:
    """Rotation-prediction MLP of the released code: ``--head_dims`` of ``depth`` entries.

    ``depth - 1`` hidden layers, then ``Linear(hidden)`` with a bias (the ``embeds`` of a
    classifier, ``g``); the 4-way classifier is a separate module on top. Depth 0 is the
    identity (RotNet: the classifier sits on ``f``).
    """
    if depth == 0:
        return nn.Identity()
    return mlp_head(in_dim, depth=depth - 1, hidden=hidden, out_dim=hidden, out_bias=True)


def head_output_dim(head: nn.Module, in_dim: int) -> int:
    """Output dimension of a head built here (``in_dim`` for the identity head)."""
    return int(getattr(head, "out_dim", in_dim))


class Decoder(nn.Module):
    """Decoder of the denoising autoencoder: feature ``f`` (or its map) -> image.

    ``pooled`` (default): ``Linear(in_dim, c * 4 * 4)`` from the pooled ``f`` to a 4x4 map,
    so everything the decoder rebuilds has passed through the representation itself.
    ``spatial``: a 1x1 convolution from the backbone's last feature map (``in_dim``
    channels, side ``image_size / 8``) to ``c`` channels, so the layout of the image reaches
    the decoder without passing through ``f``. Then transposed convolutions (kernel 4,
    stride 2) that double the resolution and halve the channels, each followed by BatchNorm
    and ReLU, and a last transposed convolution to 3 channels: with a sigmoid for targets
    in [0, 1] (``sigmoid=True``), without one for unbounded targets such as per-patch
    standardised pixels.

    Parameters
    ----------
    in_dim : int
        Dimension of ``f`` (channels of the feature map).
    image_size : int, default=32
        Output side; a power of two >= 8 (32 and 64 in the protocol).
    width : int, default=64
        Channels of the last hidden stage; the first map has ``width * 2**(stages - 1)``
        channels (256 for width 64 at 32x32).
    sigmoid : bool, default=True
    spatial : bool, default=False
        Read the ``(n, in_dim, image_size / 8, image_size / 8)`` feature map instead of
        ``f``.

    Raises
    ------
    ValueError
        If ``image_size`` is not a power of two >= 8 or ``width < 1``.
    """

    def __init__(
        self,
        in_dim: int,
        *,
        image_size: int = 32,
        width: int = 64,
        sigmoid: bool = True,
        spatial: bool = False,
    ) -> None:
        super().__init__()
        stages = int(round(math.log2(image_size / 4))) if image_size >= 8 else 0
        if image_size < 8 or 4 * 2**stages != image_size:
            raise ValueError(f"Decoder image_size must be a power of two >= 8, got {image_size}")
        if width < 1:
            raise ValueError(f"Decoder width must be >= 1, got {width}")
        self.image_size = image_size
        self.spatial = spatial
        if spatial:
            stages = 3  # the ResNet's map is 8 times smaller than the image
        channels = width * 2 ** (stages - 1)
        self.fc: nn.Module = (
            nn.Conv2d(in_dim, channels, 1) if spatial else nn.Linear(in_dim, channels * 16)
        )
        self.start_channels = channels
        layers: list[nn.Module] = [nn.BatchNorm2d(channels), nn.ReLU(inplace=True)]
        for _ in range(stages - 1):
            layers += [
                nn.ConvTranspose2d(channels, channels // 2 or 1, 4, 2, 1, bias=False),
                nn.BatchNorm2d(channels // 2 or 1),
                nn.ReLU(inplace=True),
            ]
            channels = channels // 2 or 1
        layers += [nn.ConvTranspose2d(channels, 3, 4, 2, 1)]
        if sigmoid:
            layers.append(nn.Sigmoid())
        self.net = nn.Sequential(*layers)

    def forward(self, f: torch.Tensor) -> torch.Tensor:
        if self.spatial:
            # f: (n, in_dim, s, s) -> (n, c, s, s) -> (n, 3, 8 s, 8 s)
            return self.net(self.fc(f))
        # f: (n, in_dim) -> (n, c, 4, 4) -> (n, 3, image_size, image_size)
        x = self.fc(f).view(len(f), self.start_channels, 4, 4)
        return self.net(x)
