"""The threshold of a package: held-out inlier scores by k-fold cross-fitting.

Scoring the detector's own fit rows would be optimistic (a 1-NN detector gives each its own
similarity 1), so the held-out scores come from k-fold cross-fitting: the detector is
refitted (with the deployed detector's kernel width) on k-1 folds of the fit features and
scores the k-th. An image cell holds out fit rows (:mod:`pipeline_lib.deploy.image_protocol`),
a patch cell training images, all their patches together
(:mod:`pipeline_lib.deploy.patch_protocol`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline_lib.detection.detectors import make_detector
from pipeline_lib.detection.evaluate import to_anomaly_scores

#: Folds of the threshold's cross-fitting.
THRESHOLD_FOLDS = 5


def _to_full_size(detector: str, fitted: Any, normality: np.ndarray, ratio: float) -> np.ndarray:
    """Put a fold detector's scores on the scale of the detector fitted on all rows.

    Two detectors' scores grow with the number of fit rows: a one-class SVM's
    ``sum_i a_i k(s_i, x)`` (libsvm's dual coefficients sum to ``nu * n``), and the KDE's
    ``(1/g) log sum_j`` (a sum over ``n`` rows). Fitted on ``n / ratio`` rows they are
    rescaled by ``ratio`` (SVMs) or shifted by ``log(ratio) / g`` (KDE); Gaussian density
    and k-NN similarity do not depend on ``n``.
    """
    normality = np.asarray(normality, np.float64)
    if detector in ("ocsvm", "ocsvm_linear"):
        return normality * ratio
    if detector == "kde":
        return normality + np.log(ratio) / fitted.gamma_
    return normality


def cross_fitted_normality(
    fit_features: np.ndarray,
    fit_groups: np.ndarray,
    query_features: np.ndarray,
    query_groups: np.ndarray,
    *,
    detector: str,
    detector_params: dict[str, Any],
    seed: int,
    folds: int = THRESHOLD_FOLDS,
    kernel_of: Any | None = None,
) -> np.ndarray:
    """Held-out normality of every query row: scored by a detector fitted without its group.

    Groups are what is held out together: one fit row for an image cell, one training image
    (all its patches) for a patch cell. The distinct groups are split into ``folds`` seeded
    folds; for each, the detector is refitted on the fit rows of the other groups and scores
    the query rows of the fold's groups, rescaled to the full fit size
    (:func:`_to_full_size`).

    ``kernel_of``, the detector fitted on all rows: the folds keep its kernel width
    (``gamma_``, derived from the fit features' variance when ``gamma`` is not set), so a
    fold differs from the deployed detector only in its rows. Why: a score
    ``(1/g) log sum_j exp(...)`` moves with ``g``, and a 1 % change of the width shifts every
    held-out score by about ``0.01 log(n) / g``, which on near-identical inliers (a
    production line) can exceed their whole spread.

    Raises
    ------
    ValueError
        If there are fewer groups than ``2 * folds``.
    """
    fit_groups, query_groups = np.asarray(fit_groups), np.asarray(query_groups)
    groups = np.unique(fit_groups)
    if len(groups) < 2 * folds:
        raise ValueError(
            f"{len(groups)} fit groups are too few to hold out inliers for the threshold "
            f"({2 * folds} needed)"
        )
    order = groups[np.random.default_rng(seed).permutation(len(groups))]
    normality = np.full(len(query_features), np.nan, dtype=np.float64)
    n = len(fit_features)
    params = dict(detector_params)
    if kernel_of is not None and getattr(kernel_of, "gamma", 0) is None:
        params["gamma"] = float(kernel_of.gamma_)  # derived at fit time: keep it fixed
    for part in np.array_split(order, folds):
        keep = ~np.isin(fit_groups, part)
        rows = np.flatnonzero(np.isin(query_groups, part))
        fitted = make_detector(detector, **params).fit(fit_features[keep])
        normality[rows] = _to_full_size(
            detector, fitted, fitted.score_samples(query_features[rows]), n / int(keep.sum())
        )
    return normality


def threshold_at(held_out: np.ndarray, target_fpr: float) -> float:
    """The smallest held-out anomaly score with at most ``target_fpr`` of them above it."""
    if not 0.0 < target_fpr < 1.0:
        raise ValueError(f"target_fpr must be in (0, 1), got {target_fpr}")
    return float(np.quantile(held_out, 1.0 - target_fpr, method="higher"))


def calibrate_threshold(
    fit_features: np.ndarray,
    *,
    detector: str,
    detector_params: dict[str, Any],
    target_fpr: float,
    seed: int,
    folds: int = THRESHOLD_FOLDS,
    kernel_of: Any | None = None,
) -> tuple[float, np.ndarray]:
    """Threshold at ``target_fpr`` on cross-fitted (held-out) inlier anomaly scores.

    Returns
    -------
    threshold : float
        The smallest held-out score with at most ``target_fpr`` of the held-out scores above
        it (``np.quantile(..., 1 - target_fpr, method="higher")``).
    held_out : ndarray of shape (n_fit,)
        The held-out anomaly score of every fit row.

    Raises
    ------
    ValueError
        If ``target_fpr`` is not in (0, 1) or there are fewer fit rows than ``2 * folds``.
    """
    if not 0.0 < target_fpr < 1.0:
        raise ValueError(f"target_fpr must be in (0, 1), got {target_fpr}")
    rows = np.arange(len(fit_features))
    held_out = to_anomaly_scores(
        cross_fitted_normality(
            fit_features,
            rows,
            fit_features,
            rows,
            detector=detector,
            detector_params=detector_params,
            seed=seed,
            folds=folds,
            kernel_of=kernel_of,
        )
    )
    return threshold_at(held_out, target_fpr), held_out


def rates(anomaly_scores: np.ndarray, is_outlier: np.ndarray, threshold: float) -> dict[str, float]:
    """False- and true-positive rates of ``score > threshold`` (outlier = positive)."""
    flagged = np.asarray(anomaly_scores) > threshold
    outlier = np.asarray(is_outlier).astype(bool)
    return {
        "fpr": float(flagged[~outlier].mean()) if (~outlier).any() else float("nan"),
        "tpr": float(flagged[outlier].mean()) if outlier.any() else float("nan"),
    }
