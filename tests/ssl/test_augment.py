"""Batched view augmentations: shapes, ranges, determinism and agreement with oracles."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torchvision.transforms.v2 import functional as TF

from pipeline_lib.augment import (
    GRAY_WEIGHTS,
    ViewAugment,
    color_jitter,
    distribution_copies,
    gaussian_blur,
    hflip,
    parse_distribution,
    random_grayscale,
    random_resized_crop,
    rotate90,
    rotation_views,
    to_unit_float,
    two_views,
)


def _images(n: int = 6, size: int = 16, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 3, size, size), dtype=torch.uint8, generator=generator)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _identity(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return to_unit_float(images)


def test_view_augment_shape_dtype_and_range() -> None:
    views = ViewAugment()(_images(8, 16), _gen())
    assert views.shape == (8, 3, 16, 16)
    assert views.dtype == torch.float32
    assert float(views.min()) >= 0.0 and float(views.max()) <= 1.0


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


def test_crop_matches_grid_sample_reference() -> None:
    images = to_unit_float(_images(5, 16))
    ours = random_resized_crop(images, generator=_gen(7), min_scale=0.5, flip_p=0.5)
    u = torch.rand(5, 4, generator=_gen(7))  # the same draws, in the same order
    side = 0.5 + 0.5 * u[:, 0]
    tx, ty = (2 * u[:, 1] - 1) * (1 - side), (2 * u[:, 2] - 1) * (1 - side)
    sx = torch.where(u[:, 3] < 0.5, -side, side)
    zero = torch.zeros(5)
    theta = torch.stack([torch.stack([sx, zero, tx], 1), torch.stack([zero, side, ty], 1)], 1)
    grid = F.affine_grid(theta, [5, 3, 16, 16], align_corners=False)
    reference = F.grid_sample(images, grid, padding_mode="border", align_corners=False)
    torch.testing.assert_close(ours, reference, rtol=0, atol=1e-5)


def test_full_crop_is_identity_and_flip_is_exact() -> None:
    images = _images(4, 16)
    same = random_resized_crop(images, generator=_gen(), min_scale=1.0, flip_p=0.0)
    flipped = random_resized_crop(images, generator=_gen(), min_scale=1.0, flip_p=1.0)
    torch.testing.assert_close(same, to_unit_float(images), rtol=0, atol=1e-6)
    torch.testing.assert_close(flipped, hflip(to_unit_float(images)), rtol=0, atol=1e-6)


def test_crop_side_stays_in_half_to_full_range() -> None:
    # A linear ramp along the width: the crop's visible span is its side fraction.
    ramp = torch.linspace(0, 1, 32).expand(200, 3, 32, 32).contiguous()
    out = random_resized_crop(ramp, generator=_gen(), min_scale=0.5, flip_p=0.0)
    span = (out[:, 0, 0, -1] - out[:, 0, 0, 0]) * 31 / 32 + 1 / 32  # ~ side fraction
    assert float(span.min()) > 0.45 and float(span.max()) <= 1.0 + 1e-5
    assert float(span.min()) < 0.6 and float(span.max()) > 0.9  # the range is used


@pytest.mark.parametrize(
    ("column", "kwargs", "reference"),
    [
        (0, {"brightness": 0.4}, TF.adjust_brightness),
        (1, {"contrast": 0.4}, TF.adjust_contrast),
        (2, {"saturation": 0.4}, TF.adjust_saturation),
    ],
)
def test_jitter_operations_match_torchvision(column, kwargs, reference) -> None:
    images = to_unit_float(_images(6, 8))
    strengths = {"brightness": 0.0, "contrast": 0.0, "saturation": 0.0, "hue": 0.0, **kwargs}
    ours = color_jitter(images, generator=_gen(5), **strengths)
    u = torch.rand(6, 9, generator=_gen(5))
    factors = 1 + 0.4 * (2 * u[:, column] - 1)
    expected = torch.stack(
        [reference(img, float(f)) for img, f in zip(images, factors, strict=True)]
    )
    # torchvision's luma uses 0.2989 for red where ITU-R 601 (ours) has 0.299.
    torch.testing.assert_close(ours, expected, rtol=0, atol=1e-4)


def test_hue_rotation_keeps_luma_and_grays() -> None:
    # Colours well inside the cube, so no clamping: a YIQ chroma rotation keeps Y exactly.
    images = 0.35 + 0.3 * torch.rand(6, 3, 8, 8, generator=_gen(1))
    images[:, :, 0, 0] = 0.5  # a gray pixel
    out = color_jitter(images, generator=_gen(2), brightness=0, contrast=0, saturation=0, hue=0.4)
    luma = torch.tensor(GRAY_WEIGHTS).view(1, 3, 1, 1)
    torch.testing.assert_close((out * luma).sum(1), (images * luma).sum(1), rtol=0, atol=1e-5)
    torch.testing.assert_close(out[:, :, 0, 0], torch.full((6, 3), 0.5), rtol=0, atol=1e-5)
    assert float((out - images).abs().max()) > 0.01  # the hue did change


def test_zero_jitter_is_identity_and_random_order_changes_result() -> None:
    images = to_unit_float(_images(6, 8))
    still = color_jitter(images, generator=_gen(), brightness=0, contrast=0, saturation=0, hue=0)
    torch.testing.assert_close(still, images, rtol=0, atol=1e-6)
    ordered = color_jitter(images, generator=_gen(9), random_order=False)
    shuffled = color_jitter(images, generator=_gen(9), random_order=True)
    assert not torch.allclose(ordered, shuffled)


def test_grayscale_probability_one_and_zero() -> None:
    images = to_unit_float(_images(4, 8))
    gray = random_grayscale(images, generator=_gen(), p=1.0)
    luma = (images * torch.tensor(GRAY_WEIGHTS).view(1, 3, 1, 1)).sum(1)
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
