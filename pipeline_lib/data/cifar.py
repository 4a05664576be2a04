"""Readers for the CIFAR-10 and CIFAR-100 python pickles (standard on-disk layout).

The pickles are read directly (not through torchvision's dataset classes) because
torchvision checks md5 sums that re-encoded but otherwise valid copies fail.
"""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from pipeline_lib.data.base import DataError, ImageDataset, MissingDataError, safe_class_name

__all__ = [
    "CIFAR10_CLASSES",
    "CIFAR10_DIR",
    "CIFAR100_COARSE_CLASSES",
    "CIFAR100_DIR",
    "read_cifar10",
    "read_cifar100",
]

logger = logging.getLogger(__name__)

CIFAR10_DIR = "cifar-10-batches-py"
CIFAR100_DIR = "cifar-100-python"

CIFAR10_CLASSES: tuple[str, ...] = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)

# The 20 CIFAR-100 superclasses in label order, made wildcard-safe ('-' -> '_').
CIFAR100_COARSE_CLASSES: tuple[str, ...] = (
    "aquatic_mammals",
    "fish",
    "flowers",
    "food_containers",
    "fruit_and_vegetables",
    "household_electrical_devices",
    "household_furniture",
    "insects",
    "large_carnivores",
    "large_man_made_outdoor_things",
    "large_natural_outdoor_scenes",
    "large_omnivores_and_herbivores",
    "medium_mammals",
    "non_insect_invertebrates",
    "people",
    "reptiles",
    "small_mammals",
    "trees",
    "vehicles_1",
    "vehicles_2",
)

_CIFAR10_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))

# Globals the official pickles (Python 2 cPickle, numpy arrays) and re-written copies
# (Python 3, protocol 2..5) need; anything else is refused instead of being executed.
_ALLOWED_GLOBALS = frozenset(
    {
        ("_codecs", "encode"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
    }
)


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that only resolves the globals listed in ``_ALLOWED_GLOBALS``."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")
        return super().find_class(module, name)


def _load_pickle(path: Path) -> dict[str, Any]:
    """Load one CIFAR pickle into a dict with ``str`` keys.

    Raises
    ------
    DataError
        If the file is truncated, corrupt or not a dict.
    """
    try:
        with path.open("rb") as fh:
            obj = _RestrictedUnpickler(fh, encoding="latin1").load()
    except Exception as err:  # any failure of a corrupt pickle: EOFError, UnpicklingError, ...
        raise DataError(
            f"cannot read {path}: truncated or corrupt pickle ({type(err).__name__}: {err}); "
            "delete it and download or copy the file again"
        ) from err
    if not isinstance(obj, dict):
        raise DataError(f"cannot read {path}: expected a pickled dict, got {type(obj).__name__}")
    return {(k.decode("latin1") if isinstance(k, bytes) else str(k)): v for k, v in obj.items()}


def _get(batch: dict[str, Any], key: str, path: Path) -> Any:
    if key not in batch:
        raise DataError(f"{path} has no {key!r} entry (keys: {sorted(batch)})")
    return batch[key]


def _read_batch(path: Path, label_key: str) -> tuple[np.ndarray, np.ndarray]:
    """Read images (N, 32, 32, 3) uint8 and labels (N,) int64 from one pickle."""
    batch = _load_pickle(path)
    data = np.asarray(_get(batch, "data", path))
    labels = np.asarray(_get(batch, label_key, path))
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise DataError(f"{path}: 'data' has shape {data.shape}, expected (N, 3072)")
    if labels.shape != (len(data),):
        raise DataError(f"{path}: {label_key!r} has {labels.size} entries for {len(data)} images")
    if data.dtype != np.uint8:
        if data.size and (data.min() < 0 or data.max() > 255):
            raise DataError(f"{path}: pixel values outside 0..255")
        data = data.astype(np.uint8)
    # Rows are channel-major (1024 red, 1024 green, 1024 blue values): (N, 3, 32, 32) -> NHWC.
    images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels.astype(np.int64)


def _read_names(path: Path, key: str, expected: tuple[str, ...]) -> None:
    """Check that the label names in a meta pickle are the expected ones."""
    meta = _load_pickle(path)
    raw = _get(meta, key, path)
    names = tuple(safe_class_name(n.decode() if isinstance(n, bytes) else str(n)) for n in raw)
    if names != expected:
        raise DataError(f"{path}: {key} {names} differ from the standard names {expected}")


def _check_files(folder: Path, files: tuple[str, ...], what: str) -> None:
    missing = [f for f in files if not (folder / f).is_file()]
    if missing:
        detail = "missing: " + ", ".join(missing) if folder.is_dir() else "no such folder"
        raise MissingDataError(
            f"{what} not found: expected the python pickles {', '.join(files)} in {folder}/ "
            f"({detail})."
        )


def _read_cifar(
    name: str,
    folder: Path,
    *,
    what: str,
    labels_note: str = "",
    meta: tuple[str, str],
    train: tuple[str, ...],
    test: str,
    label_key: str,
    classes: tuple[str, ...],
) -> ImageDataset:
    """Read a CIFAR folder: check its files and the label names in the ``meta`` pickle
    (file, key), then read the ``train`` pickles (concatenated) and the ``test`` pickle.
    ``what`` names the data set in messages, ``labels_note`` follows it in the log line."""
    _check_files(folder, (*train, test, meta[0]), what)
    _read_names(folder / meta[0], meta[1], classes)
    parts = [_read_batch(folder / file, label_key) for file in train]
    test_images, test_labels = _read_batch(folder / test, label_key)
    logger.info("read %s%s from %s", what, labels_note, folder)
    if len(parts) == 1:  # CIFAR-100: its one training pickle as it is, not a copy
        train_images, train_labels = parts[0]
    else:
        train_images = np.concatenate([p[0] for p in parts])
        train_labels = np.concatenate([p[1] for p in parts])
    return ImageDataset(
        name=name,
        train_images=train_images,
        train_labels=train_labels,
        test_images=test_images,
        test_labels=test_labels,
        class_names=classes,
    )


def read_cifar10(root: Path) -> ImageDataset:
    """Read CIFAR-10 from ``<root>/cifar-10-batches-py/``.

    Parameters
    ----------
    root : Path
        Data root holding the ``cifar-10-batches-py`` folder.

    Returns
    -------
    ImageDataset
        50,000 training and 10,000 test images of shape (32, 32, 3), 10 classes.

    Raises
    ------
    MissingDataError
        If the folder or one of its files is missing.
    DataError
        If a pickle is truncated or corrupt, or its contents are malformed.
    """
    return _read_cifar(
        "cifar10",
        Path(root) / CIFAR10_DIR,
        what="CIFAR-10",
        meta=("batches.meta", "label_names"),
        train=_CIFAR10_TRAIN,
        test="test_batch",
        label_key="labels",
        classes=CIFAR10_CLASSES,
    )


def read_cifar100(root: Path) -> ImageDataset:
    """Read CIFAR-100 with its 20 coarse labels from ``<root>/cifar-100-python/``.

    Parameters
    ----------
    root : Path
        Data root holding the ``cifar-100-python`` folder (``train``, ``test``, ``meta``).

    Returns
    -------
    ImageDataset
        50,000 training and 10,000 test images of shape (32, 32, 3) labelled by superclass
        (20 classes, names from :data:`CIFAR100_COARSE_CLASSES`).

    Raises
    ------
    MissingDataError, DataError
        As :func:`read_cifar10`.
    """
    return _read_cifar(
        "cifar100",
        Path(root) / CIFAR100_DIR,
        what="CIFAR-100",
        labels_note=" (coarse labels)",
        meta=("meta", "coarse_label_names"),
        train=("train",),
        test="test",
        label_key="coarse_labels",
        classes=CIFAR100_COARSE_CLASSES,
    )
