"""Reader for Cat-vs-Dog: the Kaggle / Microsoft "PetImages" folders (Asirra images).

Layout: ``<root>/PetImages/Cat/*.jpg`` and ``<root>/PetImages/Dog/*.jpg`` (or the same under
``<root>/catvsdog/``), as unzipped from the Microsoft Download Center's "Kaggle Cats and Dogs
Dataset". The download holds a few unreadable files (zero-byte and corrupt JPEGs); they are
skipped, counted and logged.

Protocol (PROTOCOL.md, "Datasets and splits"): images are converted to RGB, resized so that
the shorter side is 64 (bilinear) and centre-cropped to 64x64. The train/test split is the
fixed seed-0 split: per class, ``np.random.default_rng(0).permutation`` of the class's
readable images in sorted file-name order; the first ``n_train_per_class`` are the training
split, the next ``n_test_per_class`` the test split (10,000 and 2,500 in the paper).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from PIL import Image

from pipeline_lib.data.base import DataError, ImageDataset, MissingDataError
from pipeline_lib.data.image_folder import IMAGE_EXTENSIONS

__all__ = [
    "CATVSDOG_CLASSES",
    "CATVSDOG_URL",
    "CATVSDOG_SIZE",
    "catvsdog_candidates",
    "read_catvsdog",
]

logger = logging.getLogger(__name__)

CATVSDOG_CLASSES: tuple[str, ...] = ("cat", "dog")
CATVSDOG_SIZE = 64
CATVSDOG_URL = "https://www.microsoft.com/en-us/download/details.aspx?id=54765"

_FOLDERS = {"cat": "Cat", "dog": "Dog"}  # class name -> sub-folder of PetImages
_SPLIT_SEED = 0
_N_LOGGED = 5  # unreadable file names quoted in the warning


def catvsdog_candidates(root: Path) -> tuple[Path, ...]:
    """Folders searched for ``PetImages`` under ``root``, in order.

    Parameters
    ----------
    root : Path
        Data root.

    Returns
    -------
    tuple of Path
        ``<root>/PetImages`` and ``<root>/catvsdog/PetImages``.
    """
    return (Path(root) / "PetImages", Path(root) / "catvsdog" / "PetImages")


def _find_folder(root: Path) -> Path:
    candidates = catvsdog_candidates(root)
    for folder in candidates:
        if all((folder / sub).is_dir() for sub in _FOLDERS.values()):
            return folder
    raise MissingDataError(
        "Cat-vs-Dog not found: expected the folders Cat/ and Dog/ of JPEGs in one of: "
        f'{", ".join(f"{c}/" for c in candidates)}. Get the "Kaggle Cats and Dogs Dataset" '
        f"from the Microsoft Download Center ({CATVSDOG_URL}) and unzip it into {root}/ "
        "(it holds PetImages/Cat and PetImages/Dog); it is not downloaded automatically "
        "(the Kaggle copy needs a login)."
    )


def _check_count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DataError(f"catvsdog option {name} must be a positive int, got {value!r}")
    return value


def _load_pet(path: Path) -> np.ndarray | None:
    """Decode an image: shorter side to 64, centre crop, (64, 64, 3) uint8; None if unreadable."""
    try:
        with Image.open(path) as img:
            if img.format == "JPEG":
                # Let libjpeg decode at 1/2, 1/4 or 1/8 scale while both sides stay >= 64:
                # several times faster on the ~500x375 photos, same output geometry.
                img.draft("RGB", (CATVSDOG_SIZE, CATVSDOG_SIZE))
            img = img.convert("RGB")
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        # Zero-byte files, truncated or corrupt JPEGs (UnidentifiedImageError is an OSError).
        return None
    width, height = img.size
    scale = CATVSDOG_SIZE / min(width, height)
    new_w = max(CATVSDOG_SIZE, round(width * scale))
    new_h = max(CATVSDOG_SIZE, round(height * scale))
    img = img.resize((new_w, new_h), Image.Resampling.BILINEAR)
    left, top = (new_w - CATVSDOG_SIZE) // 2, (new_h - CATVSDOG_SIZE) // 2
    img = img.crop((left, top, left + CATVSDOG_SIZE, top + CATVSDOG_SIZE))
    return np.asarray(img, dtype=np.uint8)


def _read_class(folder: Path) -> np.ndarray:
    """Readable images of one class folder in sorted file-name order, (n, 64, 64, 3) uint8."""
    files = sorted(
        f
        for f in folder.iterdir()
        if f.is_file() and not f.name.startswith(".") and f.suffix.lower() in IMAGE_EXTENSIONS
    )
    images = np.empty((len(files), CATVSDOG_SIZE, CATVSDOG_SIZE, 3), dtype=np.uint8)
    n_read, skipped = 0, []
    for path in files:
        image = _load_pet(path)
        if image is None:
            skipped.append(path.name)
            continue
        images[n_read] = image
        n_read += 1
    if skipped:
        shown = ", ".join(skipped[:_N_LOGGED]) + (", ..." if len(skipped) > _N_LOGGED else "")
        logger.warning(
            "skipped %d unreadable image(s) of %d in %s: %s",
            len(skipped),
            len(files),
            folder,
            shown,
        )
    return images[:n_read]


def read_catvsdog(
    root: Path, *, n_train_per_class: int = 10000, n_test_per_class: int = 2500
) -> ImageDataset:
    """Read Cat-vs-Dog from ``<root>/PetImages/`` (or ``<root>/catvsdog/PetImages/``).

    Parameters
    ----------
    root : Path
        Data root.
    n_train_per_class : int, default=10000
        Training images per class: the first ones of the class's seed-0 permutation.
    n_test_per_class : int, default=2500
        Test images per class: the next ones of the same permutation.

    Returns
    -------
    ImageDataset
        ``2 * n_train_per_class`` training and ``2 * n_test_per_class`` test images of shape
        (64, 64, 3); classes ``("cat", "dog")``. Within a split, cats come first, each class
        in sorted file-name order.

    Raises
    ------
    MissingDataError
        If neither candidate folder holds both ``Cat/`` and ``Dog/``.
    DataError
        If an option is not a positive int, or a class has no readable image left for the
        test split after ``n_train_per_class`` (the test split takes the rest, at most
        ``n_test_per_class``). Unreadable images are skipped (logged
        as a warning with their count), not an error.
    """
    n_train = _check_count(n_train_per_class, "n_train_per_class")
    n_test = _check_count(n_test_per_class, "n_test_per_class")
    folder = _find_folder(root)
    parts: dict[str, list[np.ndarray]] = {"train_x": [], "train_y": [], "test_x": [], "test_y": []}
    for label, name in enumerate(CATVSDOG_CLASSES):
        class_folder = folder / _FOLDERS[name]
        images = _read_class(class_folder)
        # The download holds exactly 12,500 files per class, a few unreadable: the test
        # split takes what is left after training, at most n_test_per_class.
        if len(images) <= n_train:
            raise DataError(
                f"{class_folder}/ holds {len(images)} readable images, not more than "
                f"n_train_per_class = {n_train}; lower it or complete the folder"
            )
        # A fresh seed-0 generator per class: each class's split depends on its own files only.
        order = np.random.default_rng(_SPLIT_SEED).permutation(len(images))
        for split, index in (
            ("train", np.sort(order[:n_train])),
            ("test", np.sort(order[n_train : n_train + n_test])),
        ):
            parts[f"{split}_x"].append(images[index])
            parts[f"{split}_y"].append(np.full(len(index), label, dtype=np.int64))
    logger.info(
        "read Cat-vs-Dog from %s: %d train, %d test images",
        folder,
        sum(map(len, parts["train_y"])),
        sum(map(len, parts["test_y"])),
    )
    return ImageDataset(
        name="catvsdog",
        train_images=np.concatenate(parts["train_x"]),
        train_labels=np.concatenate(parts["train_y"]),
        test_images=np.concatenate(parts["test_x"]),
        test_labels=np.concatenate(parts["test_y"]),
        class_names=CATVSDOG_CLASSES,
    )
