"""The small-image ResNet-18 and the frozen representations built from it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from pipeline_lib.models.embed import extract_embeddings
from pipeline_lib.models.representation import (
    FROZEN_METHODS,
    Representation,
    build_representation,
)
from pipeline_lib.models.resnet import SmallImageResNet, resnet18_small


@pytest.mark.parametrize("size", [32, 64])
def test_resnet18_small_gives_512_features(size: int) -> None:
    torch.manual_seed(0)
    model = resnet18_small().eval()
    with torch.inference_mode():
        out = model(torch.rand(2, 3, size, size))
    assert model.feature_dim == 512
    assert out.shape == (2, 512)
    assert out.dtype == torch.float32
    assert torch.isfinite(out).all()
    # Global average pooling after a ReLU: features are non-negative.
    assert (out >= 0).all()


def test_width_sets_the_feature_dimension() -> None:
    model = resnet18_small(width=8).eval()
    with torch.inference_mode():
        out = model(torch.rand(3, 3, 32, 32))
    assert model.feature_dim == 64
    assert out.shape == (3, 64)


def test_resnet18_has_eight_basic_blocks_in_four_stages() -> None:
    model = resnet18_small(width=8)
    channels = [block.conv2.out_channels for block in model.stages]
    assert channels == [8, 8, 16, 16, 32, 32, 64, 64]
    strides = [block.conv1.stride for block in model.stages]
    assert strides == [(1, 1), (1, 1), (2, 2), (1, 1), (2, 2), (1, 1), (2, 2), (1, 1)]


def test_stem_is_3x3_stride_1_without_max_pool() -> None:
    model = resnet18_small(width=8)
    stem_conv = model.stem[0]
    assert isinstance(stem_conv, nn.Conv2d)
    assert stem_conv.kernel_size == (3, 3)
    assert stem_conv.stride == (1, 1)
    assert stem_conv.padding == (1, 1)
    assert not any(isinstance(module, nn.MaxPool2d) for module in model.modules())
    # The stem keeps the spatial size of a 32x32 input.
    with torch.inference_mode():
        assert model.eval().stem(torch.rand(1, 3, 32, 32)).shape == (1, 8, 32, 32)


@pytest.mark.parametrize("init", ["released", "torch"])
def test_batchnorm_starts_at_one_and_zero_under_either_init(init: str) -> None:
    model = resnet18_small(width=8, init=init)
    norms = [module for module in model.modules() if isinstance(module, nn.BatchNorm2d)]
    assert norms
    for norm in norms:
        assert torch.equal(norm.weight, torch.ones_like(norm.weight))
        assert torch.equal(norm.bias, torch.zeros_like(norm.bias))


def test_width_below_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="width must be >= 1, got 0"):
        SmallImageResNet(width=0)


def _weights(model: nn.Module) -> list[torch.Tensor]:
    return [value for value in model.state_dict().values() if value.is_floating_point()]


def test_resnet18_random_is_deterministic_per_seed() -> None:
    first = build_representation("resnet18_random", seed=3, width=8)
    again = build_representation("resnet18_random", seed=3, width=8)
    other = build_representation("resnet18_random", seed=4, width=8)
    assert all(torch.equal(a, b) for a, b in zip(_weights(first), _weights(again), strict=True))
    conv_first = first.backbone.stem[0].weight
    conv_other = other.backbone.stem[0].weight
    assert not torch.equal(conv_first, conv_other)
    x = torch.rand(2, 3, 32, 32)
    with torch.inference_mode():
        torch.testing.assert_close(first(x)["f"], again(x)["f"], rtol=0, atol=0)
        assert not torch.allclose(first(x)["f"], other(x)["f"])


def test_build_representation_leaves_the_global_rng_alone() -> None:
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    expected = torch.rand(5)
    torch.random.set_rng_state(state)
    build_representation("resnet18_random", seed=0, width=8)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(torch.rand(5), expected)


def test_resnet18_random_is_in_inference_mode_without_head() -> None:
    model = build_representation("resnet18_random", seed=0, width=8)
    assert isinstance(model, Representation)
    assert not model.training
    assert all(not module.training for module in model.modules())
    with torch.inference_mode():
        out = model(torch.rand(2, 3, 32, 32))
    assert set(out) == {"f"}
    assert out["f"].shape == (2, 64)


def test_raw_gives_flattened_pixels_in_unit_interval() -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(4, 5, 6, 3), dtype=np.uint8)
    images[0, 0, 0] = (0, 255, 128)
    model = build_representation("raw", seed=0)
    assert set(FROZEN_METHODS) == {"raw", "resnet18_random", "resnet50_imagenet"}
    features = extract_embeddings(model, images)
    assert set(features) == {"f"}
    f = features["f"]
    assert f.shape == (4, 3 * 5 * 6)
    assert f.dtype == np.float32
    assert f.min() == 0.0 and f.max() == 1.0
    # Channel-first flattening of the pixels scaled to [0, 1].
    expected = images.transpose(0, 3, 1, 2).reshape(4, -1).astype(np.float32) / 255.0
    np.testing.assert_allclose(f, expected, rtol=0, atol=1e-7)


def test_representation_head_adds_g() -> None:
    model = Representation(nn.Flatten(), head=nn.Linear(12, 2)).eval()
    with torch.inference_mode():
        out = model(torch.rand(3, 3, 2, 2))
    assert set(out) == {"f", "g"}
    assert out["f"].shape == (3, 12) and out["g"].shape == (3, 2)


def test_unknown_method_is_named() -> None:
    with pytest.raises(ValueError, match=r"'rotnet'.*allowed: raw, resnet18_random"):
        build_representation("rotnet", seed=0)
