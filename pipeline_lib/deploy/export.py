"""The representation and a fitted detector as one graph: TorchScript, ONNX, and the parity check.

Why one graph: a production line wants one file that maps pixels to a score, runnable
without this project (ONNX: with onnxruntime alone, no torch). Every detector of the
benchmark is rewritten as matrix products over what it stored at fit time:

=================  ===================================================================
detector           graph (``x`` the L2-normalised feature, float64)
=================  ===================================================================
``kde``            ``(1/g) logsumexp(-g ||x - y_j||^2)`` over the fit features ``y``
``gde``            ``log N(x; mu, Sigma)`` via the precision Cholesky factor
``knn``            mean of the ``k`` largest ``<x, y_j>`` (``topk`` of one product)
``ocsvm``          ``sum_i a_i exp(-g ||x - s_i||^2)``: the RBF kernel expansion over the
                   support vectors ``s_i`` with dual coefficients ``a_i``
``ocsvm_linear``   ``x . w`` with ``w = sum_i a_i s_i``
=================  ===================================================================

The graph takes uint8 images ``(n, s, s, 3)`` (the training resolution; decoding and
resizing happen before, in :mod:`pipeline_lib.deploy.images`, because file formats and sizes
vary) and returns the detector's normality score (``score_samples``, higher = more normal)
as float64 ``(n,)``. The representation runs in float32 as in training; the detector part in
float64, so the only differences to the eager pipeline are float32 kernel choices.

ONNX export uses torch's TorchScript-based exporter (``torch.onnx.export(..., dynamo=False)``):
with torch 2.14 the dynamo exporter needs the extra package ``onnxscript``, while the
TorchScript-based one works offline with ``onnx`` alone.
"""

from __future__ import annotations

import io
import math
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

#: Squared-norm floor of the L2 normalisation (as ``pipeline_lib.detection.detectors._common``).
NORM_EPS_SQ = 1e-12
#: ONNX operator set; 17 has every operator used (TopK, ReduceLogSumExp, ...).
ONNX_OPSET = 17
#: Parity tolerance: two implementations agree when every score differs by at most
#: ``PARITY_RTOL * (score range of the eager scores) + PARITY_ATOL``. Relative to the range,
#: because detector scores live on very different scales (a KDE score ~0.1, a GDE
#: log-density ~100s); 1e-4 of the range keeps every ranking and threshold decision except
#: near-exact ties.
PARITY_RTOL = 1e-4
PARITY_ATOL = 1e-6


def _f64(array: Any) -> torch.Tensor:
    return torch.as_tensor(np.asarray(array, dtype=np.float64))


def _normalize(x: torch.Tensor) -> torch.Tensor:
    sq = (x * x).sum(dim=1, keepdim=True)
    return x * torch.rsqrt(torch.clamp(sq, min=NORM_EPS_SQ))


class KDEGraph(nn.Module):
    """KernelDensityScore as one distance matrix + logsumexp."""

    def __init__(self, detector: Any) -> None:
        super().__init__()
        self.normalize = bool(detector.normalize)
        self.gamma = float(detector.gamma_)
        center = np.asarray(detector.center_, np.float64)
        ref = np.asarray(detector.fit_features_, np.float64) - center
        self.register_buffer("center", _f64(center))
        self.register_buffer("ref", _f64(ref))
        self.register_buffer("ref_sq", _f64((ref * ref).sum(axis=1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.normalize:
            x = _normalize(x)
        xc = x - self.center
        d2 = (xc * xc).sum(dim=1, keepdim=True) + self.ref_sq[None, :] - 2.0 * (xc @ self.ref.T)
        d2 = torch.clamp(d2, min=0.0)
        return torch.logsumexp(d2 * (-self.gamma), dim=1) / self.gamma


class GDEGraph(nn.Module):
    """GaussianDensity: ``log N(x)`` from the precision factor."""

    def __init__(self, detector: Any) -> None:
        super().__init__()
        gmm = detector.gmm_
        self.normalize = bool(detector.normalize)
        chol = np.asarray(gmm.precisions_cholesky_[0], np.float64)  # (d, d)
        mean = np.asarray(gmm.means_[0], np.float64)
        d = mean.shape[0]
        self.const = float(
            np.log(np.diag(chol)).sum() - 0.5 * d * math.log(2 * math.pi) + np.log(gmm.weights_[0])
        )
        self.register_buffer("chol", _f64(chol))
        self.register_buffer("shift", _f64(mean @ chol))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.normalize:
            x = _normalize(x)
        y = x @ self.chol - self.shift
        return self.const - 0.5 * (y * y).sum(dim=1)


class KNNGraph(nn.Module):
    """KNNCosine: top-k of one cosine-similarity product."""

    def __init__(self, detector: Any) -> None:
        super().__init__()
        self.k = int(detector.n_neighbors)
        self.register_buffer("ref", _f64(detector.fit_features_))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sim = _normalize(x) @ self.ref.T
        return torch.topk(sim, self.k, dim=1).values.mean(dim=1)


class RBFSVMGraph(nn.Module):
    """RBFOneClassSVM: kernel expansion over support vectors."""

    def __init__(self, detector: Any) -> None:
        super().__init__()
        svm = detector.svm_
        self.normalize = bool(detector.normalize)
        self.gamma = float(detector.gamma_)
        sv = np.asarray(svm.support_vectors_, np.float64)
        self.register_buffer("sv", _f64(sv))
        self.register_buffer("sv_sq", _f64((sv * sv).sum(axis=1)))
        self.register_buffer("alpha", _f64(np.asarray(svm.dual_coef_, np.float64)[0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.normalize:
            x = _normalize(x)
        d2 = (x * x).sum(dim=1, keepdim=True) + self.sv_sq[None, :] - 2.0 * (x @ self.sv.T)
        return torch.exp(torch.clamp(d2, min=0.0) * (-self.gamma)) @ self.alpha


class LinearSVMGraph(nn.Module):
    """LinearOneClassSVM: one dot product with ``w``."""

    def __init__(self, detector: Any) -> None:
        super().__init__()
        svm = detector.svm_
        self.normalize = bool(detector.normalize)
        weight = np.asarray(svm.dual_coef_, np.float64)[0] @ np.asarray(
            svm.support_vectors_, np.float64
        )
        self.register_buffer("weight", _f64(weight))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.normalize:
            x = _normalize(x)
        return x @ self.weight


#: Detector class name -> its graph (class names, so this module imports no detector code).
_GRAPHS: dict[str, type[nn.Module]] = {
    "KernelDensityScore": KDEGraph,
    "GaussianDensity": GDEGraph,
    "KNNCosine": KNNGraph,
    "RBFOneClassSVM": RBFSVMGraph,
    "LinearOneClassSVM": LinearSVMGraph,
}


def detector_graph(detector: Any) -> nn.Module:
    """The torch module computing ``detector.score_samples`` on float64 features.

    Raises
    ------
    ValueError
        If the detector class has no graph form (the message lists those that do).
    """
    name = type(detector).__name__
    if name not in _GRAPHS:
        raise ValueError(f"no graph export for detector class {name}; supported: {sorted(_GRAPHS)}")
    return _GRAPHS[name](detector)


class ScoringGraph(nn.Module):
    """uint8 images ``(n, s, s, 3)`` -> normality scores float64 ``(n,)``: ``f`` then detector.

    Parameters
    ----------
    backbone : nn.Module
        The representation's ``f`` (images in [0, 1], ``(n, 3, s, s)`` -> ``(n, d)``), in
        inference mode.
    detector : nn.Module
        From :func:`detector_graph`.
    """

    def __init__(self, backbone: nn.Module, detector: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone.eval()
        self.detector = detector.eval()

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images.permute(0, 3, 1, 2).to(torch.float32) / 255.0
        return self.detector(self.backbone(x).to(torch.float64))


def export_torchscript(graph: nn.Module, example: np.ndarray, path: str | os.PathLike) -> Path:
    """Trace ``graph`` on ``example`` (uint8 images) and save it; returns the path.

    Tracing (not scripting): the graph has no data-dependent control flow, and the traced
    program keeps the batch dimension free (checked by the parity check's other batch
    sizes).
    """
    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
        # torch 2.14 marks torch.jit deprecated (FutureWarning) but ships it; the file is
        # what the issue asks for, and loading it needs no Python code of this project.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", FutureWarning)
        traced = torch.jit.trace(graph.eval(), torch.from_numpy(example), check_trace=False)
        torch.jit.save(traced, str(path))
    return Path(path)


def export_onnx(
    graph: nn.Module,
    example: np.ndarray,
    path: str | os.PathLike,
    *,
    output_names: Sequence[str] = ("normality",),
) -> Path:
    """Export ``graph`` to ONNX (input ``images`` uint8, outputs ``output_names``).

    The batch dimension of the input and of every output is dynamic. Uses the
    TorchScript-based exporter (``dynamo=False``), see the module docstring.
    """
    buffer = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            graph.eval(),
            (torch.from_numpy(example),),
            buffer,
            dynamo=False,
            input_names=["images"],
            output_names=list(output_names),
            dynamic_axes={name: {0: "n"} for name in ("images", *output_names)},
            opset_version=ONNX_OPSET,
        )
    Path(path).write_bytes(buffer.getvalue())
    return Path(path)


def load_torchscript(path: str | os.PathLike) -> torch.jit.ScriptModule:
    """A saved TorchScript graph on the CPU, in inference mode."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit is deprecated, still works
        return torch.jit.load(str(path), map_location="cpu").eval()


def onnx_session(path: str | os.PathLike) -> Any:
    """An onnxruntime session of a saved graph on the CPU (only errors logged)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def torchscript_scorer(path: str | os.PathLike) -> Callable[[np.ndarray], np.ndarray]:
    """Load a saved TorchScript graph; returns ``images -> normality`` on NumPy arrays."""
    module = load_torchscript(path)

    def score(images: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return module(torch.from_numpy(np.ascontiguousarray(images))).numpy()

    return score


def onnx_scorer(path: str | os.PathLike) -> Callable[[np.ndarray], np.ndarray]:
    """Load an ONNX graph in onnxruntime (CPU); returns ``images -> normality``."""
    session = onnx_session(path)

    def score(images: np.ndarray) -> np.ndarray:
        return session.run(None, {"images": np.ascontiguousarray(images, dtype=np.uint8)})[0]

    return score


@dataclass(frozen=True)
class ParityReport:
    """Largest score differences of each implementation against the eager reference.

    Attributes
    ----------
    tolerance : float
        ``PARITY_RTOL * range + PARITY_ATOL`` of the eager scores.
    max_abs_diff : dict of str to float
        Per implementation (``"pyfunc"``, ``"torchscript"``, ``"onnx"``, and
        ``"<name>_permuted"`` for the scores of the reversed batch put back in order).
    """

    tolerance: float
    max_abs_diff: dict[str, float]

    @property
    def ok(self) -> bool:
        return all(diff <= self.tolerance for diff in self.max_abs_diff.values())

    def describe(self) -> str:
        parts = ", ".join(f"{name} {diff:.3g}" for name, diff in self.max_abs_diff.items())
        return f"max |score - eager|: {parts} (tolerance {self.tolerance:.3g})"


def check_parity(
    images: np.ndarray,
    eager: Callable[[np.ndarray], np.ndarray],
    others: dict[str, Callable[[np.ndarray], np.ndarray]],
    *,
    seed: int = 0,
) -> ParityReport:
    """Score ``images`` with every implementation, in order and in a permuted order.

    Why permuted: an exported graph that mixes rows (BatchNorm in training mode, a
    reduction over the wrong axis) gives scores that depend on the batch; reversing and
    shuffling the batch catches that. Each implementation scores the same images once in
    the given order and once in a seeded random permutation (scores put back in order).

    Parameters
    ----------
    images : ndarray of shape (n, s, s, 3), uint8
        At least 2 images.
    eager : callable
        The reference (the pipeline's own code path).
    others : dict of str to callable
        Implementations to compare.
    seed : int, default=0
        Seed of the permutation.

    Returns
    -------
    ParityReport
    """
    reference = np.asarray(eager(images), np.float64)
    spread = float(reference.max() - reference.min()) if len(reference) else 0.0
    tolerance = PARITY_RTOL * spread + PARITY_ATOL
    order = np.random.default_rng(seed).permutation(len(images))
    inverse = np.argsort(order)
    diffs: dict[str, float] = {}
    permuted_eager = np.asarray(eager(images[order]), np.float64)[inverse]
    diffs["eager_permuted"] = float(np.max(np.abs(permuted_eager - reference)))
    for name, score in others.items():
        direct = np.asarray(score(images), np.float64)
        permuted = np.asarray(score(images[order]), np.float64)[inverse]
        diffs[name] = float(np.max(np.abs(direct - reference)))
        diffs[f"{name}_permuted"] = float(np.max(np.abs(permuted - reference)))
    return ParityReport(tolerance=tolerance, max_abs_diff=diffs)
