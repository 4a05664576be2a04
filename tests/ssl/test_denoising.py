"""The denoising autoencoder: targets, the view switch, the noise level, the decoder input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pipeline_lib.ssl.tasks.denoising as denoising_module
from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.ssl.augment import ViewAugment, to_unit_float
from pipeline_lib.ssl.settings import TrainSettings
from pipeline_lib.ssl.tasks.denoising import (
    PATCH_STD_EPS,
    TASK,
    decode,
    denoising_inputs,
    denoising_target,
    normalize_patches,
)
from tests.ssl.tiny_runs import keyword_train, keyword_train_fused


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
        settings = TrainSettings("denoising", epochs=1, batch_size=4, denoising_target=target)
        step = TASK.step(settings, None)  # no views: the image itself is corrupted
        loss = step(model, batch, generator=torch.Generator().manual_seed(1))
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
        keyword_train("denoising", digits64, denoising_target="edges", **common)
    with pytest.raises(ValueError, match="denoising_patch must be >= 2 and divide .* 32, got 6"):
        keyword_train(
            "denoising", digits64, denoising_target="patch_normalized", denoising_patch=6, **common
        )
    # pixel targets (the default) need no block size
    model, history = keyword_train("denoising", digits64, denoising_patch=6, **common)
    assert model.arch["denoising_target"] == "pixels" and np.isfinite(history[0]["loss"])


def test_the_noise_level_is_the_corruption_added() -> None:
    batch = torch.randint(0, 256, (64, 3, 32, 32), dtype=torch.uint8)
    for std in (0.1, 0.2, 0.4):
        noisy, clean = denoising_inputs(
            batch, generator=torch.Generator().manual_seed(3), noise_std=std
        )
        assert torch.equal(clean, to_unit_float(batch))  # no views: the image itself
        drawn = torch.randn(batch.shape, generator=torch.Generator().manual_seed(3))
        # noisy = clean + std * z: one float32 rounding of values below 1 + 5 std
        assert torch.allclose(noisy - clean, std * drawn, rtol=0, atol=4e-7)
        # 196,608 draws: the sample deviation is within 1 % (> 6 standard errors) of std
        assert abs(float((noisy - clean).std()) / std - 1) < 0.01


def _flip_view(batch: torch.Tensor, generator) -> torch.Tensor:
    """A deterministic stand-in for the view augmentation: the mirrored image."""
    return to_unit_float(batch).flip(-1)


def test_with_views_the_target_is_the_clean_view_not_the_image() -> None:
    torch.manual_seed(0)
    model = build_proxy_model("denoising", width=8).eval()
    # left half dark, right half bright: the mirrored view differs from the image
    batch = torch.zeros(4, 3, 32, 32, dtype=torch.uint8)
    batch[..., 16:] = 255
    generator = torch.Generator().manual_seed(1)
    noisy, clean = denoising_inputs(batch, generator=generator, augment=_flip_view)
    assert torch.equal(clean, to_unit_float(batch).flip(-1))
    with torch.no_grad():
        step = TASK.step(TrainSettings("denoising", epochs=1, batch_size=4), _flip_view)
        loss = step(model, batch, generator=torch.Generator().manual_seed(1))
        reconstruction = decode(model, noisy)
        on_view = torch.mean((reconstruction - clean) ** 2)
        on_image = torch.mean((reconstruction - to_unit_float(batch)) ** 2)
    assert torch.allclose(loss, on_view, rtol=1e-6)
    assert not torch.allclose(loss, on_image, rtol=1e-3)


def _record_inputs(monkeypatch) -> list[dict]:
    """Spy on every denoising step's inputs: the augmentation, noise level and clean target."""
    calls: list[dict] = []
    real = denoising_module.denoising_inputs

    def spy(batch, **kwargs):
        noisy, clean = real(batch, **kwargs)
        calls.append({**kwargs, "batch": batch, "noisy": noisy, "clean": clean})
        return noisy, clean

    monkeypatch.setattr(denoising_module, "denoising_inputs", spy)
    return calls


def test_views_are_the_default_and_the_switch_turns_them_off(digits64, monkeypatch) -> None:
    calls = _record_inputs(monkeypatch)
    common = {"seed": 0, "epochs": 1, "batch_size": 16, "width": 8}
    keyword_train("denoising", digits64[:32], noise_std=0.4, **common)
    assert len(calls) == 2 and all(isinstance(c["augment"], ViewAugment) for c in calls)
    assert {c["noise_std"] for c in calls} == {0.4}
    # the clean target is a view: crops, flips and jitter move it off the source images
    for call in calls:
        assert not torch.allclose(call["clean"], to_unit_float(call["batch"]), atol=1e-2)
    calls.clear()
    keyword_train("denoising", digits64[:32], denoising_views=False, **common)
    assert len(calls) == 2 and all(c["augment"] is None for c in calls)
    assert {c["noise_std"] for c in calls} == {0.1}
    for call in calls:
        assert torch.equal(call["clean"], to_unit_float(call["batch"]))


@pytest.mark.parametrize("image_size", [32, 64])
def test_spatial_decoder_reads_the_map_before_pooling(image_size: int) -> None:
    torch.manual_seed(0)
    pooled = build_proxy_model("denoising", width=8, image_size=image_size).eval()
    torch.manual_seed(0)
    spatial = build_proxy_model(
        "denoising", width=8, image_size=image_size, denoising_decoder="spatial"
    ).eval()
    assert pooled.arch["denoising_decoder"] == "pooled"
    assert spatial.arch["denoising_decoder"] == "spatial"
    x = torch.rand(2, 3, image_size, image_size, generator=torch.Generator().manual_seed(1))
    side = image_size // 8
    with torch.no_grad():
        feature_map = spatial.backbone.feature_map(x)
        assert feature_map.shape == (2, 64, side, side)
        # f is still the pooled map: the representation does not depend on the decoder
        assert torch.allclose(spatial.backbone(x), feature_map.mean(dim=(2, 3)), atol=1e-6)
        out = decode(spatial, x)
        assert out.shape == decode(pooled, x).shape == (2, 3, image_size, image_size)
        assert torch.equal(out, spatial.proxy(feature_map))
        # a spatial decoder sees where things are; the pooled one cannot
        mirrored = feature_map.flip(-1)
        assert not torch.allclose(spatial.proxy(mirrored), out, atol=1e-3)
        assert torch.allclose(
            pooled.proxy(mirrored.mean(dim=(2, 3))), pooled.proxy(feature_map.mean(dim=(2, 3)))
        )
    with pytest.raises(ValueError, match="unknown denoising_decoder 'deep'"):
        build_proxy_model("denoising", width=8, denoising_decoder="deep")


@pytest.mark.parametrize(
    "reading",
    [
        {},
        {"denoising_views": False},
        {"noise_std": 0.4},
        {"denoising_decoder": "spatial"},
        {"denoising_target": "patch_normalized"},
    ],
    ids=["recipe", "no_views", "noise04", "spatial", "patchnorm"],
)
def test_each_reading_trains_a_step(digits64, reading: dict) -> None:
    model, history = keyword_train(
        "denoising", digits64[:16], seed=0, epochs=1, batch_size=16, width=8, **reading
    )
    assert history[0]["steps"] == 1 and np.isfinite(history[0]["loss"])
    assert model.arch["denoising_decoder"] == reading.get("denoising_decoder", "pooled")
    features = model(to_unit_float(torch.from_numpy(digits64[:4]).permute(0, 3, 1, 2)))
    assert features["f"].shape == (4, 64) and set(features) == {"f"}


def test_spatial_decoder_trains_fused_as_separately(digits64, monkeypatch) -> None:
    """Stacked grouped 1x1 convolutions keep the models apart (float64, 2 steps each)."""
    import pipeline_lib.ssl.run as run_module

    build = run_module.build_proxy_model

    def double(*args, **kwargs):
        model = build(*args, **kwargs).double()
        # the stem: a spatial decoder's input comes from backbone.feature_map, not forward
        model.backbone.stem.register_forward_pre_hook(lambda module, inputs: (inputs[0].double(),))
        return model

    monkeypatch.setattr(run_module, "build_proxy_model", double)
    sets = [digits64[:16], digits64[16:32]]
    options = {"epochs": 1, "batch_size": 8, "width": 8, "lr": 0.1, "denoising_decoder": "spatial"}
    fused = keyword_train_fused("denoising", sets, seeds=[0, 1], **options)
    for (model, _), images, seed in zip(fused, sets, [0, 1], strict=True):
        alone, history = keyword_train("denoising", images, seed=seed, **options)
        # reordered float64 sums: 64 epsilons of a tensor's norm per step (tests/ssl/test_fused.py)
        bound = 64 * torch.finfo(torch.float64).eps * history[0]["steps"]
        for name, tensor in alone.state_dict().items():
            other = model.state_dict()[name]
            if not tensor.is_floating_point():
                assert torch.equal(tensor, other), name
                continue
            assert float((tensor - other).norm()) <= bound * float(tensor.norm()), name
