"""How uncertain a category's localisation metrics are over its test set: a bootstrap over
test images, stratified by the image's label.

The image AUC of an MVTec job carries the interval of
:func:`pipeline_lib.detection.auroc_intervals.bootstrap_auroc_interval`. Pixel AUC and AUPRO
(:mod:`pipeline_lib.mvtec.pro`) are computed over the pixels of every test image, but the
images, not the pixels, are the sample: neighbouring pixels share a defect and a score. So a
resample draws test images with replacement, defective and good ones separately at their own
counts (:func:`scipy.stats.bootstrap` with two independent samples), and recomputes both
metrics over the pixels of the images drawn.

Each image is reduced once to its pixel counts per score bin (defective pixels, defect-free
pixels, and its defect regions' overlap fractions): a resample is then a weighted sum of those
rows, not a sort of millions of pixels. With at most :data:`N_BINS` distinct scores the bins
are the scores themselves and the metrics are exact; above that, they are quantile bins of all
pixel scores (about 1 / N_BINS of the pixels each), and scores within one bin count as tied:
the pixel AUC then moves by at most half the largest share of defect-free pixels in one bin,
and the AUPRO, whose curve is drawn through fewer thresholds, by at most that share divided
by the FPR limit (tested).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from pipeline_lib.detection.auroc_intervals import (
    BOOTSTRAP_METHOD,
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    interval_omission,
)
from pipeline_lib.mvtec.pro import DEFAULT_MAX_FPR, check_maps_and_masks, defect_components

__all__ = [
    "LOCALIZATION_INTERVAL_FIELDS",
    "N_BINS",
    "PixelCounts",
    "binned_metrics",
    "localization_intervals",
    "pixel_counts",
    "weighted_metrics",
]

#: Score bins of the per-image counts: exact below this many distinct scores.
N_BINS: int = 4096

#: Keys :func:`localization_intervals` returns (x 100).
LOCALIZATION_INTERVAL_FIELDS: tuple[str, ...] = (
    "pixel_auroc_low",
    "pixel_auroc_high",
    "aupro_low",
    "aupro_high",
)


@dataclass(frozen=True)
class PixelCounts:
    """Per test image, its pixels per score bin (bins in increasing score order).

    Attributes
    ----------
    defective, normal : ndarray of shape (n_images, n_bins)
        Defective and defect-free pixels of the image in each bin.
    overlap : ndarray of shape (n_images, n_bins)
        Sum over the image's defect regions of (the region's pixels in the bin) / (the
        region's size): PRO at a threshold is the sum of these above it over the regions.
    regions : ndarray of shape (n_images,)
        Defect regions (8-connected components of the mask) of each image.
    """

    defective: np.ndarray
    normal: np.ndarray
    overlap: np.ndarray
    regions: np.ndarray


def _bin_codes(scores: np.ndarray, n_bins: int) -> tuple[np.ndarray, int]:
    """Each score's bin (increasing with the score) and the number of bins."""
    distinct, codes = np.unique(scores, return_inverse=True)
    if len(distinct) <= n_bins:
        return codes.reshape(scores.shape), len(distinct)
    # quantiles of the pixels, so that each bin holds about 1 / n_bins of them
    edges = np.unique(np.quantile(scores, np.linspace(0.0, 1.0, n_bins + 1)[1:-1]))
    return np.searchsorted(edges, scores, side="right"), len(edges) + 1


def pixel_counts(pixel_maps: np.ndarray, masks: np.ndarray, *, n_bins: int = N_BINS) -> PixelCounts:
    """Reduce up-sampled anomaly maps and their masks to :class:`PixelCounts`.

    Parameters
    ----------
    pixel_maps, masks : ndarray of shape (n, h, w)
        As ``anomaly_maps`` and ``masks`` of :func:`pipeline_lib.mvtec.pro.aupro`.
    n_bins : int, default=N_BINS

    Raises
    ------
    ValueError
        As :func:`pipeline_lib.mvtec.pro.check_maps_and_masks`.
    """
    maps, truth = check_maps_and_masks(pixel_maps, masks)
    n_images = len(maps)
    codes, n_codes = _bin_codes(maps, n_bins)
    labels = defect_components(truth)  # 0 = defect-free, 1..K over all images
    sizes = np.bincount(labels.ravel()).astype(np.float64)
    flat = (np.arange(n_images)[:, None, None] * n_codes + codes).ravel()
    inside = truth.ravel()

    def per_image(select: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        counts = np.bincount(
            flat[select],
            weights=None if weights is None else weights[select],
            minlength=n_images * n_codes,
        )
        return counts.reshape(n_images, n_codes).astype(np.float64)

    region_weight = 1.0 / sizes[labels.ravel()]  # only read inside a region
    regions = np.array([np.unique(image[image > 0]).size for image in labels], dtype=np.float64)
    return PixelCounts(
        defective=per_image(inside),
        normal=per_image(~inside),
        overlap=per_image(inside, region_weight),
        regions=regions,
    )


def _truncated_area(fpr: np.ndarray, pro: np.ndarray, max_fpr: float) -> np.ndarray:
    """:func:`pipeline_lib.mvtec.pro.truncated_area` of many curves at once, rows of
    ``(batch, points)`` with non-decreasing ``fpr``."""
    x0, x1 = fpr[:, :-1], fpr[:, 1:]
    y0, y1 = pro[:, :-1], pro[:, 1:]
    whole = x1 <= max_fpr
    crossing = (x0 <= max_fpr) & (x1 > max_fpr)
    with np.errstate(invalid="ignore", divide="ignore"):
        y_end = y0 + (y1 - y0) * (max_fpr - x0) / (x1 - x0)
    area = np.where(whole, (x1 - x0) * (y0 + y1) / 2.0, 0.0).sum(axis=1)
    area += np.where(crossing, (max_fpr - x0) * (y0 + y_end) / 2.0, 0.0).sum(axis=1)
    return area / max_fpr


def weighted_metrics(counts: PixelCounts, weights: np.ndarray, max_fpr: float) -> np.ndarray:
    """Pixel AUC and AUPRO (0-1) of the test set with image ``i`` taken ``weights[b, i]``
    times, for each row ``b`` of ``weights`` (batch, n_images): shape (2, batch). A
    bootstrap resample is such a row of counts."""
    defective = weights @ counts.defective  # (batch, n_bins)
    normal = weights @ counts.normal
    overlap = weights @ counts.overlap
    regions = weights @ counts.regions  # (batch,)
    n_defective, n_normal = defective.sum(axis=1), normal.sum(axis=1)
    below = np.cumsum(normal, axis=1) - normal  # defect-free pixels in lower bins
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = (defective * (below + 0.5 * normal)).sum(axis=1) / (n_defective * n_normal)
        # thresholds from the highest bin down: what is flagged at or above each
        fpr = np.cumsum(normal[:, ::-1], axis=1) / n_normal[:, None]
        pro = np.cumsum(overlap[:, ::-1], axis=1) / regions[:, None]
    start = np.zeros((len(weights), 1))
    fpr = np.minimum(np.concatenate([start, fpr], axis=1), 1.0)
    pro = np.minimum(np.concatenate([start, pro], axis=1), 1.0)
    return np.stack([auc, _truncated_area(fpr, pro, max_fpr)])


def binned_metrics(
    pixel_maps: np.ndarray,
    masks: np.ndarray,
    *,
    max_fpr: float = DEFAULT_MAX_FPR,
    n_bins: int = N_BINS,
) -> tuple[float, float]:
    """Pixel AUC and AUPRO (x 100) of the whole test set from its binned counts: what every
    resample of :func:`localization_intervals` computes (exact below ``n_bins`` scores)."""
    counts = pixel_counts(pixel_maps, masks, n_bins=n_bins)
    auc, area = weighted_metrics(counts, np.ones((1, len(counts.regions))), max_fpr)[:, 0]
    return 100.0 * float(auc), 100.0 * float(area)


def localization_intervals(
    pixel_maps: np.ndarray,
    masks: np.ndarray,
    is_defective: Any,
    *,
    max_fpr: float = DEFAULT_MAX_FPR,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
    method: str = BOOTSTRAP_METHOD,
    n_bins: int = N_BINS,
) -> dict[str, float]:
    """95 % bootstrap intervals of the pixel AUC and the AUPRO over the test images.

    Parameters
    ----------
    pixel_maps, masks : ndarray of shape (n, h, w)
        The up-sampled maps and their masks, as for :func:`pixel_counts`.
    is_defective : array-like of shape (n,)
        1 for defective test images, 0 for good ones: the strata of the resampling.
    max_fpr : float, default=0.3
        The AUPRO's FPR limit.
    n_resamples, seed, confidence, method
        As :func:`pipeline_lib.detection.auroc_intervals.bootstrap_auroc_interval`: the same
        defaults as every job's image-AUC interval.
    n_bins : int, default=N_BINS

    Returns
    -------
    dict of str to float
        :data:`LOCALIZATION_INTERVAL_FIELDS`, x 100; NaN when the test set has fewer than
        two defective or two good images (a one-image stratum has no spread to resample; the
        image AUC's interval is omitted then too, for the reason
        :func:`~pipeline_lib.detection.auroc_intervals.interval_omission` gives).

    Raises
    ------
    ValueError
        If ``is_defective`` does not hold one 0/1 label per image, or as :func:`pixel_counts`.
    """
    labels = np.asarray(is_defective).ravel()
    if len(labels) != len(pixel_maps) or not np.isin(labels, (0, 1)).all():
        raise ValueError(
            f"is_defective must hold one 0/1 label per image: {len(labels)} labels for "
            f"{len(pixel_maps)} maps"
        )
    if interval_omission(labels) is not None:
        return dict.fromkeys(LOCALIZATION_INTERVAL_FIELDS, float("nan"))
    defective, good = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
    counts = pixel_counts(pixel_maps, masks, n_bins=n_bins)
    n_images = len(labels)

    def statistic(drawn_defective: np.ndarray, drawn_good: np.ndarray, axis: int = -1):
        """Both metrics of each resample of image indices: shape (2, *batch)."""
        a = np.moveaxis(np.asarray(drawn_defective), axis, -1)
        b = np.moveaxis(np.asarray(drawn_good), axis, -1)
        batch_shape = a.shape[:-1]
        drawn = np.concatenate(
            [a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])], axis=1
        ).astype(np.intp)
        offsets = np.arange(len(drawn))[:, None] * n_images
        weights = np.bincount((drawn + offsets).ravel(), minlength=len(drawn) * n_images)
        weights = weights.reshape(len(drawn), n_images).astype(np.float64)
        return weighted_metrics(counts, weights, max_fpr).reshape(2, *batch_shape)

    result = stats.bootstrap(
        (defective, good),
        statistic,
        n_resamples=n_resamples,
        # (batch, n_bins) products: a few tens of MB per batch
        batch=max(1, min(n_resamples, 2_000_000 // counts.normal.shape[1])),
        vectorized=True,
        paired=False,
        confidence_level=confidence,
        method=method,
        rng=np.random.default_rng(seed),
    )
    low, high = result.confidence_interval.low, result.confidence_interval.high
    return {
        "pixel_auroc_low": 100.0 * float(low[0]),
        "pixel_auroc_high": 100.0 * float(high[0]),
        "aupro_low": 100.0 * float(low[1]),
        "aupro_high": 100.0 * float(high[1]),
    }
