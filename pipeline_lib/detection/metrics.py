"""Evaluation metrics: ROC AUC of anomaly scores and the uniformity MMD of representations.

Sign convention of the whole pipeline: **the outlier is the positive class**. Metrics take
*anomaly* scores (higher = more anomalous, i.e. ``-score_samples`` of a detector, formed in
:mod:`pipeline_lib.detection.evaluate`) and labels ``is_outlier`` (1 = outlier, 0 = inlier).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve


def check_scores_and_labels(anomaly_scores: Any, is_outlier: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate a score vector and its 0/1 outlier labels.

    Returns
    -------
    scores : ndarray of shape (n,), float64
    labels : ndarray of shape (n,), int64 with values in {0, 1}, both present

    Raises
    ------
    ValueError
        If either input is not 1-D, lengths differ, a score is not finite, a label is not
        0/1 (or bool), or only one class is present.
    """
    scores = np.asarray(anomaly_scores, dtype=np.float64)
    labels = np.asarray(is_outlier)
    if scores.ndim != 1 or labels.ndim != 1:
        raise ValueError(
            f"anomaly_scores and is_outlier must be 1-D, got shapes {scores.shape} and "
            f"{labels.shape}"
        )
    if scores.shape[0] != labels.shape[0]:
        raise ValueError(
            f"anomaly_scores has {scores.shape[0]} entries but is_outlier has {labels.shape[0]}"
        )
    if not np.all(np.isfinite(scores)):
        bad = np.flatnonzero(~np.isfinite(scores))
        raise ValueError(
            f"anomaly_scores has {bad.size} non-finite value(s), first at index {bad[0]}: "
            f"{scores[bad[0]]!r}"
        )
    values = set(np.unique(labels).tolist())
    if not values <= {0, 1}:
        raise ValueError(f"is_outlier must hold only 0/1 (or bool), got values {sorted(values)}")
    if len(values) < 2:
        raise ValueError(
            f"is_outlier holds only the value {values.pop()!r}; ROC AUC needs both inliers (0) "
            "and outliers (1)"
        )
    return scores, labels.astype(np.int64)


def auroc(anomaly_scores: Any, is_outlier: Any) -> float:
    """Area under the ROC curve x 100, with the OUTLIER as the positive class.

    100 means every outlier has a higher anomaly score than every inlier, 50 is chance and
    0 means the ranking is exactly inverted. This equals the AUC of normality scores with the
    inlier as the positive class; the released code computes the same number
    (``100 * roc_auc_score(labels, anomaly_score)``, outlier label 1).

    Parameters
    ----------
    anomaly_scores : array-like of shape (n_samples,)
        Higher = more anomalous; finite.
    is_outlier : array-like of shape (n_samples,)
        1 (or True) for outliers, 0 (or False) for inliers; both must occur.

    Returns
    -------
    auroc : float
        In ``[0, 100]``.

    Raises
    ------
    ValueError
        If the lengths differ, an input is not 1-D, a score is not finite, a label is not
        0/1, or only one class is present.
    """
    scores, labels = check_scores_and_labels(anomaly_scores, is_outlier)
    return 100.0 * float(roc_auc_score(labels, scores))


def roc_curve_points(
    anomaly_scores: Any, is_outlier: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ROC curve points for plots, outlier = positive class (as in :func:`auroc`).

    Parameters
    ----------
    anomaly_scores, is_outlier : array-like of shape (n_samples,)
        As in :func:`auroc`.

    Returns
    -------
    fpr : ndarray of shape (n_points,)
        Fraction of inliers flagged (score >= threshold), increasing from 0 to 1.
    tpr : ndarray of shape (n_points,)
        Fraction of outliers flagged, increasing from 0 to 1.
    thresholds : ndarray of shape (n_points,)
        Decreasing anomaly-score thresholds; the first is ``inf``.

    Raises
    ------
    ValueError
        As :func:`auroc`.
    """
    scores, labels = check_scores_and_labels(anomaly_scores, is_outlier)
    fpr, tpr, thresholds = roc_curve(labels, scores, pos_label=1, drop_intermediate=True)
    return fpr, tpr, thresholds


def _mean_gaussian_kernel_unit(
    a: np.ndarray, b: np.ndarray, *, bandwidth: float, chunk_size: int = 4096
) -> float:
    """Mean of ``exp(-||a_i - b_j||^2 / (2 bandwidth^2))`` over all pairs of unit rows.

    For unit vectors ``||a - b||^2 = 2 - 2 <a, b>``, so the kernel is
    ``exp((<a, b> - 1) / bandwidth^2)``; computed ``chunk_size`` rows of ``a`` at a time so
    the largest temporary is ``(chunk_size, len(b))``.
    """
    inv_bw2 = 1.0 / bandwidth**2
    total = 0.0
    for start in range(0, a.shape[0], chunk_size):
        gram = a[start : start + chunk_size] @ b.T  # (chunk, len(b))
        total += float(np.exp((np.minimum(gram, 1.0) - 1.0) * inv_bw2).sum())
    return total / (a.shape[0] * b.shape[0])


def uniformity_mmd(
    features: Any,
    *,
    n_reference: int | None = None,
    bandwidth: float = 1.0,
    seed: int = 0,
) -> float:
    """MMD between L2-normalised features and the uniform distribution on the unit sphere.

    The paper's uniformity measure (Sec. "Uniformity, Batch Size and Distribution
    Augmentation", Gretton et al. 2012): small = close to uniform. Rows of ``features`` are
    L2-normalised; the reference sample is ``n_reference`` standard-normal vectors of the
    same dimension, L2-normalised (exactly uniform on the sphere), drawn with ``seed``.

    Estimator: the **biased** (V-statistic) estimate
    ``MMD_b^2 = mean k(X, X) + mean k(Z, Z) - 2 mean k(X, Z)`` (diagonal terms included),
    which is never negative, so ``log(MMD)`` (the paper correlates ``log(MMD)`` with AUC) is
    always defined; the returned value is its square root, ``MMD_b``. Its bias is
    ``O(1/n)``: for an exactly uniform sample of size ``n`` (= ``n_reference``) it is about
    ``sqrt(2 (1 - exp(-1)) / n)`` in high dimension.

    Kernel: Gaussian, ``k(a, b) = exp(-||a - b||^2 / (2 bandwidth^2))``, with a FIXED
    bandwidth (not a data-dependent median heuristic), so that MMDs of different models are
    on the same scale. The default ``bandwidth=1`` is the median heuristic of the reference
    distribution itself: for uniform points on a high-dimensional sphere
    ``||a - b||^2`` concentrates at 2, so ``2 bandwidth^2 = median ||a - b||^2`` gives
    ``k ~ exp(-1)`` between typical pairs.

    Parameters
    ----------
    features : array-like of shape (n_samples, n_features)
        Representations, e.g. ``g(f(x))``; finite, no all-zero row, ``n_samples >= 2``.
    n_reference : int or None, default=None
        Size of the uniform sample; None uses ``n_samples``.
    bandwidth : float, default=1.0
        Gaussian kernel bandwidth (see above).
    seed : int, default=0
        Seed of the uniform sample.

    Returns
    -------
    mmd : float
        ``MMD_b >= 0``.

    Raises
    ------
    ValueError
        If ``features`` is not a finite 2-D array with at least 2 rows, has an all-zero row,
        or ``n_reference`` / ``bandwidth`` is not positive.
    """
    X = np.asarray(features, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1:
        raise ValueError(f"features must be 2-D with at least 2 rows, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("features contains NaN or infinite values")
    norms = np.linalg.norm(X, axis=1)
    if np.any(norms == 0):
        raise ValueError(
            f"features row {int(np.flatnonzero(norms == 0)[0])} is all zero and cannot be "
            "projected onto the unit sphere"
        )
    if n_reference is None:
        n_reference = X.shape[0]
    if (
        isinstance(n_reference, bool)
        or not isinstance(n_reference, numbers.Integral)
        or n_reference < 2
    ):
        raise ValueError(f"n_reference must be an integer >= 2 or None, got {n_reference!r}")
    if (
        isinstance(bandwidth, bool)
        or not isinstance(bandwidth, numbers.Real)
        or not (np.isfinite(bandwidth) and bandwidth > 0)
    ):
        raise ValueError(f"bandwidth must be a positive finite number, got {bandwidth!r}")

    X = X / norms[:, None]
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((int(n_reference), X.shape[1]))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)

    k_xx = _mean_gaussian_kernel_unit(X, X, bandwidth=bandwidth)
    k_zz = _mean_gaussian_kernel_unit(Z, Z, bandwidth=bandwidth)
    k_xz = _mean_gaussian_kernel_unit(X, Z, bandwidth=bandwidth)
    return float(np.sqrt(max(k_xx + k_zz - 2.0 * k_xz, 0.0)))


#: Most points of a model's feature file the uniformity job measures: the MMD's kernel
#: matrices grow as ``n^2``, and 2,000 points (a seeded subset) keep it to seconds.
UNIFORMITY_MAX_POINTS = 2000


def feature_uniformity(
    features: Any, *, seed: int, max_points: int = UNIFORMITY_MAX_POINTS
) -> dict[str, Any]:
    """Uniformity of a trained model's training features: the uniformity study's record.

    The paper measures the projection ``g(f)``; a model whose head is the identity has no
    ``g_train`` and is measured on ``f``. More than ``max_points`` rows are subsampled with
    ``seed`` (sorted, so the subset is the same on a re-run), and :func:`uniformity_mmd`
    draws its reference sample with the same seed.

    Parameters
    ----------
    features : mapping of str to ndarray
        A feature file (``f_train`` and, with a head, ``g_train``).
    seed : int
        The split's seed.
    max_points : int, default=UNIFORMITY_MAX_POINTS

    Returns
    -------
    dict
        ``mmd`` (float), ``space`` (``"g"`` or ``"f"``) and ``n`` (points measured).
    """
    space = "g" if "g_train" in features else "f"
    sample = features[f"{space}_train"]
    if len(sample) > max_points:
        rng = np.random.default_rng(seed)
        sample = sample[np.sort(rng.choice(len(sample), max_points, replace=False))]
    mmd = uniformity_mmd(sample, seed=seed)
    return {"mmd": mmd, "space": space, "n": len(sample)}
