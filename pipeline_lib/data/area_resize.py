"""OpenCV's ``cv2.resize(..., interpolation=cv2.INTER_AREA)`` for uint8 images, in numpy.

The authors' Cat-vs-Dog preparation (``script/prepare_dogvscat.py`` of
google-research/deep_representation_one_class) resizes with ``cv2.INTER_AREA``; this module
reproduces it without adding OpenCV as a dependency. It follows OpenCV's
``modules/imgproc/src/resize.cpp``:

- **Downscaling by integer factors** on both axes (``resizeAreaFast_``): the mean of each
  ``ky x kx`` block. OpenCV rounds the 2x2 case with ``(sum + 2) >> 2`` (ties up) and the
  other factors with ``cvRound(float(sum) * float(1 / area))`` (ties to even); both are
  reproduced exactly.
- **Downscaling by other factors** (``resizeArea_``, both axes shrink): box averaging with
  fractional pixel coverage. Each output cell ``[dx * s, (dx + 1) * s)`` (``s = 1 / (dst /
  src)``) weighs a source pixel by its covered fraction divided by the cell width, with
  OpenCV's quirks kept: partial coverages of at most 1e-3 are dropped, the weights are
  rounded to float32, the last cell is clipped to the image. The result is rounded to the
  nearest integer, ties to even (``saturate_cast<uchar>``).
- **Upscaling** (any axis grows): OpenCV "emulates area with some variant of bilinear
  interpolation": output ``d`` takes source ``x = floor(d * s)`` and ``x + 1`` with weights
  ``1 - f`` and ``f``, ``f = frac((d + 1) - (x + 1) / s)`` (0 when that is <= 0 or at the
  last source pixel). Reproduced with the same weights.

Where the result may differ from cv2 (by 1 grey level, never more):

- non-integer downscaling: OpenCV accumulates the weighted sums in float32, this module in
  float64 (with the same float32 weights), so a value within float32 rounding error of a
  ``.5`` tie can round the other way;
- upscaling: OpenCV's uint8 bilinear path uses 11-bit fixed-point weights and integer
  shifts, this module exact float64 weights rounded to nearest at the end;
- OpenCV builds whose resize dispatches to a hardware HAL (Carotene, IPP, OpenCL UMat) are
  not modelled. OpenCV is not a dependency: the module is checked against hand-computed
  oracles (``tests/data/test_catvsdog.py``) and, through a trace of the released script run
  with OpenCV (``tests/reference/test_data.py``), against cv2 itself: at most one grey level,
  most of it in enlarged images (docs/protocol.md).

PIL is not used: ``Image.resize(..., Image.BOX)`` weighs each source pixel by whether its
centre falls in the output cell, not by the fraction it covers, so it differs from
``INTER_AREA`` whenever the ratio is not an integer.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

__all__ = ["area_resize"]

_EPS_COVER = 1e-3  # OpenCV drops partial coverages at most this large (computeResizeAreaTab)


def _scale(n_src: int, n_dst: int) -> float:
    """Source pixels per output pixel, computed as OpenCV does (``1 / (dst / src)``)."""
    return 1.0 / (n_dst / n_src)


@lru_cache(maxsize=256)  # photos share a few sizes; the tables are read-only
def _area_weights(n_src: int, n_dst: int) -> np.ndarray:
    """Box-area weights of one axis, shape (n_dst, n_src), as ``computeResizeAreaTab``."""
    scale = _scale(n_src, n_dst)
    weights = np.zeros((n_dst, n_src), dtype=np.float64)
    for dst in range(n_dst):
        start = dst * scale
        stop = start + scale
        cell = min(scale, n_src - start)
        last = min(math.floor(stop), n_src - 1)
        first = min(math.ceil(start), last)
        # OpenCV adds the terms into the output cell, so weights of one pixel add up too.
        if first - start > _EPS_COVER:
            weights[dst, first - 1] += np.float32((first - start) / cell)
        weights[dst, first:last] += np.float32(1.0 / cell)
        if stop - last > _EPS_COVER:
            weights[dst, last] += np.float32(min(stop - last, 1.0, cell) / cell)
    weights.flags.writeable = False
    return weights


@lru_cache(maxsize=256)  # photos share a few sizes; the tables are read-only
def _linear_weights(n_src: int, n_dst: int) -> np.ndarray:
    """OpenCV's bilinear emulation of ``INTER_AREA`` when enlarging, shape (n_dst, n_src)."""
    scale = _scale(n_src, n_dst)
    inv_scale = n_dst / n_src
    weights = np.zeros((n_dst, n_src), dtype=np.float64)
    for dst in range(n_dst):
        src = math.floor(dst * scale)
        frac = float(np.float32((dst + 1) - (src + 1) * inv_scale))
        frac = 0.0 if frac <= 0 else frac - math.floor(frac)
        if src >= n_src - 1:
            src, frac = n_src - 1, 0.0
        weights[dst, src] += 1.0 - frac
        if frac:
            weights[dst, src + 1] += frac
    weights.flags.writeable = False
    return weights


def _integer_factor(scale: float) -> int | None:
    """The integer ``scale`` is within double epsilon of (OpenCV's fast path), else None."""
    rounded = round(scale)
    return rounded if abs(scale - rounded) < np.finfo(np.float64).eps else None


def _block_mean(image: np.ndarray, ky: int, kx: int) -> np.ndarray:
    """``resizeAreaFast_``: integer block means with OpenCV's uint8 rounding."""
    height, width, channels = image.shape
    blocks = image.reshape(height // ky, ky, width // kx, kx, channels)
    sums = blocks.sum(axis=(1, 3), dtype=np.int64)
    if ky == kx == 2:
        return ((sums + 2) >> 2).astype(np.uint8)
    mean = sums.astype(np.float32) * np.float32(1.0 / (ky * kx))
    return np.clip(np.rint(mean), 0, 255).astype(np.uint8)


def area_resize(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize a uint8 image like ``cv2.resize(image, (width, height), cv2.INTER_AREA)``.

    Parameters
    ----------
    image : np.ndarray
        uint8 array of shape (H, W) or (H, W, C).
    height, width : int
        Output size (note the order: OpenCV takes ``(width, height)``).

    Returns
    -------
    np.ndarray
        uint8 array of shape (height, width) or (height, width, C). See the module docstring
        for where it may differ from OpenCV by one grey level.

    Raises
    ------
    ValueError
        If ``image`` is not a 2-D or 3-D uint8 array or a size is not positive.
    """
    if image.dtype != np.uint8 or image.ndim not in (2, 3):
        raise ValueError(
            f"area_resize needs a uint8 (H, W) or (H, W, C) array, got {image.dtype} "
            f"of shape {image.shape}"
        )
    if height < 1 or width < 1:
        raise ValueError(f"area_resize needs a positive output size, got {height}x{width}")
    planar = image.ndim == 2
    pixels = image[:, :, None] if planar else image
    n_rows, n_cols = pixels.shape[:2]
    if (n_rows, n_cols) == (height, width):
        return image.copy()  # cv2.resize copies when the size does not change
    scale_y, scale_x = _scale(n_rows, height), _scale(n_cols, width)
    if scale_x >= 1 and scale_y >= 1:
        ky, kx = _integer_factor(scale_y), _integer_factor(scale_x)
        if ky is not None and kx is not None:
            out = _block_mean(pixels, ky, kx)
            return out[:, :, 0] if planar else out
        rows, cols = _area_weights(n_rows, height), _area_weights(n_cols, width)
    else:
        rows, cols = _linear_weights(n_rows, height), _linear_weights(n_cols, width)
    channels = pixels.shape[2]
    # rows first, then columns: two BLAS matrix products
    values = rows @ pixels.reshape(n_rows, n_cols * channels).astype(np.float64)
    values = values.reshape(height, n_cols, channels).transpose(0, 2, 1) @ cols.T
    values = values.transpose(0, 2, 1)
    out = np.clip(np.rint(values), 0, 255).astype(np.uint8)
    return out[:, :, 0] if planar else out
