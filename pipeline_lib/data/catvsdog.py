"""Reader for Cat-vs-Dog (Asirra images) in two layouts, chosen by the ``layout`` option.

``kaggle``: ``<root>/dogs-vs-cats/train/{cat,dog}.<id>.jpg`` (or the same under
``<root>/catvsdog/``), the 25,000 training images of the Kaggle "Dogs vs. Cats" competition,
which the authors' released code (google-research/deep_representation_one_class) reads. It is
read the way that code prepares and splits it:

- ``script/prepare_dogvscat.py``: the ``.jpg`` names of ``train/`` in sorted order, label 1
  (dog) if the name starts with ``dog``, else 0 (cat) if it starts with ``cat``; each image
  decoded to RGB (EXIF orientation applied, as ``cv2.imread`` does), resized with
  ``cv2.INTER_AREA`` (:func:`pipeline_lib.data.area_resize.area_resize`, which documents where
  it may differ from cv2 by one grey level) so that the shorter side is 64 and the longer
  ``int(64 * long / short)``, then centre-cropped at offset ``(new - 64) // 2``;
- ``data/dogvscat.py``: the cats and the dogs, each in file order, split by one
  ``np.random.seed(0)`` state: the cats' permutation is drawn first, the dogs' second; the
  first 10,000 of each permutation train, the rest (2,500) test, in permutation order. Here
  ``np.random.RandomState(0)`` stands for the global seed (the global state is not touched).

``petimages``: ``<root>/PetImages/{Cat,Dog}/*.jpg`` (or the same under ``<root>/catvsdog/``),
as unzipped from the Microsoft Download Center's "Kaggle Cats and Dogs Dataset" (the same
photos, other names, a few unreadable files). Protocol (docs/protocol.md, "Datasets and splits"):
images are converted to RGB, resized so that the shorter side is 64 (bilinear) and
centre-cropped to 64x64. The train/test split is the fixed seed-0 split: per class,
``np.random.default_rng(0).permutation`` of the class's readable images in sorted file-name
order; the first ``n_train_per_class`` are the training split, the next ``n_test_per_class``
the test split (10,000 and 2,500 in the paper), each in file order.

``auto`` (default) reads the Kaggle layout when its folder exists (the released code's
source), else PetImages. In both layouts unreadable files are skipped, counted and logged.
So are files refused before decoding (:mod:`pipeline_lib.data.image_files`; each is logged
with its reason): a format other than PNG, JPEG/MPO, BMP, GIF, TIFF or WEBP, or an aspect
ratio whose resize (intermediate image, or the area-resize weight tables) would exceed
:data:`~pipeline_lib.data.image_files.DEFAULT_MAX_PIXELS`; and a file whose decoding runs
out of memory.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from PIL import Image, ImageOps

from pipeline_lib.data.area_resize import area_resize
from pipeline_lib.data.base import DataError, ImageDataset, MissingDataError
from pipeline_lib.data.image_files import (
    DEFAULT_MAX_PIXELS,
    ImageError,
    ImageMemoryError,
    ImageSizeError,
    check_resized,
    crop_resize_shape,
    open_image,
)
from pipeline_lib.data.image_folder import IMAGE_EXTENSIONS
from pipeline_lib.data.regular_files import image_entries, note_skipped, split_regular

__all__ = [
    "CATVSDOG_CLASSES",
    "CATVSDOG_KAGGLE_URL",
    "CATVSDOG_LAYOUTS",
    "CATVSDOG_URL",
    "CATVSDOG_SIZE",
    "catvsdog_candidates",
    "kaggle_candidates",
    "read_catvsdog",
    "released_split",
    "resize_and_crop",
]

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

CATVSDOG_CLASSES: tuple[str, ...] = ("cat", "dog")
CATVSDOG_SIZE = 64
CATVSDOG_URL = "https://www.microsoft.com/en-us/download/details.aspx?id=54765"
CATVSDOG_KAGGLE_URL = "https://www.kaggle.com/c/dogs-vs-cats/data"
CATVSDOG_LAYOUTS: tuple[str, ...] = ("auto", "kaggle", "petimages")

_FOLDERS = {"cat": "Cat", "dog": "Dog"}  # class name -> sub-folder of PetImages
_SPLIT_SEED = 0
_N_LOGGED = 5  # unreadable file names quoted in the warning
_KAGGLE_PREFIXES = (("dog", 1), ("cat", 0))  # checked in this order, as the released script
_KAGGLE_N_FILES = 25000  # the released script asserts this many


def catvsdog_candidates(root: Path) -> tuple[Path, ...]:
    """Folders searched for ``PetImages`` under ``root``, in order: ``<root>/PetImages`` and
    ``<root>/catvsdog/PetImages``."""
    return (Path(root) / "PetImages", Path(root) / "catvsdog" / "PetImages")


def kaggle_candidates(root: Path) -> tuple[Path, ...]:
    """Folders searched for the Kaggle ``train/`` images under ``root``, in order:
    ``<root>/dogs-vs-cats/train`` (the released code's ``$DATA_DIR/dogs-vs-cats/train``) and
    ``<root>/catvsdog/dogs-vs-cats/train``."""
    return (
        Path(root) / "dogs-vs-cats" / "train",
        Path(root) / "catvsdog" / "dogs-vs-cats" / "train",
    )


def _find_petimages(root: Path) -> Path | None:
    for folder in catvsdog_candidates(root):
        if all((folder / sub).is_dir() for sub in _FOLDERS.values()):
            return folder
    return None


def _find_kaggle(root: Path) -> Path | None:
    return next((folder for folder in kaggle_candidates(root) if folder.is_dir()), None)


def _hint(what: str, candidates: tuple[Path, ...], source: str) -> str:
    """``what`` is expected in one of ``candidates``; ``source`` says where to get it."""
    return f"{what} in one of: {', '.join(f'{c}/' for c in candidates)}. {source}"


def _petimages_hint(root: Path) -> str:
    return _hint(
        "the folders Cat/ and Dog/ of JPEGs",
        catvsdog_candidates(root),
        'Get the "Kaggle Cats and Dogs Dataset" from the Microsoft Download Center '
        f"({CATVSDOG_URL}) and unzip it into {root}/ (it holds PetImages/Cat and PetImages/Dog)",
    )


def _kaggle_hint(root: Path) -> str:
    return _hint(
        "the files cat.<id>.jpg and dog.<id>.jpg",
        kaggle_candidates(root),
        f'Get train.zip of the Kaggle "Dogs vs. Cats" competition ({CATVSDOG_KAGGLE_URL}) and '
        f"unzip it into {root}/dogs-vs-cats/",
    )


_NOT_DOWNLOADED = "; it is not downloaded automatically (the Kaggle copy needs a login)."


def _find_folder(root: Path, layout: str) -> tuple[str, Path]:
    """The layout to read and its folder: Kaggle first under ``auto``, as the released code."""
    if layout in ("auto", "kaggle"):
        folder = _find_kaggle(root)
        if folder is not None:
            return "kaggle", folder
    if layout in ("auto", "petimages"):
        folder = _find_petimages(root)
        if folder is not None:
            return "petimages", folder
    if layout == "kaggle":
        message = f"Cat-vs-Dog (layout kaggle) not found: expected {_kaggle_hint(root)}"
    elif layout == "petimages":
        message = f"Cat-vs-Dog not found: expected {_petimages_hint(root)}"
    else:
        message = (
            f"Cat-vs-Dog not found: expected {_kaggle_hint(root)} (layout kaggle, read "
            f"first), or {_petimages_hint(root)} (layout petimages)"
        )
    raise MissingDataError(message + _NOT_DOWNLOADED)


def _check_layout(value: object) -> str:
    if value not in CATVSDOG_LAYOUTS:
        raise DataError(
            f"catvsdog option layout must be one of {', '.join(CATVSDOG_LAYOUTS)}, got {value!r}"
        )
    return str(value)


def _check_count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DataError(f"catvsdog option {name} must be a positive int, got {value!r}")
    return value


def _decode(path: Path, read: Callable[[Image.Image], _T]) -> _T | None:
    """``read(image)`` on the opened file; None if the file is unreadable.

    Zero-byte files and truncated or corrupt images give None (``UnidentifiedImageError`` is
    an ``OSError``); an :class:`ImageError` (a refusal before decoding) propagates, and
    running out of memory becomes an :class:`ImageMemoryError`.
    """
    try:
        with open_image(path) as img:
            return read(img)
    except ImageError:
        raise
    except MemoryError as err:
        raise ImageMemoryError(f"ran out of memory decoding it ({err})") from err
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        return None


def _draft_rgb(img: Image.Image) -> Image.Image:
    """The Pet image as RGB, decoded at a reduced JPEG scale where that keeps both sides >= 64."""
    width, height = img.size
    new_w, new_h = crop_resize_shape(width, height, CATVSDOG_SIZE)
    check_resized(width, height, new_w, new_h, size=CATVSDOG_SIZE, max_pixels=DEFAULT_MAX_PIXELS)
    if img.format == "JPEG":
        # Let libjpeg decode at 1/2, 1/4 or 1/8 scale while both sides stay >= 64:
        # several times faster on the ~500x375 photos, same output geometry.
        img.draft("RGB", (CATVSDOG_SIZE, CATVSDOG_SIZE))
    return img.convert("RGB")


def _load_pet(path: Path) -> np.ndarray | None:
    """Decode an image: shorter side to 64, centre crop, (64, 64, 3) uint8; None if unreadable.

    Raises
    ------
    ImageError
        If the file is refused before decoding (format, resize intermediate) or decoding it
        runs out of memory; the message says why.
    """
    img = _decode(path, _draft_rgb)
    if img is None:
        return None
    # The drafted size, not the header's: the resize starts from the decoded pixels.
    new_w, new_h = crop_resize_shape(*img.size, CATVSDOG_SIZE)
    try:
        img = img.resize((new_w, new_h), Image.Resampling.BILINEAR)
    except MemoryError as err:
        raise ImageMemoryError(f"ran out of memory resizing it ({err})") from err
    left, top = (new_w - CATVSDOG_SIZE) // 2, (new_h - CATVSDOG_SIZE) // 2
    img = img.crop((left, top, left + CATVSDOG_SIZE, top + CATVSDOG_SIZE))
    return np.asarray(img, dtype=np.uint8)


def _load_or_skip(load: Any, path: Path) -> np.ndarray | None:
    """``load(path)``, or None after a warning naming the file when it is refused."""
    try:
        return load(path)
    except ImageError as error:
        logger.warning("skipped %s: %s", path, error)
        return None


def _log_skipped(skipped: list[str], n_files: int, folder: Path) -> None:
    """Warn with the count and the first names of the unreadable files of ``folder``."""
    if not skipped:
        return
    shown = ", ".join(skipped[:_N_LOGGED]) + (", ..." if len(skipped) > _N_LOGGED else "")
    logger.warning(
        "skipped %d unreadable image(s) of %d in %s: %s", len(skipped), n_files, folder, shown
    )


def _read_class(folder: Path) -> np.ndarray:
    """Readable images of one class folder in sorted file-name order, (n, 64, 64, 3) uint8."""
    files = image_entries(folder, IMAGE_EXTENSIONS)
    images = np.empty((len(files), CATVSDOG_SIZE, CATVSDOG_SIZE, 3), dtype=np.uint8)
    n_read, skipped = 0, []
    for path in files:
        image = _load_or_skip(_load_pet, path)
        if image is None:
            skipped.append(path.name)
            continue
        images[n_read] = image
        n_read += 1
    _log_skipped(skipped, len(files), folder)
    return images[:n_read]


def _dataset(parts: dict[str, list[np.ndarray]], folder: Path) -> ImageDataset:
    """Concatenate the per-class pieces (cats first) into the data set and log its size."""
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


def _read_petimages(folder: Path, n_train: int, n_test: int) -> ImageDataset:
    """The PetImages layout: per-class ``default_rng(0)`` split, each split in file order."""
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
    return _dataset(parts, folder)


def resize_and_crop(pixels: np.ndarray, side: int = CATVSDOG_SIZE) -> np.ndarray:
    """The released ``resize_and_crop_image``: shorter side to ``side`` (INTER_AREA), centre crop.

    Parameters
    ----------
    pixels : np.ndarray
        uint8 image of shape (H, W, 3).
    side : int, default=64
        Output side.

    Returns
    -------
    np.ndarray
        uint8 array of shape (side, side, 3). The longer side is first resized to
        ``int(side * long / short)`` (truncated, as the released script; a square image
        takes the width branch), the crop starts at ``(new - side) // 2``.
    """
    height, width = pixels.shape[:2]
    new_height = new_width = side
    if height > width:
        new_height = int(side * height / width)
    else:
        new_width = int(side * width / height)
    resized = area_resize(pixels, new_height, new_width)
    top, left = (new_height - side) // 2, (new_width - side) // 2
    return resized[top : top + side, left : left + side]


def _check_kaggle_size(width: int, height: int) -> None:
    """Refuse, from the header, a file whose :func:`resize_and_crop` would not fit in memory.

    Besides the intermediate image, :func:`~pipeline_lib.data.area_resize.area_resize` builds
    a dense float64 weight table per axis (output x input pixels): for a 10,000 x 10 image
    (64,000 x 10,000 entries) that is 5 GB. Both are bounded by ``DEFAULT_MAX_PIXELS``.
    """
    long, short = max(width, height), min(width, height)
    new_long = int(CATVSDOG_SIZE * long / short) if short else 0
    new_w, new_h = (new_long, CATVSDOG_SIZE) if width >= height else (CATVSDOG_SIZE, new_long)
    check_resized(width, height, new_w, new_h, size=CATVSDOG_SIZE, max_pixels=DEFAULT_MAX_PIXELS)
    entries = new_long * long + CATVSDOG_SIZE * short
    if entries > DEFAULT_MAX_PIXELS:
        raise ImageSizeError(
            f"image is {width} x {height}: the INTER_AREA resize to {new_w} x {new_h} needs "
            f"{entries:,} weight-table entries, over the limit of {DEFAULT_MAX_PIXELS:,}; "
            "crop it to the part to use"
        )


def _full_rgb(img: Image.Image) -> np.ndarray:
    """The Kaggle image as ``cv2.imread`` gives it: full size, EXIF orientation applied, RGB."""
    _check_kaggle_size(*img.size)
    # No draft mode here: cv2 decodes at full size before INTER_AREA.
    return np.asarray(ImageOps.exif_transpose(img).convert("RGB"), dtype=np.uint8)


def _load_kaggle(path: Path) -> np.ndarray | None:
    """Decode as ``cv2.imread`` (full size, EXIF orientation applied) then the released crop.

    Raises
    ------
    ImageError
        As :func:`_load_pet`.
    """
    pixels = _decode(path, _full_rgb)
    if pixels is None:
        return None
    try:
        return resize_and_crop(pixels)
    except MemoryError as err:
        raise ImageMemoryError(f"ran out of memory resizing it ({err})") from err


def _kaggle_label(name: str, folder: Path) -> int:
    for prefix, label in _KAGGLE_PREFIXES:
        if name.startswith(prefix):
            return label
    raise DataError(
        f"{folder / name} is neither a cat.* nor a dog.* file; the Kaggle train/ folder holds "
        "only those (the released script would give it the previous file's label): move it out"
    )


def _kaggle_files(folder: Path) -> tuple[list[str], np.ndarray]:
    """The released file list: sorted ``.jpg`` names of ``folder`` and their 0/1 labels."""
    entries = sorted(folder / n for n in os.listdir(folder) if n.endswith(".jpg"))
    files, skipped = split_regular(entries)
    note_skipped(folder, skipped, len(entries))
    names = [path.name for path in files]
    labels = np.array([_kaggle_label(name, folder) for name in names], dtype=np.int64)
    return names, labels


def released_split(labels: np.ndarray, n_train: int, n_test: int) -> dict[str, np.ndarray]:
    """Indices of the released ``data/dogvscat.py`` split, per class and split, cats first.

    One ``RandomState(0)`` draws the cats' permutation, then the dogs': the dogs' split
    depends on the number of cats, as in the released code's ``np.random.seed(0)``.

    Parameters
    ----------
    labels : ndarray of shape (n,), int
        0 (cat) or 1 (dog) per image of the released file list.
    n_train, n_test : int
        Per class: the first ``n_train`` of its permutation train, the next ``n_test`` test.

    Returns
    -------
    dict of str to ndarray
        ``train_0``, ``test_0``, ``train_1``, ``test_1``: indices into ``labels``, each in
        permutation order.
    """
    rng = np.random.RandomState(_SPLIT_SEED)
    split: dict[str, np.ndarray] = {}
    for label in range(len(CATVSDOG_CLASSES)):
        members = np.flatnonzero(labels == label)
        order = rng.permutation(len(members))
        split[f"train_{label}"] = members[order[:n_train]]
        split[f"test_{label}"] = members[order[n_train : n_train + n_test]]
    return split


def _read_kaggle(folder: Path, n_train: int, n_test: int) -> ImageDataset:
    """The Kaggle layout read, resized and split as the authors' released code does."""
    names, labels = _kaggle_files(folder)
    if n_train == 10000 and len(names) != _KAGGLE_N_FILES:
        logger.warning(
            "%s holds %d .jpg files; the released prepare_dogvscat.py asserts %d",
            folder,
            len(names),
            _KAGGLE_N_FILES,
        )
    images = np.empty((len(names), CATVSDOG_SIZE, CATVSDOG_SIZE, 3), dtype=np.uint8)
    readable = np.zeros(len(names), dtype=bool)
    for i, name in enumerate(names):
        image = _load_or_skip(_load_kaggle, folder / name)
        if image is not None:
            images[i], readable[i] = image, True
    _log_skipped([n for n, ok in zip(names, readable, strict=True) if not ok], len(names), folder)
    images, labels = images[readable], labels[readable]
    counts = np.bincount(labels, minlength=len(CATVSDOG_CLASSES))
    if counts.min() <= n_train:
        raise DataError(
            f"{folder}/ holds {counts[0]} readable cat and {counts[1]} readable dog images; "
            f"the released split needs more than n_train_per_class = {n_train} of each; "
            "lower it or complete the folder"
        )
    split = released_split(labels, n_train, n_test)
    parts: dict[str, list[np.ndarray]] = {"train_x": [], "train_y": [], "test_x": [], "test_y": []}
    for name in ("train", "test"):
        for label in range(len(CATVSDOG_CLASSES)):
            index = split[f"{name}_{label}"]
            parts[f"{name}_x"].append(images[index])
            parts[f"{name}_y"].append(labels[index])
    return _dataset(parts, folder)


def read_catvsdog(
    root: Path,
    *,
    layout: str = "auto",
    n_train_per_class: int = 10000,
    n_test_per_class: int = 2500,
) -> ImageDataset:
    """Read Cat-vs-Dog from the Kaggle ``dogs-vs-cats/train/`` or the ``PetImages/`` layout.

    Parameters
    ----------
    root : Path
        Data root.
    layout : {"auto", "kaggle", "petimages"}, default="auto"
        ``kaggle``: ``<root>/dogs-vs-cats/train/{cat,dog}.<id>.jpg``, read, resized and
        split as the authors' released code; ``petimages``: ``<root>/PetImages/{Cat,Dog}/``
        (both also under ``<root>/catvsdog/``); ``auto``: Kaggle when its folder exists,
        else PetImages. See the module docstring for each layout's protocol.
    n_train_per_class : int, default=10000
        Training images per class: the first ones of the class's seed-0 permutation (the
        released split uses 10,000; tests use fewer).
    n_test_per_class : int, default=2500
        Test images per class: the next ones of the same permutation.

    Returns
    -------
    ImageDataset
        ``2 * n_train_per_class`` training and up to ``2 * n_test_per_class`` test images of
        shape (64, 64, 3); classes ``("cat", "dog")``; within a split, cats come first. Each
        class is in sorted file-name order (``petimages``) or in the order of its
        permutation, as the released arrays (``kaggle``).

    Raises
    ------
    MissingDataError
        If the layout's folder is missing (the message names the folders searched and the
        download to unzip there).
    DataError
        If an option is invalid, a Kaggle ``.jpg`` name starts with neither ``cat`` nor
        ``dog``, or a class has no readable image left for the test split after
        ``n_train_per_class`` (the test split takes the rest, at most ``n_test_per_class``).
        Unreadable images are skipped (logged as a warning with their count), not an error.
    """
    chosen = _check_layout(layout)
    n_train = _check_count(n_train_per_class, "n_train_per_class")
    n_test = _check_count(n_test_per_class, "n_test_per_class")
    found, folder = _find_folder(Path(root), chosen)
    if found == "kaggle":
        return _read_kaggle(folder, n_train, n_test)
    return _read_petimages(folder, n_train, n_test)
