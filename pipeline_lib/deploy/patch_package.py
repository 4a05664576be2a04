"""The packaged model of one MVTec category cell: a score, a verdict and an anomaly map per image.

Same folder as an image package (:mod:`pipeline_lib.deploy.package`), ``kind: patch``, with
the patch protocol's settings beside the image size: every image is resized whole to
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
2 images a fold); for each, the detector is refitted on the
fit patches of the other images and scores every dense patch of the fold's images
(:func:`~pipeline_lib.deploy.package.cross_fitted_normality`). Its FPR / TPR on the test
images are measured and stored.

Exported: ``model.ts`` and ``model.onnx`` hold the whole scoring, map included
(:mod:`pipeline_lib.deploy.patch_export`), checked against the eager scores and maps; when
the detector's fit set is too large to embed (above
:data:`~pipeline_lib.deploy.patch_export.MAX_EXPORT_BYTES`) nothing is exported and
``package.json`` says why under ``export``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from torch import nn

from pipeline_lib.data.mvtec import category_from_arrays
from pipeline_lib.deploy.export import check_parity, detector_graph, export_onnx, export_torchscript
from pipeline_lib.deploy.package import (
    THRESHOLD_FOLDS,
    PackageError,
    cross_fitted_normality,
    document_info,
    rates,
    read_document,
    read_model_files,
    representation_spec,
    threshold_at,
    write_document,
    write_model_files,
)
from pipeline_lib.deploy.patch_export import (
    MAP_OUTPUTS,
    MAX_EXPORT_BYTES,
    PatchScorer,
    PatchScoringGraph,
    buffer_bytes,
    onnx_patch_scorer,
    torchscript_patch_scorer,
)
from pipeline_lib.detection.detectors import make_detector
from pipeline_lib.detection.evaluate import to_anomaly_scores
from pipeline_lib.detection.metrics import auroc
from pipeline_lib.models.checkpoints import load_trained_representation
from pipeline_lib.models.representation import build_representation
from pipeline_lib.mvtec.localize import grid_side, image_scores, upsample_score_maps
from pipeline_lib.mvtec.patches import embed_patches, sample_positions
from pipeline_lib.registry import TRAINED_METHODS
from pipeline_lib.runtime.io import load_npz

log = logging.getLogger(__name__)

#: Test images of the export-time parity check. Each is 3,249 patches at the paper's sizes,
#: run by 4 implementations in 2 orders: 4 images keep that to minutes on a CPU.
PARITY_IMAGES = 4


@dataclass(frozen=True)
class PatchResult:
    """Scores of a batch: ``scores`` (n,) anomaly, ``is_anomaly`` (n,), ``maps`` (n, s, s)."""

    scores: np.ndarray
    is_anomaly: np.ndarray
    maps: np.ndarray


@dataclass
class PackagedPatchDetector:
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

    representation: nn.Module
    detector: Any
    image_size: int
    patch_size: int
    stride: int
    sigma: float
    normalize: bool
    threshold: float
    info: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 4096
    kind: ClassVar[str] = "patch"
    resize: ClassVar[str] = "stretch"

    @property
    def grid(self) -> int:
        return grid_side(self.image_size, self.patch_size, self.stride)

    def patch_maps(self, images: np.ndarray) -> np.ndarray:
        """Patch anomaly scores ``(n, grid, grid)`` of uint8 images ``(n, s, s, 3)``."""
        features = embed_patches(
            self.representation,
            images,
            patch_size=self.patch_size,
            stride=self.stride,
            batch_size=self.batch_size,
        )
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

    def graph(self) -> PatchScoringGraph:
        """The exportable graph (:mod:`pipeline_lib.deploy.patch_export`)."""
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
        return {
            "kind": self.kind,
            "resize": self.resize,
            "image_size": self.image_size,
            "patch_size": self.patch_size,
            "stride": self.stride,
            "sigma": self.sigma,
            "normalize": self.normalize,
            "threshold": self.threshold,
        }

    def save(self, folder: str | os.PathLike) -> Path:
        """Write ``package.json``, ``representation.pt`` and the detector into ``folder``."""
        folder = Path(folder)
        write_model_files(folder, self.representation, self.info["representation"], self.detector)
        write_document(folder, self._header(), self.info)
        return folder

    @classmethod
    def load(cls, folder: str | os.PathLike, *, batch_size: int = 4096) -> PackagedPatchDetector:
        """Read a ``kind: patch`` package folder.

        Raises
        ------
        PackageError
            If a file is missing, unreadable, or the package is of another kind.
        """
        folder = Path(folder)
        document = read_document(folder, kind=cls.kind)
        representation, detector = read_model_files(folder)
        return cls(
            representation=representation,
            detector=detector,
            image_size=int(document["image_size"]),
            patch_size=int(document["patch_size"]),
            stride=int(document["stride"]),
            sigma=float(document["sigma"]),
            normalize=bool(document["normalize"]),
            threshold=float(document["threshold"]),
            info=document_info(document),
            batch_size=batch_size,
        )


def _representation(
    method: str, model_path: str | os.PathLike | None, *, seed: int, width: int
) -> tuple[nn.Module, dict[str, Any]]:
    """The cell's network and what rebuilds it (refused before building if not packable)."""
    if method in TRAINED_METHODS:
        if model_path is None:
            raise PackageError(f"trained method {method!r} needs its model.pt")
        model = load_trained_representation(model_path)
        return model, representation_spec(method, seed=seed, width=width, arch=model.arch)
    spec = representation_spec(method, seed=seed, width=width, arch=None)
    return build_representation(method, seed=seed, width=width), spec


def _display_range(held_out_maps: np.ndarray, threshold: float) -> list[float]:
    """Colour scale of the heat maps: median held-out inlier pixel (dark) to the threshold."""
    low = float(np.median(held_out_maps))
    return [low, max(float(threshold), low + 1e-12)]


def package_patch_cell(
    out_dir: str | os.PathLike,
    *,
    category_path: str | os.PathLike,
    model_path: str | os.PathLike | None,
    cell: dict[str, Any],
    detector_params: dict[str, Any],
    width: int,
    patch_size: int,
    stride: int,
    sigma: float,
    normalize: bool,
    max_fit_patches: int | None,
    target_fpr: float,
    batch_size: int = 4096,
    recorded_auroc: float | None = None,
) -> dict[str, Any]:
    """Package one MVTec cell into ``out_dir``; returns the package's metrics record.

    Parameters
    ----------
    out_dir : str or PathLike
        Package folder (replaced if it exists).
    category_path : str or PathLike
        The category's ``category.npz`` (:func:`~pipeline_lib.data.mvtec.category_to_arrays`).
    model_path : str or PathLike or None
        The trained patch ``model.pt``; None for a frozen method.
    cell : dict
        ``dataset`` (``mvtec``), ``inlier`` (the category), ``method``, ``detector``, ``seed``.
    detector_params : dict
        The patch detector's parameters (``mvtec.detectors``).
    width : int
        ``embed.width`` (frozen ResNet).
    patch_size, stride, sigma, normalize, max_fit_patches
        ``mvtec.patches``, ``mvtec.localize`` and ``mvtec.embed.max_fit_patches``.
    target_fpr : float
    batch_size : int, default=4096
    recorded_auroc : float or None
        The image AUC the benchmark recorded for this cell (x 100), stored beside the
        package's.

    Returns
    -------
    dict
        Threshold, its held-out and test FPR / TPR, image (and pixel) AUC, parity report.

    Raises
    ------
    PackageError
        If the method cannot be packaged, or the exported graphs disagree with the eager
        scores or maps beyond the parity tolerance.
    """
    method, detector, seed = cell["method"], cell["detector"], int(cell["seed"])
    representation, spec = _representation(method, model_path, seed=seed, width=width)
    category = category_from_arrays(load_npz(category_path))
    train = category.train_images
    image_size = int(train.shape[1])
    grid = grid_side(image_size, patch_size, stride)
    dense = embed_patches(
        representation, train, patch_size=patch_size, stride=stride, batch_size=batch_size
    )
    dense_groups = np.repeat(np.arange(len(train)), grid * grid)
    positions = sample_positions(len(train), grid, max_patches=max_fit_patches, seed=seed)
    fit_rows = positions[:, 0] * grid * grid + positions[:, 1] * grid + positions[:, 2]
    fit_features = dense[fit_rows]
    fitted = make_detector(detector, **detector_params).fit(fit_features)
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
            dense_groups,
            detector=detector,
            detector_params=detector_params,
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
    info: dict[str, Any] = {
        "cell": {**cell, "fitset": "train"},
        "detector_params": detector_params,
        "representation": spec,
        "target_fpr": float(target_fpr),
        "threshold_rule": (
            f"image score (max of the patch-score map) > threshold; threshold = "
            f"{1 - target_fpr:g} quantile of the image scores of the {len(train)} training "
            f"images, each scored by a detector fitted without its patches ({folds} folds)"
        ),
        "anomaly_map": {
            "size": [image_size, image_size],
            "of": "the model input (the whole image resized to image_size x image_size)",
            "display_range": _display_range(
                upsample_score_maps(
                    held_out_maps,
                    patch_size=patch_size,
                    stride=stride,
                    sigma=sigma,
                    normalize=normalize,
                ),
                threshold,
            ),
        },
    }
    package = PackagedPatchDetector(
        representation=representation,
        detector=fitted,
        image_size=image_size,
        patch_size=patch_size,
        stride=stride,
        sigma=sigma,
        normalize=normalize,
        threshold=threshold,
        info=info,
        batch_size=batch_size,
    )
    test = package.score(category.test_images)
    labels = category.test_labels
    metrics: dict[str, Any] = {
        "threshold": threshold,
        "threshold_is_max_of_held_out": few,
        "heldout_fpr": float(np.mean(held_out > threshold)),
        **{f"test_{k}": v for k, v in rates(test.scores, labels, threshold).items()},
        "image_auroc": auroc(test.scores, labels),
        "n_fit_patches": int(len(fit_features)),
        "n_train_images": int(len(train)),
        "n_test": int(len(labels)),
    }
    if category.test_masks is not None:
        truth = (category.test_masks > 0).ravel().astype(np.int8)
        metrics["pixel_auroc"] = auroc(test.maps.ravel(), truth)
    if recorded_auroc is not None:
        metrics["image_auroc_recorded"] = float(recorded_auroc)
    info["metrics"] = metrics

    out_dir = Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    package.save(out_dir)
    rng = np.random.default_rng(seed)
    sample = category.test_images[np.sort(rng.permutation(labels.size)[:PARITY_IMAGES])]
    report = _export_and_check(package, sample, out_dir, seed=seed)
    info.update(report)
    package.save(out_dir)  # with the export and parity reports
    failed = [name for name, part in report["parity"].items() if not part["ok"]]
    if failed:
        raise PackageError(f"exported graphs disagree with the eager model: {report['parity']}")
    flat = {
        f"parity_{part}_{name}": diff
        for part, values in report["parity"].items()
        for name, diff in values["max_abs_diff"].items()
    }
    return {**metrics, **flat}


def _export_and_check(
    package: PackagedPatchDetector, sample: np.ndarray, out_dir: Path, *, seed: int
) -> dict[str, Any]:
    """Export the graphs (when they fit) and compare scores and maps with the eager path."""
    reloaded = PackagedPatchDetector.load(out_dir, batch_size=package.batch_size)
    others: dict[str, Any] = {"package_reloaded": lambda x: _pair(reloaded.score(x))}
    graph = package.graph()
    size = buffer_bytes(graph.detector)
    if size <= MAX_EXPORT_BYTES:
        export_torchscript(graph, sample[:2], out_dir / "model.ts")
        export_onnx(graph, sample[:2], out_dir / "model.onnx", output_names=MAP_OUTPUTS)
        others["torchscript"] = torchscript_patch_scorer(out_dir / "model.ts")
        others["onnx"] = onnx_patch_scorer(out_dir / "model.onnx")
        export = {
            "files": ["model.ts", "model.onnx"],
            "inputs": "images: uint8 (n, image_size, image_size, 3), the resized image",
            "outputs": "score: float64 (n,) image anomaly score; anomaly_map: float32 "
            "(n, image_size, image_size)",
        }
    else:
        export = {
            "files": [],
            "skipped": f"the detector's fit set takes {size:,} bytes, over the export limit "
            f"of {MAX_EXPORT_BYTES:,} (ONNX files stop at 2 GB); set mvtec.embed."
            "max_fit_patches lower to export, or score with the eager package",
        }
    eager = _remember(lambda x: _pair(package.score(x)))
    others = {name: _remember(fn) for name, fn in others.items()}
    parity = {}
    for part, index in (("score", 0), ("map", 1)):
        report = check_parity(
            sample,
            lambda x, i=index: eager(x)[i],
            {name: (lambda x, f=fn, i=index: f(x)[i]) for name, fn in others.items()},
            seed=seed,
        )
        parity[part] = {
            "n_images": int(len(sample)),
            "tolerance": report.tolerance,
            "max_abs_diff": report.max_abs_diff,
            "ok": report.ok,
        }
    return {"export": export, "parity": parity}


def _pair(result: PatchResult) -> tuple[np.ndarray, np.ndarray]:
    return result.scores, result.maps


def _remember(score: PatchScorer) -> PatchScorer:
    """``score`` computed once per distinct batch: the score and map checks share the runs."""
    seen: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def remembered(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = hashlib.sha1(np.ascontiguousarray(images).tobytes(), usedforsecurity=False).digest()
        if key not in seen:
            seen[key] = score(images)
        return seen[key]

    return remembered
