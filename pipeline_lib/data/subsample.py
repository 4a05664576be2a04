"""Per-class subsampling for smoke runs and CI (the paper uses every image)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from pipeline_lib.data import ImageDataset, load_dataset


def _per_class(labels: np.ndarray, limit: int, rng: np.random.Generator) -> np.ndarray:
    keep = [
        np.sort(rng.permutation(np.flatnonzero(labels == label))[:limit])
        for label in np.unique(labels)
    ]
    return np.sort(np.concatenate(keep))


def subsample_dataset(
    dataset: ImageDataset,
    *,
    max_train_per_class: int | None = None,
    max_test_per_class: int | None = None,
    seed: int = 0,
) -> ImageDataset:
    """Keep at most the given number of images per class in each split.

    The subset is fixed (``seed=0`` by default) and independent of the experiment seed, so
    every seed of a sweep sees the same images, as with the full data.

    Raises
    ------
    ValueError
        If a limit is smaller than 1.
    """
    for name, limit in (
        ("max_train_per_class", max_train_per_class),
        ("max_test_per_class", max_test_per_class),
    ):
        if limit is not None and limit < 1:
            raise ValueError(f"{name} must be >= 1 or null, got {limit}")
    rng = np.random.default_rng(seed)
    train_images, train_labels = dataset.train_images, dataset.train_labels
    test_images, test_labels = dataset.test_images, dataset.test_labels
    if max_train_per_class is not None:
        keep = _per_class(train_labels, max_train_per_class, rng)
        train_images, train_labels = train_images[keep], train_labels[keep]
    if max_test_per_class is not None:
        keep = _per_class(test_labels, max_test_per_class, rng)
        test_images, test_labels = test_images[keep], test_labels[keep]
    return dataclasses.replace(
        dataset,
        train_images=train_images,
        train_labels=train_labels,
        test_images=test_images,
        test_labels=test_labels,
    )


def prepare_dataset(
    name: str,
    settings: Mapping[str, Any],
    *,
    root: str | os.PathLike | None = None,
    download: bool = False,
) -> ImageDataset:
    """A config's data set as its jobs see it: read with its options, then subsampled.

    The ``prepare_dataset`` rule's recipe in one function. ``settings`` is one entry of the
    config's ``datasets`` (``options``, ``max_train_per_class``, ``max_test_per_class``).
    """
    dataset = load_dataset(name, root=root, download=download, **settings.get("options", {}))
    return subsample_dataset(
        dataset,
        max_train_per_class=settings.get("max_train_per_class"),
        max_test_per_class=settings.get("max_test_per_class"),
    )
