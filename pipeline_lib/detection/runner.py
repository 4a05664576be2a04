"""One pure function per workflow step: arrays in, arrays and records out (no file I/O)."""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import torch

from pipeline_lib.data.split import OneClassSplit
from pipeline_lib.detection.auroc_intervals import auroc_interval_record
from pipeline_lib.detection.detectors import params_for_device
from pipeline_lib.detection.evaluate import evaluate_detector, evaluate_normality_scores
from pipeline_lib.registry import ROTATION_DETECTORS

log = logging.getLogger(__name__)


def run_rotation_detection(
    split: OneClassSplit,
    features: dict[str, np.ndarray],
    *,
    detector: str,
    intervals: bool = True,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """AUC of a rotation-classifier score stored with the features (nothing is fitted).

    ``intervals`` adds the AUC's interval over the test set as :func:`run_detection` does.

    ``detector`` is an id of :data:`pipeline_lib.registry.ROTATION_DETECTORS`; its scores
    (higher = more normal, float32 ties of ``rotation_released`` kept: the AUC counts a
    tied pair as half) are read from the feature file.
    """
    if detector not in ROTATION_DETECTORS:
        raise ValueError(
            f"unknown rotation detector {detector!r}; allowed: {', '.join(ROTATION_DETECTORS)}"
        )
    key = f"{ROTATION_DETECTORS[detector]}_test"
    if key not in features:
        if "log_p_rotations_test" in features:
            raise ValueError(
                f"features hold no {key!r} for {detector}: they were embedded before the "
                "rotation classifier had four scores; delete this features.npz to embed again"
            )
        raise ValueError(f"features hold no {key!r}: only rotation models have this detector")
    normality = rows_for(split.test_index, features["test_index"], features[key])
    result = evaluate_normality_scores(normality, split.test_is_outlier)
    record = {
        "auroc": float(result.auroc),
        "n_fit": 0,
        "n_test": int(result.n_test),
        "n_test_outliers": int(split.test_is_outlier.sum()),
        "space": "rotation_classifier",
    }
    if intervals:
        record |= auroc_interval_record(result.anomaly_scores, split.test_is_outlier)
    scores = {
        "anomaly_score": result.anomaly_scores,
        "is_outlier": np.asarray(split.test_is_outlier, dtype=np.int8),
        "test_index": split.test_index,
    }
    return record, scores


def fit_index_for(split: OneClassSplit, fitset: str) -> np.ndarray:
    """Training-set indices a detector is fitted on.

    ``"train"`` is the representation's own training set (contaminated in the unsupervised
    setting); ``"clean<n>"`` is the semi-supervised setting's n clean inliers.

    Raises
    ------
    ValueError
        If ``fitset`` is neither form, or the split holds no clean subset of that size.
    """
    if fitset == "train":
        return split.train_index
    if fitset.startswith("clean") and fitset[5:].isdigit():
        n = int(fitset[5:])
        if n not in split.clean_index:
            raise ValueError(
                f"split has no clean subset of {n} inliers (has {sorted(split.clean_index)}); "
                "add it to splits.clean_inliers"
            )
        return split.clean_index[n]
    raise ValueError(f"fit set {fitset!r} must be 'train' or 'clean<n>'")


def limit_fit_index(index: np.ndarray, *, max_fit: int, seed: int) -> np.ndarray:
    """At most ``max_fit`` indices, a seeded random subset (docs/protocol.md: at most 20,000)."""
    if len(index) <= max_fit:
        return index
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(index, size=max_fit, replace=False))


def rows_for(index: np.ndarray, available: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Rows of ``features`` (one per entry of ``available``) for the global ``index``.

    Raises
    ------
    ValueError
        If some requested image was never embedded.
    """
    if len(available) == 0:
        raise ValueError("features are empty: re-run the embedding step")
    order = np.argsort(available)
    position = np.searchsorted(available, index, sorter=order)
    position = np.clip(position, 0, len(available) - 1)
    found = available[order[position]] == index
    if not found.all():
        missing = index[~found][:5].tolist()
        raise ValueError(f"features are missing images {missing}: re-run the embedding step")
    return features[order[position]]


def run_detection(
    split: OneClassSplit,
    features: dict[str, np.ndarray],
    *,
    fitset: str,
    detector: str,
    detector_params: dict[str, Any],
    max_fit: int,
    seed: int,
    space: str = "f",
    device: str | torch.device | None = None,
    intervals: bool = True,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Fit ``detector`` on the fit set's features and score the whole test split.

    ``intervals`` (default) adds the AUC's 95 % interval over the test set and its DeLong
    standard error to the record (about a second for 10,000 test images); the evaluation
    during training, which keeps only the AUC, turns it off.

    ``device`` is the job's device (:func:`pipeline_lib.runtime.devices.select_device`): detectors
    that score with torch (OC-SVM RBF, KDE, k-NN) score there unless ``detector_params``
    sets ``device`` itself; None keeps each detector's own default.

    Returns
    -------
    record : dict
        AUC (x100, outlier = positive), sizes, timings, the detector's fitted
        hyper-parameters (``gamma_`` of the RBF detectors) and, with ``intervals``,
        :data:`~pipeline_lib.detection.auroc_intervals.INTERVAL_FIELDS`; without the job key.
    scores : dict of str to ndarray
        ``anomaly_score`` and ``is_outlier`` of shape (n_test,), in test-split order.
    """
    fit_index = limit_fit_index(fit_index_for(split, fitset), max_fit=max_fit, seed=seed)
    stored = space
    if space == "g" and "g_train" not in features:
        stored = "f"  # a model whose head is the identity (depth 0, RotNet): g(f) = f
        log.info("no g features stored (identity head): detectors on g use f")
    fit_features = rows_for(fit_index, features["train_index"], features[f"{stored}_train"])
    test_features = rows_for(split.test_index, features["test_index"], features[f"{stored}_test"])
    start = time.perf_counter()
    params = params_for_device(detector, detector_params, device)
    result = evaluate_detector(
        fit_features, test_features, split.test_is_outlier, detector=detector, **params
    )
    log.info(
        "%s on %d fit x %d test features (%d-d): AUC %.2f in %.1f s",
        detector,
        len(fit_features),
        len(test_features),
        fit_features.shape[1],
        result.auroc,
        time.perf_counter() - start,
    )
    record = {
        "auroc": float(result.auroc),
        "n_fit": int(len(fit_features)),
        "n_test": int(len(test_features)),
        "n_test_outliers": int(split.test_is_outlier.sum()),
        "feature_dim": int(fit_features.shape[1]),
        "space": space,
        "fit_seconds": float(result.fit_seconds),
        "score_seconds": float(result.score_seconds),
        **result.fitted,
    }
    if intervals:
        record |= auroc_interval_record(result.anomaly_scores, split.test_is_outlier)
    scores = {
        "anomaly_score": np.asarray(result.anomaly_scores, dtype=np.float64),
        "is_outlier": np.asarray(split.test_is_outlier, dtype=np.int8),
        "test_index": split.test_index,
    }
    return record, scores
