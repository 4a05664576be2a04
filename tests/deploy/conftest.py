"""A small real benchmark cell built in-process (digits, frozen ResNet-18), for deploy tests.

The cell goes through the pipeline's own functions (reader, split, embedding) and leaves
the files the workflow would: ``dataset.npz``, ``split.npz``, ``features.npz``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline_lib.data.digits import read_digits
from pipeline_lib.data.split import one_class_split, save_split
from pipeline_lib.deploy.image_package import PackagedDetector
from pipeline_lib.deploy.image_protocol import ImageProtocol
from pipeline_lib.deploy.packaging import package_cell
from pipeline_lib.detection.detectors import make_detector
from pipeline_lib.models.embed import embed_split
from pipeline_lib.models.representation import build_representation
from pipeline_lib.runtime.io import save_image_dataset, save_npz

REPO = Path(__file__).resolve().parents[2]
WIDTH = 8
SEED = 0
#: Image side of :func:`small_package`.
SMALL_SIZE = 8


def run_fresh_python(args: list[str], *, timeout: float) -> subprocess.CompletedProcess:
    """``python args`` in a fresh process at the repository root (one thread, nothing on its
    path but the repository), its output captured: what the hostile-input tests measure."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def digits_cell(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Files of the cell digits / class 0 / resnet18_random (width 8) / seed 0."""
    folder = tmp_path_factory.mktemp("digits_cell")
    dataset = read_digits()
    split = one_class_split(dataset.train_labels, dataset.test_labels, inlier=0, seed=SEED)
    model = build_representation("resnet18_random", seed=SEED, width=WIDTH)
    features = embed_split(model, dataset, split.train_index, batch_size=128)
    paths = {
        "dataset": folder / "dataset.npz",
        "split": folder / "split.npz",
        "features": folder / "features.npz",
    }
    save_image_dataset(paths["dataset"], dataset)
    save_split(paths["split"], split)
    save_npz(paths["features"], features)
    return paths


def make_package(cell: dict[str, Path], out: Path, detector: str) -> dict:
    """Package the digits cell with ``detector`` (paper defaults) into ``out``."""
    return package_cell(
        out,
        ImageProtocol(
            dataset_path=cell["dataset"],
            split_path=cell["split"],
            features_path=cell["features"],
            max_fit=20000,
        ),
        model_path=None,
        cell={
            "dataset": "digits",
            "inlier": "0",
            "method": "resnet18_random",
            "detector": detector,
            "seed": SEED,
            "contamination": 0.0,
        },
        detector_params={},
        width=WIDTH,
        target_fpr=0.05,
    )


@pytest.fixture(scope="session")
def kde_package(digits_cell: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The digits cell packaged with the KDE detector."""
    out = tmp_path_factory.mktemp("kde_package") / "package"
    make_package(digits_cell, out, "kde")
    return out


def png_bytes(image: np.ndarray) -> bytes:
    """PNG encoding of a uint8 image."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return buffer.getvalue()


def small_package(folder: Path, detector: str = "gde") -> PackagedDetector:
    """Save a small image package (raw pixels, ``detector`` fitted on random 192-d features)."""
    representation = build_representation("raw", seed=0, width=8)
    features = np.random.default_rng(1).normal(size=(30, SMALL_SIZE * SMALL_SIZE * 3))
    package = PackagedDetector(
        representation,
        make_detector(detector).fit(features),
        image_size=SMALL_SIZE,
        threshold=0.5,
        info={"representation": {"kind": "frozen", "method": "raw", "seed": 0, "width": 8}},
    )
    package.save(folder)
    return package
