"""Per-region overlap (PRO) and the area under the PRO curve up to a false-positive rate.

Definition (Bergmann et al., "The MVTec Anomaly Detection Dataset", IJCV 2021; used by
industrial users beside pixel AUC because pixel AUC is dominated by large defects): the
ground-truth masks of all test images are split into connected components ``C_1 .. C_K``
(8-connectivity, as the official evaluation code). For a threshold ``t`` on the anomaly
maps, with ``P_t`` the pixels scoring ``>= t``,

* ``PRO(t) = (1/K) sum_k |P_t ∩ C_k| / |C_k|`` (every defect counts the same, whatever
  its size),
* ``FPR(t) = |P_t ∩ N| / |N|`` with ``N`` every defect-free pixel of every test image.

AUPRO is the area under ``PRO`` as a function of ``FPR`` from 0 to ``max_fpr`` (0.3 by
convention), by the trapezoidal rule with the curve interpolated linearly at ``max_fpr``,
divided by ``max_fpr`` so that a perfect map scores 1.

Computation: every pixel gets a weight, ``1 / (K |C_k|)`` towards PRO if it lies in
component ``k``, ``1 / |N|`` towards FPR otherwise; after one sort of all scores
(descending), cumulative sums of the weights give both curves at every distinct threshold.
That is ``O(P log P)`` for ``P`` pixels, against ``O(P * thresholds)`` for the definition
(which :func:`pro_curve_reference` implements for tests).
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

__all__ = [
    "DEFAULT_MAX_FPR",
    "aupro",
    "check_maps_and_masks",
    "defect_components",
    "pro_curve",
    "pro_curve_reference",
    "truncated_area",
]

#: FPR limit of the AUPRO (MVTec AD's convention: 30 %).
DEFAULT_MAX_FPR = 0.3

_EIGHT_CONNECTED = np.ones((3, 3), dtype=int)


def check_maps_and_masks(
    anomaly_maps: np.ndarray, masks: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The maps as float64 and the masks as booleans, both (n, h, w).

    Raises
    ------
    ValueError
        If the shapes differ, a score is not finite, or the masks hold no defective or no
        defect-free pixel.
    """
    maps = np.asarray(anomaly_maps, dtype=np.float64)
    truth = np.asarray(masks)
    if maps.ndim != 3 or maps.shape != truth.shape:
        raise ValueError(
            f"anomaly_maps and masks must both have shape (n, h, w), got {maps.shape} and "
            f"{truth.shape}"
        )
    if not np.all(np.isfinite(maps)):
        raise ValueError("anomaly_maps holds NaN or infinite values")
    truth = truth > 0
    if not truth.any():
        raise ValueError("masks hold no defective pixel: PRO needs at least one defect region")
    if truth.all():
        raise ValueError("masks hold no defect-free pixel: the FPR of PRO is undefined")
    return maps, truth


def defect_components(truth: np.ndarray) -> np.ndarray:
    """Component id per pixel (0 = defect-free, 1..K over all images), shape of ``truth``."""
    labels = np.zeros(truth.shape, dtype=np.int64)
    offset = 0
    for i, mask in enumerate(truth):
        image_labels, count = ndimage.label(mask, structure=_EIGHT_CONNECTED)
        labels[i] = np.where(image_labels > 0, image_labels + offset, 0)
        offset += count
    return labels


def pro_curve(anomaly_maps: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """FPR and PRO at every distinct threshold, from the highest score down.

    Parameters
    ----------
    anomaly_maps : ndarray of shape (n, h, w)
        Pixel anomaly scores (higher = more anomalous).
    masks : ndarray of shape (n, h, w)
        Ground truth; non-zero = defective pixel. Defect-free images are all zero.

    Returns
    -------
    fpr, pro : ndarray of shape (n_thresholds + 1,), float64
        Both start at 0 (threshold above every score) and end at 1 (every pixel flagged);
        ``fpr`` is non-decreasing.

    Raises
    ------
    ValueError
        If the shapes differ, a score is not finite, or the masks hold no defective or no
        defect-free pixel.
    """
    maps, truth = check_maps_and_masks(anomaly_maps, masks)
    labels = defect_components(truth).ravel()
    n_regions = int(labels.max())
    sizes = np.bincount(labels, minlength=n_regions + 1).astype(np.float64)
    n_normal = sizes[0]
    # Weight of each pixel towards PRO (inside a region) and towards FPR (outside).
    region_weight = np.where(labels > 0, 1.0 / (n_regions * sizes[labels]), 0.0)
    normal_weight = np.where(labels == 0, 1.0 / n_normal, 0.0)
    scores = maps.ravel()
    order = np.argsort(-scores, kind="stable")
    sorted_scores = scores[order]
    pro = np.cumsum(region_weight[order])
    fpr = np.cumsum(normal_weight[order])
    # One curve point per distinct threshold: the last pixel of each run of equal scores.
    last_of_run = np.flatnonzero(np.diff(sorted_scores, append=-np.inf) != 0)
    fpr = np.concatenate([[0.0], fpr[last_of_run]])
    pro = np.concatenate([[0.0], pro[last_of_run]])
    # Cumulative rounding can leave 1 - 1e-16; the last point flags every pixel exactly.
    fpr[-1], pro[-1] = 1.0, 1.0
    return np.minimum(fpr, 1.0), np.minimum(pro, 1.0)


def pro_curve_reference(
    anomaly_maps: np.ndarray, masks: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pro_curve` straight from the definition, one threshold at a time (slow; tests)."""
    maps, truth = check_maps_and_masks(anomaly_maps, masks)
    labels = defect_components(truth)
    regions = [labels == k for k in range(1, int(labels.max()) + 1)]
    normal = ~truth
    fprs, pros = [0.0], [0.0]
    for threshold in np.unique(maps)[::-1]:
        flagged = maps >= threshold
        pros.append(float(np.mean([flagged[r].sum() / r.sum() for r in regions])))
        fprs.append(float(flagged[normal].sum() / normal.sum()))
    return np.array(fprs), np.array(pros)


def truncated_area(fpr: np.ndarray, pro: np.ndarray, *, max_fpr: float = DEFAULT_MAX_FPR) -> float:
    """Trapezoidal area under ``pro(fpr)`` on ``[0, max_fpr]``, divided by ``max_fpr``.

    The curve is interpolated linearly at ``max_fpr``. Where ``fpr`` jumps at one
    threshold (a tie spanning several normal pixels) the trapezoid is the straight line
    between the points, as in the official evaluation.
    """
    if not 0 < max_fpr <= 1:
        raise ValueError(f"max_fpr must be in (0, 1], got {max_fpr}")
    fpr = np.asarray(fpr, dtype=np.float64)
    pro = np.asarray(pro, dtype=np.float64)
    inside = fpr <= max_fpr
    x, y = fpr[inside], pro[inside]
    if x[-1] < max_fpr:
        after = int(np.argmax(fpr > max_fpr))  # first point beyond the limit
        x0, x1, y0, y1 = fpr[after - 1], fpr[after], pro[after - 1], pro[after]
        y_end = y0 + (y1 - y0) * (max_fpr - x0) / (x1 - x0)
        x, y = np.append(x, max_fpr), np.append(y, y_end)
    return float(np.trapezoid(y, x) / max_fpr)


def aupro(
    anomaly_maps: np.ndarray, masks: np.ndarray, *, max_fpr: float = DEFAULT_MAX_FPR
) -> float:
    """Normalised area under the PRO curve up to ``max_fpr`` (1 = perfect), x 100.

    Parameters
    ----------
    anomaly_maps : ndarray of shape (n, h, w)
        Pixel anomaly scores (higher = more anomalous).
    masks : ndarray of shape (n, h, w)
        Ground truth; non-zero = defective pixel.
    max_fpr : float, default=0.3

    Returns
    -------
    float
        In [0, 100].
    """
    fpr, pro = pro_curve(anomaly_maps, masks)
    return 100.0 * truncated_area(fpr, pro, max_fpr=max_fpr)
