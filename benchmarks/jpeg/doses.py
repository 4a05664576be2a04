"""The dose points: the shared CIFAR-10 copy re-encoded as a whole at lower JPEG qualities,
and how far each version's pixels moved from it."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

REFERENCE = "shared"  # dose 0: the shared copy as read
SUBSAMPLING_420 = 2  # PIL's code for 4:2:0 chroma subsampling
SUBSAMPLING_444 = 0


@dataclass(frozen=True)
class Dose:
    """One version of the data set: the shared copy, or it re-encoded once at ``quality``."""

    name: str
    quality: int | None


def doses_for(qualities: Sequence[int]) -> tuple[Dose, ...]:
    """The reference (the shared copy) then one re-encoding per quality, named ``q<quality>``.

    Raises
    ------
    ValueError
        If a quality is outside 1..100 or repeated.
    """
    if len(set(qualities)) != len(qualities):
        raise ValueError(f"--qualities has a repeated value: {list(qualities)}")
    for quality in qualities:
        if not 1 <= quality <= 100:
            raise ValueError(f"JPEG quality must be in 1..100, got {quality}")
    return (Dose(REFERENCE, None), *(Dose(f"q{q}", q) for q in qualities))


def jpeg_roundtrip(image: np.ndarray, *, quality: int, subsampling: int) -> np.ndarray:
    """Encode one uint8 RGB image as JPEG with PIL and decode it again."""
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "JPEG", quality=quality, subsampling=subsampling)
    buffer.seek(0)
    with Image.open(buffer) as decoded:
        return np.asarray(decoded.convert("RGB"))


def reencode(images: np.ndarray, *, quality: int, subsampling: int = SUBSAMPLING_420) -> np.ndarray:
    """Every image of ``images`` (uint8, shape (n, h, w, 3)) through one JPEG round trip.

    Raises
    ------
    ValueError
        If ``images`` is not a uint8 array of shape (n, h, w, 3).
    """
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(
            f"images must be uint8 of shape (n, h, w, 3), got {images.dtype} {images.shape}"
        )
    out = np.empty_like(images)
    for i, image in enumerate(images):
        out[i] = jpeg_roundtrip(image, quality=quality, subsampling=subsampling)
    return out


def mean_abs_change(reference: np.ndarray, changed: np.ndarray) -> float:
    """Mean absolute pixel difference in grey levels (0-255), over every pixel and channel.

    Raises
    ------
    ValueError
        If the shapes differ.
    """
    if reference.shape != changed.shape:
        raise ValueError(f"shapes differ: {reference.shape} and {changed.shape}")
    return float(np.abs(reference.astype(np.int16) - changed.astype(np.int16)).mean())


def reencode_dataset(dataset: Any, dose: Dose) -> tuple[Any, float]:
    """The data set at ``dose`` (both splits re-encoded) and its dose in grey levels."""
    from pipeline_lib.data import ImageDataset

    if dose.quality is None:
        return dataset, 0.0
    train = reencode(dataset.train_images, quality=dose.quality)
    test = reencode(dataset.test_images, quality=dose.quality)
    changed = sum(
        np.abs(new.astype(np.int16) - old).sum(dtype=np.int64)
        for new, old in ((train, dataset.train_images), (test, dataset.test_images))
    )
    dose_value = float(changed / (train.size + test.size))
    recoded = ImageDataset(
        name=dataset.name,
        train_images=train,
        train_labels=dataset.train_labels,
        test_images=test,
        test_labels=dataset.test_labels,
        class_names=dataset.class_names,
    )
    return recoded, dose_value
