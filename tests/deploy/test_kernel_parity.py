"""One scoring kernel per detector: the detector, the explanation and the export agree.

The detector's ``score_samples`` (blocked), the explanation's differentiable score (KDE)
and the exported graph (eager, TorchScript and ONNX) all call the same function of
:mod:`pipeline_lib.detection.detectors.kernels`; what differs is the blocking (sums split
into blocks), the normalisation (NumPy in the detectors, torch in the graphs) and the
export runtime, all rounding. Tolerance: a small multiple of float64 eps times the problem
size ``d + n_ref`` (the matrix products' reduction length plus the number of summed or
compared reference rows), times the scores' magnitude.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from pipeline_lib import explain
from pipeline_lib.deploy import export
from pipeline_lib.deploy.export import (
    ScoringGraph,
    detector_graph,
    export_onnx,
    export_torchscript,
    onnx_scorer,
    torchscript_scorer,
)
from pipeline_lib.detection.detectors import gde, kde, kernels, knn, make_detector, ocsvm

SIDE = 2  # images (n, 2, 2, 3): 12 features per image
#: detector id -> (its kernel, params giving float64 CPU scoring in several blocks).
KERNELS = {
    "kde": (kernels.kde_score, {"dtype": "float64", "device": "cpu", "chunk_size": 7}),
    "ocsvm": (kernels.rbf_expansion, {"dtype": "float64", "device": "cpu", "chunk_size": 7}),
    "gde": (kernels.gaussian_score, {}),
    "knn": (
        kernels.knn_score,
        {"n_neighbors": 3, "dtype": "float64", "device": "cpu", "chunk_size": 7},
    ),
}
DETECTOR_MODULES = {"kde": kde, "ocsvm": ocsvm, "gde": gde, "knn": knn}
GRAPH_CLASSES = {
    "kde": export.KDEGraph,
    "ocsvm": export.RBFSVMGraph,
    "gde": export.GDEGraph,
    "knn": export.KNNGraph,
}


def _features(images: np.ndarray) -> np.ndarray:
    """What :class:`ScoringGraph` feeds the detector with a flattening backbone, float64."""
    pixels = torch.from_numpy(images).permute(0, 3, 1, 2).to(torch.float32) / 255.0
    return pixels.flatten(1).to(torch.float64).numpy()


def _images(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, SIDE, SIDE, 3), dtype=np.uint8)


def _tolerance(detector_name: str, fitted, expected: np.ndarray, d: int) -> float:
    n_ref = {
        "kde": lambda: len(fitted.fit_features_),
        "ocsvm": lambda: len(fitted.svm_.support_vectors_),
        "gde": lambda: d,  # no reference rows: two products of length d
        "knn": lambda: len(fitted.fit_features_),
    }[detector_name]()
    return 16 * np.finfo(np.float64).eps * (d + n_ref) * max(1.0, float(np.abs(expected).max()))


class _Pixels(nn.Module):
    """A representation whose ``f`` is the input itself (one parameter, for its device)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones((), dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"f": x * self.scale}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_path_calls_the_one_kernel(name: str) -> None:
    kernel = KERNELS[name][0]
    # The detector module and the export module hold the kernel object itself, the exported
    # graph of a fitted detector scores through it, and the detector's score_samples (the base
    # class's template) scores through it: the class's kernel, or its _score calls it by name.
    detector_module = DETECTOR_MODULES[name]
    assert getattr(detector_module, kernel.__name__) is kernel
    assert getattr(export, kernel.__name__) is kernel
    detector_class = make_detector(name).__class__
    if hasattr(detector_class, "_kernel"):
        assert detector_class._kernel is kernel
    else:
        assert f"{kernel.__name__}(" in inspect.getsource(detector_class._score)
    fitted = make_detector(name, **KERNELS[name][1]).fit(_features(_images(16, seed=0)))
    assert GRAPH_CLASSES[name](fitted).kernel is kernel
    if name == "kde":
        assert explain.kde_score is kernel
        assert "kde_score(" in inspect.getsource(explain.kde_anomaly_function)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_detector_explanation_and_export_scores_agree(name: str, tmp_path: Path) -> None:
    fit_images, test_images = _images(90, seed=1), _images(31, seed=2)
    fit, test = _features(fit_images), _features(test_images)
    detector = make_detector(name, **KERNELS[name][1]).fit(fit)
    expected = detector.score_samples(test)
    tolerance = _tolerance(name, detector, expected, fit.shape[1])
    assert np.ptp(expected) > 1e3 * tolerance  # the scores are not flat: the check can fail

    paths = {}
    graph = detector_graph(detector)
    with torch.no_grad():
        paths["graph"] = graph(torch.from_numpy(test)).numpy()
    if name in ("kde", "ocsvm", "knn"):  # the blocked walk, in a single block
        paths["detector, one block"] = detector.set_params(chunk_size=4096).score_samples(test)
    if name == "kde":
        score = explain.kde_anomaly_function(_Pixels(), fit)
        with torch.no_grad():
            paths["explanation"] = -score(torch.from_numpy(test)).numpy()
        # ... and its gradient through the kernel's in-place steps is the true one.
        x = torch.from_numpy(test[:3]).requires_grad_(True)
        assert torch.autograd.gradcheck(score, (x,))

    # The exported files: traced on 2 images, run on 31 (the batch dimension stays free).
    scoring = ScoringGraph(nn.Flatten(), graph)
    export_torchscript(scoring, test_images[:2], tmp_path / "model.ts")
    export_onnx(scoring, test_images[:2], tmp_path / "model.onnx")
    paths["torchscript"] = torchscript_scorer(tmp_path / "model.ts")(test_images)
    paths["onnx"] = onnx_scorer(tmp_path / "model.onnx")(test_images)

    for path, scores in paths.items():
        assert scores.shape == expected.shape, path
        assert np.max(np.abs(scores - expected)) <= tolerance, path
