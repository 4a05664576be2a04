"""Batched view augmentations on the training device (PROTOCOL.md, "Augmentation").

Every function works on a whole batch ``(n, 3, h, w)`` at once with *per-sample* random
parameters, and draws those parameters from an explicit CPU :class:`torch.Generator` (then
moves the few numbers to the images' device). Drawing on the CPU makes an augmentation
stream depend only on the seed, not on the device, and keeps the generator's state easy to
checkpoint. There is no per-image Python loop.

The view pipeline (:class:`ViewAugment`) follows the released code:

1. random resized square crop, side uniform in ``[0.5 h, h]``, position uniform, resized back
   to ``h`` (bilinear), fused with a horizontal flip (p=0.5) into one separable resampling;
2. colour jitter, always applied: brightness, contrast, saturation and hue, 0.4 each, in a
   random order drawn per image, clamped to [0, 1] after every operation (as SimCLR's
   ``color_jitter_rand``). Each operation is an affine map of the RGB vector of every pixel
   (a per-image 3x3 matrix plus an offset), so each of the four slots is one batched matrix
   product. Brightness, contrast and saturation match torchvision's definitions; hue is a
   rotation of the chroma plane in YIQ space by ``2 pi delta``, ``delta ~ U[-0.4, 0.4]``
   (the same shift as an HSV hue change for the dominant hue, but it keeps luma instead of
   the HSV value, so it is close to, not equal to, ``adjust_hue``);
3. grayscale with p=0.2 (ITU-R 601 luma, as torchvision);
4. Gaussian blur with probability ``blur_p``, default 0: the released config names blur
   but never applies it.

Geometric transforms for rotation prediction and distribution augmentation are exact pixel
permutations: :func:`rotate90`, :func:`hflip` and :func:`distribution_copies`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

__all__ = [
    "DEFAULT_DISTRIBUTIONS",
    "DISTRIBUTION_PRIMITIVES",
    "DistributionCopies",
    "GRAY_WEIGHTS",
    "ViewAugment",
    "color_jitter",
    "distribution_copies",
    "gaussian_blur",
    "hflip",
    "parse_distribution",
    "random_grayscale",
    "random_resized_crop",
    "rotate90",
    "rotation_views",
    "to_unit_float",
    "two_views",
]

#: Luma weights of ITU-R 601 (torchvision's ``rgb_to_grayscale``).
GRAY_WEIGHTS: tuple[float, float, float] = (0.299, 0.587, 0.114)

_RGB_TO_YIQ = torch.tensor(
    [[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]],
    dtype=torch.float64,
)
_YIQ_TO_RGB = torch.linalg.inv(_RGB_TO_YIQ)

#: Distribution augmentation of the paper's main table (rotations as new instances).
DEFAULT_DISTRIBUTIONS: tuple[str, ...] = ("rot90", "rot180", "rot270")


def to_unit_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 ``(n, 3, h, w)`` -> float32 in [0, 1]; float input is returned unchanged."""
    if images.dtype == torch.uint8:
        return images.float().div_(255.0)
    if not images.is_floating_point():
        raise ValueError(f"images must be uint8 or floating point, got {images.dtype}")
    return images


def _check_batch(images: torch.Tensor) -> None:
    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"images must have shape (n, 3, h, w), got {tuple(images.shape)}")


def _rand(generator: torch.Generator, *shape: int, device: torch.device) -> torch.Tensor:
    """Uniform [0, 1) numbers from the CPU ``generator``, moved to ``device``."""
    return torch.rand(*shape, generator=generator).to(device, non_blocking=True)


def _bilinear_matrix(scale: torch.Tensor, shift: torch.Tensor, size: int) -> torch.Tensor:
    """Per-image ``(size, size)`` bilinear interpolation matrices of an affine resampling.

    Output pixel ``j`` reads the input at normalised coordinate ``scale * u_j + shift``
    with ``u_j = (2 j + 1) / size - 1`` (``align_corners=False``), clamped to the border;
    the weight of input pixel ``i`` is the tent ``max(0, 1 - |p - i|)`` of the pixel
    coordinate ``p``. Same result as ``F.grid_sample(mode="bilinear",
    padding_mode="border", align_corners=False)`` on an axis-aligned affine grid.
    """
    device = scale.device
    u = (2.0 * torch.arange(size, device=device, dtype=torch.float32) + 1.0) / size - 1.0
    normalised = scale[:, None] * u[None, :] + shift[:, None]  # (n, size)
    position = ((normalised + 1.0) * size - 1.0) / 2.0
    position = position.clamp(0.0, size - 1.0)
    pixels = torch.arange(size, device=device, dtype=torch.float32)
    return (1.0 - (position[:, :, None] - pixels[None, None, :]).abs()).clamp_(min=0.0)


def random_resized_crop(
    images: torch.Tensor,
    *,
    generator: torch.Generator,
    min_scale: float = 0.5,
    max_scale: float = 1.0,
    flip_p: float = 0.0,
) -> torch.Tensor:
    """Random square crop with side fraction in ``[min_scale, max_scale]``, resized back.

    The crop side is ``r * h`` (and ``r * w``) with ``r ~ U[min_scale, max_scale]`` per image,
    its position uniform inside the image; bilinear resampling to the input size. A
    horizontal flip with probability ``flip_p`` is folded into the same resampling, done as
    two batched matrix products (separable bilinear interpolation, which is faster than
    ``grid_sample`` on CPU and equal to it up to rounding).

    Parameters
    ----------
    images : Tensor of shape (n, 3, h, w)
        uint8 or float in [0, 1].
    generator : torch.Generator
        CPU generator for the per-image parameters (draws ``n * 4`` numbers).
    min_scale, max_scale : float, default=0.5, 1.0
        Side fraction range; the released code's ``[0.5, 1]`` matches torchvision's
        ``RandomResizedCrop(scale=(0.25, 1), ratio=(1, 1))`` in range (not in density).
    flip_p : float, default=0.0

    Returns
    -------
    Tensor of shape (n, 3, h, w), float32 in [0, 1]
    """
    _check_batch(images)
    if not 0.0 < min_scale <= max_scale <= 1.0:
        raise ValueError(f"need 0 < min_scale <= max_scale <= 1, got {min_scale}, {max_scale}")
    x = to_unit_float(images)
    n = len(x)
    u = _rand(generator, n, 4, device=x.device)
    side = min_scale + (max_scale - min_scale) * u[:, 0]
    # In normalised coordinates (align_corners=False: [-1, 1] spans the image edges) a crop
    # of fraction r has its centre in [-(1 - r), 1 - r].
    tx = (2.0 * u[:, 1] - 1.0) * (1.0 - side)
    ty = (2.0 * u[:, 2] - 1.0) * (1.0 - side)
    sx = torch.where(u[:, 3] < flip_p, -side, side)
    _, _, h, w = x.shape
    rows = _bilinear_matrix(side, ty, h)  # (n, h, h)
    cols = _bilinear_matrix(sx, tx, w)  # (n, w, w); a negative scale mirrors
    # Separable bilinear resampling as two batched matrix products, rows @ x @ cols^T, with
    # the channels folded into the matrix dimensions (one GEMM per image and pass).
    out = torch.bmm(rows, x.permute(0, 2, 1, 3).reshape(n, h, 3 * w))  # (n, h, 3 w)
    out = torch.bmm(out.view(n, h * 3, w), cols.transpose(1, 2))  # (n, 3 h, w)
    return out.view(n, h, 3, w).permute(0, 2, 1, 3).contiguous().clamp_(0.0, 1.0)


def _gray_row(device: torch.device) -> torch.Tensor:
    return torch.tensor(GRAY_WEIGHTS, dtype=torch.float32, device=device)


def color_jitter(
    images: torch.Tensor,
    *,
    generator: torch.Generator,
    brightness: float = 0.4,
    contrast: float = 0.4,
    saturation: float = 0.4,
    hue: float = 0.4,
    p: float = 1.0,
    random_order: bool = True,
) -> torch.Tensor:
    """Colour jitter with per-image factors and (optionally) per-image random order.

    Brightness ``x * b``, contrast ``c x + (1 - c) mean(gray(x))``, saturation
    ``s x + (1 - s) gray(x)`` with ``b, c, s ~ U[1 - strength, 1 + strength]`` (torchvision's
    definitions); hue rotates the YIQ chroma plane by ``2 pi delta``,
    ``delta ~ U[-hue, hue]``. The result is clamped to [0, 1] after every operation.

    Parameters
    ----------
    images : Tensor of shape (n, 3, h, w)
        uint8 or float in [0, 1].
    generator : torch.Generator
        CPU generator (draws ``n * 9`` numbers).
    brightness, contrast, saturation, hue : float, default=0.4
    p : float, default=1.0
        Probability to jitter an image (the released code: always).
    random_order : bool, default=True
        Draw the order of the four operations per image (released code); ``False`` applies
        brightness, contrast, saturation, hue in that order.

    Returns
    -------
    Tensor of shape (n, 3, h, w), float32 in [0, 1]
    """
    _check_batch(images)
    if min(brightness, contrast, saturation, hue) < 0 or hue > 0.5:
        raise ValueError(
            "jitter strengths must be >= 0 and hue <= 0.5, got "
            f"{brightness}, {contrast}, {saturation}, {hue}"
        )
    x = to_unit_float(images)
    n, _, h, w = x.shape
    device = x.device
    u = _rand(generator, n, 9, device=device)
    applied = (u[:, 4] < p).float()

    def factor(column: int, strength: float) -> torch.Tensor:
        value = (1.0 + strength * (2.0 * u[:, column] - 1.0)).clamp_(min=0.0)
        return applied * value + (1.0 - applied)  # 1 = identity where not applied

    b, c, s = factor(0, brightness), factor(1, contrast), factor(2, saturation)
    angle = applied * hue * (2.0 * u[:, 3] - 1.0) * (2.0 * math.pi)
    eye = torch.eye(3, device=device).expand(n, 3, 3)
    gray = _gray_row(device)
    ones_gray = torch.ones(3, 1, device=device) * gray[None, :]  # (3, 3): 1 w^T
    m_brightness = b[:, None, None] * eye
    m_contrast = c[:, None, None] * eye
    m_saturation = s[:, None, None] * eye + (1.0 - s)[:, None, None] * ones_gray
    cos, sin = torch.cos(angle), torch.sin(angle)
    rot = torch.zeros(n, 3, 3, device=device)
    rot[:, 0, 0] = 1.0
    rot[:, 1, 1], rot[:, 1, 2] = cos, -sin
    rot[:, 2, 1], rot[:, 2, 2] = sin, cos
    to_yiq = _RGB_TO_YIQ.to(device=device, dtype=torch.float32)
    to_rgb = _YIQ_TO_RGB.to(device=device, dtype=torch.float32)
    m_hue = to_rgb @ rot @ to_yiq
    matrices = torch.stack([m_brightness, m_contrast, m_saturation, m_hue], 1)  # (n, 4, 3, 3)
    contrast_offset = 1.0 - c  # times the current mean luma, only in the contrast slot
    if random_order:
        order = torch.argsort(u[:, 5:9], dim=1)  # (n, 4): a uniform random permutation
    else:
        order = torch.arange(4, device=device).expand(n, 4)
    rows = torch.arange(n, device=device)
    flat = x.reshape(n, 3, h * w)
    for slot in range(4):
        op = order[:, slot]
        matrix = matrices[rows, op]  # (n, 3, 3)
        mean_luma = flat.mean(2) @ gray  # (n,)
        offset = torch.where(op == 1, contrast_offset * mean_luma, torch.zeros_like(mean_luma))
        flat = torch.baddbmm(offset[:, None, None], matrix, flat).clamp_(0.0, 1.0)
    return flat.view(n, 3, h, w)


def random_grayscale(
    images: torch.Tensor, *, generator: torch.Generator, p: float = 0.2
) -> torch.Tensor:
    """Replace an image by its luma (in all 3 channels) with probability ``p``.

    Draws ``n`` numbers from ``generator``; returns float32 of the input's shape.
    """
    _check_batch(images)
    x = to_unit_float(images)
    mask = _rand(generator, len(x), device=x.device) < p
    luma = torch.einsum("nchw,c->nhw", x, _gray_row(x.device))[:, None]  # (n, 1, h, w)
    return torch.where(mask[:, None, None, None], luma.expand_as(x), x)


def gaussian_blur(
    images: torch.Tensor,
    *,
    generator: torch.Generator,
    p: float = 0.5,
    sigma: tuple[float, float] = (0.1, 2.0),
    kernel_size: int | None = None,
) -> torch.Tensor:
    """Gaussian blur with per-image ``sigma ~ U[sigma]`` applied with probability ``p``.

    Kernel size ``2 * ((h // 10) // 2) + 1`` (SimCLR: 10% of the side), at least 3;
    reflect padding; one grouped separable convolution for the whole batch. Draws ``2 n``
    numbers from ``generator``.
    """
    _check_batch(images)
    x = to_unit_float(images)
    n, c, h, w = x.shape
    if kernel_size is None:
        kernel_size = max(3, 2 * ((h // 10) // 2) + 1)
    if kernel_size % 2 == 0 or kernel_size < 1:
        raise ValueError(f"kernel_size must be odd and positive, got {kernel_size}")
    u = _rand(generator, n, 2, device=x.device)
    mask = u[:, 0] < p
    std = sigma[0] + (sigma[1] - sigma[0]) * u[:, 1]
    radius = kernel_size // 2
    taps = torch.arange(-radius, radius + 1, device=x.device, dtype=torch.float32)
    kernel = torch.exp(-(taps[None, :] ** 2) / (2.0 * std[:, None] ** 2))
    kernel = (kernel / kernel.sum(1, keepdim=True)).repeat_interleave(c, 0)  # (n * c, k)
    planes = x.reshape(1, n * c, h, w)
    planes = F.pad(planes, (radius, radius, radius, radius), mode="reflect")
    planes = F.conv2d(planes, kernel[:, None, :, None], groups=n * c)  # vertical pass
    planes = F.conv2d(planes, kernel[:, None, None, :], groups=n * c)  # horizontal pass
    blurred = planes.view(n, c, h, w)
    return torch.where(mask[:, None, None, None], blurred, x)


@dataclass(frozen=True)
class ViewAugment:
    """The view augmentation ``A`` of PROTOCOL.md, applied to a batch on its device.

    Parameters
    ----------
    crop_min_scale, crop_max_scale : float, default=0.5, 1.0
        Crop side as a fraction of the image side.
    flip_p : float, default=0.5
    jitter_p : float, default=1.0
        The released code always jitters (SimCLR uses 0.8).
    brightness, contrast, saturation, hue : float, default=0.4
    jitter_random_order : bool, default=True
    grayscale_p : float, default=0.2
    blur_p : float, default=0.0
        The released code never blurs; SimCLR uses 0.5.
    blur_sigma : tuple of float, default=(0.1, 2.0)

    Notes
    -----
    ``augment(images, generator)`` returns one float32 view in [0, 1] per input image;
    every image gets independent parameters, so ``augment(torch.cat([x, x]), g)`` gives two
    independent views of each image.
    """

    crop_min_scale: float = 0.5
    crop_max_scale: float = 1.0
    flip_p: float = 0.5
    jitter_p: float = 1.0
    brightness: float = 0.4
    contrast: float = 0.4
    saturation: float = 0.4
    hue: float = 0.4
    jitter_random_order: bool = True
    grayscale_p: float = 0.2
    blur_p: float = 0.0
    blur_sigma: tuple[float, float] = (0.1, 2.0)

    def __call__(self, images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        # Pixels stay float32 even inside the training loop's autocast region.
        with torch.autocast(device_type=images.device.type, enabled=False):
            x = random_resized_crop(
                images,
                generator=generator,
                min_scale=self.crop_min_scale,
                max_scale=self.crop_max_scale,
                flip_p=self.flip_p,
            )
            x = color_jitter(
                x,
                generator=generator,
                brightness=self.brightness,
                contrast=self.contrast,
                saturation=self.saturation,
                hue=self.hue,
                p=self.jitter_p,
                random_order=self.jitter_random_order,
            )
            x = random_grayscale(x, generator=generator, p=self.grayscale_p)
            if self.blur_p > 0:
                x = gaussian_blur(x, generator=generator, p=self.blur_p, sigma=self.blur_sigma)
        return x


def hflip(images: torch.Tensor) -> torch.Tensor:
    """Mirror left-right: ``(n, c, h, w)`` -> same shape."""
    return images.flip(-1)


def rotate90(images: torch.Tensor, k: int | torch.Tensor) -> torch.Tensor:
    """Rotate by ``k`` quarter turns counter-clockwise (as ``numpy.rot90``).

    Parameters
    ----------
    images : Tensor of shape (n, c, h, w)
    k : int or Tensor of shape (n,)
        One rotation for the whole batch, or one per image (any integers; taken mod 4).

    Returns
    -------
    Tensor of shape (n, c, h, w)

    Raises
    ------
    ValueError
        If per-image rotations are requested for non-square images.
    """
    if isinstance(k, int):
        return torch.rot90(images, k % 4, dims=(-2, -1))
    if images.shape[-1] != images.shape[-2]:
        raise ValueError(f"per-image rotations need square images, got {tuple(images.shape)}")
    k = k.to(images.device).remainder(4)
    if k.shape != (len(images),):
        raise ValueError(f"k must have shape ({len(images)},), got {tuple(k.shape)}")
    out = images
    for quarter in (1, 2, 3):  # a loop over rotation values, not images: no host sync
        mask = (k == quarter).view(-1, *([1] * (images.ndim - 1)))
        out = torch.where(mask, torch.rot90(images, quarter, dims=(-2, -1)), out)
    return out


def two_views(
    images: torch.Tensor, augment: Callable[..., torch.Tensor], generator: torch.Generator
) -> list[torch.Tensor]:
    """Two independently augmented views of every image (contrastive learning).

    Returns ``[view_1, view_2]``, each float32 ``(n, 3, h, w)``.
    """
    views = augment(torch.cat([images, images]), generator)
    return list(views.chunk(2))


def rotation_views(
    images: torch.Tensor, augment: Callable[..., torch.Tensor], generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Four independently augmented views of every image, rotated by 0/90/180/270 degrees.

    The augmentation is applied *before* the rotation, so a random flip can never turn one
    rotation into another.

    Returns
    -------
    views : Tensor of shape (4 n, 3, h, w)
        Rotation-major: rows ``k n .. (k + 1) n - 1`` are rotated by ``k`` quarter turns.
    labels : Tensor of shape (4 n,), int64
        The rotation ``k`` of every row.
    """
    n = len(images)
    views = augment(images.repeat(4, 1, 1, 1), generator)
    views = torch.cat([rotate90(chunk, k) for k, chunk in enumerate(views.split(n))])
    labels = torch.arange(4, device=views.device).repeat_interleave(n)
    return views, labels


_PRIMITIVES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "hflip": hflip,
    "vflip": lambda x: x.flip(-2),
    "rot90": lambda x: rotate90(x, 1),
    "rot180": lambda x: rotate90(x, 2),
    "rot270": lambda x: rotate90(x, 3),
}

#: Names a distribution-augmentation transform may combine with ``+``.
DISTRIBUTION_PRIMITIVES: tuple[str, ...] = tuple(_PRIMITIVES)


def parse_distribution(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """Turn ``"rot90+hflip"`` into a function applying ``rot90`` then ``hflip``.

    Raises
    ------
    ValueError
        On an unknown primitive (allowed: :data:`DISTRIBUTION_PRIMITIVES`).
    """
    parts = name.split("+")
    unknown = [part for part in parts if part not in _PRIMITIVES]
    if not name or unknown:
        raise ValueError(
            f"unknown distribution transform {name!r}; combine with '+' any of "
            f"{', '.join(DISTRIBUTION_PRIMITIVES)} (e.g. 'rot90+hflip')"
        )

    def apply(x: torch.Tensor) -> torch.Tensor:
        for part in parts:
            x = _PRIMITIVES[part](x)
        return x

    return apply


class DistributionCopies(NamedTuple):
    """Instances of distribution augmentation; row ``i`` is instance ``i``.

    images : Tensor of shape (n * (1 + T), c, h, w)
        Transform-major: rows ``t n .. (t + 1) n - 1`` hold transform ``t`` of every image
        (``t = 0`` is the identity).
    source : Tensor of shape (n * (1 + T),), int64
        Index of the original image in the batch.
    transform : Tensor of shape (n * (1 + T),), int64
        0 for the identity, ``t`` for ``transforms[t - 1]``.
    """

    images: torch.Tensor
    source: torch.Tensor
    transform: torch.Tensor


def distribution_copies(
    images: torch.Tensor, transforms: Sequence[str] = DEFAULT_DISTRIBUTIONS
) -> DistributionCopies:
    """Every image under the identity and each named transform, as separate instances.

    Parameters
    ----------
    images : Tensor of shape (n, c, h, w)
    transforms : sequence of str, default=("rot90", "rot180", "rot270")
        Names for :func:`parse_distribution` (e.g. ``("hflip", "rot90", "rot90+hflip")``);
        the identity is always included and must not be listed.

    Returns
    -------
    DistributionCopies

    Raises
    ------
    ValueError
        On an unknown, duplicated or ``"identity"`` transform name.
    """
    names = list(transforms)
    if "identity" in names or len(set(names)) != len(names):
        raise ValueError(
            f"distribution transforms must be distinct and exclude 'identity' (always "
            f"included), got {names}"
        )
    functions = [parse_distribution(name) for name in names]
    n = len(images)
    copies = torch.cat([images] + [function(images) for function in functions])
    source = torch.arange(n, device=images.device).repeat(1 + len(names))
    transform = torch.arange(1 + len(names), device=images.device).repeat_interleave(n)
    return DistributionCopies(copies, source, transform)
