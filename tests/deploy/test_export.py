"""Export parity: eager pipeline scores = pyfunc = TorchScript = ONNX, in any batch order."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch

from pipeline_lib.deploy.export import PARITY_RTOL, detector_graph, onnx_scorer, torchscript_scorer
from pipeline_lib.deploy.image_package import PackagedDetector
from pipeline_lib.deploy.mlflow_model import model_arguments
from pipeline_lib.detection.detectors import make_detector
from pipeline_lib.runtime.io import load_image_dataset
from tests.deploy.conftest import make_package, png_bytes


@pytest.mark.parametrize("name", ["kde", "gde", "knn", "ocsvm", "ocsvm_linear"])
def test_detector_graph_equals_score_samples(name: str) -> None:
    rng = np.random.default_rng(1)
    fit = rng.normal(size=(150, 12)).astype(np.float32)
    test = rng.normal(size=(40, 12)).astype(np.float32)
    params = {"n_neighbors": 3} if name == "knn" else {}
    detector = make_detector(name, **params).fit(fit)
    expected = detector.score_samples(test)
    graph = detector_graph(detector)
    got = graph(torch.from_numpy(test).double()).numpy()
    order = rng.permutation(len(test))
    got_permuted = graph(torch.from_numpy(test[order]).double()).numpy()[np.argsort(order)]
    tolerance = PARITY_RTOL * np.ptp(expected)
    assert np.max(np.abs(got - expected)) <= tolerance
    assert np.max(np.abs(got_permuted - expected)) <= tolerance


def _pyfunc_model(package_dir: Path, model_dir: Path) -> mlflow.pyfunc.PyFuncModel:
    # As deploy.mlflow_model.log_and_register logs it: from code, requirements pinned (left out,
    # MLflow infers them in a subprocess that imports the model, most of this test's time).
    mlflow.pyfunc.save_model(str(model_dir), **model_arguments(package_dir))
    assert not list(model_dir.rglob("*.pkl")), "the logged model holds a pickle"
    return mlflow.pyfunc.load_model(str(model_dir))


def _pyfunc_scores(model: mlflow.pyfunc.PyFuncModel, images: np.ndarray) -> np.ndarray:
    frame = pd.DataFrame(
        {
            "name": [str(i) for i in range(len(images))],
            "image": [base64.b64encode(png_bytes(image)).decode() for image in images],
        }
    )
    answer = model.predict(frame)
    assert list(answer["error"]) == [""] * len(images)
    assert list(answer["name"]) == [str(i) for i in range(len(images))]
    return answer["score"].to_numpy(dtype=np.float64)


@pytest.mark.parametrize("detector", ["kde", "ocsvm"])
def test_eager_pyfunc_torchscript_onnx_agree_in_any_order(
    detector: str, digits_cell: dict[str, Path], tmp_path: Path
) -> None:
    package_dir = tmp_path / "package"
    record = make_package(digits_cell, package_dir, detector)
    # The package scores the test images from pixels exactly as the pipeline did from features.
    assert record["auroc_pixels"] == pytest.approx(record["auroc_features"], abs=1e-9)
    assert record["max_abs_diff_pixels_vs_features"] < 1e-9
    stored = json.loads((package_dir / "package.json").read_text())
    assert stored["parity"]["n_images"] == 64
    assert max(stored["parity"]["max_abs_diff"].values()) <= stored["parity"]["tolerance"]

    package = PackagedDetector.load(package_dir)
    images = load_image_dataset(digits_cell["dataset"]).test_images[::12]  # 50, both classes
    eager = package.anomaly_scores(images)
    tolerance = PARITY_RTOL * np.ptp(eager) + 1e-6
    pyfunc_model = _pyfunc_model(package_dir, tmp_path / "pyfunc")
    order = np.random.default_rng(3).permutation(len(images))
    back = np.argsort(order)
    implementations = {
        "pyfunc": lambda x: _pyfunc_scores(pyfunc_model, x),
        "torchscript": lambda x: -torchscript_scorer(package_dir / "model.ts")(x),
        "onnx": lambda x: -onnx_scorer(package_dir / "model.onnx")(x),
    }
    for name, score in implementations.items():
        direct = score(images)
        permuted = score(images[order])[back]
        assert np.max(np.abs(direct - eager)) <= tolerance, name
        assert np.max(np.abs(permuted - eager)) <= tolerance, name
        # Same decisions at the package threshold, except scores within tolerance of it.
        clear = np.abs(eager - package.threshold) > tolerance
        assert np.array_equal(
            (direct > package.threshold)[clear], (eager > package.threshold)[clear]
        )
