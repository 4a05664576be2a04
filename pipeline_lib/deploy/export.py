"""The representation and a fitted detector as one graph: TorchScript, ONNX, and the parity check.

Why one graph: a production line wants one file that maps pixels to a score, runnable
without this project (ONNX: with onnxruntime alone, no torch). Every detector of the
benchmark is a thin module holding what it stored at fit time as buffers and calling the
detector's own scoring kernel (:mod:`pipeline_lib.detection.detectors.kernels`, the function
``score_samples`` runs block by block) on the whole batch at once:

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
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from pipeline_lib.detection.detectors.kernels import (
    gaussian_score,
    gaussian_state,
    kde_score,
    kde_state,
    knn_score,
    knn_state,
    normalize_rows,
    rbf_expansion,
    rbf_expansion_state,
)

#: ONNX operator set; 17 has every operator used (TopK, ReduceLogSumExp, ...).
ONNX_OPSET = 17
#: Parity tolerance: two implementations agree when every score differs by at most
#: ``PARITY_RTOL * (score range of the eager scores) + PARITY_ATOL``. Relative to the range,
#: because detector scores live on very different scales (a KDE score ~0.1, a GDE
#: log-density ~100s); 1e-4 of the range keeps every ranking and threshold decision except
#: near-exact ties.
PARITY_RTOL = 1e-4
PARITY_ATOL = 1e-6
#: Largest detector constant exported (bytes of its buffers); ONNX files stop at 2 GB.
MAX_EXPORT_BYTES = 1 << 30


def _f64(array: Any) -> torch.Tensor:
    return torch.as_tensor(np.asarray(array, dtype=np.float64))


class KernelGraph(nn.Module):
    """A detector's scoring kernel over its fitted state, the kernel the detector scores with.

    The state's tensors become buffers (they travel with the module into TorchScript and
    ONNX), its numbers plain attributes (traced as constants).
    """

    def __init__(
        self,
        kernel: Callable[[torch.Tensor, Any], torch.Tensor],
        state: tuple,
        *,
        normalize: bool,
    ) -> None:
        super().__init__()
        self.kernel = kernel
        self.state_type = type(state)
        self.normalize = normalize
        for name, value in state._asdict().items():  # type: ignore[attr-defined]
            if isinstance(value, torch.Tensor):
                self.register_buffer(name, value)
            else:
                setattr(self, name, value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.normalize:
            x = normalize_rows(x)
        fields = self.state_type._fields  # type: ignore[attr-defined]
        return self.kernel(x, self.state_type(*(getattr(self, name) for name in fields)))


class KDEGraph(KernelGraph):
    """KernelDensityScore: :func:`~pipeline_lib.detection.detectors.kernels.kde_score`."""

    def __init__(self, detector: Any) -> None:
        state = kde_state(detector.fit_features_, detector.center_, detector.gamma_)
        super().__init__(kde_score, state, normalize=bool(detector.normalize))


class GDEGraph(KernelGraph):
    """GaussianDensity: :func:`~pipeline_lib.detection.detectors.kernels.gaussian_score`."""

    def __init__(self, detector: Any) -> None:
        gmm = detector.gmm_
        state = gaussian_state(gmm.means_[0], gmm.precisions_cholesky_[0], gmm.weights_[0])
        super().__init__(gaussian_score, state, normalize=bool(detector.normalize))


class KNNGraph(KernelGraph):
    """KNNCosine: :func:`~pipeline_lib.detection.detectors.kernels.knn_score` (cosine: rows
    always normalised)."""

    def __init__(self, detector: Any) -> None:
        state = knn_state(detector.fit_features_, detector.n_neighbors)
        super().__init__(knn_score, state, normalize=True)


class RBFSVMGraph(KernelGraph):
    """RBFOneClassSVM: :func:`~pipeline_lib.detection.detectors.kernels.rbf_expansion`."""

    def __init__(self, detector: Any) -> None:
        svm = detector.svm_
        state = rbf_expansion_state(svm.support_vectors_, svm.dual_coef_[0], detector.gamma_)
        super().__init__(rbf_expansion, state, normalize=bool(detector.normalize))


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
            x = normalize_rows(x)
        return x @ self.weight


#: Detector class name -> its graph (class names: the graphs read the fitted attributes).
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


#: What a loaded graph computes on uint8 images: one array (an image graph's normality) or a
#: tuple of arrays (a patch graph's scores and maps).
Scorer = Callable[[np.ndarray], Any]


def _numpy(output: torch.Tensor | tuple[torch.Tensor, ...]) -> Any:
    if isinstance(output, tuple | list):
        return tuple(part.numpy() for part in output)
    return output.numpy()


def _in_calls_of(run: Scorer, images_per_call: int | None) -> Scorer:
    """``run`` on at most ``images_per_call`` images a call, the outputs concatenated."""
    if images_per_call is None:
        return run

    def score(images: np.ndarray) -> Any:
        parts = [
            run(images[i : i + images_per_call]) for i in range(0, len(images), images_per_call)
        ]
        if isinstance(parts[0], tuple):
            return tuple(np.concatenate(column) for column in zip(*parts, strict=True))
        return np.concatenate(parts)

    return score


def torchscript_scorer(path: str | os.PathLike, *, images_per_call: int | None = None) -> Scorer:
    """Load a saved TorchScript graph; returns ``images -> outputs`` on NumPy arrays.

    ``images_per_call`` bounds the images of one forward pass (a patch graph holds every
    patch of its batch at once); None runs the whole batch.
    """
    module = load_torchscript(path)

    def run(images: np.ndarray) -> Any:
        with torch.no_grad():
            output = module(torch.from_numpy(np.ascontiguousarray(images)))
        return _numpy(output)

    return _in_calls_of(run, images_per_call)


def onnx_scorer(path: str | os.PathLike, *, images_per_call: int | None = None) -> Scorer:
    """Load an ONNX graph in onnxruntime (CPU); returns ``images -> outputs`` (as above)."""
    session = onnx_session(path)

    def run(images: np.ndarray) -> Any:
        outputs = session.run(None, {"images": np.ascontiguousarray(images, dtype=np.uint8)})
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    return _in_calls_of(run, images_per_call)


def buffer_bytes(module: nn.Module) -> int:
    """Bytes of a module's buffers and parameters (what an export embeds as constants)."""
    tensors = [*module.buffers(), *module.parameters()]
    return int(sum(t.numel() * t.element_size() for t in tensors))


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
    eager: Scorer,
    others: dict[str, Scorer],
    *,
    parts: Sequence[str] | None = None,
    seed: int = 0,
) -> dict[str, ParityReport]:
    """Score ``images`` with every implementation, in order and in a permuted order.

    Why permuted: an exported graph that mixes rows (BatchNorm in training mode, a
    reduction over the wrong axis) gives scores that depend on the batch; reversing and
    shuffling the batch catches that. Each implementation scores the same images once in
    the given order and once in a seeded random permutation (outputs put back in order).

    Parameters
    ----------
    images : ndarray of shape (n, s, s, 3), uint8
        At least 2 images.
    eager : callable
        The reference (the pipeline's own code path): one array, or with several ``parts``
        a tuple of arrays (rows first).
    others : dict of str to callable
        Implementations to compare, returning what ``eager`` returns.
    parts : sequence of str, optional
        Names of the outputs (several: the scorers return a tuple); None: one output.
    seed : int, default=0
        Seed of the permutation.

    Returns
    -------
    dict of str to ParityReport
        One per part (``parts``; the single key ``"output"`` without).
    """
    names = tuple(parts) if parts is not None else ("output",)

    def run(score: Scorer, batch: np.ndarray) -> tuple[np.ndarray, ...]:
        output = score(batch)
        return tuple(output) if len(names) > 1 else (output,)

    order = np.random.default_rng(seed).permutation(len(images))
    inverse = np.argsort(order)
    outputs = {"eager": (run(eager, images), run(eager, images[order]))}
    outputs |= {name: (run(fn, images), run(fn, images[order])) for name, fn in others.items()}
    reports = {}
    for k, part in enumerate(names):
        reference = np.asarray(outputs["eager"][0][k], np.float64)
        spread = float(reference.max() - reference.min()) if len(reference) else 0.0
        diffs: dict[str, float] = {}
        for name, (direct, permuted) in outputs.items():
            back = np.asarray(permuted[k], np.float64)[inverse]
            if name != "eager":
                diffs[name] = float(np.max(np.abs(np.asarray(direct[k], np.float64) - reference)))
            diffs[f"{name}_permuted"] = float(np.max(np.abs(back - reference)))
        reports[part] = ParityReport(
            tolerance=PARITY_RTOL * spread + PARITY_ATOL, max_abs_diff=diffs
        )
    return reports
