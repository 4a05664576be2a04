"""Readers for the IDX files of Fashion-MNIST and MNIST (gzipped or not).

Protocol preprocessing (docs/protocol.md, "Datasets and splits"): the 28x28 grey images are
zero-padded to 32x32 and replicated to 3 channels.
"""

from __future__ import annotations

import gzip
import logging
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pipeline_lib.data.base import DataError, ImageDataset, MissingDataError

__all__ = [
    "DEBIAN_FMNIST_DIR",
    "FMNIST_CLASSES",
    "IDX_FILES",
    "MNIST_CLASSES",
    "fmnist_candidates",
    "mnist_candidates",
    "read_fmnist",
    "read_idx",
    "read_mnist",
]

logger = logging.getLogger(__name__)

FMNIST_CLASSES: tuple[str, ...] = (
    "t_shirt_top",
    "trouser",
    "pullover",
    "dress",
    "coat",
    "sandal",
    "shirt",
    "sneaker",
    "bag",
    "ankle_boot",
)
MNIST_CLASSES: tuple[str, ...] = tuple(str(d) for d in range(10))

# Where Debian's ``dataset-fashion-mnist`` package installs the four original .gz files.
DEBIAN_FMNIST_DIR = Path("/usr/share/datasets/fashion-mnist")

IDX_FILES: dict[str, str] = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}

_IMAGE_MAGIC = 0x00000803  # unsigned byte, 3 dimensions
_LABEL_MAGIC = 0x00000801  # unsigned byte, 1 dimension
_PAD = 2  # 28 + 2 * 2 = 32


def fmnist_candidates(root: Path) -> tuple[Path, ...]:
    """Folders searched for the Fashion-MNIST files under ``root``, in order:
    ``<root>/FashionMNIST/raw`` (torchvision's layout) and ``<root>/fashion-mnist`` (a flat
    folder with the four files)."""
    return (Path(root) / "FashionMNIST" / "raw", Path(root) / "fashion-mnist")


def mnist_candidates(root: Path) -> tuple[Path, ...]:
    """Folders searched for the MNIST files under ``root``, in order: ``<root>/MNIST/raw``
    (torchvision's layout) and ``<root>/mnist`` (flat folder)."""
    return (Path(root) / "MNIST" / "raw", Path(root) / "mnist")


def read_idx(path: Path, *, magic: int) -> np.ndarray:
    """Read one IDX file of unsigned bytes, gzipped when its name ends in ``.gz``.

    Parameters
    ----------
    path : Path
        The IDX file.
    magic : int
        Expected magic number: ``0x803`` for images (N, rows, cols), ``0x801`` for labels.

    Returns
    -------
    ndarray of dtype uint8
        The payload reshaped to the dimensions in the header.

    Raises
    ------
    DataError
        If the file is truncated or corrupt: unreadable gzip stream, wrong magic number,
        or a payload whose length does not match the header's dimensions.
    """
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as fh:
                raw = fh.read()
        else:
            raw = path.read_bytes()
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(
            f"cannot read {path}: truncated or corrupt gzip file ({err}); download or copy it again"
        ) from err
    if len(raw) < 4:
        raise DataError(f"{path} is truncated: {len(raw)} bytes, no IDX header")
    found = int.from_bytes(raw[:4], "big")
    if found != magic:
        raise DataError(f"{path}: IDX magic number {found:#010x}, expected {magic:#010x}")
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{path} is truncated: {len(raw)} bytes, IDX header needs {header}")
    dims = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    expected = header + int(np.prod(dims))
    if len(raw) != expected:
        raise DataError(
            f"{path} is truncated or corrupt: {len(raw)} bytes, header dims {dims} need {expected}"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def _find_file(folder: Path, stem: str) -> Path | None:
    """The plain file if present (torchvision keeps both), else the ``.gz`` one, else None."""
    for name in (stem, f"{stem}.gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def _locate(candidates: Sequence[Path], what: str) -> dict[str, Path]:
    """Pick the first folder holding all four IDX files."""
    partial = []
    for folder in candidates:
        found = {key: _find_file(folder, stem) for key, stem in IDX_FILES.items()}
        complete = {key: path for key, path in found.items() if path is not None}
        if len(complete) == len(IDX_FILES):
            return complete
        if complete:
            missing = ", ".join(IDX_FILES[key] for key in IDX_FILES if key not in complete)
            partial.append(f" {folder}/ lacks {missing}.")
    raise MissingDataError(
        f"{what} not found: expected the four IDX files ({', '.join(IDX_FILES.values())}, "
        f"each optionally .gz) in one of: {', '.join(f'{c}/' for c in candidates)}."
        + "".join(partial)
    )


def _to_rgb32(images: np.ndarray) -> np.ndarray:
    # (N, 28, 28) -> zero-pad to (N, 32, 32) -> replicate grey to (N, 32, 32, 3).
    padded = np.pad(images, ((0, 0), (_PAD, _PAD), (_PAD, _PAD)))
    return np.repeat(padded[..., None], 3, axis=-1)


def _read_idx_dataset(
    name: str, candidates: Sequence[Path], class_names: tuple[str, ...], what: str
) -> ImageDataset:
    files = _locate(candidates, what)
    arrays = {}
    for split in ("train", "test"):
        images = read_idx(files[f"{split}_images"], magic=_IMAGE_MAGIC)
        labels = read_idx(files[f"{split}_labels"], magic=_LABEL_MAGIC)
        if images.shape[1:] != (28, 28):
            raise DataError(f"{files[f'{split}_images']}: images are {images.shape[1:]}, not 28x28")
        if len(labels) != len(images):
            raise DataError(
                f"{files[f'{split}_labels']} has {len(labels)} labels for "
                f"{len(images)} images in {files[f'{split}_images']}"
            )
        if labels.size and labels.max() >= len(class_names):
            raise DataError(f"{files[f'{split}_labels']}: label {labels.max()} out of range")
        arrays[f"{split}_images"] = _to_rgb32(images)
        arrays[f"{split}_labels"] = labels.astype(np.int64)
    logger.info("read %s from %s", what, files["train_images"].parent)
    return ImageDataset(name=name, class_names=class_names, **arrays)


def read_fmnist(root: Path, *, system_dirs: Sequence[Path] = (DEBIAN_FMNIST_DIR,)) -> ImageDataset:
    """Read Fashion-MNIST, preprocessed to (32, 32, 3).

    Parameters
    ----------
    root : Path
        Data root; the files are searched in :func:`fmnist_candidates` of it.
    system_dirs : sequence of Path, default=(DEBIAN_FMNIST_DIR,)
        Further folders tried after those under ``root`` (Debian's package location).

    Returns
    -------
    ImageDataset
        60,000 training and 10,000 test images, 10 classes (:data:`FMNIST_CLASSES`).

    Raises
    ------
    MissingDataError
        If no candidate folder holds all four files.
    DataError
        If a file is truncated or corrupt.
    """
    candidates = (*fmnist_candidates(root), *map(Path, system_dirs))
    return _read_idx_dataset("fmnist", candidates, FMNIST_CLASSES, "Fashion-MNIST")


def read_mnist(root: Path) -> ImageDataset:
    """Read MNIST, preprocessed to (32, 32, 3) like Fashion-MNIST.

    Parameters
    ----------
    root : Path
        Data root; the files are searched in :func:`mnist_candidates` of it.

    Returns
    -------
    ImageDataset
        60,000 training and 10,000 test images, classes ``"0"`` ... ``"9"``.

    Raises
    ------
    MissingDataError, DataError
        As :func:`read_fmnist`.
    """
    return _read_idx_dataset("mnist", mnist_candidates(root), MNIST_CLASSES, "MNIST")
