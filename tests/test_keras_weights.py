"""The Keras-to-torch weight converter (pipeline_lib.models.keras_weights).

The released model's Keras names follow model/resnet_util.py; tests/reference/test_network.py
converts the released model's own weights (names and shapes from TensorFlow). Here: the
names one by one, the layouts, and that a released set of names covers our model exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline_lib.models.keras_weights import (
    convert_released_weights,
    hidden_layers,
    keras_layout,
    torch_name,
)
from pipeline_lib.models.proxy import build_proxy_model


@pytest.mark.parametrize(
    ("keras", "hidden", "ours"),
    [
        ("conv1_conv/kernel:0", 0, "backbone.stem.0.weight"),
        ("conv1_bn/moving_variance:0", 0, "backbone.stem.1.running_var"),
        ("conv2_block1_0_conv/kernel", 0, "backbone.stages.0.shortcut.0.weight"),
        ("conv2_block1_0_bn/gamma", 0, "backbone.stages.0.shortcut.1.weight"),
        ("conv3_block2_1_bn/beta", 0, "backbone.stages.3.bn1.bias"),
        ("conv5_block2_2_conv/kernel", 0, "backbone.stages.7.conv2.weight"),
        ("proj_0/kernel", 7, "head.0.weight"),
        ("proj_3_bn/moving_mean", 7, "head.10.running_mean"),
        ("embeds/bias", 7, "head.21.bias"),
        ("embeds/kernel", 8, "head.24.weight"),
        ("logits/kernel", 0, "proxy.weight"),
    ],
)
def test_released_names_map_to_ours(keras: str, hidden: int, ours: str) -> None:
    assert torch_name(keras, hidden_layers=hidden) == ours


@pytest.mark.parametrize(
    "name", ["conv6_block1_1_conv/kernel", "conv2_block3_1_conv/kernel", "conv1_conv/bias", "x"]
)
def test_a_name_outside_the_released_network_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="released ResNet-18|not a Keras weight name"):
        torch_name(name, hidden_layers=0)


def test_layouts_move_every_entry_where_torch_reads_it() -> None:
    kernel = np.arange(3 * 3 * 2 * 5, dtype=np.float32).reshape(3, 3, 2, 5)  # HWIO
    dense = np.arange(6 * 4, dtype=np.float32).reshape(6, 4)  # (in, out)
    converted = convert_released_weights({"conv1_conv/kernel": kernel, "logits/kernel": dense})
    conv, linear = converted["backbone.stem.0.weight"], converted["proxy.weight"]
    assert conv.shape == (5, 2, 3, 3) and conv[4, 1, 2, 0] == kernel[2, 0, 1, 4]
    assert linear.shape == (4, 6) and linear[3, 5] == dense[5, 3]
    assert np.array_equal(keras_layout(conv), kernel)
    assert np.array_equal(keras_layout(linear), dense)


def _released_names(width: int, stem: int, head_dims: tuple[int, ...], classes: int) -> list:
    """The Keras weight names of the released ResNet-18 and head (model/resnet_util.py)."""
    bn = ("gamma", "beta", "moving_mean", "moving_variance")
    names = ["conv1_conv/kernel", *(f"conv1_bn/{w}" for w in bn)]
    for stage in range(2, 6):
        for block in (1, 2):
            layer = f"conv{stage}_block{block}"
            projection = block == 1 and (stage > 2 or stem != width)
            for part in ("0", "1", "2") if projection else ("1", "2"):
                names += [f"{layer}_{part}_conv/kernel", *(f"{layer}_{part}_bn/{w}" for w in bn)]
    for j in range(len(head_dims) - 1):
        names += [f"proj_{j}/kernel", *(f"proj_{j}_bn/{w}" for w in bn)]
    if head_dims:
        names += ["embeds/kernel"] + (["embeds/bias"] if classes else [])
    if classes:
        names += ["logits/kernel", "logits/bias"]
    return names


@pytest.mark.parametrize(
    ("method", "head_depth", "head_dims", "classes"),
    [
        ("rotation", 8, (32,) * 8, 4),
        ("contrastive", 8, (32,) * 8 + (128,), 0),
        ("rotnet", 0, (), 4),
    ],
)
def test_the_released_names_cover_our_model_exactly(method, head_depth, head_dims, classes):
    """Width 4 with the released 16x wider stem: every tensor named once, by the released
    naming; the converted dict loads strictly and round-trips every value."""
    model = build_proxy_model(method, width=4, stem_width=64, head_depth=head_depth, head_hidden=32)
    names = _released_names(4, 64, head_dims, classes)
    hidden = hidden_layers(names)
    state = model.state_dict()
    keras = {
        name: keras_layout(state[torch_name(name, hidden_layers=hidden)].numpy()) for name in names
    }
    converted = convert_released_weights(keras)
    assert set(converted) == set(state)  # with each BatchNorm's num_batches_tracked
    model.load_state_dict({key: torch.from_numpy(value) for key, value in converted.items()})
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key


def test_two_names_for_one_tensor_are_refused() -> None:
    kernel = np.zeros((1, 1, 1, 1), np.float32)
    with pytest.raises(ValueError, match="two released weights"):
        convert_released_weights({"conv1_conv/kernel": kernel, "conv1_conv/kernel:0": kernel})
