"""Colour operations of the view augmentation, batched with per-image parameters.

Two colour jitters live here:

``released`` (:func:`released_color_jitter`, the default of every paper row)
    The released code's ``ColorJitter`` (``data/augment_ops.py``), which calls TensorFlow's
    ``tf.image.random_brightness / random_contrast / random_saturation / random_hue``:

    - brightness adds ``delta ~ U[-b, b]`` to every value (additive, not a factor);
    - contrast maps each channel to ``(x - mean_c) * c + mean_c`` with ``mean_c`` the
      channel's own spatial mean and ``c ~ U[1 - s, 1 + s]``;
    - saturation converts to HSV, multiplies S by ``U[1 - s, 1 + s]``, clips S to [0, 1]
      and converts back (TF's ``adjust_saturation`` kernel);
    - hue adds ``delta ~ U[-h, h]`` turns to the hue and wraps it (TF's ``adjust_hue``
      kernel, which works on the (min, max) range of each pixel);
    - nothing is clamped between or after the operations (TF's float ops do not clip).

    The four operations run in an order that ``random.shuffle`` fixes once, when the
    released input pipeline is traced, and separately for every view stream (view 1 and
    view 2 of contrastive learning, each of the four rotations). Here ``order`` gives that
    order per image; :class:`~pipeline_lib.ssl.augment.ViewAugment` draws one permutation per
    view stream from the run's seed.

``torchvision`` (:func:`affine_color_jitter`, a named variant)
    Not the released code's: brightness, contrast and saturation as torchvision's factors,
    hue as a YIQ chroma rotation, a random order per image and a clamp to [0, 1] after every
    operation.

The HSV helpers re-implement TF's C++ kernels; the test suite checks them against the
worked examples of TF's own documentation and a numpy re-implementation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeAlias

import torch

from pipeline_lib.ssl.draws import device_constant

__all__ = [
    "GRAY_WEIGHTS",
    "TF_GRAY_WEIGHTS",
    "JitterStrengths",
    "RELEASED_STRENGTHS",
    "adjust_brightness",
    "adjust_contrast",
    "adjust_hue",
    "adjust_saturation",
    "affine_color_jitter",
    "grayscale",
    "jitter_slots",
    "released_color_jitter",
]

#: Per slot of the jitter, the operations that may run there: ``(operation, rows)`` with
#: ``rows`` None (every image) or a boolean ``(n,)`` mask of the images that run it.
JitterSlots: TypeAlias = list[list[tuple[int, torch.Tensor | None]]]


@dataclass(frozen=True)
class JitterStrengths:
    """The four strengths of a colour jitter, checked once for both jitters.

    Parameters
    ----------
    brightness, contrast, saturation, hue : float, default=0.4
        ``released``: ``max_delta`` of brightness and hue, and the half-range of the contrast
        and saturation factors around 1 (the released ``jitter_b0.4_c0.4_s0.4_h0.4``);
        ``torchvision``: the half-range of every factor, hue in turns. 0 turns an operation
        off.

    Raises
    ------
    ValueError
        On a negative strength or ``hue > 0.5`` (half a turn).
    """

    brightness: float = 0.4
    contrast: float = 0.4
    saturation: float = 0.4
    hue: float = 0.4

    def __post_init__(self) -> None:
        if min(self.brightness, self.contrast, self.saturation, self.hue) < 0 or self.hue > 0.5:
            raise ValueError(
                "jitter strengths must be >= 0 and hue <= 0.5, got "
                f"{self.brightness}, {self.contrast}, {self.saturation}, {self.hue}"
            )


#: The released code's strengths (``jitter_b0.4_c0.4_s0.4_h0.4``).
RELEASED_STRENGTHS = JitterStrengths()

#: Luma weights of ITU-R 601 as used by the ``torchvision`` variant.
GRAY_WEIGHTS: tuple[float, float, float] = (0.299, 0.587, 0.114)
#: ``tf.image.rgb_to_grayscale``'s weights (the released code's grayscale).
TF_GRAY_WEIGHTS: tuple[float, float, float] = (0.2989, 0.587, 0.114)

_RGB_TO_YIQ = torch.tensor(
    [[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]],
    dtype=torch.float64,
)
_YIQ_TO_RGB = torch.linalg.inv(_RGB_TO_YIQ)
# As plain floats, for :func:`device_constant` (a step must not read a tensor on the host).
_RGB_TO_YIQ_VALUES = tuple(_RGB_TO_YIQ.flatten().tolist())
_YIQ_TO_RGB_VALUES = tuple(_YIQ_TO_RGB.flatten().tolist())


def _per_image(value: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
    """``(n,)`` parameters -> ``(n, 1, 1, 1)`` on the images' device and dtype."""
    return value.to(device=images.device, dtype=images.dtype).view(-1, 1, 1, 1)


def adjust_brightness(images: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """``tf.image.adjust_brightness`` on floats: ``x + delta`` per image, unclipped."""
    return images + _per_image(delta, images)


def adjust_contrast(images: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """``tf.image.adjust_contrast``: ``(x - mean) * factor + mean`` per image and channel."""
    mean = images.mean(dim=(2, 3), keepdim=True)  # (n, 3, 1, 1): per channel, as TF
    return (images - mean) * _per_image(factor, images) + mean


def _hsv_from_rgb(images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """TF's ``adjust_saturation`` RGB -> HSV: H in [0, 1), S = range / V (0 where V <= 0)."""
    r, g, b = images.unbind(1)
    value = torch.maximum(torch.maximum(r, g), b)
    spread = value - torch.minimum(torch.minimum(r, g), b)
    saturation = torch.where(value > 0, spread / torch.where(value > 0, value, 1.0), 0.0)
    safe = torch.where(spread > 0, spread, 1.0)
    hue = torch.where(
        r == value,
        (g - b) / (6.0 * safe),
        torch.where(
            g == value, (b - r) / (6.0 * safe) + 2.0 / 6.0, (r - g) / (6.0 * safe) + 4.0 / 6.0
        ),
    )
    hue = torch.where(spread > 0, hue, 0.0)
    hue = torch.where(hue < 0, hue + 1.0, hue)
    return hue, saturation, value


def _hexagon_sector(
    category: torch.Tensor, high: torch.Tensor, middle: torch.Tensor, low: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per pixel, ``(r, g, b)`` of the hue hexagon's sector ``category`` (0-5), as TF's kernels.

    Sector 0 is ``(high, middle, low)``, then one channel moves per sector; a pixel whose
    category is none of 0-5 gets ``low`` in every channel.
    """
    table = {
        0: (high, middle, low),
        1: (middle, high, low),
        2: (low, high, middle),
        3: (low, middle, high),
        4: (middle, low, high),
        5: (high, low, middle),
    }
    r, g, b = low, low, low
    for key, (rr, gg, bb) in table.items():
        hit = category == key
        r, g, b = torch.where(hit, rr, r), torch.where(hit, gg, g), torch.where(hit, bb, b)
    return r, g, b


def _rgb_from_hsv(hue: torch.Tensor, saturation: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """TF's ``adjust_saturation`` HSV -> RGB (``(n, h, w)`` planes -> ``(n, 3, h, w)``)."""
    chroma = saturation * value
    low = value - chroma
    sector = hue * 6.0
    category = sector.trunc()  # TF: static_cast<int>
    # TF folds the sector into (0, 2) with while-loops; for sector >= 0 that is fmod 2,
    # except that an exact 0 becomes 2 (same |x - 1| either way).
    folded = torch.remainder(sector, 2.0)
    mid = chroma * (1.0 - (folded - 1.0).abs())
    r, g, b = _hexagon_sector(category, chroma, mid, torch.zeros_like(chroma))
    return torch.stack([r + low, g + low, b + low], 1)


def adjust_saturation(images: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """``tf.image.adjust_saturation``: S times ``factor`` per image, clipped to [0, 1]."""
    hue, saturation, value = _hsv_from_rgb(images)
    factor = factor.to(device=images.device, dtype=images.dtype).view(-1, 1, 1)
    return _rgb_from_hsv(hue, (saturation * factor).clamp(0.0, 1.0), value)


def adjust_hue(images: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """``tf.image.adjust_hue``: hue plus ``delta`` turns per image, wrapped.

    TF's kernel keeps each pixel's minimum and maximum and moves the middle value along
    the hue hexagon (its ``rgb_to_hv_range`` / ``hv_range_to_rgb``), so pixels with
    negative values (after an additive brightness) keep their range.
    """
    r, g, b = images.unbind(1)
    high = torch.maximum(torch.maximum(r, g), b)
    low = torch.minimum(torch.minimum(r, g), b)
    spread = high - low
    safe = torch.where(spread > 0, spread, 1.0)
    sector = torch.where(
        r == high,
        (g - b) / safe,
        torch.where(g == high, 2.0 + (b - r) / safe, 4.0 + (r - g) / safe),
    )
    sector = torch.where(spread > 0, sector, 0.0)
    shift = delta.to(device=images.device, dtype=images.dtype).view(-1, 1, 1) * 6.0
    sector = torch.remainder(sector + shift, 6.0)
    sector = torch.where(sector >= 6.0, sector - 6.0, sector)  # float rounding of -0.0...
    category = sector.floor()
    ratio = sector - category
    ratio = torch.where(torch.remainder(category, 2.0) == 0, ratio, 1.0 - ratio)
    middle = low + ratio * spread
    return torch.stack(_hexagon_sector(category, high, middle, low), 1)


def grayscale(images: torch.Tensor, weights: tuple[float, float, float]) -> torch.Tensor:
    """Luma with ``weights``, repeated in all three channels."""
    row = device_constant(weights, images.dtype, images.device)
    return torch.einsum("nchw,c->nhw", images, row)[:, None].expand_as(images)


def released_color_jitter(
    images: torch.Tensor,
    *,
    order: torch.Tensor,
    uniforms: torch.Tensor,
    strengths: JitterStrengths = RELEASED_STRENGTHS,
) -> torch.Tensor:
    """The released ``ColorJitter`` with TF's operations (see the module docstring).

    Parameters
    ----------
    images : Tensor of shape (n, 3, h, w), float
    order : Tensor of shape (n, 4), int64, on the CPU
        Per image, the operations in the order they run: 0 brightness, 1 contrast,
        2 saturation, 3 hue.
    uniforms : Tensor of shape (n, 4), on the CPU
        ``U[0, 1)`` draws for the four strengths (columns in the operation numbering).
    strengths : JitterStrengths, default=the released ``jitter_b0.4_c0.4_s0.4_h0.4``
        0 turns an operation off, as in the released code.

    Returns
    -------
    Tensor of shape (n, 3, h, w), float, unclipped
    """
    slots: JitterSlots = []
    for slot in range(4):
        chosen = order[:, slot]  # CPU: deciding which operations run needs no device sync
        entries = []
        for index in range(4):
            rows = chosen == index
            if bool(rows.any()):
                entries.append((index, None if bool(rows.all()) else rows))
        slots.append(entries)
    return jitter_slots(images, slots=slots, uniforms=uniforms, strengths=strengths)


def jitter_slots(
    images: torch.Tensor,
    *,
    slots: JitterSlots,
    uniforms: torch.Tensor,
    strengths: JitterStrengths = RELEASED_STRENGTHS,
) -> torch.Tensor:
    """The released jitter given which operations run in each slot (see :data:`JitterSlots`).

    :func:`released_color_jitter` builds the slots from a CPU order; a two-phase training
    step builds them with masks already on the device, so the step reads nothing on the host
    and copies nothing to the device. Masked images keep their values (``torch.where``), so
    both give the same numbers.
    """
    brightness, contrast = strengths.brightness, strengths.contrast
    saturation, hue = strengths.saturation, strengths.hue
    signed = 2.0 * uniforms - 1.0  # U[-1, 1)
    operations = (
        (brightness, lambda x, s: adjust_brightness(x, brightness * s)),
        (contrast, lambda x, s: adjust_contrast(x, 1.0 + contrast * s)),
        (saturation, lambda x, s: adjust_saturation(x, 1.0 + saturation * s)),
        (hue, lambda x, s: adjust_hue(x, hue * s)),
    )
    x = images
    for entries in slots:
        for index, rows in entries:
            strength, operation = operations[index]
            if strength == 0:
                continue
            changed = operation(x, signed[:, index])
            x = changed if rows is None else torch.where(_mask(rows, x), changed, x)
    return x


def _mask(rows: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
    return rows.to(images.device).view(-1, 1, 1, 1)


def affine_color_jitter(
    images: torch.Tensor,
    *,
    uniforms: torch.Tensor,
    strengths: JitterStrengths = RELEASED_STRENGTHS,
    p: float = 1.0,
    random_order: bool = True,
) -> torch.Tensor:
    """The ``torchvision`` jitter variant: affine colour maps, clamped after every step.

    Brightness ``x * b``, contrast ``c x + (1 - c) mean(gray(x))``, saturation
    ``s x + (1 - s) gray(x)`` with ``b, c, s ~ U[1 - strength, 1 + strength]``
    (torchvision's definitions); hue rotates the YIQ chroma plane by ``2 pi delta``,
    ``delta ~ U[-hue, hue]``. Each operation is a per-image 3x3 matrix plus an offset, so
    each of the four slots is one batched matrix product.

    Parameters
    ----------
    images : Tensor of shape (n, 3, h, w), float in [0, 1]
    uniforms : Tensor of shape (n, 9)
        ``U[0, 1)`` draws: four strengths, the apply coin, four order keys.
    strengths : JitterStrengths, default=0.4 each
    p : float, default=1.0
        Probability to jitter an image.
    random_order : bool, default=True
        A random order per image; ``False`` applies brightness, contrast, saturation, hue.

    Returns
    -------
    Tensor of shape (n, 3, h, w), float32 in [0, 1]
    """
    x = images
    n, _, h, w = x.shape
    device = x.device
    u = uniforms.to(device)
    applied = (u[:, 4] < p).float()

    def factor(column: int, strength: float) -> torch.Tensor:
        value = (1.0 + strength * (2.0 * u[:, column] - 1.0)).clamp_(min=0.0)
        return applied * value + (1.0 - applied)  # 1 = identity where not applied

    b = factor(0, strengths.brightness)
    c = factor(1, strengths.contrast)
    s = factor(2, strengths.saturation)
    angle = applied * strengths.hue * (2.0 * u[:, 3] - 1.0) * (2.0 * math.pi)
    eye = torch.eye(3, device=device).expand(n, 3, 3)
    gray = device_constant(GRAY_WEIGHTS, torch.float32, device)
    ones_gray = torch.ones(3, 1, device=device) * gray[None, :]  # (3, 3): 1 w^T
    m_brightness = b[:, None, None] * eye
    m_contrast = c[:, None, None] * eye
    m_saturation = s[:, None, None] * eye + (1.0 - s)[:, None, None] * ones_gray
    cos, sin = torch.cos(angle), torch.sin(angle)
    rot = torch.zeros(n, 3, 3, device=device)
    rot[:, 0, 0] = 1.0
    rot[:, 1, 1], rot[:, 1, 2] = cos, -sin
    rot[:, 2, 1], rot[:, 2, 2] = sin, cos
    to_yiq = device_constant(_RGB_TO_YIQ_VALUES, torch.float32, device).view(3, 3)
    to_rgb = device_constant(_YIQ_TO_RGB_VALUES, torch.float32, device).view(3, 3)
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
