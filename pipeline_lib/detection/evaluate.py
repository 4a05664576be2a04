"""Fit a one-class detector on inlier features and score a test set.

This is the ONLY place where detector normality scores (``score_samples``, higher = more
normal) become anomaly scores (``-score_samples``, higher = more anomalous). Everything
downstream (:func:`pipeline_lib.detection.metrics.auroc`, score files, ROC plots) takes anomaly
scores with the outlier as the positive class.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipeline_lib.detection.detectors import make_detector
from pipeline_lib.detection.metrics import auroc


@dataclass(frozen=True)
class DetectionResult:
    """Outcome of fitting one detector and scoring one test set.

    Attributes
    ----------
    anomaly_scores : ndarray of shape (n_test,)
        Higher = more anomalous (``-score_samples``).
    auroc : float
        ROC AUC x 100, outlier = positive class.
    fit_seconds : float
        Wall time of ``fit``.
    score_seconds : float
        Wall time of ``score_samples``.
    n_fit : int
        Number of fit rows.
    n_test : int
        Number of test rows.
    fitted : dict of str to float, default={}
        Hyper-parameters the detector chose from its fit data (:data:`FITTED_PARAMS`, e.g.
        the RBF ``gamma_`` that ``gamma_scale`` turns into): recorded so a result says
        which kernel width produced its AUC. Empty for detectors without one.
    """

    anomaly_scores: np.ndarray
    auroc: float
    fit_seconds: float
    score_seconds: float
    n_fit: int
    n_test: int
    fitted: dict[str, float] = field(default_factory=dict)


#: Attributes a fitted detector may carry that the result record keeps.
FITTED_PARAMS: tuple[str, ...] = ("gamma_",)


def to_anomaly_scores(normality: Any) -> np.ndarray:
    """``-normality`` as float64: the pipeline's one sign flip (higher = more anomalous).

    Public so that scoring outside the benchmark (:mod:`pipeline_lib.deploy`) flips the
    sign in the same single place.
    """
    return -np.asarray(normality, dtype=np.float64)


def _fit_and_score(
    fit_features: Any, test_features: Any, detector: str, detector_params: dict[str, Any]
) -> tuple[np.ndarray, float, float, dict[str, float]]:
    """Fit, score and negate.

    Returns ``(anomaly_scores, fit_seconds, score_seconds, fitted)``, ``fitted`` holding the
    :data:`FITTED_PARAMS` the estimator has after ``fit``.
    """
    estimator = make_detector(detector, **detector_params)
    start = time.perf_counter()
    estimator.fit(fit_features)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    normality = np.asarray(estimator.score_samples(test_features), dtype=np.float64)
    score_seconds = time.perf_counter() - start
    anomaly_scores = to_anomaly_scores(normality)  # the one sign flip of the pipeline
    if not np.all(np.isfinite(anomaly_scores)):
        n_bad = int(np.count_nonzero(~np.isfinite(anomaly_scores)))
        raise ValueError(
            f"detector {detector!r} with parameters {detector_params} produced {n_bad} "
            "non-finite score(s)"
        )
    fitted = {
        name: float(getattr(estimator, name))
        for name in FITTED_PARAMS
        if getattr(estimator, name, None) is not None
    }
    return anomaly_scores, fit_seconds, score_seconds, fitted


def score_with_detector(
    fit_features: Any,
    test_features: Any,
    *,
    detector: str,
    **detector_params: Any,
) -> np.ndarray:
    """Fit a one-class detector on inlier features and return test anomaly scores.

    Parameters
    ----------
    fit_features : array-like of shape (n_fit, n_features)
        Features the detector is fitted on (training inliers, possibly contaminated).
    test_features : array-like of shape (n_test, n_features)
        Features to score.
    detector : str
        A key of :data:`pipeline_lib.detection.detectors.DETECTORS` (``ocsvm``, ``ocsvm_linear``,
        ``kde``, ``gde``, ``knn``).
    **detector_params
        Hyper-parameters of that detector (e.g. ``normalize=True``, ``gamma_scale=10.0``);
        omitted ones take the class defaults, which follow the paper.

    Returns
    -------
    anomaly_scores : ndarray of shape (n_test,), float64
        ``-detector.score_samples(test_features)``: higher = more anomalous.

    Raises
    ------
    ValueError
        If ``detector`` is unknown, a parameter value is invalid, the features are not
        finite 2-D arrays with matching widths, or the detector yields non-finite scores.
    TypeError
        If a parameter name is not accepted by the detector.
    """
    anomaly_scores, _, _, _ = _fit_and_score(fit_features, test_features, detector, detector_params)
    return anomaly_scores


def evaluate_detector(
    fit_features: Any,
    test_features: Any,
    is_outlier: Any,
    *,
    detector: str,
    **detector_params: Any,
) -> DetectionResult:
    """Fit, score and compute the ROC AUC (outlier = positive class) with timings.

    Parameters
    ----------
    fit_features : array-like of shape (n_fit, n_features)
        Features the detector is fitted on.
    test_features : array-like of shape (n_test, n_features)
        Features to score.
    is_outlier : array-like of shape (n_test,)
        1 for outliers, 0 for inliers; both must occur.
    detector : str
        A key of :data:`pipeline_lib.detection.detectors.DETECTORS`.
    **detector_params
        Hyper-parameters of that detector.

    Returns
    -------
    result : DetectionResult
        Anomaly scores, AUC x 100, fit / score wall times and sizes.

    Raises
    ------
    ValueError
        As :func:`score_with_detector`, or if ``is_outlier`` does not match the test set
        (length, values, both classes present).
    TypeError
        If a parameter name is not accepted by the detector.
    """
    n_test = len(test_features)
    if len(is_outlier) != n_test:
        raise ValueError(
            f"is_outlier has {len(is_outlier)} entries but test_features has {n_test} rows"
        )
    anomaly_scores, fit_seconds, score_seconds, fitted = _fit_and_score(
        fit_features, test_features, detector, detector_params
    )
    return DetectionResult(
        anomaly_scores=anomaly_scores,
        auroc=auroc(anomaly_scores, is_outlier),
        fit_seconds=fit_seconds,
        score_seconds=score_seconds,
        n_fit=len(fit_features),
        n_test=n_test,
        fitted=fitted,
    )


def evaluate_normality_scores(normality: Any, is_outlier: Any) -> DetectionResult:
    """ROC AUC of scores that need no fitting (e.g. RotNet's rotation classifier).

    ``normality`` is higher = more normal, like ``score_samples``; it is turned into an
    anomaly score here, the same single place as for fitted detectors.
    """
    normality = np.asarray(normality, dtype=np.float64)
    if len(is_outlier) != len(normality):
        raise ValueError(
            f"is_outlier has {len(is_outlier)} entries but there are {len(normality)} scores"
        )
    anomaly_scores = to_anomaly_scores(normality)
    return DetectionResult(
        anomaly_scores=anomaly_scores,
        auroc=auroc(anomaly_scores, is_outlier),
        fit_seconds=0.0,
        score_seconds=0.0,
        n_fit=0,
        n_test=len(normality),
    )
