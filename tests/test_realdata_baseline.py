"""The random-weights ResNet-18 baseline on real data subsets (CIFAR-10, Fashion-MNIST).

The full-size comparison with the paper is `config/experiments/baseline_random.yaml`; these
subsets keep CI fast while still checking that real images go through the whole library
chain and land in the paper's regime (Fashion-MNIST far above chance, CIFAR-10 modestly
above it, linear OC-SVM on unnormalised random features near 50).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from pipeline_lib.data import DataError, load_dataset
from pipeline_lib.data.split import one_class_split
from pipeline_lib.data.subsample import subsample_dataset
from pipeline_lib.detection.runner import run_detection
from pipeline_lib.models.embed import embed_dataset
from pipeline_lib.models.representation import build_representation

pytestmark = pytest.mark.realdata


def _load_or_skip(name: str):
    root = os.environ.get("DROC_DATA_ROOT")
    try:
        return load_dataset(name, root=Path(root) if root else None)
    except DataError as error:
        pytest.skip(f"real {name} not available ({error}); .ci/run provides it")


def _baseline_aucs(name: str, classes: list[str], *, per_class_train: int, per_class_test: int):
    dataset = subsample_dataset(
        _load_or_skip(name),
        max_train_per_class=per_class_train,
        max_test_per_class=per_class_test,
    )
    # A one-class split without contamination fits on its inlier class's training images
    # only: the other classes' training images are not embedded (half the network's work).
    inliers = [dataset.class_names.index(inlier) for inlier in classes]
    fitted = np.isin(dataset.train_labels, inliers)
    dataset = dataclasses.replace(
        dataset,
        train_images=dataset.train_images[fitted],
        train_labels=dataset.train_labels[fitted],
    )
    features = embed_dataset(build_representation("resnet18_random", seed=0), dataset)
    aucs: dict[str, list[float]] = {}
    for inlier in classes:
        split = one_class_split(
            dataset.train_labels,
            dataset.test_labels,
            inlier=dataset.class_names.index(inlier),
            seed=0,
        )
        for detector in ("ocsvm", "kde", "ocsvm_linear"):
            record, _ = run_detection(
                split,
                features,
                fitset="train",
                detector=detector,
                detector_params={},
                max_fit=20000,
                seed=0,
            )
            aucs.setdefault(detector, []).append(record["auroc"])
    return {detector: float(np.mean(values)) for detector, values in aucs.items()}


def test_fashion_mnist_random_resnet_is_far_above_chance() -> None:
    # Paper, full table: OC-SVM 89.8, KDE 89.4, linear OC-SVM 50.3 (all classes, 5 seeds).
    aucs = _baseline_aucs(
        "fmnist", ["trouser", "bag", "sneaker"], per_class_train=100, per_class_test=30
    )
    assert aucs["ocsvm"] > 80 and aucs["kde"] > 80
    assert 35 < aucs["ocsvm_linear"] < 65


def test_cifar10_random_resnet_is_modestly_above_chance() -> None:
    # Paper, full table: OC-SVM 61.2, KDE 60.5, linear OC-SVM 50.1.
    aucs = _baseline_aucs(
        "cifar10", ["automobile", "ship", "truck"], per_class_train=100, per_class_test=30
    )
    assert 50 < aucs["ocsvm"] < 85 and 50 < aucs["kde"] < 85
    assert 35 < aucs["ocsvm_linear"] < 65
