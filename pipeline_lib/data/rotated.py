"""Randomly rotated data sets (paper App. A.2: rotation prediction vs distribution augmentation).

Every image, train and test, is turned by a random multiple of 90 degrees drawn once with
a fixed seed, so the "upright" orientation that rotation prediction relies on is gone while
the classes stay the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from pipeline_lib.data.base import ImageDataset

#: The rotations are part of the data set, not of an experiment: one fixed draw.
ROTATION_SEED = 0


def rotate_randomly(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each ``(h, w, c)`` square image turned by k * 90 degrees, k uniform in {0, 1, 2, 3}."""
    turns = rng.integers(0, 4, size=len(images))
    out = images.copy()
    for k in (1, 2, 3):  # a loop over rotations, not images
        chosen = turns == k
        out[chosen] = np.rot90(images[chosen], k=k, axes=(1, 2))
    return out


def randomly_rotated(reader: Callable[..., ImageDataset], name: str) -> Callable[..., ImageDataset]:
    """A reader returning ``reader``'s data set with every image randomly rotated."""

    def read(root: Path, **options: Any) -> ImageDataset:
        dataset = reader(root, **options)
        rng = np.random.default_rng(ROTATION_SEED)
        return replace(
            dataset,
            name=name,
            train_images=rotate_randomly(dataset.train_images, rng),
            test_images=rotate_randomly(dataset.test_images, rng),
        )

    read.__doc__ = f"{reader.__name__} with every image turned by a random multiple of 90 degrees."
    return read
