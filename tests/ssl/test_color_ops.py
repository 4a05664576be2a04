"""The released colour jitter's TF operations against scalar re-implementations of TF's kernels.

The oracles below follow TF's C++ kernels line by line (``adjust_saturation_op.cc``:
``rgb_to_hsv`` / ``hsv_to_rgb``; ``adjust_hue_op.cc``: ``rgb_to_hv_range`` /
``hv_range_to_rgb``) one pixel at a time, and the worked examples of TF's documentation
pin both down.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline_lib.ssl.color_ops import (
    GRAY_WEIGHTS,
    TF_GRAY_WEIGHTS,
    JitterStrengths,
    adjust_brightness,
    adjust_contrast,
    adjust_hue,
    adjust_saturation,
    affine_color_jitter,
    grayscale,
    released_color_jitter,
)


def _tf_rgb_to_hsv(r: float, g: float, b: float) -> tuple[float, float, float]:
    vv = max(r, g, b)
    spread = vv - min(r, g, b)
    s = spread / vv if vv > 0 else 0.0
    if spread <= 0:
        h = 0.0
    else:
        norm = 1.0 / (6.0 * spread)
        if r == vv:
            h = norm * (g - b)
        elif g == vv:
            h = norm * (b - r) + 2.0 / 6.0
        else:
            h = norm * (r - g) + 4.0 / 6.0
    if h < 0:
        h += 1.0
    return h, s, vv


def _tf_hsv_to_rgb(h: float, s: float, v: float) -> tuple[float, float, float]:
    c = s * v
    m = v - c
    dh = h * 6
    category = int(dh)
    fmodu = dh
    while fmodu <= 0:
        fmodu += 2.0
    while fmodu >= 2.0:
        fmodu -= 2.0
    x = c * (1 - abs(fmodu - 1))
    table = {
        0: (c, x, 0),
        1: (x, c, 0),
        2: (0, c, x),
        3: (0, x, c),
        4: (x, 0, c),
        5: (c, 0, x),
    }
    rr, gg, bb = table.get(category, (0, 0, 0))
    return rr + m, gg + m, bb + m


def _tf_saturation(pixel: np.ndarray, factor: float) -> np.ndarray:
    h, s, v = _tf_rgb_to_hsv(*pixel)
    return np.array(_tf_hsv_to_rgb(h, min(1.0, max(0.0, s * factor)), v))


def _tf_hue(pixel: np.ndarray, delta: float) -> np.ndarray:
    r, g, b = pixel
    vmin, vmax = min(r, g, b), max(r, g, b)
    spread = vmax - vmin
    if spread != 0:
        if r == vmax:
            h = (g - b) / spread
        elif g == vmax:
            h = 2 + (b - r) / spread
        else:
            h = 4 + (r - g) / spread
    else:
        h = 0.0
    h += delta * 6
    while h < 0:
        h += 6
    while h >= 6:
        h -= 6
    category = int(h)
    ratio = h - category
    if category % 2:
        ratio = 1 - ratio
    vmid = vmin + ratio * spread
    table = {
        0: (vmax, vmid, vmin),
        1: (vmid, vmax, vmin),
        2: (vmin, vmax, vmid),
        3: (vmin, vmid, vmax),
        4: (vmid, vmin, vmax),
        5: (vmax, vmin, vmid),
    }
    return np.array(table[category])


def _pixels(images: torch.Tensor) -> np.ndarray:
    return images.permute(0, 2, 3, 1).reshape(-1, 3).double().numpy()


def _images(seed: int, n: int = 4, low: float = -0.3, high: float = 1.3) -> torch.Tensor:
    # Values outside [0, 1] too: after an additive brightness TF's ops see such pixels.
    generator = torch.Generator().manual_seed(seed)
    return low + (high - low) * torch.rand(n, 3, 5, 5, generator=generator, dtype=torch.float64)


def test_tf_documentation_examples() -> None:
    # tf.image.adjust_saturation(x, 0.5) and tf.image.adjust_hue(x, 0.2), from TF's docs.
    x = torch.tensor([[[1.0, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]]).permute(2, 0, 1)
    saturated = adjust_saturation(x[None], torch.tensor([0.5]))[0].permute(1, 2, 0)
    hued = adjust_hue(x[None], torch.tensor([0.2]))[0].permute(1, 2, 0)
    expected_saturation = [[[2, 2.5, 3], [5, 5.5, 6]], [[8, 8.5, 9], [11, 11.5, 12]]]
    expected_hue = [[[2.4, 1, 3], [5.4, 4, 6]], [[8.4, 7, 9], [11.4, 10, 12]]]
    torch.testing.assert_close(saturated, torch.tensor(expected_saturation), atol=1e-5, rtol=0)
    torch.testing.assert_close(hued, torch.tensor(expected_hue), atol=1e-5, rtol=0)


@pytest.mark.parametrize("seed", [0, 1])
def test_saturation_matches_tf_kernel(seed: int) -> None:
    images = _images(seed)
    factors = torch.tensor([0.6, 1.0, 1.4, 2.5], dtype=torch.float64)
    ours = _pixels(adjust_saturation(images, factors)).reshape(4, -1, 3)
    for i, factor in enumerate(factors.tolist()):
        expected = np.stack([_tf_saturation(p, factor) for p in _pixels(images[i : i + 1])])
        np.testing.assert_allclose(ours[i], expected, atol=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_hue_matches_tf_kernel(seed: int) -> None:
    images = _images(seed)
    deltas = torch.tensor([-0.4, -0.05, 0.2, 0.4], dtype=torch.float64)
    ours = _pixels(adjust_hue(images, deltas)).reshape(4, -1, 3)
    for i, delta in enumerate(deltas.tolist()):
        expected = np.stack([_tf_hue(p, delta) for p in _pixels(images[i : i + 1])])
        np.testing.assert_allclose(ours[i], expected, atol=1e-9)


def test_brightness_is_additive_and_contrast_is_per_channel_unclamped() -> None:
    images = _images(2, low=0.0, high=1.0)
    delta = torch.tensor([0.4, -0.4, 0.1, 0.0], dtype=torch.float64)
    bright = adjust_brightness(images, delta)
    np.testing.assert_allclose(
        bright.numpy(), images.numpy() + delta.numpy()[:, None, None, None], atol=1e-12
    )
    assert float(bright.max()) > 1.0 and float(bright.min()) < 0.0  # no clipping, as TF
    factor = torch.tensor([0.6, 1.4, 1.0, 2.0], dtype=torch.float64)
    contrasted = adjust_contrast(images, factor).numpy()
    x = images.numpy()
    mean = x.mean(axis=(2, 3), keepdims=True)  # per image AND channel (TF), not the gray mean
    np.testing.assert_allclose(
        contrasted, (x - mean) * factor.numpy()[:, None, None, None] + mean, atol=1e-12
    )


def test_released_jitter_follows_the_given_order_and_strengths() -> None:
    images = _images(3, n=2, low=0.0, high=1.0).float()
    uniforms = torch.tensor([[0.9, 0.1, 0.7, 0.3], [0.2, 0.8, 0.4, 0.6]])
    order = torch.tensor([[2, 0, 3, 1], [1, 3, 0, 2]])
    out = released_color_jitter(images, order=order, uniforms=uniforms)
    signed = 2 * uniforms - 1
    steps = [
        lambda x, s: adjust_brightness(x, 0.4 * s),
        lambda x, s: adjust_contrast(x, 1 + 0.4 * s),
        lambda x, s: adjust_saturation(x, 1 + 0.4 * s),
        lambda x, s: adjust_hue(x, 0.4 * s),
    ]
    for i in range(2):
        expected = images[i : i + 1]
        for op in order[i].tolist():
            expected = steps[op](expected, signed[i : i + 1, op])
        torch.testing.assert_close(out[i : i + 1], expected)
    # Zero strengths are switched off, as the released ColorJitter does.
    off = JitterStrengths(brightness=0, contrast=0, saturation=0, hue=0)
    still = released_color_jitter(images, order=order, uniforms=uniforms, strengths=off)
    assert torch.equal(still, images)


def test_grayscale_weights_are_tf_and_torchvision_variant_keeps_601() -> None:
    assert TF_GRAY_WEIGHTS == (0.2989, 0.587, 0.114) and GRAY_WEIGHTS[0] == 0.299
    images = _images(4, low=0.0, high=1.0).float()
    gray = grayscale(images, TF_GRAY_WEIGHTS)
    expected = 0.2989 * images[:, 0] + 0.587 * images[:, 1] + 0.114 * images[:, 2]
    for channel in range(3):
        torch.testing.assert_close(gray[:, channel], expected)


def test_affine_variant_is_clamped_and_identity_at_zero_strength() -> None:
    images = _images(5, low=0.0, high=1.0).float()
    uniforms = torch.rand(4, 9, generator=torch.Generator().manual_seed(0))
    out = affine_color_jitter(images, uniforms=uniforms)
    assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0
    off = JitterStrengths(brightness=0, contrast=0, saturation=0, hue=0)
    still = affine_color_jitter(images, uniforms=uniforms, strengths=off)
    torch.testing.assert_close(still, images, rtol=0, atol=1e-6)
