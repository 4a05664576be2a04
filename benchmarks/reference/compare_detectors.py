"""Our detectors against the released ``eval_embed`` (trace_detectors.py) on the same inputs.

Each released score is compared with ours after the monotone map that relates the two
definitions (so equal numbers mean equal rankings and equal AUCs):

=====================  ================  ==================================================
released metric        ours              released = map(our anomaly score)
=====================  ================  ==================================================
``pool.auc``           ``knn``           ``1 - max cos`` = ours ``-max cos`` + 1
``pool.kocsvm``        ``ocsvm``         ``-score_samples``: the same
``pool.kde``           ``kde``           ``-logsumexp(2 gamma cos) / gamma`` = ours - 2
                                         (``||x - y||^2 = 2 - 2 cos`` for unit rows)
``pool.gde``           ``gde``           ``-score_samples``: the same
``pool.locsvm``        ``ocsvm_linear``  ``-score_samples``: the same
``logit.auc``          ``rotation_p0``   ``1 - p(0 | x)`` = ours ``-p(0 | x)`` + 1
``dscore.auc``         ``rotation_released``  ``1 - prod_k p(k | rot_k x)``: the same
=====================  ================  ==================================================

Our anomaly scores are what the pipeline ranks: ``score_with_detector`` (``-score_samples``)
for the feature detectors, ``-`` the normality of
:func:`~pipeline_lib.ssl.rotation.scores_from_rotation_logits` for the rotation classifier.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from inputs import detector_inputs, digest
from parity import Difference, relative_difference
from trace_io import read_trace

from pipeline_lib.detection.detectors import l2_normalize, rbf_gamma
from pipeline_lib.detection.evaluate import score_with_detector, to_anomaly_scores
from pipeline_lib.detection.metrics import auroc
from pipeline_lib.ssl.rotation import scores_from_rotation_logits

FAMILY = "detectors"
EPS32 = float(np.finfo(np.float32).eps)

#: released metric -> (our detector or rotation score, offset: released = ours + offset)
PAIRS: dict[str, tuple[str, float]] = {
    "pool.auc": ("knn", 1.0),
    "pool.kocsvm": ("ocsvm", 0.0),
    "pool.kde": ("kde", -2.0),
    "pool.gde": ("gde", 0.0),
    "pool.locsvm": ("ocsvm_linear", 0.0),
    "logit.auc": ("rotation_p0", 1.0),
    "dscore.auc": ("rotation_released", 0.0),
}
_ROTATION_KEYS = {"rotation_p0": "p_rot0", "rotation_released": "released_rotations"}

#: Scores made of cosines or probabilities (at most 1 in magnitude, where float32 rounds
#: them) are compared absolutely; the others relative to the largest released score.
ABSOLUTE = frozenset({"knn", "rotation_p0", "rotation_released"})
#: How much each score may differ and why (d = 128 features).
TOLERANCES: dict[str, tuple[float, str]] = {
    "knn": (
        8 * EPS32,
        "float32 cosines on both sides: normalisation (TF multiplies by rsqrt, we divide by "
        "sqrt) and a 128-term dot product in another summation order, each a few ulps",
    ),
    "ocsvm": (
        1e-4,
        "the same libsvm fit on float32-normalised rows that differ in the last ulp "
        "(rsqrt against 1/sqrt), so the SMO solver can stop at a slightly other point within "
        "its tol = 1e-3; scored in float64 on both sides",
    ),
    "kde": (
        16 * EPS32,
        "float32 on both sides: TF's logsumexp(2 gamma cos) / gamma against our "
        "logsumexp(-gamma ||x - y||^2) / gamma from centred features; the score moves by "
        "twice a weighted mean of the cosines' rounding (a few ulps of 1), on scores near 2",
    ),
    "gde": (
        32 * EPS32,
        "scikit-learn fits and scores the float32 rows in float32 (the released rows are "
        "TF's float32 normalisation, ours NumPy's, an ulp apart); ours scores the fitted "
        "float32 Cholesky factor in float64: float32 rounding through a 128 x 128 "
        "triangular solve",
    ),
    "ocsvm_linear": (
        1e-9,
        "the same libsvm fit and scikit-learn score_samples on the same raw rows",
    ),
    "rotation_p0": (
        4 * EPS32,
        "a float32 softmax (TF) against a float64 log-softmax: the float32 rounding of p",
    ),
    "rotation_released": (
        8 * EPS32,
        "both in float32: softmax, log and sum over four views, exp; TF's softmax and "
        "reduction order against torch's, a few ulps of 1",
    ),
}


def our_anomaly_scores(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Our anomaly scores (higher = more anomalous) of every compared detector, on the CPU."""
    fit, test = inputs["fit_features"], inputs["test_features"]
    scores = {}
    for name in ("knn", "ocsvm", "kde", "gde", "ocsvm_linear"):
        params = {"device": "cpu"} if name in ("knn", "kde") else {}
        scores[name] = score_with_detector(fit, test, detector=name, **params)
    rotation = scores_from_rotation_logits(torch.from_numpy(inputs["rotation_logits"]))
    for name, key in _ROTATION_KEYS.items():
        scores[name] = to_anomaly_scores(rotation[key].numpy())
    return scores


def compare(trace: dict[str, np.ndarray], meta: dict[str, Any]) -> list[Difference]:
    inputs = detector_inputs(int(meta["input_seed"]))
    if digest(*inputs.values()) != meta["input_digest"]:
        raise ValueError(
            "inputs.detector_inputs no longer makes the inputs the trace was made from "
            "(digest differs): make the detector trace again"
        )
    labels = inputs["test_labels"]
    ours = our_anomaly_scores(inputs)
    records = []
    for index, metric in enumerate(meta["metrics"]):
        name, offset = PAIRS[metric]
        released = trace[f"score/{metric}"]
        tolerance, why = TOLERANCES[name]
        mapped = ours[name] + offset
        if name in ABSOLUTE:
            largest = float(np.max(np.abs(mapped - released)))
            measure = f"max |ours + {offset:g} - released| (scores of magnitude <= 1)"
        else:
            largest = relative_difference(mapped, released)
            measure = f"max |ours + {offset:g} - released| / max |released|"
        records.append(
            Difference(
                FAMILY, f"{name} score (released {metric})", largest, tolerance, measure, why
            )
        )
        released_auc = float(trace["auc"][index])
        our_auc = auroc(ours[name], labels)  # percent, as util.metric.roc
        records.append(
            Difference(
                FAMILY,
                f"{name} AUC (released {metric})",
                abs(our_auc - released_auc),
                _auc_tolerance(labels),
                f"AUC points; released {released_auc:.4f}, ours {our_auc:.4f}",
                "scores within the tolerance above rank the test set the same way unless "
                "an inlier and an outlier lie within it; one such swapped pair moves the AUC "
                "by 100 / (inliers x outliers), which is allowed once",
            )
        )
    normalized = l2_normalize(inputs["fit_features"])
    gamma = rbf_gamma(normalized)
    records.append(
        Difference(
            FAMILY,
            "gamma = 10 / (d Var) of the normalised fit features",
            abs(gamma - float(trace["gamma"])) / float(trace["gamma"]),
            16 * EPS32,
            f"relative; released {float(trace['gamma']):.7g}, ours {gamma:.7g}",
            "TF's float32 variance of float32-normalised rows against our float64 variance "
            "of the same rows: float32 rounding of a mean of squares",
        )
    )
    return records


def _auc_tolerance(labels: np.ndarray) -> float:
    n_out = int(np.count_nonzero(labels))
    return 100.0 / (n_out * (len(labels) - n_out)) * (1 + math.ulp(1.0))


def differences(folder: Path) -> list[Difference]:
    """:func:`compare` on the ``detectors`` trace in ``folder``."""
    return compare(*read_trace(folder, FAMILY))
