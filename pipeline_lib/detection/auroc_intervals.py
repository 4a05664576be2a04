"""How uncertain one job's AUC is over its test set: DeLong's variance and a bootstrap interval.

A single seed gives no spread over seeds, so its AUC carries the other uncertainty a reader
can be shown: that of the finite test set. Two estimates, both with the outlier as the
positive class and AUC x 100 like :func:`pipeline_lib.detection.metrics.auroc`:

- :func:`delong_variance`: DeLong, DeLong & Clarke-Pearson (1988) variance of the AUC, the
  fast form of Sun & Xu (2014) through midranks. A formula, no test.
- :func:`bootstrap_auroc_interval`: the 95 % percentile interval of
  :func:`scipy.stats.bootstrap`, resampling inliers and outliers separately (stratified by
  label: each resample keeps the test set's class sizes, as the AUC is conditional on them),
  with a fixed seed.

They live with the detector jobs (not the report) because a job's ``scores.npz`` is at hand
there: :func:`auroc_interval_record` is what a job adds to its ``result.json``.

Neither exists when the test split holds a single inlier or a single outlier (a smoke run's
``max_test_per_class: 1``): every resample of a one-score class is that score, and the
sample variance of its placement values is undefined (not 0). The job then keeps its AUC,
and its record says why the interval is missing (:data:`INTERVAL_OMITTED`).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from scipy import stats

from pipeline_lib.detection.metrics import check_scores_and_labels

log = logging.getLogger(__name__)

__all__ = [
    "BOOTSTRAP_METHOD",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "CONFIDENCE",
    "INTERVAL_FIELDS",
    "INTERVAL_OMITTED",
    "MIN_PER_CLASS",
    "auroc_interval_record",
    "bootstrap_auroc_interval",
    "delong_variance",
    "interval_omission",
]

#: Coverage of every interval reported.
CONFIDENCE: float = 0.95
#: Resamples of the bootstrap interval.
BOOTSTRAP_RESAMPLES: int = 1000
#: The bootstrap's seed: the same scores always give the same interval.
BOOTSTRAP_SEED: int = 0
#: :func:`scipy.stats.bootstrap`'s ``method``. BCa would need a jackknife over every test
#: image (10,000 AUCs of 10,000 scores per job); the percentile interval needs none.
BOOTSTRAP_METHOD: str = "percentile"

#: Keys :func:`auroc_interval_record` adds to a job's result record.
INTERVAL_FIELDS: tuple[str, ...] = ("auroc_low", "auroc_high", "auroc_se_delong")
#: Key a job's record holds instead of :data:`INTERVAL_FIELDS` when its test split gives no
#: interval: the reason, in words (:func:`interval_omission`).
INTERVAL_OMITTED: str = "auroc_interval_omitted"
#: Scores each class needs for a spread: one gives no sample variance and no resampling.
MIN_PER_CLASS: int = 2


def interval_omission(is_outlier: Any) -> str | None:
    """Why the test split gives no interval of its AUC; None when it gives one.

    Parameters
    ----------
    is_outlier : array-like of shape (n_test,)
        1 = outlier, 0 = inlier (both present: the AUC itself needs them).

    Returns
    -------
    str or None
        E.g. ``"the test split has 1 outlier(s) and 9 inlier(s); an interval over the test
        set needs at least 2 of each"``.
    """
    labels = np.asarray(is_outlier).astype(bool)
    n_outliers = int(labels.sum())
    n_inliers = int(labels.size - n_outliers)
    if min(n_outliers, n_inliers) >= MIN_PER_CLASS:
        return None
    return (
        f"the test split has {n_outliers} outlier(s) and {n_inliers} inlier(s); an interval "
        f"over the test set needs at least {MIN_PER_CLASS} of each"
    )


def delong_variance(anomaly_scores: Any, is_outlier: Any) -> tuple[float, float]:
    """The AUC and DeLong's estimate of its variance, both on the 0-1 scale.

    With outlier scores ``x`` (m of them) and inlier scores ``y`` (n), the placement
    values are ``V10_i = mean_j psi(x_i, y_j)`` and ``V01_j = mean_i psi(x_i, y_j)``
    (``psi`` = 1 if ``x > y``, 1/2 on a tie, else 0); ``AUC = mean(V10)`` and
    ``Var = var(V10) / m + var(V01) / n`` (sample variances, ``ddof=1``; DeLong et al.
    1988, eq. 2-4). Sun & Xu (2014) obtain every placement value from midranks: ``V10_i =
    (R_i - R^x_i) / n`` with ``R_i`` the midrank of ``x_i`` among all scores and ``R^x_i``
    among the outliers alone; likewise ``V01_j = 1 - (R_j - R^y_j) / m``. O(N log N).

    Parameters
    ----------
    anomaly_scores : array-like of shape (n_test,)
        Higher = more anomalous.
    is_outlier : array-like of shape (n_test,)
        1 = outlier (positive class), 0 = inlier.

    Returns
    -------
    auc : float
        ROC AUC in [0, 1] (ties count half).
    variance : float
        DeLong's variance of ``auc``; 0 when each class has a single score.

    Raises
    ------
    ValueError
        As :func:`pipeline_lib.detection.metrics.auroc` on malformed input.
    """
    scores, labels = check_scores_and_labels(anomaly_scores, is_outlier)
    x, y = scores[labels == 1], scores[labels == 0]
    m, n = len(x), len(y)
    rank_all = stats.rankdata(np.concatenate([x, y]))  # midranks
    v10 = (rank_all[:m] - stats.rankdata(x)) / n
    v01 = 1.0 - (rank_all[m:] - stats.rankdata(y)) / m
    auc = float(v10.mean())
    s10 = float(np.var(v10, ddof=1)) if m > 1 else 0.0
    s01 = float(np.var(v01, ddof=1)) if n > 1 else 0.0
    return auc, s10 / m + s01 / n


def _auc_of_codes(n_codes: int):
    """The Mann-Whitney AUC of resampled score *codes*, vectorised for the bootstrap.

    A code is a score's position among the distinct scores, so codes keep the scores' order
    and ties and the AUC of codes is the AUC of scores. Per resample, counting the inliers
    at each code gives, for every outlier, the inliers below it (plus half those tied):
    O(N) per resample instead of a sort.
    """

    def statistic(outliers: np.ndarray, inliers: np.ndarray, axis: int = -1) -> np.ndarray:
        x = np.moveaxis(np.asarray(outliers), axis, -1).astype(np.intp)
        y = np.moveaxis(np.asarray(inliers), axis, -1).astype(np.intp)
        batch_shape = x.shape[:-1]
        x = x.reshape(-1, x.shape[-1])  # (n_batch, m)
        y = y.reshape(-1, y.shape[-1])  # (n_batch, n)
        n_batch, (m, n) = x.shape[0], (x.shape[1], y.shape[1])
        offsets = np.arange(n_batch)[:, None] * n_codes
        counts = np.bincount((y + offsets).ravel(), minlength=n_batch * n_codes)
        counts = counts.reshape(n_batch, n_codes)  # inliers per code, per resample
        below = np.cumsum(counts, axis=1) - counts
        wins = np.take_along_axis(below + 0.5 * counts, x, axis=1).sum(axis=1)
        return (wins / (m * n)).reshape(batch_shape)

    return statistic


def bootstrap_auroc_interval(
    anomaly_scores: Any,
    is_outlier: Any,
    *,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
    method: str = BOOTSTRAP_METHOD,
) -> tuple[float, float]:
    """A bootstrap confidence interval of the AUC over the test set, on the 0-1 scale.

    Inliers and outliers are resampled separately, each with replacement and at its own
    size (:func:`scipy.stats.bootstrap` with two independent samples): resampling
    ``(score, label)`` pairs within each label, so every resample keeps both classes.

    Parameters
    ----------
    anomaly_scores, is_outlier : array-like of shape (n_test,)
        As :func:`delong_variance`.
    n_resamples : int, default=BOOTSTRAP_RESAMPLES
    seed : int, default=BOOTSTRAP_SEED
        Seed of the resampling: the same scores give the same interval.
    confidence : float, default=CONFIDENCE
    method : {"percentile", "basic", "BCa"}, default=BOOTSTRAP_METHOD

    Returns
    -------
    (low, high) : tuple of float
        The interval's ends in [0, 1].

    Raises
    ------
    ValueError
        On malformed input (as :func:`delong_variance`), ``n_resamples < 1``, or a class
        with fewer than :data:`MIN_PER_CLASS` scores (:func:`interval_omission` says so).
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    scores, labels = check_scores_and_labels(anomaly_scores, is_outlier)
    omission = interval_omission(labels)
    if omission is not None:
        raise ValueError(f"no bootstrap interval: {omission}")
    distinct, codes = np.unique(scores, return_inverse=True)
    # Batches bound the memory: each holds (batch, n_codes) counts and (batch, N) codes.
    batch = max(1, min(n_resamples, 4_000_000 // (len(distinct) + len(scores))))
    result = stats.bootstrap(
        (codes[labels == 1], codes[labels == 0]),
        _auc_of_codes(len(distinct)),
        n_resamples=n_resamples,
        batch=batch,
        vectorized=True,
        paired=False,
        confidence_level=confidence,
        method=method,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def auroc_interval_record(anomaly_scores: Any, is_outlier: Any) -> dict[str, float | str]:
    """What a detector job records of its AUC's uncertainty over the test set (x 100).

    Returns
    -------
    dict
        ``auroc_low``, ``auroc_high``: the bootstrap interval of
        :func:`bootstrap_auroc_interval` (defaults: 95 %, 1,000 stratified resamples,
        percentile, seed 0); ``auroc_se_delong``: the square root of
        :func:`delong_variance`. All AUC x 100, keys :data:`INTERVAL_FIELDS`. With a single
        inlier or outlier, only :data:`INTERVAL_OMITTED` and its reason: the DeLong term of
        a one-score class is undefined, so the standard error goes with the interval.

    Raises
    ------
    ValueError
        On malformed input, as :func:`delong_variance`.
    """
    _, labels = check_scores_and_labels(anomaly_scores, is_outlier)
    omission = interval_omission(labels)
    if omission is not None:
        log.warning("AUC interval omitted: %s", omission)
        return {INTERVAL_OMITTED: omission}
    low, high = bootstrap_auroc_interval(anomaly_scores, is_outlier)
    _, variance = delong_variance(anomaly_scores, is_outlier)
    return {
        "auroc_low": 100.0 * low,
        "auroc_high": 100.0 * high,
        "auroc_se_delong": 100.0 * float(np.sqrt(variance)),
    }
