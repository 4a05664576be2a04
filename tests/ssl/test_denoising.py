"""The denoising autoencoder's targets: per-patch standardisation and raw pixels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.ssl.denoising import (
    PATCH_STD_EPS,
    denoising_step,
    denoising_target,
    normalize_patches,
)
from pipeline_lib.ssl.train import train_representation


def test_every_block_of_every_channel_is_standardised() -> None:
    images = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    images[0, 1, :8, :8] = 0.25  # one flat block
    out = normalize_patches(images, 8)
    assert out.shape == images.shape
    blocks = out.unfold(2, 8, 8).unfold(3, 8, 8)  # (n, c, 4, 4, 8, 8)
    source = images.unfold(2, 8, 8).unfold(3, 8, 8)
    means = blocks.mean(dim=(4, 5))
    assert torch.allclose(means, torch.zeros_like(means), atol=1e-5)
    # std of a standardised block = s / (s + eps) for the block's own deviation s
    s = source.std(dim=(4, 5))
    assert torch.allclose(blocks.std(dim=(4, 5)), s / (s + PATCH_STD_EPS), atol=1e-4)
    # a flat block becomes zeros instead of amplified noise
    assert torch.equal(out[0, 1, :8, :8], torch.zeros(8, 8))
    # the block at row 1, column 2 is the standardised source block at the same place
    block = images[1, 2, 8:16, 16:24]
    expected = (block - block.mean()) / (block.std() + PATCH_STD_EPS)
    assert torch.allclose(out[1, 2, 8:16, 16:24], expected, atol=1e-5)


def test_patch_must_divide_the_image() -> None:
    with pytest.raises(ValueError, match="denoising_patch.*32x32.*got 5"):
        normalize_patches(torch.rand(1, 3, 32, 32), 5)
    with pytest.raises(ValueError, match="unknown denoising_target 'edges'"):
        denoising_target(torch.rand(1, 3, 32, 32), "edges", 8)


def test_decoder_ends_in_sigmoid_only_for_pixel_targets() -> None:
    f = torch.randn(4, 64) * 10
    torch.manual_seed(0)
    pixels = build_proxy_model("denoising", width=8).eval()  # the paper's default
    torch.manual_seed(0)
    normalized = build_proxy_model("denoising", width=8, denoising_target="patch_normalized")
    normalized = normalized.eval()
    assert normalized.arch["denoising_target"] == "patch_normalized"
    assert pixels.arch["denoising_target"] == "pixels"
    with torch.no_grad():
        bounded, unbounded = pixels.proxy(f), normalized.proxy(f)
    assert bounded.min() >= 0 and bounded.max() <= 1
    assert torch.allclose(bounded, torch.sigmoid(unbounded))
    assert "denoising_target" not in build_proxy_model("rotnet", width=8).arch


@pytest.mark.parametrize("target", ["pixels", "patch_normalized"])
def test_step_reconstructs_the_chosen_target(target: str) -> None:
    torch.manual_seed(0)
    model = build_proxy_model("denoising", width=8, denoising_target=target).eval()
    batch = torch.randint(0, 256, (4, 3, 32, 32), dtype=torch.uint8)
    with torch.no_grad():
        loss = denoising_step(
            model, batch, generator=torch.Generator().manual_seed(1), target=target
        )
        noisy = batch.float() / 255 + 0.1 * torch.randn(
            batch.shape, generator=torch.Generator().manual_seed(1)
        )
        reconstruction = model.proxy(model.backbone(noisy))
        clean = batch.float() / 255
        wanted = clean if target == "pixels" else normalize_patches(clean, 8)
        expected = torch.mean((reconstruction - wanted) ** 2)
    assert torch.allclose(loss, expected, atol=1e-6)


def test_training_rejects_bad_target_settings(digits64: np.ndarray) -> None:
    common = {"seed": 0, "epochs": 1, "batch_size": 16, "width": 8}
    with pytest.raises(ValueError, match="unknown denoising_target 'edges'"):
        train_representation("denoising", digits64, denoising_target="edges", **common)
    with pytest.raises(ValueError, match="denoising_patch must be >= 2 and divide .* 32, got 6"):
        train_representation(
            "denoising", digits64, denoising_target="patch_normalized", denoising_patch=6, **common
        )
    # pixel targets (the default) need no block size
    model, history = train_representation("denoising", digits64, denoising_patch=6, **common)
    assert model.arch["denoising_target"] == "pixels" and np.isfinite(history[0]["loss"])
