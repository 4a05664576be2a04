"""ROC curve points from a saved scores file (for plots)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from pipeline_lib.detection.metrics import auroc, roc_curve_points


def roc_curve_from_scores(scores: dict[str, np.ndarray], path: str | os.PathLike) -> dict[str, Any]:
    """FPR/TPR (outlier = positive class), labelled by the job's method and detector.

    ``path`` is ``.../{method}/{fitset}/{detector}/scores.npz``: its folders name the curve.
    """
    parts = Path(path).parts
    fpr, tpr, _ = roc_curve_points(scores["anomaly_score"], scores["is_outlier"])
    return {
        "label": f"{parts[-4]} / {parts[-2]}",
        "fpr": fpr,
        "tpr": tpr,
        "auc": auroc(scores["anomaly_score"], scores["is_outlier"]),
    }
