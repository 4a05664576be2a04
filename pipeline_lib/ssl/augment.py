"""Batched view augmentations on the training device (docs/protocol.md, "View augmentation").

Every function works on a whole batch ``(n, 3, h, w)`` at once with *per-sample* random
parameters, and draws those parameters from an explicit CPU :class:`torch.Generator` (then
moves the few numbers to the images' device). Drawing on the CPU makes an augmentation
stream depend only on the seed, not on the device, and keeps the generator's state easy to
checkpoint. There is no per-image Python loop.

The view pipeline (:class:`ViewAugment`) follows the released code's
``cnr0.5+hflip+jitter_b0.4_c0.4_s0.4_h0.4+gray0.2+blur0.5`` (``data/augment_ops.py``):

1. ``RandomCropAndResize``: a square crop of integer side ``U{floor(h/2), ..., h}`` at a
   uniform integer offset, resized back to ``h`` by TF's bilinear ``tf.image.resize``
   (half-pixel centres, edge clamping inside the crop, no antialiasing);
2. ``RandomFlipLeftRight`` with p = 0.5 (off when ``hflip`` is a distribution of DA, as the
   paper's Sec. 5.2 and the released script of that figure);
3. colour jitter, always applied, with TF's semantics (:mod:`pipeline_lib.ssl.color_ops`): an
   additive brightness, per-channel contrast, HSV saturation and hue; the order of the four
   operations is fixed for the run and the view stream (the released pipeline shuffles it
   once, when it is traced); no clamping;
4. grayscale with p = 0.2 (``tf.image.rgb_to_grayscale``'s weights);
5. Gaussian blur: named in the released config but never applied (its ``RandomBlur``
   returns the image when training), so off by default; ``blur_p`` turns SimCLR's on.

Where torch cannot be identical: the random numbers (TF's stateful RNG streams cannot be
reproduced), the order permutation of each view stream (drawn from the run's seed instead of
Python's ``random`` state at trace time), and float rounding of the resampling and HSV
arithmetic. ``jitter="torchvision"`` selects torchvision-style factors instead (a named
variant, :func:`~pipeline_lib.ssl.color_ops.affine_color_jitter`).

Geometric transforms for rotation prediction and distribution augmentation are exact pixel
permutations: :func:`rotate90`, :func:`hflip` and :func:`distribution_copies`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from pipeline_lib.registry import DEFAULT_DISTRIBUTIONS, DISTRIBUTION_PRIMITIVES
from pipeline_lib.ssl.color_ops import GRAY_WEIGHTS as GRAY_WEIGHTS_601
from pipeline_lib.ssl.color_ops import (
    TF_GRAY_WEIGHTS,
    JitterSlots,
    JitterStrengths,
    affine_color_jitter,
    grayscale,
    jitter_slots,
    released_color_jitter,
)
from pipeline_lib.ssl.draws import Draws, as_draws

__all__ = [
    "DEFAULT_DISTRIBUTIONS",
    "DISTRIBUTION_PRIMITIVES",
    "JITTER_ORDERS",
    "JITTERS",
    "DistributionCopies",
    "ViewAugment",
    "crop_and_resize",
    "distribution_copies",
    "gaussian_blur",
    "hflip",
    "parse_distribution",
    "random_grayscale",
    "rotate90",
    "rotation_views",
    "to_unit_float",
    "two_views",
]

#: Colour jitters of :class:`ViewAugment`: the released code's (TF ops) or the variant.
JITTERS: tuple[str, ...] = ("released", "torchvision")
#: How the order of the four jitter operations is drawn.
JITTER_ORDERS: tuple[str, ...] = ("per_run", "per_image")


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


def _rand(generator: torch.Generator | Draws, *shape: int, device: torch.device) -> torch.Tensor:
    """Uniform [0, 1) numbers from the CPU ``generator`` (or static draws), on ``device``."""
    return as_draws(generator).rand(*shape).to(device, non_blocking=True)


def _resize_matrix(offset: torch.Tensor, side: torch.Tensor, size: int) -> torch.Tensor:
    """Per-image ``(size, size)`` matrices of TF's bilinear resize of a crop to ``size``.

    Output pixel ``j`` reads the crop ``[offset, offset + side)`` at
    ``p = (j + 0.5) side / size - 0.5`` (half-pixel centres), clamped to
    ``[0, side - 1]`` as TF's ``compute_interpolation_weights`` does, so a crop never reads
    outside itself; the weight of image pixel ``i`` is the tent ``max(0, 1 - |p - i|)``.
    """
    device = offset.device
    j = torch.arange(size, device=device, dtype=torch.float32)
    position = (j[None, :] + 0.5) * (side[:, None] / size) - 0.5  # (n, size), crop coords
    position = torch.minimum(position.clamp(min=0.0), side[:, None] - 1.0) + offset[:, None]
    pixels = torch.arange(size, device=device, dtype=torch.float32)
    return (1.0 - (position[:, :, None] - pixels[None, None, :]).abs()).clamp_(min=0.0)


def crop_and_resize(
    images: torch.Tensor,
    *,
    generator: torch.Generator | Draws,
    min_scale: float = 0.5,
    flip_p: float = 0.0,
) -> torch.Tensor:
    """The released ``RandomCropAndResize`` (then ``RandomFlipLeftRight``) on a batch.

    Per image: side ``s`` uniform on the integers ``int(h * min_scale) .. h``, offsets
    uniform on ``0 .. h - s`` in each axis (``tf.image.random_crop``), TF's bilinear resize
    back to ``h``, and a horizontal flip of the result with probability ``flip_p``. The
    resampling is separable: two batched matrix products.

    Parameters
    ----------
    images : Tensor of shape (n, 3, h, h)
        uint8 or float in [0, 1]; square.
    generator : torch.Generator or Draws
        CPU generator for the per-image parameters (draws ``n * 4`` numbers), or the static
        draws of a two-phase step (:mod:`pipeline_lib.ssl.draws`).
    min_scale : float, default=0.5
        Smallest crop side as a fraction of the image side (the released ``cnr0.5``).
    flip_p : float, default=0.0

    Returns
    -------
    Tensor of shape (n, 3, h, h), float32

    Raises
    ------
    ValueError
        On non-square images or ``min_scale`` outside (0, 1].
    """
    _check_batch(images)
    if not 0.0 < min_scale <= 1.0:
        raise ValueError(f"need 0 < min_scale <= 1, got {min_scale}")
    x = to_unit_float(images)
    n, _, h, w = x.shape
    if h != w:
        raise ValueError(f"crop_and_resize needs square images, got {h}x{w}")
    u = as_draws(generator).rand(n, 4)
    smallest = int(h * min_scale)
    side = (smallest + (u[:, 0] * (h - smallest + 1)).floor()).clamp(max=h)
    top = (u[:, 1] * (h - side + 1)).floor().clamp(max=h - side)
    left = (u[:, 2] * (h - side + 1)).floor().clamp(max=h - side)
    flip = u[:, 3] < flip_p
    rows = _resize_matrix(top.to(x.device), side.to(x.device), h)  # (n, h, h)
    cols = _resize_matrix(left.to(x.device), side.to(x.device), w)  # (n, w, w)
    cols = torch.where(flip.to(x.device)[:, None, None], cols.flip(1), cols)
    # rows @ x @ cols^T with the channels folded into the matrix dimensions.
    out = torch.bmm(rows, x.permute(0, 2, 1, 3).reshape(n, h, 3 * w))  # (n, h, 3 w)
    out = torch.bmm(out.view(n, h * 3, w), cols.transpose(1, 2))  # (n, 3 h, w)
    return out.view(n, h, 3, w).permute(0, 2, 1, 3).contiguous()


def random_grayscale(
    images: torch.Tensor,
    *,
    generator: torch.Generator | Draws,
    p: float = 0.2,
    weights: tuple[float, float, float] = TF_GRAY_WEIGHTS,
) -> torch.Tensor:
    """Replace an image by its luma (in all 3 channels) with probability ``p``.

    Draws ``n`` numbers from ``generator``; returns float32 of the input's shape.
    """
    _check_batch(images)
    x = to_unit_float(images)
    mask = _rand(generator, len(x), device=x.device) < p
    return torch.where(mask[:, None, None, None], grayscale(x, weights), x)


def gaussian_blur(
    images: torch.Tensor,
    *,
    generator: torch.Generator | Draws,
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
    """The view augmentation ``A`` of docs/protocol.md, applied to a batch on its device.

    Parameters
    ----------
    crop_min_scale : float, default=0.5
        Smallest crop side as a fraction of the image side.
    flip_p : float, default=0.5
        0 when ``hflip`` is a distribution of DA (the trainer sets it; ``view_flip``).
    jitter : {"released", "torchvision"}, default="released"
        TF's colour operations, unclamped (the released code), or torchvision's affine,
        clamped jitter (a named variant).
    jitter_order : {"per_run", "per_image"}, default="per_run"
        ``per_run``: one order of the four operations per view stream, fixed for the run
        (the released code); ``per_image``: a fresh order per image.
    order_seed : int, default=0
        Seeds the per-run orders (the trainer sets it from the run's seed).
    brightness, contrast, saturation, hue : float, default=0.4
    grayscale_p : float, default=0.2
    blur_p : float, default=0.0
        The released code never blurs; SimCLR uses 0.5.
    blur_sigma : tuple of float, default=(0.1, 2.0)

    Notes
    -----
    ``augment(images, generator, streams=k)`` returns one float32 view per input image;
    ``images`` holds ``k`` equal chunks, one per view stream (view 1 and view 2, or the four
    rotations), and every image gets independent random parameters.
    """

    crop_min_scale: float = 0.5
    flip_p: float = 0.5
    jitter: str = "released"
    jitter_order: str = "per_run"
    order_seed: int = 0
    brightness: float = 0.4
    contrast: float = 0.4
    saturation: float = 0.4
    hue: float = 0.4
    grayscale_p: float = 0.2
    blur_p: float = 0.0
    blur_sigma: tuple[float, float] = (0.1, 2.0)

    def __post_init__(self) -> None:
        if self.jitter not in JITTERS:
            raise ValueError(f"unknown jitter {self.jitter!r}; allowed: {', '.join(JITTERS)}")
        if self.jitter_order not in JITTER_ORDERS:
            raise ValueError(
                f"unknown jitter_order {self.jitter_order!r}; allowed: {', '.join(JITTER_ORDERS)}"
            )

    @functools.cached_property
    def strengths(self) -> JitterStrengths:
        """The four jitter strengths as one checked object (either jitter takes it); built
        and checked once per augmentation, not at every training step."""
        return JitterStrengths(self.brightness, self.contrast, self.saturation, self.hue)

    def stream_orders(self, streams: int) -> torch.Tensor:
        """The fixed jitter order of each view stream, ``(streams, 4)``, from ``order_seed``."""
        return torch.tensor(_stream_orders(self.order_seed, streams))

    def _orders(self, n: int, streams: int, generator: torch.Generator | Draws) -> torch.Tensor:
        if self.jitter_order == "per_image":
            return torch.argsort(as_draws(generator).rand(n, 4), dim=1)
        if n % streams:
            raise ValueError(f"{n} images do not split into {streams} equal view streams")
        return self.stream_orders(streams).repeat_interleave(n // streams, dim=0)

    def _static_slots(self, x: torch.Tensor, streams: int, draws: Draws) -> JitterSlots:
        """The jitter's slots with every mask made on the device (a two-phase step).

        ``per_run``: the host knows each stream's fixed order, so a slot computes only the
        operations some stream runs there; ``per_image``: any operation may run in any slot.
        """
        n = len(x)
        if self.jitter_order == "per_image":
            order = torch.argsort(draws.rand(n, 4), dim=1)
            return [[(index, order[:, slot] == index) for index in range(4)] for slot in range(4)]
        if n % streams:
            raise ValueError(f"{n} images do not split into {streams} equal view streams")
        orders = _stream_orders(self.order_seed, streams)
        stream = torch.arange(n, device=x.device) // (n // streams)
        slots: JitterSlots = []
        for slot in range(4):
            entries = []
            for index in range(4):
                chosen = [s for s in range(streams) if orders[s][slot] == index]
                if not chosen:
                    continue
                if len(chosen) == streams:
                    entries.append((index, None))
                    continue
                rows = functools.reduce(torch.logical_or, [stream == s for s in chosen])
                entries.append((index, rows))
            slots.append(entries)
        return slots

    def _released_jitter(self, x: torch.Tensor, streams: int, draws: Draws) -> torch.Tensor:
        """The released colour jitter and grayscale (draws: order if per image, 4, then 1)."""
        strengths = self.strengths
        if draws.static:
            slots = self._static_slots(x, streams, draws)
            x = jitter_slots(x, slots=slots, uniforms=draws.rand(len(x), 4), strengths=strengths)
        else:
            x = released_color_jitter(
                x,
                order=self._orders(len(x), streams, draws),
                uniforms=draws.rand(len(x), 4),
                strengths=strengths,
            )
        return random_grayscale(x, generator=draws, p=self.grayscale_p)

    def __call__(
        self, images: torch.Tensor, generator: torch.Generator | Draws, streams: int = 1
    ) -> torch.Tensor:
        draws = as_draws(generator)
        # Pixels stay float32 even inside the training loop's autocast region.
        with torch.autocast(device_type=images.device.type, enabled=False):
            x = crop_and_resize(
                images, generator=draws, min_scale=self.crop_min_scale, flip_p=self.flip_p
            )
            if self.jitter == "released":
                x = self._released_jitter(x, streams, draws)
            else:
                x = affine_color_jitter(
                    x.clamp(0.0, 1.0),
                    uniforms=draws.rand(len(x), 9),
                    random_order=True,
                    strengths=self.strengths,
                )
                x = random_grayscale(
                    x, generator=draws, p=self.grayscale_p, weights=GRAY_WEIGHTS_601
                )
            if self.blur_p > 0:
                x = gaussian_blur(x, generator=draws, p=self.blur_p, sigma=self.blur_sigma)
        return x


@functools.lru_cache(maxsize=256)
def _stream_orders(order_seed: int, streams: int) -> tuple[tuple[int, ...], ...]:
    """Per view stream, the jitter order drawn from ``order_seed`` (plain ints, cached)."""
    generator = torch.Generator().manual_seed(order_seed)
    return tuple(tuple(torch.randperm(4, generator=generator).tolist()) for _ in range(streams))


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
    images: torch.Tensor,
    augment: Callable[..., torch.Tensor],
    generator: torch.Generator | Draws,
) -> list[torch.Tensor]:
    """Two independently augmented views of every image (contrastive learning).

    Returns ``[view_1, view_2]``, each float32 ``(n, 3, h, w)``.
    """
    views = augment(torch.cat([images, images]), generator, streams=2)
    return list(views.chunk(2))


def rotation_views(
    images: torch.Tensor,
    augment: Callable[..., torch.Tensor],
    generator: torch.Generator | Draws,
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
    views = augment(images.repeat(4, 1, 1, 1), generator, streams=4)
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
