"""Detector ids with their accepted parameters and defaults (the paper's RBF gamma scale
stated once), and the detectors read from a rotation classifier.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Detectors read from the rotation classifier -> the feature-file key of their scores
#: (:func:`pipeline_lib.ssl.rotation.scores_from_rotation_logits`; docs/protocol.md), all
#: from one log-softmax of the four rotated views, higher = more normal:
#: ``rotation_classifier``, the paper's Table 1 score sum_k p(k | rot_k x) (the paper's
#: "Rotation Classifier" numbers belong to it); ``rotation_log_p``, Golan et al.'s sum_k
#: log p(k | rot_k x) (``rotation_classifier`` before the paper's form became the default);
#: ``rotation_p0``, p(0 | x); ``rotation_released``, the released code's float32
#: 1 - exp(sum_k log p(k | rot_k x)), negated, with its float32 ties.
ROTATION_DETECTORS: dict[str, str] = {
    "rotation_classifier": "sum_p_rotations",
    "rotation_log_p": "log_p_rotations",
    "rotation_p0": "p_rot0",
    "rotation_released": "released_rotations",
}

#: The paper's RBF kernel-width multiplier: ``gamma = GAMMA_SCALE / (d * Var(X_fit))``, ten
#: times scikit-learn's ``gamma="scale"`` ("we reduce [the kernel width] by 10 times than
#: default", Sec. 3.2; appendix "Details of shallow one-class classifiers"). The one place
#: this number is written: the RBF one-class SVM, the KDE and the explanations read it here.
GAMMA_SCALE: float = 10.0

#: Detector id -> every keyword parameter its class accepts, with the default the class
#: uses (the paper's where the paper fixes one). The detector classes
#: (:mod:`pipeline_lib.detection.detectors`) take their ``__init__`` defaults from here and
#: the config check (:func:`pipeline_lib.config.validate.validate_config`) rejects any other
#: name before a job runs. ``gamma=None`` derives the kernel width from ``gamma_scale``.
DETECTOR_DEFAULTS: dict[str, dict[str, Any]] = {
    "ocsvm": {
        "nu": 0.5,
        "gamma": None,
        "gamma_scale": GAMMA_SCALE,
        "normalize": True,
        "tol": 1e-3,
        "cache_size": 200.0,
        "max_iter": -1,
        # Scoring: blocked float64 kernel sums in torch, on the CPU unless set.
        "chunk_size": 4096,
        "dtype": "float64",
        "device": "cpu",
    },
    "ocsvm_linear": {
        "nu": 0.5,
        "normalize": False,
        "tol": 1e-3,
        "cache_size": 200.0,
        "max_iter": -1,
    },
    "kde": {
        "gamma": None,
        "gamma_scale": GAMMA_SCALE,
        "normalize": True,
        "chunk_size": 2048,
        "dtype": "float32",
        "device": "auto",
    },
    "gde": {"normalize": True, "reg_covar": 1e-6, "random_state": 0},
    "knn": {"n_neighbors": 1, "chunk_size": 2048, "dtype": "float32", "device": "auto"},
}

#: Every detector id of the feature detectors (the schema's ``detectors`` names).
DETECTORS: tuple[str, ...] = tuple(DETECTOR_DEFAULTS)


def unknown_detector_parameters(detector: str, params: Mapping[str, Any]) -> list[str]:
    """The names in ``params`` that ``detector`` does not accept, in the given order.

    Raises
    ------
    KeyError
        If ``detector`` is not an id of :data:`DETECTOR_DEFAULTS`.
    """
    accepted = DETECTOR_DEFAULTS[detector]
    return [name for name in params if name not in accepted]


def detector_settings(detector: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every parameter of ``detector`` with ``params`` over the registry defaults.

    Two parameter sets are the same detector exactly when these are equal
    (``{}`` and ``{nu: 0.5}`` both run the paper's one-class SVM).
    """
    return {**DETECTOR_DEFAULTS[detector], **(params or {})}
