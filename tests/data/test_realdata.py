"""Real data sets (CIFAR-10 via DROC_DATA_ROOT, Debian's Fashion-MNIST); skipped when absent."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from pipeline_lib.data import load_dataset
from pipeline_lib.data.mnist import DEBIAN_FMNIST_DIR, IDX_FILES

pytestmark = pytest.mark.realdata


def test_real_cifar10():
    root = os.environ.get("DROC_DATA_ROOT", "")
    if not root or not (Path(root) / "cifar-10-batches-py").is_dir():
        pytest.skip(
            "real CIFAR-10 absent: set DROC_DATA_ROOT to a folder holding cifar-10-batches-py "
            '(the standard pickle layout: docs/usage.md, "Data")'
        )
    data = load_dataset("cifar10", root=root)
    assert data.train_images.shape == (50000, 32, 32, 3)
    assert data.test_images.shape == (10000, 32, 32, 3)
    assert np.bincount(data.train_labels).tolist() == [5000] * 10
    assert np.bincount(data.test_labels).tolist() == [1000] * 10
    assert data.class_names[0] == "airplane"
    assert 100 < data.train_images.mean() < 150  # natural images, not blank


def test_real_fmnist_debian(tmp_path):
    present = all(
        (DEBIAN_FMNIST_DIR / stem).is_file() or (DEBIAN_FMNIST_DIR / f"{stem}.gz").is_file()
        for stem in IDX_FILES.values()
    )
    if not present:
        pytest.skip(
            f"Fashion-MNIST absent from {DEBIAN_FMNIST_DIR} (apt-get install dataset-fashion-mnist)"
        )
    data = load_dataset("fmnist", root=tmp_path)  # empty root: falls back to the Debian copy
    assert data.train_images.shape == (60000, 32, 32, 3)
    assert data.test_images.shape == (10000, 32, 32, 3)
    assert np.bincount(data.train_labels).tolist() == [6000] * 10
    assert np.bincount(data.test_labels).tolist() == [1000] * 10
    assert data.train_images[:, :2].max() == 0  # zero padding rows
    assert data.class_names[-1] == "ankle_boot"
