"""The MVTec patch protocol of a package: a score, a verdict and an anomaly map per image.

What an MVTec category cell changes in :func:`~pipeline_lib.deploy.package.package_cell`
(``kind: patch``; everything else is shared). Every image is resized whole to
``image_size`` x ``image_size`` (``resize: stretch``, as the MVTec reader), its dense
``patch_size`` patches at ``stride`` are embedded and scored by the detector fitted on the
category's training patches (the benchmark's fit set: the same seeded subset of
``mvtec.embed.max_fit_patches``), the image score is the maximum of the patch-score map and
the anomaly map is the Gaussian up-sampling of that map (:mod:`pipeline_lib.mvtec.localize`,
``sigma`` and ``normalize`` as configured).

**Map size**: the model's input size (``image_size`` x ``image_size``, 256 at the paper's
settings), not the original file's size: the map is defined on the pixels the model saw;
stretching it back to a non-square original is left to the caller (``droc score`` writes
it at the input size).

Threshold: on the image score, at the target FPR of **held-out** training images: the
training images are split into 5 seeded folds (fewer for fewer than 10 images, at least
2 images a fold); for each, the detector is refitted on the fit patches of the other images
and scores every dense patch of the fold's images
(:func:`~pipeline_lib.deploy.threshold.cross_fitted_normality`). Its FPR / TPR on the test
images are measured and stored.

Exported: the whole map pipeline is static tensor algebra, so ``model.ts`` and
``model.onnx`` hold the whole scoring, map included (:class:`PatchScoringGraph`): dense
patches are one ``index_select`` with a precomputed pixel index (the ``unfold`` view of
:func:`pipeline_lib.mvtec.patches.map_patches`, written as a gather because ONNX has no
``unfold``), the representation's ``f`` embeds them, the detector graph of
:mod:`pipeline_lib.deploy.export` scores them, the image score is the map's maximum and the
up-sampling is the separable Gaussian transposed convolution ``U M U^T`` of
:func:`pipeline_lib.mvtec.localize.upsample_score_maps`, with its normalisation. Outputs:
``score`` float64 ``(n,)`` and ``anomaly_map`` float32 ``(n, size, size)``. The graph holds
the detector's fit set as a constant (a KDE keeps every fit patch): above
:data:`~pipeline_lib.deploy.export.MAX_EXPORT_BYTES` nothing is exported (an ONNX file
cannot exceed 2 GB) and ``package.json`` says why under ``export``; the eager scorer still
works. Memory of one forward pass: every patch of the batch at once (``n * grid^2``
patches; 40 MB of pixels per 256 x 256 image at the paper's 57 x 57 grid), so exported
graphs are fed :data:`IMAGES_PER_CALL` images at a time.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from pipeline_lib.data.mvtec import category_from_arrays
from pipeline_lib.deploy.errors import PackageError
from pipeline_lib.deploy.export import MAX_EXPORT_BYTES, ParityReport, buffer_bytes, detector_graph
from pipeline_lib.deploy.package import FitSettings, SavedPackage
from pipeline_lib.deploy.protocols import Calibration
from pipeline_lib.deploy.threshold import (
    THRESHOLD_FOLDS,
    cross_fitted_normality,
    rates,
    threshold_at,
)
from pipeline_lib.detection.detectors import make_detector
from pipeline_lib.detection.evaluate import to_anomaly_scores
from pipeline_lib.detection.metrics import auroc
from pipeline_lib.mvtec.localize import (
    grid_side,
    image_scores,
    upsample_score_maps,
    upsampling_matrix,
)
from pipeline_lib.mvtec.patches import PatchOptions, embed_patches, sample_positions
from pipeline_lib.runtime.io import load_npz

log = logging.getLogger(__name__)

#: Images per call of the exported graphs: every patch of a call goes through the graph at
#: once, so memory grows with it; 3 (not the 2 of the trace) also checks the free batch
#: dimension and, in the parity check's permuted order, that rows do not mix.
IMAGES_PER_CALL = 3


def patch_pixel_index(image_size: int, patch_size: int, stride: int) -> np.ndarray:
    """Flat pixel index ``(grid^2 * p * p,)``: patch ``g = r * grid + c``, row-major inside."""
    grid = grid_side(image_size, patch_size, stride)
    starts = np.arange(grid) * stride
    inside = np.arange(patch_size)
    rows = starts[:, None, None, None] + inside[None, None, :, None]  # (grid, 1, p, 1)
    cols = starts[None, :, None, None] + inside[None, None, None, :]  # (1, grid, 1, p)
    return (rows * image_size + cols).reshape(-1).astype(np.int64)


class PatchScoringGraph(nn.Module):
    """uint8 images ``(n, s, s, 3)`` -> (anomaly score ``(n,)``, anomaly map ``(n, s, s)``).

    Parameters
    ----------
    backbone : nn.Module
        The representation's ``f`` on patches in [0, 1], ``(b, 3, p, p)`` -> ``(b, d)``.
    detector : nn.Module
        From :func:`pipeline_lib.deploy.export.detector_graph` (returns normality).
    image_size, patch_size, stride : int
    sigma : float
        Of the up-sampling Gaussian.
    normalize : bool
        Divide by the up-sampling of ones (as the benchmark's ``mvtec.localize.normalize``).
    """

    def __init__(
        self,
        backbone: nn.Module,
        detector: nn.Module,
        *,
        image_size: int,
        patch_size: int,
        stride: int,
        sigma: float,
        normalize: bool,
    ) -> None:
        super().__init__()
        self.backbone = backbone.eval()
        self.detector = detector.eval()
        self.grid = grid_side(image_size, patch_size, stride)
        self.patch_size = patch_size
        self.image_size = image_size
        spread = upsampling_matrix(self.grid, patch_size=patch_size, stride=stride, sigma=sigma)
        coverage = spread.sum(axis=1)
        scale = 1.0 / np.outer(coverage, coverage) if normalize else np.ones((image_size,) * 2)
        self.register_buffer(
            "index", torch.from_numpy(patch_pixel_index(image_size, patch_size, stride))
        )
        self.register_buffer("spread", torch.from_numpy(spread))
        self.register_buffer("scale", torch.from_numpy(scale))

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = images.shape[0]
        p, grid = self.patch_size, self.grid
        x = images.permute(0, 3, 1, 2).to(torch.float32) / 255.0
        x = x.reshape(n, 3, self.image_size * self.image_size).index_select(2, self.index)
        patches = x.reshape(n, 3, grid * grid, p, p).permute(0, 2, 1, 3, 4).reshape(-1, 3, p, p)
        normality = self.detector(self.backbone(patches).to(torch.float64))
        maps = (-normality).reshape(n, grid, grid)
        scores = torch.amax(maps, dim=(1, 2))
        pixels = torch.matmul(torch.matmul(self.spread, maps), self.spread.T) * self.scale
        return scores, pixels.to(torch.float32)


@dataclass(frozen=True)
class PatchResult:
    """Scores of a batch: ``scores`` (n,) anomaly, ``is_anomaly`` (n,), ``maps`` (n, s, s)."""

    scores: np.ndarray
    is_anomaly: np.ndarray
    maps: np.ndarray


@dataclass
class PackagedPatchDetector(SavedPackage):
    """A patch representation, the detector fitted on training patches, and a threshold.

    Parameters
    ----------
    representation : nn.Module
        Embeds ``patch_size`` patches (``f``), inference mode.
    detector : sklearn estimator
        Fitted on training-patch features.
    image_size, patch_size, stride : int
        Input side and the dense patch grid (``grid_side`` checks they tile).
    sigma : float
        Of the Gaussian up-sampling.
    normalize : bool
        Up-sampling divided by that of ones (``mvtec.localize.normalize``).
    threshold : float
        Image scores above it are anomalies.
    info : dict
        The rest of ``package.json`` (cell, metrics, parity, export).
    batch_size : int, default=4096
        Patches per forward pass.
    """

    patch_size: int
    stride: int
    sigma: float
    normalize: bool
    batch_size: int = field(default=4096, kw_only=True)
    kind: ClassVar[str] = "patch"
    resize: ClassVar[str] = "stretch"
    settings: ClassVar[dict[str, type]] = {
        "patch_size": int,
        "stride": int,
        "sigma": float,
        "normalize": bool,
    }
    outputs: ClassVar[tuple[str, ...]] = ("score", "anomaly_map")
    images_per_call: ClassVar[int | None] = IMAGES_PER_CALL

    @property
    def grid(self) -> int:
        return grid_side(self.image_size, self.patch_size, self.stride)

    def patch_maps(self, images: np.ndarray) -> np.ndarray:
        """Patch anomaly scores ``(n, grid, grid)`` of uint8 images ``(n, s, s, 3)``."""
        options = PatchOptions(self.patch_size, self.stride, batch_size=self.batch_size)
        features = embed_patches(self.representation, images, options=options)
        anomaly = to_anomaly_scores(self.detector.score_samples(features))
        return anomaly.reshape(len(images), self.grid, self.grid)

    def score(self, images: np.ndarray) -> PatchResult:
        """Image scores (map maximum), verdicts and up-sampled maps ``(n, s, s)`` float32."""
        maps = self.patch_maps(images)
        scores = image_scores(maps)
        pixels = upsample_score_maps(
            maps,
            patch_size=self.patch_size,
            stride=self.stride,
            sigma=self.sigma,
            normalize=self.normalize,
        )
        return PatchResult(scores=scores, is_anomaly=scores > self.threshold, maps=pixels)

    def anomaly_scores(self, images: np.ndarray) -> np.ndarray:
        """Image anomaly scores (as :meth:`PackagedDetector.anomaly_scores`)."""
        return image_scores(self.patch_maps(images))

    def graph_outputs(self, images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What :meth:`graph` computes (scores, maps), the eager way (the parity reference)."""
        result = self.score(images)
        return result.scores, result.maps

    def graph(self) -> PatchScoringGraph:
        """The exportable graph (:class:`PatchScoringGraph`)."""
        return PatchScoringGraph(
            self.representation.backbone,
            detector_graph(self.detector),
            image_size=self.image_size,
            patch_size=self.patch_size,
            stride=self.stride,
            sigma=self.sigma,
            normalize=self.normalize,
        )

    def _header(self) -> dict[str, Any]:
        return super()._header() | {"resize": self.resize}


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
