"""Initial weights: the released code's Keras initialisers, or torch's.

The released networks (``model/resnet_util.py``) are Keras layers with these initialisers:

* every convolution: ``VarianceScaling(scale=2.0, mode='fan_out')``, whose TF 2 default
  distribution is ``truncated_normal``: a normal of standard deviation
  ``sqrt(scale / fan_out) / 0.87962566103423978`` cut at two standard deviations (the
  constant is the standard deviation of a unit normal truncated to [-2, 2], so the weights
  end with variance ``scale / fan_out``), ``fan_out = out_channels * kh * kw``; no bias;
* every Dense layer: Keras' defaults, ``glorot_uniform`` (``U(-l, l)``,
  ``l = sqrt(6 / (fan_in + fan_out))``) and a zero bias;
* every BatchNormalization: gamma 1, beta 0 (no zero-initialised last BatchNorm of a block),
  moving mean 0, moving variance 1.

``released`` applies that rule to every layer of a network. The denoising decoder has no
released counterpart; the same rule applied to its layers is the simplest reading: its
transposed convolutions get the convolution rule with ``fan_out`` as both frameworks compute
it for a transposed kernel (``in_channels * kh * kw``: Keras' kernel is ``(kh, kw, out,
in)``, torch's ``(in, out, kh, kw)``), and a zero bias; its Linear layer the Dense rule.

``torch`` (a variant) is torch's own initialisation: torchvision's ResNet rule for the
backbone's convolutions (Kaiming normal, fan-out, not truncated; BatchNorm 1 and 0) and
torch's layer defaults for every other layer (``kaiming_uniform_(a=sqrt(5))`` weights and
``U(+-1/sqrt(fan_in))`` biases for Linear and transposed convolutions).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from pipeline_lib.registry import INITS

__all__ = ["INITS", "TRUNCATED_NORMAL_STD", "released_init_", "variance_scaling_std"]

#: Standard deviation of a unit normal truncated to [-2, 2] (Keras' constant).
TRUNCATED_NORMAL_STD = 0.87962566103423978

#: The released convolutions' ``VarianceScaling`` scale.
CONV_SCALE = 2.0


def variance_scaling_std(fan: int, scale: float = CONV_SCALE) -> float:
    """The pre-truncation standard deviation Keras uses: ``sqrt(scale / fan) / 0.8796...``."""
    return math.sqrt(scale / max(1, fan)) / TRUNCATED_NORMAL_STD


def _fan_out(weight: torch.Tensor) -> int:
    # torch's convention equals Keras' for Linear, Conv2d and ConvTranspose2d (module doc).
    return nn.init._calculate_fan_in_and_fan_out(weight)[1]


@torch.no_grad()
def _truncated_variance_scaling_(weight: torch.Tensor, scale: float = CONV_SCALE) -> None:
    """A normal of Keras' std cut at +-2 std, by the inverse CDF of a uniform draw.

    Why not ``nn.init.trunc_normal_``: torch 2.14 draws it by rejection, a loop whose length
    depends on the numbers (it cannot be traced, e.g. with fake tensors, and its draws count
    varies); TF re-draws too. The inverse CDF gives the same distribution from exactly one
    uniform number per weight.
    """
    std = variance_scaling_std(_fan_out(weight), scale)
    low = math.erf(-2.0 / math.sqrt(2.0))  # 2 Phi(-2) - 1
    weight.uniform_(low, -low)
    weight.erfinv_().mul_(std * math.sqrt(2.0))
    weight.clamp_(-2.0 * std, 2.0 * std)  # rounding at the ends of erfinv


@torch.no_grad()
def released_init_(module: nn.Module) -> nn.Module:
    """Re-initialise every layer of ``module`` in place with the released rule; return it.

    Draws from the global torch RNG (callers fork and seed it), layer by layer in
    ``module.modules()`` order.

    Raises
    ------
    ValueError
        If ``module`` holds a layer with parameters that the rule does not cover.
    """
    for layer in module.modules():
        if isinstance(layer, nn.Conv2d | nn.ConvTranspose2d):
            _truncated_variance_scaling_(layer.weight)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
        elif isinstance(layer, nn.Linear):
            nn.init.xavier_uniform_(layer.weight)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
        elif isinstance(layer, nn.modules.batchnorm._BatchNorm):
            layer.reset_parameters()  # gamma 1, beta 0, running mean 0 and variance 1
        elif any(True for _ in layer.parameters(recurse=False)):
            raise ValueError(f"no released initialiser for {type(layer).__name__}")
    return module


def check_init(init: str) -> str:
    """``init`` if it is one of :data:`INITS`, else a ValueError naming the allowed values."""
    if init not in INITS:
        raise ValueError(f"unknown init {init!r}; allowed: {', '.join(INITS)}")
    return init
