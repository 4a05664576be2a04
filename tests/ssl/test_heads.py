"""Heads, decoder and the proxy models built for every trained method."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from pipeline_lib.models.heads import (
    Decoder,
    HeadBatchNorm,
    contrastive_head,
    head_output_dim,
    mlp_head,
    rotation_head,
)
from pipeline_lib.models.proxy import build_proxy_model, rotation_logits
from pipeline_lib.models.representation import FROZEN_METHODS, METHODS, TRAINED_METHODS


def test_trained_methods_are_listed() -> None:
    assert TRAINED_METHODS == ("rotnet", "rotation", "denoising", "contrastive", "contrastive_da")
    assert METHODS == FROZEN_METHODS + TRAINED_METHODS


def test_mlp_head_layers_and_output() -> None:
    head = mlp_head(16, depth=2, hidden=8, out_dim=4)
    kinds = [type(layer) for layer in head]
    assert kinds == [nn.Linear, HeadBatchNorm, nn.ReLU] * 2 + [nn.Linear]
    assert head[0].bias is None and head[3].bias is None and head[-1].bias is not None
    assert head_output_dim(head, 16) == 4
    assert head(torch.randn(5, 16)).shape == (5, 4)


def test_head_batchnorm_moves_its_variance_towards_the_biased_batch_variance() -> None:
    torch.manual_seed(0)
    x = torch.randn(6, 5) * 3 + 1
    ours, torchs = HeadBatchNorm(5), nn.BatchNorm1d(5)
    for norm in (ours, torchs):
        norm.weight.data.uniform_(0.5, 1.5)
        norm.bias.data.uniform_(-0.1, 0.1)
    torchs.load_state_dict(ours.state_dict())
    out, reference = ours(x), torchs(x)
    # The output is torch's (the biased variance normalises both); only the moving
    # variance differs: 0.9 * 1 + 0.1 * var, the biased var here, the unbiased in torch.
    assert torch.allclose(out, reference, rtol=0, atol=1e-6)
    biased, unbiased = x.var(0, correction=0), x.var(0, correction=1)
    assert torch.allclose(ours.running_var, 0.9 + 0.1 * biased, rtol=1e-6)
    assert torch.allclose(torchs.running_var, 0.9 + 0.1 * unbiased, rtol=1e-6)
    assert torch.allclose(ours.running_mean, torchs.running_mean, rtol=0, atol=1e-7)
    assert int(ours.num_batches_tracked) == 1
    torchs.load_state_dict(ours.state_dict())
    assert torch.equal(ours.eval()(x), torchs.eval()(x))  # inference is BatchNorm1d's


def test_head_batchnorm_needs_a_momentum() -> None:
    with pytest.raises(ValueError, match="momentum"):
        HeadBatchNorm(4, momentum=None)


def _released_head_parameters(dims: list[int], num_class: int, in_dim: int = 512) -> int:
    """Trainable parameters of the released ``get_head(dims, num_class)`` (Keras layers)."""
    total, width = 0, in_dim
    for d in dims[:-1]:
        total += width * d + 2 * d  # Dense(no bias) + BatchNorm gamma and beta
        width = d
    total += width * dims[-1] + (dims[-1] if num_class > 0 else 0)  # embeds
    if num_class > 0:
        total += dims[-1] * num_class + num_class  # logits
    return total


def _parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("depth", [0, 1, 2, 8])
def test_contrastive_head_is_the_released_layout(depth: int) -> None:
    head = contrastive_head(512, depth=depth)
    linears = [m for m in head.modules() if isinstance(m, nn.Linear)]
    assert len(linears) == depth + 1 and all(m.bias is None for m in linears)
    assert head_output_dim(head, 512) == 128
    # --head_dims 512 x depth, 128 with --latent_dim 0 (no classifier)
    assert _parameters(head) == _released_head_parameters([512] * depth + [128], num_class=0)


@pytest.mark.parametrize("depth", [1, 2, 8])
def test_rotation_head_and_classifier_are_the_released_layout(depth: int) -> None:
    model = build_proxy_model("rotation", width=64, head_depth=depth)
    linears = [m for m in model.head.modules() if isinstance(m, nn.Linear)]
    assert len(linears) == depth and linears[-1].bias is not None
    assert all(m.bias is None for m in linears[:-1])
    assert head_output_dim(model.head, 512) == 512 and model.proxy.out_features == 4
    # --head_dims of depth 512s with --latent_dim 4: hidden layers, embeds, then logits
    expected = _released_head_parameters([512] * depth, num_class=4)
    assert _parameters(model.head) + _parameters(model.proxy) == expected


def test_depth_zero_heads() -> None:
    assert isinstance(mlp_head(16, depth=0), nn.Identity)
    assert isinstance(rotation_head(16, depth=0), nn.Identity)  # RotNet: classifier on f
    single = contrastive_head(16, depth=0)  # [512 x 0, 128]: one Linear to 128
    assert [type(m) for m in single] == [nn.Linear] and single[0].out_features == 128
    assert head_output_dim(mlp_head(16, depth=0), 16) == 16
    assert head_output_dim(mlp_head(16, depth=3, hidden=8), 16) == 8
    assert head_output_dim(contrastive_head(16, depth=8, hidden=8), 16) == 128
    with pytest.raises(ValueError, match="depth"):
        mlp_head(16, depth=-1)


@pytest.mark.parametrize("size", [32, 64])
def test_decoder_outputs_an_image_in_unit_interval(size: int) -> None:
    decoder = Decoder(64, image_size=size, width=8)
    with torch.no_grad():
        out = decoder(torch.randn(3, 64))
    assert out.shape == (3, 3, size, size)
    assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0
    with pytest.raises(ValueError, match="power of two"):
        Decoder(64, image_size=28)


@pytest.mark.parametrize(
    ("method", "g_dim"),
    [("rotnet", 64), ("rotation", 16), ("contrastive", 128), ("contrastive_da", 128)],
)
def test_proxy_models_give_f_and_g(method: str, g_dim: int) -> None:
    model = build_proxy_model(
        method, width=8, head_depth=None if method == "rotnet" else 2, head_hidden=16
    ).eval()
    out = model(torch.rand(2, 3, 32, 32))
    assert set(out) == {"f", "g"}
    assert out["f"].shape == (2, 64) and out["g"].shape == (2, g_dim)
    if method == "rotnet":
        assert torch.equal(out["f"], out["g"])  # identity head
    if method in ("rotnet", "rotation"):
        assert rotation_logits(model, torch.rand(2, 3, 32, 32)).shape == (2, 4)


def test_denoising_model_has_no_head_and_a_decoder() -> None:
    model = build_proxy_model("denoising", width=8).eval()
    assert set(model(torch.rand(2, 3, 32, 32))) == {"f"}
    assert isinstance(model.proxy, Decoder)
    with pytest.raises(ValueError, match="rotation classifier"):
        rotation_logits(model, torch.rand(2, 3, 32, 32))


def test_head_depth_rules() -> None:
    assert build_proxy_model("rotation", width=8).arch["head_depth"] == 8
    assert build_proxy_model("rotnet", width=8).arch["head_depth"] == 0
    with pytest.raises(ValueError, match="head_depth"):
        build_proxy_model("rotnet", width=8, head_depth=8)
    with pytest.raises(ValueError, match="unknown trained"):
        build_proxy_model("resnet18_random")


def test_stem_width_builds_the_released_narrow_network(tmp_path) -> None:
    """The released stem has 64 channels at every width: at width 16 the first block's
    shortcut becomes a 1x1 projection. The arch records the stem only when it differs from
    the width, and a saved model comes back with it."""
    from pipeline_lib.models.checkpoints import load_trained_representation, save_representation

    model = build_proxy_model("rotnet", width=4, stem_width=16)
    first = model.backbone.stages[0]
    assert model.backbone.stem[0].out_channels == 16 and first.conv1.in_channels == 16
    assert isinstance(first.shortcut, nn.Sequential) and first.shortcut[0].in_channels == 16
    assert model.arch["stem_width"] == 16
    usual = build_proxy_model("rotnet", width=4, stem_width=4)
    assert "stem_width" not in usual.arch  # the arch of every usual network, as before
    assert isinstance(usual.backbone.stages[0].shortcut, nn.Identity)
    path = tmp_path / "model.pt"
    save_representation(path, model, method="rotnet", config_dict={})
    loaded = load_trained_representation(path)
    assert loaded.arch == model.arch and loaded.backbone.stem[0].out_channels == 16
    with pytest.raises(ValueError, match="stem_width must be >= 1"):
        build_proxy_model("rotnet", width=4, stem_width=0)
