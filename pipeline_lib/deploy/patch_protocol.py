"""The MVTec patch protocol: how an MVTec category cell becomes a patch package.

What an MVTec category cell changes in :func:`~pipeline_lib.deploy.packaging.package_cell`
(``kind: patch``; everything else is shared): the detector is fitted on the category's
training patches (the benchmark's fit set: the same seeded subset of
``mvtec.embed.max_fit_patches``), and the package is a
:class:`~pipeline_lib.deploy.patch_package.PackagedPatchDetector`: a score and an anomaly
map per image.

Threshold: on the image score, at the target FPR of **held-out** training images: the
training images are split into 5 seeded folds (fewer for fewer than 10 images, at least
2 images a fold); for each, the detector is refitted on the fit patches of the other images
and scores every dense patch of the fold's images
(:func:`~pipeline_lib.deploy.threshold.cross_fitted_normality`). Its FPR / TPR on the test
images are measured and stored.

Export: the exported graph
(:class:`~pipeline_lib.deploy.patch_package.PatchScoringGraph`) holds the detector's fit
set as a constant (a KDE keeps every fit patch): above
:data:`~pipeline_lib.deploy.export.MAX_EXPORT_BYTES` nothing is exported (an ONNX file
cannot exceed 2 GB) and ``package.json`` says why under ``export``; the eager scorer still
works.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch import nn

from pipeline_lib.data.mvtec import category_from_arrays
from pipeline_lib.deploy.cell_protocol import Calibration, FitSettings
from pipeline_lib.deploy.export import MAX_EXPORT_BYTES, ParityReport, buffer_bytes
from pipeline_lib.deploy.package_format import PackageError
from pipeline_lib.deploy.patch_package import PackagedPatchDetector, PatchScoringGraph
from pipeline_lib.deploy.threshold import (
    THRESHOLD_FOLDS,
    cross_fitted_normality,
    rates,
    threshold_at,
)
from pipeline_lib.detection.detectors import make_detector
from pipeline_lib.detection.evaluate import to_anomaly_scores
from pipeline_lib.detection.metrics import auroc
from pipeline_lib.mvtec.localize import grid_side, image_scores, upsample_score_maps
from pipeline_lib.mvtec.patches import PatchOptions, embed_patches, sample_positions
from pipeline_lib.runtime.io import load_npz

log = logging.getLogger(__name__)


def _display_range(held_out_maps: np.ndarray, threshold: float) -> list[float]:
    """Colour scale of the heat maps: median held-out inlier pixel (dark) to the threshold."""
    low = float(np.median(held_out_maps))
    return [low, max(float(threshold), low + 1e-12)]


@dataclass(frozen=True)
class PatchProtocol:
    """An MVTec category cell: dense patches, an image score and an anomaly map per image.

    Parameters
    ----------
    category_path : str or PathLike
        The category's ``category.npz`` (:func:`~pipeline_lib.data.mvtec.category_to_arrays`).
    patch_size, stride, sigma, normalize, max_fit_patches
        ``mvtec.patches``, ``mvtec.localize`` and ``mvtec.embed.max_fit_patches``.
    batch_size : int, default=4096
        Patches per forward pass.
    """

    category_path: str | os.PathLike
    patch_size: int
    stride: int
    sigma: float
    normalize: bool
    max_fit_patches: int | None
    batch_size: int = 4096
    fitset: str = "train"
    #: Each is 3,249 patches at the paper's sizes, run by 4 implementations in 2 orders:
    #: 4 images keep that to minutes on a CPU.
    parity_images: int = 4

    def _upsample(self, maps: np.ndarray) -> np.ndarray:
        return upsample_score_maps(
            maps,
            patch_size=self.patch_size,
            stride=self.stride,
            sigma=self.sigma,
            normalize=self.normalize,
        )

    def fit(self, representation: nn.Module, settings: FitSettings) -> Calibration:
        """The benchmark's fit patches; threshold on held-out training images' scores."""
        detector, params, seed = settings.detector, settings.detector_params, settings.seed
        target_fpr = settings.target_fpr
        category = category_from_arrays(load_npz(self.category_path))
        train = category.train_images
        image_size = int(train.shape[1])
        grid = grid_side(image_size, self.patch_size, self.stride)
        options = PatchOptions(self.patch_size, self.stride, batch_size=self.batch_size)
        dense = embed_patches(representation, train, options=options)
        positions = sample_positions(len(train), grid, max_patches=self.max_fit_patches, seed=seed)
        fit_rows = positions[:, 0] * grid * grid + positions[:, 1] * grid + positions[:, 2]
        fit_features = dense[fit_rows]
        fitted = make_detector(detector, **params).fit(fit_features)
        folds = min(THRESHOLD_FOLDS, len(train) // 2)
        if folds < 2:
            raise PackageError(
                f"{len(train)} training images are too few to hold some out for the threshold "
                "(4 needed)"
            )
        held_out_maps = to_anomaly_scores(
            cross_fitted_normality(
                fit_features,
                positions[:, 0],
                dense,
                np.repeat(np.arange(len(train)), grid * grid),
                detector=detector,
                detector_params=params,
                seed=seed,
                folds=folds,
                kernel_of=fitted,
            )
        ).reshape(len(train), grid, grid)
        held_out = image_scores(held_out_maps)
        threshold = threshold_at(held_out, target_fpr)
        few = len(train) * target_fpr < 1.0
        if few:
            log.warning(
                "%d training images are too few for a threshold at FPR %g: it is the largest "
                "held-out image score, and the test FPR may be well above the target",
                len(train),
                target_fpr,
            )
        info = {
            "threshold_rule": (
                f"image score (max of the patch-score map) > threshold; threshold = "
                f"{1 - target_fpr:g} quantile of the image scores of the {len(train)} training "
                f"images, each scored by a detector fitted without its patches ({folds} folds)"
            ),
            "anomaly_map": {
                "size": [image_size, image_size],
                "of": "the model input (the whole image resized to image_size x image_size)",
                "display_range": _display_range(self._upsample(held_out_maps), threshold),
            },
        }
        data = {"few": few, "n_fit": int(len(fit_features)), "category": category}
        return Calibration(fitted, threshold, held_out, category.test_images, info, data)

    def build(
        self, representation: nn.Module, calibration: Calibration, info: dict
    ) -> PackagedPatchDetector:
        c = calibration
        settings = (self.patch_size, self.stride, self.sigma, self.normalize)
        return PackagedPatchDetector(
            representation,
            c.detector,
            c.image_size,
            c.threshold,
            *settings,
            info=info,
            batch_size=self.batch_size,
        )

    def measure(
        self, package: PackagedPatchDetector, calibration: Calibration, recorded_auroc: float | None
    ) -> dict[str, Any]:
        """Image AUC, pixel AUC (with masks) and the threshold's rates on the test images."""
        category, threshold = calibration.data["category"], calibration.threshold
        test = package.score(category.test_images)
        labels = category.test_labels
        metrics: dict[str, Any] = {
            "threshold": threshold,
            "threshold_is_max_of_held_out": calibration.data["few"],
            "heldout_fpr": float(np.mean(calibration.held_out > threshold)),
            **{f"test_{k}": v for k, v in rates(test.scores, labels, threshold).items()},
            "image_auroc": auroc(test.scores, labels),
            "n_fit_patches": calibration.data["n_fit"],
            "n_train_images": int(len(category.train_images)),
            "n_test": int(len(labels)),
        }
        if category.test_masks is not None:
            truth = (category.test_masks > 0).ravel().astype(np.int8)
            metrics["pixel_auroc"] = auroc(test.maps.ravel(), truth)
        if recorded_auroc is not None:
            metrics["image_auroc_recorded"] = float(recorded_auroc)
        return metrics

    def export_plan(self, graph: PatchScoringGraph) -> tuple[bool, dict[str, Any]]:
        """Exported when the detector's constants fit an ONNX file; the record says which."""
        size = buffer_bytes(graph.detector)
        if size <= MAX_EXPORT_BYTES:
            return True, {
                "files": ["model.ts", "model.onnx"],
                "inputs": "images: uint8 (n, image_size, image_size, 3), the resized image",
                "outputs": "score: float64 (n,) image anomaly score; anomaly_map: float32 "
                "(n, image_size, image_size)",
            }
        return False, {
            "files": [],
            "skipped": f"the detector's fit set takes {size:,} bytes, over the export limit "
            f"of {MAX_EXPORT_BYTES:,} (ONNX files stop at 2 GB); set mvtec.embed."
            "max_fit_patches lower to export, or score with the eager package",
        }

    def parity_record(
        self, reports: dict[str, ParityReport], n_images: int
    ) -> tuple[dict[str, Any], dict[str, float]]:
        """Per part (``score``, ``map``): the report with its verdict; flat metrics by part."""
        parts = {"score": reports["score"], "map": reports["anomaly_map"]}
        record = {
            part: {
                "n_images": int(n_images),
                "tolerance": report.tolerance,
                "max_abs_diff": report.max_abs_diff,
                "ok": report.ok,
            }
            for part, report in parts.items()
        }
        flat = {
            f"parity_{part}_{name}": diff
            for part, report in parts.items()
            for name, diff in report.max_abs_diff.items()
        }
        return record, flat

    def example_images(self) -> np.ndarray:
        return category_from_arrays(load_npz(self.category_path)).test_images
