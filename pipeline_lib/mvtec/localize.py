"""Score maps to image scores, pixel maps and metrics: the MVTec protocol's numpy side.

Paper, Sec. 4.4 and App. E.2 (docs/protocol.md, "MVTec AD"): the image score is the maximum of
its patch score map. For localisation the ``grid`` x ``grid`` map (57 x 57) is brought back
to the image size by a transposed convolution with one 32x32 Gaussian kernel at stride 4
(``(57 - 1) * 4 + 32 = 256``); pixel AUC and the per-region overlap (:mod:`pipeline_lib.mvtec.pro`)
compare it with the masks.

The Gaussian's width is not given in the paper. The paper cites FCDD
(Liznerski et al., ICLR 2021) for the up-sampling, whose released ``kernel_size_to_std``
gives ``sigma = 10`` pixels for kernels of 32 or more; that is :data:`DEFAULT_SIGMA`, a
config value (``mvtec.localize.sigma``).

A plain transposed convolution *sums* the kernels of all patches covering a pixel: away
from the border every pixel gets the same total weight, but within ``patch_size - stride``
pixels of the border fewer patches overlap, so signed scores are pulled towards 0 there.
``normalize=True`` (the default) divides by the transposed convolution of a map of ones,
i.e. takes the Gaussian-weighted mean of the covering patch scores: the same map as the
paper's up to one constant factor in the interior, without the border artefact.
``normalize=False`` is the plain operation of the paper's footnote.

No torch here, so the figure and table jobs start fast.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline_lib.data.mvtec import MVTecCategory
from pipeline_lib.detection.metrics import auroc
from pipeline_lib.mvtec.pixel_intervals import localization_intervals
from pipeline_lib.mvtec.pro import DEFAULT_MAX_FPR, aupro
from pipeline_lib.paper.published import display_name

__all__ = [
    "DEFAULT_SIGMA",
    "IMAGE_SIZE",
    "PATCH_SIZE",
    "STRIDE",
    "evaluate_score_maps",
    "gaussian_kernel",
    "grid_side",
    "image_scores",
    "localization_panels",
    "upsample_score_maps",
    "upsampling_matrix",
]

#: Side of the resized MVTec images, of the patches, and the dense stride (the paper's).
IMAGE_SIZE = 256
PATCH_SIZE = 32
STRIDE = 4
#: Standard deviation (pixels) of the 32x32 up-sampling kernel: FCDD's choice (see above).
DEFAULT_SIGMA = 10.0


def grid_side(
    image_size: int = IMAGE_SIZE, patch_size: int = PATCH_SIZE, stride: int = STRIDE
) -> int:
    """Side of the dense patch grid, ``(image_size - patch_size) / stride + 1`` (57).

    Raises
    ------
    ValueError
        If the patch does not fit or the stride does not tile the image exactly (then the
        transposed convolution could not return to ``image_size``).
    """
    if min(image_size, patch_size, stride) < 1 or patch_size > image_size:
        raise ValueError(
            f"need 1 <= patch_size <= image_size and stride >= 1, got image_size={image_size}, "
            f"patch_size={patch_size}, stride={stride}"
        )
    if (image_size - patch_size) % stride:
        raise ValueError(
            f"stride {stride} does not tile image_size - patch_size = {image_size - patch_size} "
            "exactly; choose sizes with (image_size - patch_size) % stride == 0"
        )
    return (image_size - patch_size) // stride + 1


def _profile(size: int, sigma: float) -> np.ndarray:
    """1-D Gaussian ``exp(-(i - c)^2 / (2 sigma^2))``, ``c = (size - 1) / 2``."""
    if size < 1 or not sigma > 0:
        raise ValueError(f"need size >= 1 and sigma > 0, got size={size}, sigma={sigma}")
    offsets = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    return np.exp(-(offsets**2) / (2.0 * sigma**2))


def gaussian_kernel(size: int = PATCH_SIZE, sigma: float = DEFAULT_SIGMA) -> np.ndarray:
    """``size`` x ``size`` Gaussian centred on the kernel's middle, peak value 1 for odd sizes.

    Entry ``(i, j)`` is ``exp(-((i - c)^2 + (j - c)^2) / (2 sigma^2))`` with
    ``c = (size - 1) / 2``, so an even kernel is symmetric about its centre (between
    pixels).

    Returns
    -------
    ndarray of shape (size, size), float64
    """
    profile = _profile(size, sigma)
    return np.outer(profile, profile)


def upsampling_matrix(
    grid: int, *, patch_size: int = PATCH_SIZE, stride: int = STRIDE, sigma: float = DEFAULT_SIGMA
) -> np.ndarray:
    """``U`` of :func:`upsample_score_maps`, ``(size, grid)``: column ``r`` holds the profile.

    Public so that the exported MVTec graph (:mod:`pipeline_lib.deploy.patch_package`) builds
    the same matrix.
    """
    size = (grid - 1) * stride + patch_size
    profile = _profile(patch_size, sigma)
    spread = np.zeros((size, grid))
    for r in range(grid):
        spread[r * stride : r * stride + patch_size, r] = profile
    return spread


def upsample_score_maps(
    maps: np.ndarray,
    *,
    patch_size: int = PATCH_SIZE,
    stride: int = STRIDE,
    sigma: float = DEFAULT_SIGMA,
    normalize: bool = True,
) -> np.ndarray:
    """Score maps ``(n, grid, grid)`` -> pixel maps by a Gaussian transposed convolution.

    One ``patch_size`` x ``patch_size`` Gaussian kernel (:func:`gaussian_kernel`) at
    ``stride``: each patch score is spread over the pixels the patch covers, i.e.
    ``torch.nn.functional.conv_transpose2d(maps, kernel, stride=stride)`` (a test checks
    the equality). The kernel is separable, ``k = a a^T``, so the transposed convolution is
    ``U M U^T`` with ``U[y, r] = a[y - r * stride]`` (zero outside the patch): two small
    matrix products per image instead of a loop over patches. The output side is
    ``(grid - 1) * stride + patch_size`` (256 for the paper's 57, 4, 32).

    Parameters
    ----------
    maps : ndarray of shape (n, grid, grid)
        Patch anomaly scores.
    patch_size, stride : int, default=32, 4
    sigma : float, default=10.0
    normalize : bool, default=True
        Divide by the transposed convolution of ones (Gaussian-weighted mean of the covering
        patches; see the module docstring). False gives the plain sum.

    Returns
    -------
    ndarray of shape (n, size, size), float32
    """
    maps = np.asarray(maps, dtype=np.float64)
    if maps.ndim != 3 or maps.shape[1] != maps.shape[2]:
        raise ValueError(f"maps must have shape (n, grid, grid), got {maps.shape}")
    spread = upsampling_matrix(maps.shape[1], patch_size=patch_size, stride=stride, sigma=sigma)
    out = spread @ maps @ spread.T  # (n, size, size)
    if normalize:
        coverage = spread.sum(
            axis=1
        )  # U 1: the transposed convolution of ones is its outer product
        out /= np.outer(coverage, coverage)
    return out.astype(np.float32)


def image_scores(maps: np.ndarray) -> np.ndarray:
    """Image anomaly score = spatial maximum of its patch score map (paper Sec. 4.4)."""
    maps = np.asarray(maps)
    if maps.ndim != 3:
        raise ValueError(f"maps must have shape (n, grid, grid), got {maps.shape}")
    return maps.reshape(len(maps), -1).max(axis=1).astype(np.float64)


def evaluate_score_maps(
    maps: np.ndarray,
    is_defective: np.ndarray,
    masks: np.ndarray | None,
    *,
    patch_size: int = PATCH_SIZE,
    stride: int = STRIDE,
    sigma: float = DEFAULT_SIGMA,
    normalize: bool = True,
    pro_max_fpr: float = DEFAULT_MAX_FPR,
) -> dict[str, float]:
    """Image AUC (spatial max), and with masks pixel AUC and AUPRO of the up-sampled maps.

    Parameters
    ----------
    maps : ndarray of shape (n, grid, grid)
        Patch anomaly scores.
    is_defective : ndarray of shape (n,)
        1 for defective test images (the positive class), 0 for good ones.
    masks : ndarray of shape (n, size, size) or None
        Ground truth; None gives image-level metrics only.
    patch_size, stride, sigma, normalize
        Up-sampling (:func:`upsample_score_maps`).
    pro_max_fpr : float, default=0.3

    Returns
    -------
    dict of str to float
        ``image_auroc`` and, with masks, ``pixel_auroc`` and ``aupro`` with their 95 %
        intervals over the test images (``pixel_auroc_low`` ... ``aupro_high``:
        :func:`pipeline_lib.mvtec.pixel_intervals.localization_intervals`), all x 100.

    Raises
    ------
    ValueError
        If the up-sampled maps and the masks differ in size (the patch grid does not match
        the images), or a metric's input is degenerate (e.g. no defective image).
    """
    result = {"image_auroc": auroc(image_scores(maps), is_defective)}
    if masks is None:
        return result
    pixels = upsample_score_maps(
        maps, patch_size=patch_size, stride=stride, sigma=sigma, normalize=normalize
    )
    if pixels.shape != masks.shape:
        raise ValueError(
            f"up-sampled score maps are {pixels.shape[1:]} but the masks are {masks.shape[1:]}: "
            "patch size and stride do not match the image size"
        )
    truth = (np.asarray(masks) > 0).ravel()
    result["pixel_auroc"] = auroc(pixels.ravel(), truth.astype(np.int8))
    result["aupro"] = aupro(pixels, masks, max_fpr=pro_max_fpr)
    return result | localization_intervals(pixels, masks, is_defective, max_fpr=pro_max_fpr)


def localization_panels(
    category: MVTecCategory,
    score_maps: dict[str, np.ndarray],
    *,
    n_images: int = 4,
    patch_size: int = PATCH_SIZE,
    stride: int = STRIDE,
    sigma: float = DEFAULT_SIGMA,
    normalize: bool = True,
) -> dict[str, Any]:
    """Rows and columns of a category's localisation figure (:func:`plot_localization`).

    Takes ``n_images`` defective test images spread evenly over the test order (so over
    the defect types), and for each method its up-sampled anomaly maps; each method's
    colour range is the min and max of its maps over the *whole* test set.

    Returns
    -------
    dict
        Keyword arguments of :func:`pipeline_lib.mvtec.heatmaps.plot_localization`: ``images``,
        ``masks``, ``anomaly_maps``, ``value_ranges``, ``row_labels``.
    """
    defective = np.flatnonzero(category.test_labels == 1)
    if len(defective) == 0:
        raise ValueError(f"category {category.name!r} has no defective test image to draw")
    picks = defective[np.unique(np.linspace(0, len(defective) - 1, n_images).round().astype(int))]
    anomaly_maps, ranges = {}, {}
    for method, maps in score_maps.items():
        label = display_name("method", method)
        pixels = upsample_score_maps(
            maps, patch_size=patch_size, stride=stride, sigma=sigma, normalize=normalize
        )
        anomaly_maps[label] = pixels[picks]
        ranges[label] = (float(pixels.min()), float(pixels.max()))
    return {
        "images": category.test_images[picks],
        "masks": None if category.test_masks is None else category.test_masks[picks],
        "anomaly_maps": anomaly_maps,
        "value_ranges": ranges,
        "row_labels": [category.test_files[i] for i in picks],
    }
