"""An MVTec patch cell as one graph: uint8 images -> image anomaly score and anomaly map.

The whole map pipeline is static tensor algebra, so it is exported, not only the image
score: dense patches are one ``index_select`` with a precomputed pixel index (the
``unfold`` view of :func:`pipeline_lib.mvtec.patches.map_patches`, written as a gather
because ONNX has no ``unfold``), the representation's ``f`` embeds them, the detector graph
of :mod:`pipeline_lib.deploy.export` scores them, the image score is the map's maximum
(:func:`pipeline_lib.mvtec.localize.image_scores`) and the up-sampling is the separable
Gaussian transposed convolution ``U M U^T`` of
:func:`pipeline_lib.mvtec.localize.upsample_score_maps`, with its normalisation.

Outputs: ``score`` float64 ``(n,)`` (anomaly, higher = more anomalous) and ``anomaly_map``
float32 ``(n, size, size)``. The graph holds the detector's fit set as a constant (a KDE
keeps every fit patch): above :data:`MAX_EXPORT_BYTES` nothing is exported (an ONNX file
cannot exceed 2 GB) and the package says so; the eager scorer still works. Memory of one
forward pass: every patch of the batch at once (``n * grid^2`` patches; 40 MB of pixels per
256 x 256 image at the paper's 57 x 57 grid, and the network's activations for 3,249
patches), so exported graphs are best fed a few images at a time, as the loaders here do
(:data:`IMAGES_PER_CALL`). The batch dimension stays free (traced on two images).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from pipeline_lib.deploy.export import load_torchscript, onnx_session
from pipeline_lib.mvtec.localize import grid_side, upsampling_matrix

#: Largest detector constant exported (bytes of its buffers); ONNX files stop at 2 GB.
MAX_EXPORT_BYTES = 1 << 30


def patch_pixel_index(image_size: int, patch_size: int, stride: int) -> np.ndarray:
    """Flat pixel index ``(grid^2 * p * p,)``: patch ``g = r * grid + c``, row-major inside."""
    grid = grid_side(image_size, patch_size, stride)
    starts = np.arange(grid) * stride
    inside = np.arange(patch_size)
    rows = starts[:, None, None, None] + inside[None, None, :, None]  # (grid, 1, p, 1)
    cols = starts[None, :, None, None] + inside[None, None, None, :]  # (1, grid, 1, p)
    return (rows * image_size + cols).reshape(-1).astype(np.int64)


def buffer_bytes(module: nn.Module) -> int:
    """Bytes of a module's buffers and parameters (what an export embeds as constants)."""
    tensors = [*module.buffers(), *module.parameters()]
    return int(sum(t.numel() * t.element_size() for t in tensors))


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


#: Names of the graph's outputs (ONNX), in :meth:`PatchScoringGraph.forward`'s order.
MAP_OUTPUTS = ("score", "anomaly_map")

PatchScorer = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


#: Images per call of the loaders below: every patch of a call goes through the graph at
#: once, so memory grows with it; 3 (not the 2 of the trace) also checks the free batch
#: dimension and, in the parity check's permuted order, that rows do not mix.
IMAGES_PER_CALL = 3


def _in_small_batches(run: PatchScorer) -> PatchScorer:
    def score(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        step = IMAGES_PER_CALL
        parts = [run(images[i : i + step]) for i in range(0, len(images), step)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    return score


def torchscript_patch_scorer(path: str | os.PathLike) -> PatchScorer:
    """Load a saved patch graph; ``images -> (scores, maps)``, :data:`IMAGES_PER_CALL` a call."""
    module = load_torchscript(path)

    def run(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            scores, maps = module(torch.from_numpy(np.ascontiguousarray(images)))
        return scores.numpy(), maps.numpy()

    return _in_small_batches(run)


def onnx_patch_scorer(path: str | os.PathLike) -> PatchScorer:
    """Load a patch graph in onnxruntime (CPU); ``images -> (scores, maps)``, in small batches."""
    session = onnx_session(path)

    def run(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        scores, maps = session.run(None, {"images": np.ascontiguousarray(images, dtype=np.uint8)})
        return scores, maps

    return _in_small_batches(run)
