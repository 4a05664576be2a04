"""Fetch the public data sets into the data root with torchvision's downloaders.

torchvision is used only to download and unpack the standard files; reading is done by this
package's own readers (see :mod:`pipeline_lib.data.cifar`, :mod:`pipeline_lib.data.mnist`,
:mod:`pipeline_lib.data.celeba`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from pipeline_lib.data.base import DataError

__all__ = [
    "download_celeba",
    "download_cifar10",
    "download_cifar100",
    "download_fmnist",
    "download_mnist",
]

logger = logging.getLogger(__name__)


def _fetch(class_name: str, root: Path, what: str) -> None:
    """Instantiate ``torchvision.datasets.<class_name>`` with ``download=True`` for both splits.

    Raises
    ------
    DataError
        If the download fails (e.g. no network), naming the root and the cause.
    """
    import torchvision.datasets

    dataset_class = getattr(torchvision.datasets, class_name)
    root = Path(root)
    logger.info("downloading %s into %s with torchvision.datasets.%s", what, root, class_name)
    try:
        root.mkdir(parents=True, exist_ok=True)
        for train in (True, False):
            dataset_class(str(root), train=train, download=True)
    except (OSError, RuntimeError) as err:  # URLError is an OSError; torchvision raises both
        raise DataError(
            f"downloading {what} into {root}/ failed ({type(err).__name__}: {err}); "
            "without network, put the files there yourself"
        ) from err


def download_cifar10(root: Path) -> None:
    """Download CIFAR-10 to ``<root>/cifar-10-batches-py/`` (``DataError`` if it fails)."""
    _fetch("CIFAR10", root, "CIFAR-10")


def download_cifar100(root: Path) -> None:
    """Download CIFAR-100 to ``<root>/cifar-100-python/`` (``DataError`` if it fails)."""
    _fetch("CIFAR100", root, "CIFAR-100")


def download_fmnist(root: Path) -> None:
    """Download Fashion-MNIST to ``<root>/FashionMNIST/raw/`` (``DataError`` if it fails)."""
    _fetch("FashionMNIST", root, "Fashion-MNIST")


def download_mnist(root: Path) -> None:
    """Download MNIST to ``<root>/MNIST/raw/`` (``DataError`` if it fails)."""
    _fetch("MNIST", root, "MNIST")


def download_celeba(root: Path) -> None:
    """Download CelebA (aligned images, attributes, partitions) to ``<root>/celeba/``.

    Uses ``torchvision.datasets.CelebA(root, split="all", target_type="attr",
    download=True)``, which fetches the files from Google Drive (it needs the ``gdown``
    package; Google Drive often refuses with a daily quota error) and unzips
    ``img_align_celeba.zip`` (1.4 GB).

    Parameters
    ----------
    root : Path
        Data root.

    Raises
    ------
    DataError
        If the download fails (no network, no ``gdown``, Google Drive quota, bad checksum).
    """
    import torchvision.datasets

    root = Path(root)
    logger.info("downloading CelebA into %s with torchvision.datasets.CelebA", root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        torchvision.datasets.CelebA(str(root), split="all", target_type="attr", download=True)
    except Exception as err:  # OSError, RuntimeError, and gdown's own exception classes
        raise DataError(
            f"downloading CelebA into {root}/ failed ({type(err).__name__}: {err}); without "
            "network or when Google Drive refuses, get img_align_celeba.zip, "
            "list_attr_celeba.txt and list_eval_partition.txt from "
            "https://mmlab.ie.cuhk.edu.hk/projects/CelebA.html, unzip the images into "
            f"{root / 'celeba'}/ and put the text files beside them"
        ) from err
