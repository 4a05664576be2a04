"""Shared cases of the MLflow tracking tests: job records as the pipeline logs them."""

from __future__ import annotations


def job_records(n: int = 3) -> list[dict]:
    """``n`` job records (rows of results.csv), one per digits class, AUC 90 + class."""
    return [
        {
            "result_key": f"digits/{inlier}/contam0/seed0/raw/train/knn",
            "dataset": "digits",
            "inlier": str(inlier),
            "method": "raw",
            "seed": 0,
            "contamination": 0.0,
            "fitset": "train",
            "detector": "knn",
            "auroc": 90.0 + inlier,
            "n_fit": 60,
        }
        for inlier in range(n)
    ]
