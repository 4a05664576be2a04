"""Batched view augmentations: shapes, ranges, determinism and agreement with oracles."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torchvision.transforms.v2 import functional as TF

from pipeline_lib.ssl.augment import (
    ViewAugment,
    crop_and_resize,
    distribution_copies,
    gaussian_blur,
    hflip,
    parse_distribution,
    random_grayscale,
    rotate90,
    rotation_views,
    to_unit_float,
    two_views,
)
from pipeline_lib.ssl.color_ops import (
    GRAY_WEIGHTS,
    TF_GRAY_WEIGHTS,
    JitterStrengths,
    affine_color_jitter,
)
from pipeline_lib.ssl.run import _view_augment
from pipeline_lib.ssl.settings import TrainSettings


def _images(n: int = 6, size: int = 16, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 3, size, size), dtype=torch.uint8, generator=generator)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _identity(images: torch.Tensor, generator: torch.Generator, streams: int = 1) -> torch.Tensor:
    return to_unit_float(images)


def test_view_augment_shape_dtype_and_unclamped_values() -> None:
    views = ViewAugment()(_images(64, 16), _gen())
    assert views.shape == (64, 3, 16, 16)
    assert views.dtype == torch.float32
    # TF's float colour ops do not clip: an additive brightness leaves [0, 1].
    assert float(views.min()) < 0.0 or float(views.max()) > 1.0
    assert float(views.min()) > -1.0 and float(views.max()) < 2.0


def test_same_generator_seed_gives_same_views_and_other_seed_differs() -> None:
    images = _images(8, 16)
    augment = ViewAugment(blur_p=0.5)
    first, again = augment(images, _gen(3)), augment(images, _gen(3))
    other = augment(images, _gen(4))
    assert torch.equal(first, again)
    assert not torch.allclose(first, other)


def test_parameters_are_drawn_per_image() -> None:
    # 16 copies of one image: every view must differ from every other one.
    images = _images(1, 16).repeat(16, 1, 1, 1)
    views = ViewAugment()(images, _gen()).flatten(1)
    distances = torch.cdist(views, views)
    off_diagonal = distances[~torch.eye(16, dtype=torch.bool)]
    assert float(off_diagonal.min()) > 1e-3


def _tf_crop_and_resize(image: np.ndarray, top: int, left: int, side: int) -> np.ndarray:
    """tf.image.random_crop at (top, left) then tf.image.resize (bilinear, half-pixel)."""
    crop = image[:, top : top + side, left : left + side]
    size = image.shape[1]
    scale = side / size
    out = np.empty_like(image)
    for i in range(size):
        for j in range(size):
            y, x = (i + 0.5) * scale - 0.5, (j + 0.5) * scale - 0.5
            y0, x0 = int(np.floor(y)), int(np.floor(x))
            dy, dx = y - y0, x - x0
            ys = (max(y0, 0), min(y0 + 1, side - 1))
            xs = (max(x0, 0), min(x0 + 1, side - 1))
            top_row = crop[:, ys[0], xs[0]] * (1 - dx) + crop[:, ys[0], xs[1]] * dx
            bottom_row = crop[:, ys[1], xs[0]] * (1 - dx) + crop[:, ys[1], xs[1]] * dx
            out[:, i, j] = top_row * (1 - dy) + bottom_row * dy
    return out


def test_crop_matches_tf_random_crop_and_bilinear_resize() -> None:
    images = to_unit_float(_images(6, 16)).double().float()
    ours = crop_and_resize(images, generator=_gen(7), min_scale=0.5, flip_p=0.5)
    u = torch.rand(6, 4, generator=_gen(7))  # the same draws, in the same order
    sides = (8 + (u[:, 0] * 9).floor()).clamp(max=16).int().tolist()
    assert min(sides) >= 8 and max(sides) <= 16
    for i, side in enumerate(sides):
        top = min(int(u[i, 1] * (16 - side + 1)), 16 - side)
        left = min(int(u[i, 2] * (16 - side + 1)), 16 - side)
        expected = _tf_crop_and_resize(images[i].double().numpy(), top, left, side)
        if float(u[i, 3]) < 0.5:
            expected = expected[:, :, ::-1]
        np.testing.assert_allclose(ours[i].numpy(), expected, atol=1e-5)


def test_full_crop_is_identity_and_flip_is_exact() -> None:
    images = _images(4, 16)
    same = crop_and_resize(images, generator=_gen(), min_scale=1.0, flip_p=0.0)
    flipped = crop_and_resize(images, generator=_gen(), min_scale=1.0, flip_p=1.0)
    torch.testing.assert_close(same, to_unit_float(images), rtol=0, atol=1e-6)
    torch.testing.assert_close(flipped, hflip(to_unit_float(images)), rtol=0, atol=1e-6)


def test_crop_sides_cover_the_released_integer_range() -> None:
    # A ramp along the width: a crop of side s spans (s - 1) / 31 of it after resizing.
    ramp = torch.linspace(0, 1, 32).expand(400, 3, 32, 32).contiguous()
    out = crop_and_resize(ramp, generator=_gen(), min_scale=0.5, flip_p=0.0)
    widths = (out[:, 0, 0, -1] - out[:, 0, 0, 0]) * 31  # between s - 2 and s - 1 pixels
    assert float(widths.min()) > 16 - 2.01 and float(widths.max()) <= 31 + 1e-4
    assert float(widths.min()) < 16 and float(widths.max()) > 30  # both ends are drawn


@pytest.mark.parametrize(
    ("column", "kwargs", "reference"),
    [
        (0, {"brightness": 0.4}, TF.adjust_brightness),
        (1, {"contrast": 0.4}, TF.adjust_contrast),
        (2, {"saturation": 0.4}, TF.adjust_saturation),
    ],
)
def test_torchvision_variant_operations_match_torchvision(column, kwargs, reference) -> None:
    images = to_unit_float(_images(6, 8))
    strengths = JitterStrengths(
        **{"brightness": 0.0, "contrast": 0.0, "saturation": 0.0, "hue": 0.0, **kwargs}
    )
    u = torch.rand(6, 9, generator=_gen(5))
    ours = affine_color_jitter(images, uniforms=u, strengths=strengths)
    factors = 1 + 0.4 * (2 * u[:, column] - 1)
    expected = torch.stack(
        [reference(img, float(f)) for img, f in zip(images, factors, strict=True)]
    )
    # torchvision's luma uses 0.2989 for red where ITU-R 601 (ours) has 0.299.
    torch.testing.assert_close(ours, expected, rtol=0, atol=1e-4)


def test_torchvision_variant_hue_keeps_luma_and_grays() -> None:
    # Colours well inside the cube, so no clamping: a YIQ chroma rotation keeps Y exactly.
    images = 0.35 + 0.3 * torch.rand(6, 3, 8, 8, generator=_gen(1))
    images[:, :, 0, 0] = 0.5  # a gray pixel
    u = torch.rand(6, 9, generator=_gen(2))
    hue_only = JitterStrengths(brightness=0, contrast=0, saturation=0, hue=0.4)
    out = affine_color_jitter(images, uniforms=u, strengths=hue_only)
    luma = torch.tensor(GRAY_WEIGHTS).view(1, 3, 1, 1)
    torch.testing.assert_close((out * luma).sum(1), (images * luma).sum(1), rtol=0, atol=1e-5)
    torch.testing.assert_close(out[:, :, 0, 0], torch.full((6, 3), 0.5), rtol=0, atol=1e-5)
    assert float((out - images).abs().max()) > 0.01  # the hue did change


def test_jitter_order_is_fixed_per_run_and_view_stream() -> None:
    augment = ViewAugment(order_seed=11)
    orders = augment._orders(12, 3, _gen())
    streams = augment.stream_orders(3)
    assert torch.equal(orders, streams.repeat_interleave(4, dim=0))  # one order per stream
    assert torch.equal(ViewAugment(order_seed=11).stream_orders(3), streams)  # per run
    assert all(sorted(row.tolist()) == [0, 1, 2, 3] for row in streams)
    seeds = [ViewAugment(order_seed=s).stream_orders(2) for s in range(20)]
    assert len({tuple(o.flatten().tolist()) for o in seeds}) > 10  # the seed decides
    per_image = ViewAugment(jitter_order="per_image")._orders(64, 2, _gen())
    assert len({tuple(row.tolist()) for row in per_image}) > 10
    with pytest.raises(ValueError, match="jitter_order"):
        ViewAugment(jitter_order="per_batch")
    with pytest.raises(ValueError, match="jitter"):
        ViewAugment(jitter="kornia")


@pytest.mark.parametrize(
    ("distributions", "view_flip", "flip_p"),
    [
        ((), "auto", 0.5),
        (("rot90", "rot180", "rot270"), "auto", 0.5),
        (("hflip",), "auto", 0.0),
        (("hflip", "rot90", "rot90+hflip"), "auto", 0.0),
        (("hflip",), "always", 0.5),
        (("rot90",), "never", 0.0),
    ],
)
def test_no_view_is_flipped_when_hflip_is_a_distribution(distributions, view_flip, flip_p):
    settings = TrainSettings(  # only contrastive_da has distributions
        method="contrastive_da" if distributions else "contrastive",
        epochs=1,
        batch_size=4,
        distributions=distributions,
        view_flip=view_flip,
    )
    augment = _view_augment(0, settings)
    assert augment.flip_p == flip_p


def test_grayscale_probability_one_and_zero() -> None:
    images = to_unit_float(_images(4, 8))
    gray = random_grayscale(images, generator=_gen(), p=1.0)
    luma = (images * torch.tensor(TF_GRAY_WEIGHTS).view(1, 3, 1, 1)).sum(1)
    for channel in range(3):
        torch.testing.assert_close(gray[:, channel], luma)
    assert torch.equal(random_grayscale(images, generator=_gen(), p=0.0), images)


def test_blur_keeps_constant_images_and_smooths_noise() -> None:
    constant = torch.full((3, 3, 16, 16), 0.3)
    torch.testing.assert_close(gaussian_blur(constant, generator=_gen(), p=1.0), constant)
    noise = torch.rand(3, 3, 16, 16, generator=_gen(1))
    blurred = gaussian_blur(noise, generator=_gen(), p=1.0, sigma=(1.0, 1.0))
    assert float(blurred.std()) < 0.7 * float(noise.std())
    assert torch.equal(gaussian_blur(noise, generator=_gen(), p=0.0), noise)


def test_rotate90_per_image_matches_numpy() -> None:
    images = _images(8, 6)
    k = torch.tensor([0, 1, 2, 3, 3, 2, 1, 5])
    out = rotate90(images, k).numpy()
    for i in range(8):
        expected = np.rot90(images[i].numpy(), int(k[i]) % 4, axes=(1, 2))
        np.testing.assert_array_equal(out[i], expected)
    np.testing.assert_array_equal(rotate90(images, 1).numpy(), np.rot90(images.numpy(), 1, (2, 3)))


def test_rotation_views_carry_their_labels() -> None:
    images = _images(5, 8)
    views, labels = rotation_views(images, _identity, _gen())
    assert views.shape == (20, 3, 8, 8)
    assert labels.tolist() == [k for k in range(4) for _ in range(5)]
    for row in range(20):
        expected = rotate90(to_unit_float(images[row % 5 : row % 5 + 1]), int(labels[row]))
        assert torch.equal(views[row : row + 1], expected)


def test_rotation_views_are_augmented_independently() -> None:
    images = _images(1, 16)
    views, _ = rotation_views(images, ViewAugment(), _gen())
    unrotated = torch.stack([rotate90(views[k : k + 1], -k)[0] for k in range(4)])
    assert float(torch.pdist(unrotated.flatten(1)).min()) > 1e-3


def test_two_views_are_independent_views_of_each_image() -> None:
    images = _images(4, 16)
    first, second = two_views(images, ViewAugment(), _gen())
    assert first.shape == second.shape == (4, 3, 16, 16)
    assert float((first - second).abs().flatten(1).max(1).values.min()) > 1e-3


def test_distribution_copies_count_order_and_ids() -> None:
    images = _images(3, 8)
    names = ("hflip", "rot90", "rot90+hflip")
    copies = distribution_copies(images, names)
    assert copies.images.shape == (3 * 4, 3, 8, 8)
    assert copies.source.tolist() == [0, 1, 2] * 4
    assert copies.transform.tolist() == [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3
    assert torch.equal(copies.images[:3], images)
    assert torch.equal(copies.images[3:6], images.flip(-1))
    assert torch.equal(copies.images[6:9], torch.rot90(images, 1, (-2, -1)))
    assert torch.equal(copies.images[9:], torch.rot90(images, 1, (-2, -1)).flip(-1))
    assert torch.equal(parse_distribution("rot180")(images), rotate90(images, 2))


@pytest.mark.parametrize("names", [("rot45",), ("identity",), ("rot90", "rot90"), ("",)])
def test_bad_distribution_names_raise(names) -> None:
    with pytest.raises(ValueError, match="distribution transform"):
        distribution_copies(_images(2, 8), names)


def test_wrong_shapes_raise() -> None:
    with pytest.raises(ValueError, match=r"\(n, 3, h, w\)"):
        ViewAugment()(torch.zeros(2, 1, 8, 8, dtype=torch.uint8), _gen())
    with pytest.raises(ValueError, match="square"):
        rotate90(torch.zeros(2, 3, 4, 6), torch.tensor([0, 1]))
