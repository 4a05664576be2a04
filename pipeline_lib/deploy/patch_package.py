"""The MVTec patch package (``kind: patch``): a score, a verdict and an anomaly map per image.

Every image is resized whole to ``image_size`` x ``image_size`` (``resize: stretch``, as the
MVTec reader), its dense ``patch_size`` patches at ``stride`` are embedded and scored by the
detector fitted on the category's training patches, the image score is the maximum of the
patch-score map and the anomaly map is the Gaussian up-sampling of that map
(:mod:`pipeline_lib.mvtec.localize`, ``sigma`` and ``normalize`` as configured). How an
MVTec cell becomes such a package is :mod:`pipeline_lib.deploy.patch_protocol`.

**Map size**: the model's input size (``image_size`` x ``image_size``, 256 at the paper's
settings), not the original file's size: the map is defined on the pixels the model saw;
stretching it back to a non-square original is left to the caller (``droc score`` writes
it at the input size).

Exported: the whole map pipeline is static tensor algebra, so ``model.ts`` and
``model.onnx`` hold the whole scoring, map included (:class:`PatchScoringGraph`): dense
patches are one ``index_select`` with a precomputed pixel index (the ``unfold`` view of
:func:`pipeline_lib.mvtec.patches.map_patches`, written as a gather because ONNX has no
``unfold``), the representation's ``f`` embeds them, the detector graph of
:mod:`pipeline_lib.deploy.export` scores them, the image score is the map's maximum and the
up-sampling is the separable Gaussian transposed convolution ``U M U^T`` of
:func:`pipeline_lib.mvtec.localize.upsample_score_maps`, with its normalisation. Outputs:
``score`` float64 ``(n,)`` and ``anomaly_map`` float32 ``(n, size, size)``. Memory of one
forward pass: every patch of the batch at once (``n * grid^2`` patches; 40 MB of pixels per
256 x 256 image at the paper's 57 x 57 grid), so exported graphs are fed
:data:`IMAGES_PER_CALL` images at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from pipeline_lib.deploy.export import detector_graph
from pipeline_lib.deploy.saved_package import SavedPackage
from pipeline_lib.detection.evaluate import to_anomaly_scores
from pipeline_lib.mvtec.localize import (
    grid_side,
    image_scores,
    upsample_score_maps,
    upsampling_matrix,
)
from pipeline_lib.mvtec.patches import PatchOptions, embed_patches

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
        """Image anomaly scores (as the image package's ``anomaly_scores``)."""
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
