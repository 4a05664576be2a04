"""Data sets of the benchmark: readers of the standard on-disk layouts behind one entry point.

>>> data = load_dataset("cifar10", root="data")            # doctest: +SKIP
>>> data.train_images.shape, data.class_names[0]           # doctest: +SKIP
((50000, 32, 32, 3), 'airplane')

Every reader returns an :class:`ImageDataset` of uint8 NHWC images with the protocol's
preprocessing applied (docs/protocol.md, "Datasets and splits") and int64 labels. Problems with
the files raise :class:`DataError` (a ``ValueError``) naming the file or folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pipeline_lib.data.base import DataError, ImageDataset, MissingDataError
from pipeline_lib.data.catvsdog import CATVSDOG_CLASSES, read_catvsdog
from pipeline_lib.data.celeba import CELEBA_CLASSES, read_celeba
from pipeline_lib.data.cifar import (
    CIFAR10_CLASSES,
    CIFAR100_COARSE_CLASSES,
    read_cifar10,
    read_cifar100,
)
from pipeline_lib.data.digits import DIGITS_CLASSES, read_digits
from pipeline_lib.data.download import (
    download_celeba,
    download_cifar10,
    download_cifar100,
    download_fmnist,
    download_mnist,
)
from pipeline_lib.data.image_folder import image_folder_class_names, read_image_folder
from pipeline_lib.data.mnist import FMNIST_CLASSES, MNIST_CLASSES, read_fmnist, read_mnist
from pipeline_lib.data.rotated import randomly_rotated

__all__ = [
    "DATASETS",
    "DATA_ROOT_ENV",
    "DataError",
    "DatasetSpec",
    "ImageDataset",
    "MissingDataError",
    "dataset_class_names",
    "load_dataset",
    "resolve_data_root",
]

DATA_ROOT_ENV = "DROC_DATA_ROOT"
_DEFAULT_ROOT = "data"


@dataclass(frozen=True)
class DatasetSpec:
    """How to read, name and fetch one data set.

    Parameters
    ----------
    reader : callable
        ``reader(root: Path, **options) -> ImageDataset``.
    class_names : tuple of str or callable
        The class names in label order, or ``class_names(root: Path, **options)`` for data
        sets whose classes are only known from the files.
    download : callable or None, default=None
        ``download(root: Path) -> None`` fetching the files into ``root``; None when there is
        nothing to download.
    options : frozenset of str, default=frozenset()
        Names of the keyword options the reader accepts.
    inliers : tuple of str or None, default=None
        The classes that can be the inlier class of a one-class split; None: every class.
        ``classes: all`` in a config means these. The config validation
        (:func:`pipeline_lib.config.validate.validate_config`) reads them, so a class that cannot be
        an inlier fails before any job instead of in ``prepare_split`` after the embedding.
    inlier_reason : str, default=""
        Why the other classes cannot be inliers (quoted in the error).
    contamination_reason : str, default=""
        Non-empty when the training split cannot be contaminated (``splits.contamination``
        > 0 is impossible): why, quoted in the error.
    train_per_class : mapping of str to int or None, default=None
        Training images per class when they are known without the files (the standard
        splits); the validation checks ``splits.clean_inliers`` against them. None: only
        known from the files (checked when the split is drawn).
    """

    reader: Callable[..., ImageDataset]
    class_names: tuple[str, ...] | Callable[..., tuple[str, ...]]
    download: Callable[[Path], None] | None = None
    options: frozenset[str] = frozenset()
    inliers: tuple[str, ...] | None = None
    inlier_reason: str = ""
    contamination_reason: str = ""
    train_per_class: Mapping[str, int] | None = None


def _same(classes: tuple[str, ...], count: int) -> Mapping[str, int]:
    return MappingProxyType(dict.fromkeys(classes, count))


def _counts(classes: tuple[str, ...], counts: tuple[int, ...]) -> Mapping[str, int]:
    return MappingProxyType(dict(zip(classes, counts, strict=True)))


# Training images per class of the standard splits (CIFAR-10: 5,000 each; CIFAR-100: 2,500
# per superclass; Fashion-MNIST: 6,000 each; MNIST and sklearn digits (this package's fixed
# 2/3 hold-out) differ per class).
_CIFAR10_TRAIN = _same(CIFAR10_CLASSES, 5000)
_DIGITS_TRAIN = _counts(DIGITS_CLASSES, (119, 121, 118, 122, 121, 121, 121, 119, 116, 120))
_CELEBA_REASON = (
    "the CelebA training split holds only the training partition's images without "
    "eyeglasses (docs/protocol.md, 'Datasets and splits'), so 'eyeglasses' has no training images"
)


DATASETS: Mapping[str, DatasetSpec] = MappingProxyType(
    {
        "cifar10": DatasetSpec(
            read_cifar10, CIFAR10_CLASSES, download_cifar10, train_per_class=_CIFAR10_TRAIN
        ),
        "cifar100": DatasetSpec(
            read_cifar100,
            CIFAR100_COARSE_CLASSES,
            download_cifar100,
            train_per_class=_same(CIFAR100_COARSE_CLASSES, 2500),
        ),
        "fmnist": DatasetSpec(
            read_fmnist,
            FMNIST_CLASSES,
            download_fmnist,
            train_per_class=_same(FMNIST_CLASSES, 6000),
        ),
        "mnist": DatasetSpec(
            read_mnist,
            MNIST_CLASSES,
            download_mnist,
            train_per_class=_counts(
                MNIST_CLASSES, (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949)
            ),
        ),
        "digits": DatasetSpec(read_digits, DIGITS_CLASSES, train_per_class=_DIGITS_TRAIN),
        # Every image turned by a random multiple of 90 degrees (App. A.2).
        "cifar10_rotated": DatasetSpec(
            randomly_rotated(read_cifar10, "cifar10_rotated"),
            CIFAR10_CLASSES,
            download_cifar10,
            train_per_class=_CIFAR10_TRAIN,
        ),
        "digits_rotated": DatasetSpec(
            randomly_rotated(read_digits, "digits_rotated"),
            DIGITS_CLASSES,
            train_per_class=_DIGITS_TRAIN,
        ),
        "catvsdog": DatasetSpec(
            read_catvsdog,
            CATVSDOG_CLASSES,
            options=frozenset({"layout", "n_train_per_class", "n_test_per_class"}),
        ),
        "celeba": DatasetSpec(
            read_celeba,
            CELEBA_CLASSES,
            download_celeba,
            options=frozenset({"resize"}),
            inliers=("no_eyeglasses",),
            inlier_reason=_CELEBA_REASON,
            contamination_reason=(
                "the CelebA training split holds no outliers (no image with eyeglasses) to "
                "contaminate it with"
            ),
        ),
        "image_folder": DatasetSpec(
            read_image_folder,
            image_folder_class_names,
            options=frozenset({"path", "image_size", "test_fraction"}),
        ),
    }
)


def _spec(name: str, options: Mapping[str, Any]) -> DatasetSpec:
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; allowed: {', '.join(DATASETS)}")
    spec = DATASETS[name]
    unknown = sorted(set(options) - spec.options)
    if unknown:
        allowed = ", ".join(sorted(spec.options)) or "none"
        raise DataError(f"dataset {name!r} got unknown option(s) {unknown}; allowed: {allowed}")
    return spec


def resolve_data_root(root: str | os.PathLike | None) -> Path:
    """Pick the folder that holds the data sets.

    Parameters
    ----------
    root : str, PathLike or None
        The configured data root; None or ``""`` when not configured.

    Returns
    -------
    Path
        ``root`` if given, else the value of the environment variable ``DROC_DATA_ROOT``
        if set and non-empty, else ``data`` (relative to the working directory).
    """
    if root is not None and str(root) != "":
        return Path(root).expanduser()
    env = os.environ.get(DATA_ROOT_ENV, "")
    if env:
        return Path(env).expanduser()
    return Path(_DEFAULT_ROOT)


def load_dataset(
    name: str,
    *,
    root: str | os.PathLike | None = None,
    download: bool = False,
    **options: Any,
) -> ImageDataset:
    """Read a data set with the protocol's preprocessing.

    Parameters
    ----------
    name : str
        Dataset id, one of ``DATASETS`` (``cifar10``, ``cifar100``, ``fmnist``, ``mnist``,
        ``digits``, ``catvsdog``, ``celeba``, ``image_folder``).
    root : str, PathLike or None, default=None
        Data root, see :func:`resolve_data_root`.
    download : bool, default=False
        When the files are missing, fetch them into the root with torchvision's downloaders
        first (``cifar10``, ``cifar100``, ``fmnist``, ``mnist``, ``celeba``; the others have
        nothing to download and ignore it: ``catvsdog`` needs a manual download).
    **options : Any
        Reader options: ``image_folder`` takes ``path``, ``image_size`` and
        ``test_fraction``; ``catvsdog`` takes ``layout`` (``auto``, ``kaggle`` or
        ``petimages``), ``n_train_per_class`` and ``n_test_per_class``; ``celeba`` takes
        ``resize`` (``bicubic``, the released code's, or ``bilinear``); the others take none.

    Returns
    -------
    ImageDataset
        uint8 images of shape (N, H, W, 3) and int64 labels for the train and test splits.

    Raises
    ------
    DataError
        If ``name`` or an option is unknown, the files are missing (and not downloaded),
        the download fails, or a file is truncated or corrupt. The message names the
        file or the expected folder and layout.
    """
    spec = _spec(name, options)
    data_root = resolve_data_root(root)
    try:
        return spec.reader(data_root, **options)
    except MissingDataError as err:
        if spec.download is None:
            raise
        if not download:
            raise MissingDataError(
                f"{err} Set `download: true` in the config to fetch it into {data_root}/, "
                f"or put the files there (or set {DATA_ROOT_ENV} to the folder that holds them)."
            ) from err
        try:
            spec.download(data_root)
        except DataError as download_err:
            raise DataError(
                f"{download_err}, or set {DATA_ROOT_ENV} to the folder that holds them. {err}"
            ) from download_err
    return spec.reader(data_root, **options)


def dataset_class_names(
    name: str, *, root: str | os.PathLike | None = None, **options: Any
) -> tuple[str, ...]:
    """Class names of a data set in label order, without reading its images.

    Parameters
    ----------
    name : str
        Dataset id, one of ``DATASETS``.
    root : str, PathLike or None, default=None
        Data root, see :func:`resolve_data_root` (only image folders look at files).
    **options : Any
        Reader options, as for :func:`load_dataset`; ``image_folder`` needs ``path``.

    Returns
    -------
    tuple of str
        Wildcard-safe names; static for the public data sets, the sorted sub-folder names
        for ``image_folder``.

    Raises
    ------
    DataError
        If ``name`` or an option is unknown, or an image folder is missing or has a class
        name that is not wildcard-safe.
    """
    spec = _spec(name, options)
    if isinstance(spec.class_names, tuple):
        return spec.class_names
    return spec.class_names(resolve_data_root(root), **options)
