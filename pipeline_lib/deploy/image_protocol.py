"""The image protocol: how an image cell (one score per whole image) becomes a package.

The detector is refitted on the detection step's stored features, on the same fit rows, so
the package scores as the benchmark did; the threshold is held out by fit row
(:func:`~pipeline_lib.deploy.threshold.calibrate_threshold`). The interface is
:class:`~pipeline_lib.deploy.cell_protocol.CellProtocol`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch import nn

from pipeline_lib.data.split import load_split
from pipeline_lib.deploy.cell_protocol import Calibration, FitSettings
from pipeline_lib.deploy.export import ParityReport, ScoringGraph
from pipeline_lib.deploy.image_package import PackagedDetector
from pipeline_lib.deploy.threshold import THRESHOLD_FOLDS, calibrate_threshold, rates
from pipeline_lib.detection.detectors import make_detector
from pipeline_lib.detection.evaluate import to_anomaly_scores
from pipeline_lib.detection.metrics import auroc
from pipeline_lib.detection.runner import fit_index_for, limit_fit_index, rows_for
from pipeline_lib.runtime.io import load_image_dataset, load_npz


@dataclass(frozen=True)
class ImageProtocol:
    """An image cell: a score per whole image, fitted on the detection step's features.

    Parameters
    ----------
    dataset_path, split_path, features_path : str or PathLike
        The cell's ``dataset.npz``, ``split.npz`` and ``features.npz``.
    max_fit : int
        ``detect.max_fit``.
    fitset : str, default="train"
    """

    dataset_path: str | os.PathLike
    split_path: str | os.PathLike
    features_path: str | os.PathLike
    max_fit: int
    fitset: str = "train"
    parity_images: int = 64

    def fit(self, representation: nn.Module, settings: FitSettings) -> Calibration:
        """The detection step's fit rows of the stored features; threshold by fit row."""
        detector, params, seed = settings.detector, settings.detector_params, settings.seed
        split = load_split(self.split_path)
        features = load_npz(self.features_path)
        fit_index = limit_fit_index(
            fit_index_for(split, self.fitset), max_fit=self.max_fit, seed=seed
        )
        fit_features = rows_for(fit_index, features["train_index"], features["f_train"])
        test_features = rows_for(split.test_index, features["test_index"], features["f_test"])
        fitted = make_detector(detector, **params).fit(fit_features)
        threshold, held_out = calibrate_threshold(
            fit_features,
            detector=detector,
            detector_params=params,
            target_fpr=settings.target_fpr,
            seed=seed,
            kernel_of=fitted,
        )
        rule = (
            f"anomaly score > threshold; threshold = {1 - settings.target_fpr:g} quantile of "
            f"{THRESHOLD_FOLDS}-fold cross-fitted scores of the {len(fit_features)} fit rows"
        )
        return Calibration(
            detector=fitted,
            threshold=threshold,
            held_out=held_out,
            test_images=load_image_dataset(self.dataset_path).test_images[split.test_index],
            info={"threshold_rule": rule},
            data={
                "test_scores": to_anomaly_scores(fitted.score_samples(test_features)),
                "labels": split.test_is_outlier,
                "n_fit": int(len(fit_features)),
            },
        )

    def build(
        self, representation: nn.Module, calibration: Calibration, info: dict
    ) -> PackagedDetector:
        return PackagedDetector(
            representation,
            calibration.detector,
            calibration.image_size,
            calibration.threshold,
            info=info,
        )

    def measure(
        self, package: PackagedDetector, calibration: Calibration, recorded_auroc: float | None
    ) -> dict[str, Any]:
        """AUC from the stored features and from pixels through the package, and their gap."""
        threshold, test_scores = calibration.threshold, calibration.data["test_scores"]
        labels = calibration.data["labels"]
        pixel_scores = package.anomaly_scores(calibration.test_images)
        metrics = {
            "threshold": threshold,
            "heldout_fpr": float(np.mean(calibration.held_out > threshold)),
            **{f"test_{k}": v for k, v in rates(test_scores, labels, threshold).items()},
            "auroc_features": auroc(test_scores, labels),
            "auroc_pixels": auroc(pixel_scores, labels),
            "max_abs_diff_pixels_vs_features": float(np.max(np.abs(pixel_scores - test_scores))),
            "n_fit": calibration.data["n_fit"],
            "n_test": int(len(test_scores)),
        }
        if recorded_auroc is not None:
            metrics["auroc_recorded"] = float(recorded_auroc)
        return metrics

    def export_plan(self, graph: ScoringGraph) -> tuple[bool, None]:
        """Always exported (the detector's fit set is at most ``detect.max_fit`` rows)."""
        return True, None

    def parity_record(
        self, reports: dict[str, ParityReport], n_images: int
    ) -> tuple[dict[str, Any], dict[str, float]]:
        (report,) = reports.values()
        record = {
            "n_images": int(n_images),
            "tolerance": report.tolerance,
            "max_abs_diff": report.max_abs_diff,
        }
        flat = {f"parity_{name}": diff for name, diff in report.max_abs_diff.items()}
        return record, {"parity_tolerance": report.tolerance, **flat}

    def example_images(self) -> np.ndarray:
        return load_image_dataset(self.dataset_path).test_images
