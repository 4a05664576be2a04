"""The released Keras network's weights as this project's state dict, name by name.

The released code (google-research/deep_representation_one_class, ``model/resnet_util.py``)
names every Keras weight by its layer: ``conv1_conv`` / ``conv1_bn`` (the stem),
``conv{2..5}_block{b}_{0,1,2}_{conv,bn}`` (a block's projection shortcut, first and second
convolution), ``proj_{j}`` / ``proj_{j}_bn`` (the head's hidden layers), ``embeds`` (the
head's last Dense) and ``logits`` (the classifier). :func:`convert_released_weights` maps
them onto :func:`pipeline_lib.models.proxy.build_proxy_model`'s state dict for the ResNet-18
at any width (with ``stem_width=64``: the released stem) and each head the released scripts
use: the rotation MLP (``--head_dims`` of 512s, ``--latent_dim=4``), the contrastive head
(``[512 x 8, 128]``, ``--latent_dim=0``) and RotNet's classifier (``--head_dims=''``).

Layouts: a convolution kernel is ``(kh, kw, in, out)`` in Keras and ``(out, in, kh, kw)`` in
torch, a Dense kernel ``(in, out)`` against Linear's ``(out, in)``; BatchNorm's ``gamma``,
``beta``, ``moving_mean`` and ``moving_variance`` are ``weight``, ``bias``, ``running_mean``
and ``running_var`` (Keras' momentum 0.9 is torch's 0.1, both with epsilon 1e-5).

Torch-free (NumPy arrays in and out), so a released checkpoint converts anywhere: in
TensorFlow, ``{w.name: w.numpy() for w in model.weights}`` of the released model; then
``model.load_state_dict({k: torch.from_numpy(v) for k, v in converted.items()})``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "BATCH_NORM_WEIGHTS",
    "convert_released_weights",
    "hidden_layers",
    "keras_layout",
    "torch_name",
]

#: Keras BatchNormalization weight -> torch BatchNorm tensor.
BATCH_NORM_WEIGHTS: dict[str, str] = {
    "gamma": "weight",
    "beta": "bias",
    "moving_mean": "running_mean",
    "moving_variance": "running_var",
}

_DENSE_WEIGHTS = {"kernel": "weight", "bias": "bias"}
_BLOCK = re.compile(r"conv(?P<stage>[2-5])_block(?P<block>\d+)_(?P<part>[012])_(?P<kind>conv|bn)")
_HIDDEN = re.compile(r"proj_(?P<index>\d+)(?P<bn>_bn)?")
_BLOCK_PARTS = {("1", "conv"): "conv1", ("1", "bn"): "bn1", ("2", "conv"): "conv2"}
_BLOCK_PARTS |= {("2", "bn"): "bn2", ("0", "conv"): "shortcut.0", ("0", "bn"): "shortcut.1"}
#: Modules per hidden layer of a head (Linear, BatchNorm1d, ReLU: heads.mlp_head).
_HIDDEN_STRIDE = 3


def _split(name: str) -> tuple[str, str]:
    """``conv1_bn/gamma:0`` -> ``("conv1_bn", "gamma")``."""
    layer, _, weight = name.split(":", 1)[0].rpartition("/")
    if not layer:
        raise ValueError(f"{name!r} is not a Keras weight name (layer/weight)")
    return layer, weight


def _module(layer: str, *, blocks: Sequence[int], hidden_layers: int) -> str | None:
    """The torch module of Keras layer ``layer``; None if it is none of the released ones."""
    if layer == "conv1_conv":
        return "backbone.stem.0"
    if layer == "conv1_bn":
        return "backbone.stem.1"
    if match := _BLOCK.fullmatch(layer):
        stage, block = int(match["stage"]) - 2, int(match["block"]) - 1
        if block >= blocks[stage]:
            return None
        part = _BLOCK_PARTS[match["part"], match["kind"]]
        return f"backbone.stages.{sum(blocks[:stage]) + block}.{part}"
    if match := _HIDDEN.fullmatch(layer):
        return f"head.{_HIDDEN_STRIDE * int(match['index']) + (1 if match['bn'] else 0)}"
    if layer == "embeds":
        return f"head.{_HIDDEN_STRIDE * hidden_layers}"
    if layer == "logits":
        return "proxy"
    return None


def torch_name(keras_name: str, *, hidden_layers: int, blocks: Sequence[int] = (2, 2, 2, 2)) -> str:
    """Our state-dict key of Keras weight ``keras_name`` (``conv2_block1_0_conv/kernel:0``).

    Parameters
    ----------
    keras_name : str
        ``layer/weight``, with or without TensorFlow's ``:0``.
    hidden_layers : int
        The head's hidden layers (``proj_{j}``), which place ``embeds`` after them.
    blocks : sequence of int, default=(2, 2, 2, 2)
        Blocks per stage (ResNet-18).

    Raises
    ------
    ValueError
        If the name is not a weight of the released ResNet and heads.
    """
    layer, weight = _split(keras_name)
    module = _module(layer, blocks=blocks, hidden_layers=hidden_layers)
    is_bn = layer.endswith("_bn")
    tensor = (BATCH_NORM_WEIGHTS if is_bn else _DENSE_WEIGHTS).get(weight)
    if module is None or tensor is None or (weight == "bias" and layer.endswith("_conv")):
        raise ValueError(
            f"{keras_name!r} is not a weight of the released ResNet-{2 * sum(blocks) + 2} or "
            "its heads (conv1_*, conv{2..5}_block{b}_{0,1,2}_{conv,bn}, proj_{j}[_bn], "
            "embeds, logits)"
        )
    return f"{module}.{tensor}"


def hidden_layers(names: Iterable[str]) -> int:
    """The head's hidden layers among Keras weight names: the ``proj_{j}`` Dense layers."""
    layers = {_split(name)[0] for name in names}
    return sum(1 for layer in layers if (match := _HIDDEN.fullmatch(layer)) and not match["bn"])


def _layout(value: np.ndarray) -> np.ndarray:
    """Keras' kernel layout -> torch's: HWIO -> OIHW, (in, out) -> (out, in)."""
    if value.ndim == 4:
        return np.ascontiguousarray(value.transpose(3, 2, 0, 1))
    if value.ndim == 2:
        return np.ascontiguousarray(value.T)
    return np.ascontiguousarray(value)


def keras_layout(value: np.ndarray) -> np.ndarray:
    """Our tensor in Keras' layout (the inverse of the conversion): OIHW -> HWIO, a Linear's
    ``(out, in)`` -> ``(in, out)``; anything else as it is."""
    if value.ndim == 4:
        return np.ascontiguousarray(value.transpose(2, 3, 1, 0))
    if value.ndim == 2:
        return np.ascontiguousarray(value.T)
    return value


def convert_released_weights(
    weights: Mapping[str, np.ndarray], *, blocks: Sequence[int] = (2, 2, 2, 2)
) -> dict[str, np.ndarray]:
    """The released model's weights ``{keras_name: array}`` as our state dict (NumPy).

    Every BatchNorm also gets ``num_batches_tracked`` 0 (Keras has none; torch reads it only
    without a momentum). Load the result with ``strict=True``: a weight of one side that the
    other lacks then fails by name.

    Raises
    ------
    ValueError
        On a name that is not a released weight, or two names for one tensor.
    """
    hidden = hidden_layers(weights)
    converted: dict[str, np.ndarray] = {}
    for name, value in weights.items():
        key = torch_name(name, hidden_layers=hidden, blocks=blocks)
        if key in converted:
            raise ValueError(f"two released weights map to {key!r} (one is {name!r})")
        converted[key] = _layout(np.asarray(value))
        if key.endswith(".running_var"):
            converted[key.removesuffix("running_var") + "num_batches_tracked"] = np.zeros(
                (), dtype=np.int64
            )
    return converted
