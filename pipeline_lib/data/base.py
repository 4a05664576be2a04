"""The data contract shared by every reader: :class:`ImageDataset` and :class:`DataError`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "DataError",
    "ImageDataset",
    "MissingDataError",
    "check_class_name",
    "safe_class_name",
]

_SAFE_NAME = re.compile(r"[A-Za-z0-9_]+")
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9_]")


class DataError(ValueError):
    """A data set could not be read: missing, truncated or malformed files, or bad options.

    The message names the file or folder involved and what to do about it.
    """


class MissingDataError(DataError):
    """The files of a data set are not where they are expected (a download may help)."""


def safe_class_name(name: str) -> str:
    """Make a class name wildcard-safe by replacing every character outside ``[A-Za-z0-9_]``.

    Parameters
    ----------
    name : str
        Class name as stored with the data set, e.g. ``"large_man-made_outdoor_things"``.

    Returns
    -------
    str
        The name with each character outside ``[A-Za-z0-9_]`` replaced by ``_``,
        e.g. ``"large_man_made_outdoor_things"``.
    """
    return _UNSAFE_CHAR.sub("_", name)


def check_class_name(name: str, *, where: str | Path) -> str:
    """Return ``name`` if it is wildcard-safe, else raise.

    Parameters
    ----------
    name : str
        Candidate class name.
    where : str or Path
        The folder or file the name comes from, quoted in the error message.

    Returns
    -------
    str
        ``name`` unchanged.

    Raises
    ------
    DataError
        If ``name`` does not match ``[A-Za-z0-9_]+``.
    """
    if not isinstance(name, str) or _SAFE_NAME.fullmatch(name) is None:
        raise DataError(
            f"class name {name!r} (from {where}) is not wildcard-safe: use only letters, "
            "digits and '_' (rename the folder)"
        )
    return name


# eq=False: field-wise == on arrays is ambiguous; compare the arrays themselves.
@dataclass(frozen=True, eq=False)
class ImageDataset:
    """A labelled image data set with its standard train and test splits.

    Parameters
    ----------
    name : str
        Dataset id, e.g. ``"cifar10"``.
    train_images : ndarray of shape (n_train, height, width, 3), dtype uint8
        Training images after the protocol's preprocessing.
    train_labels : ndarray of shape (n_train,), dtype int64
        Class index of each training image, in ``range(len(class_names))``.
    test_images : ndarray of shape (n_test, height, width, 3), dtype uint8
        Test images, same height and width as the training images.
    test_labels : ndarray of shape (n_test,), dtype int64
        Class index of each test image.
    class_names : tuple of str
        Wildcard-safe class names; ``class_names[k]`` is the name of label ``k``.

    Raises
    ------
    DataError
        If an array has the wrong dtype or shape, a label is out of range or a class name
        is not wildcard-safe or repeated.
    """

    name: str
    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    class_names: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(set(self.class_names)) != len(self.class_names) or not self.class_names:
            raise DataError(f"{self.name}: class names {self.class_names!r} are empty or repeated")
        for class_name in self.class_names:
            check_class_name(class_name, where=f"data set {self.name!r}")
        shapes = []
        for split in ("train", "test"):
            images = getattr(self, f"{split}_images")
            labels = getattr(self, f"{split}_labels")
            if not isinstance(images, np.ndarray) or images.dtype != np.uint8:
                raise DataError(f"{self.name}: {split}_images must be a uint8 ndarray")
            if images.ndim != 4 or images.shape[-1] != 3:
                raise DataError(
                    f"{self.name}: {split}_images has shape {images.shape}, expected (N, H, W, 3)"
                )
            if not isinstance(labels, np.ndarray) or labels.dtype != np.int64:
                raise DataError(f"{self.name}: {split}_labels must be an int64 ndarray")
            if labels.shape != (len(images),):
                raise DataError(
                    f"{self.name}: {split}_labels has shape {labels.shape}, "
                    f"expected ({len(images)},)"
                )
            if labels.size and (labels.min() < 0 or labels.max() >= len(self.class_names)):
                raise DataError(
                    f"{self.name}: {split}_labels range [{labels.min()}, {labels.max()}] "
                    f"is outside [0, {len(self.class_names) - 1}]"
                )
            shapes.append(images.shape[1:])
        if shapes[0] != shapes[1]:
            raise DataError(
                f"{self.name}: train images {shapes[0]} and test images {shapes[1]} differ in size"
            )

    @property
    def n_classes(self) -> int:
        """int : Number of classes."""
        return len(self.class_names)
