"""Whether a data set's files are where its reader looks, without reading them.

The workflow plans every job from the config alone (class names are static), so a run whose
data root is wrong would otherwise start, train nothing, and fail in ``prepare_dataset``
minutes later, or on a cluster after a queue wait. :func:`missing_data` looks only for the
folder each reader starts from (the same candidate folders the readers search), so it is
cheap enough for the Snakefile to call when it is parsed; the reader still checks each
file when it runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pipeline_lib.data import DATASETS
from pipeline_lib.data.catvsdog import catvsdog_candidates, kaggle_candidates
from pipeline_lib.data.celeba import CELEBA_IMAGE_DIR, celeba_candidates
from pipeline_lib.data.cifar import CIFAR10_DIR, CIFAR100_DIR
from pipeline_lib.data.mnist import DEBIAN_FMNIST_DIR, fmnist_candidates, mnist_candidates

__all__ = ["EXPECTED_LAYOUTS", "missing_data"]


def _cifar10(root: Path, **_: Any) -> tuple[Path, ...]:
    return (root / CIFAR10_DIR,)


def _cifar100(root: Path, **_: Any) -> tuple[Path, ...]:
    return (root / CIFAR100_DIR,)


def _fmnist(root: Path, **_: Any) -> tuple[Path, ...]:
    return (*fmnist_candidates(root), DEBIAN_FMNIST_DIR)


def _mnist(root: Path, **_: Any) -> tuple[Path, ...]:
    return mnist_candidates(root)


def _celeba(root: Path, **_: Any) -> tuple[Path, ...]:
    return tuple(folder / CELEBA_IMAGE_DIR for folder in celeba_candidates(root))


def _catvsdog(root: Path, *, layout: str = "auto", **_: Any) -> tuple[Path, ...]:
    kaggle = kaggle_candidates(root) if layout in ("auto", "kaggle") else ()
    pets = catvsdog_candidates(root) if layout in ("auto", "petimages") else ()
    return (*kaggle, *pets)


def _nothing(root: Path, **_: Any) -> tuple[Path, ...]:
    return ()


#: Data set -> (the folders its reader starts from, any one will do; what they hold).
#: No folders: nothing to find (scikit-learn's digits ship with it; an image folder's
#: ``path`` is checked when its class names are read, also at parse time).
EXPECTED_LAYOUTS: Mapping[str, tuple[Callable[..., tuple[Path, ...]], str]] = MappingProxyType(
    {
        "cifar10": (_cifar10, "data_batch_1..5, test_batch and batches.meta (CIFAR-10, python)"),
        "cifar10_rotated": (_cifar10, "the CIFAR-10 python pickles (data_batch_1..5, ...)"),
        "cifar100": (_cifar100, "train, test and meta (CIFAR-100, python)"),
        "fmnist": (_fmnist, "the four Fashion-MNIST IDX files (train-images-idx3-ubyte[.gz], ...)"),
        "mnist": (_mnist, "the four MNIST IDX files (train-images-idx3-ubyte[.gz], ...)"),
        "celeba": (_celeba, "the aligned CelebA JPEGs, beside list_attr_celeba.txt"),
        "catvsdog": (
            _catvsdog,
            "cat.<id>.jpg and dog.<id>.jpg (Kaggle train/), or PetImages/Cat and Dog",
        ),
        "digits": (_nothing, ""),
        "digits_rotated": (_nothing, ""),
        "image_folder": (_nothing, ""),
    }
)


def missing_data(
    name: str,
    *,
    root: str | os.PathLike,
    download: bool = False,
    **options: Any,
) -> str | None:
    """Why data set ``name`` cannot be read from ``root``, or None when it can (or is fetched).

    Parameters
    ----------
    name : str
        A key of :data:`EXPECTED_LAYOUTS` (every data set of ``pipeline_lib.data.DATASETS``).
    root : str or PathLike
        The resolved data root.
    download : bool, default=False
        The config's ``data.download``: a data set with a downloader is then fetched, so
        nothing is missing.
    **options : Any
        The data set's reader options (Cat-vs-Dog's ``layout`` narrows the folders).

    Returns
    -------
    str or None
        A message naming the folders looked for, what they should hold and how to fix it.

    Raises
    ------
    KeyError
        If ``name`` has no entry (a data set added without one).
    """
    locate, holds = EXPECTED_LAYOUTS[name]
    root = Path(root)
    folders = locate(root, **options)
    fetchable = DATASETS[name].download is not None
    if not folders or (download and fetchable) or any(folder.is_dir() for folder in folders):
        return None
    where = ", ".join(f"{folder.absolute()}/" for folder in folders)
    state = "does not exist" if not root.is_dir() else "exists, but holds none of them"
    root = root.absolute()
    fetch = "; or set data.download: true to fetch them" if fetchable else ""
    return (
        f"{name}: none of {where} found (the data root {root}/ {state}); expected {holds} "
        "there. Set data.root in the config or $DROC_DATA_ROOT to the folder that holds "
        f"them, or put them there{fetch}"
    )
