"""Reader for user data stored as one sub-folder of images per class.

Two layouts are accepted:

* ``<path>/train/<class>/*`` and ``<path>/test/<class>/*``: the given split is used;
* ``<path>/<class>/*``: each class is split into train and test by a fixed, stratified
  draw (``test_fraction``, seed 0).

Images are converted to RGB, resized so that the shorter side is ``image_size`` (bilinear)
and centre-cropped to ``image_size`` x ``image_size`` (docs/protocol.md,
"Datasets and splits").

A file that cannot be used stops the read with an error naming it (as a corrupt file always
did): a format other than PNG, JPEG/MPO, BMP, GIF, TIFF or WEBP, an aspect ratio whose resize
intermediate would exceed :data:`~pipeline_lib.data.image_files.DEFAULT_MAX_PIXELS` (checked
from the header, before decoding), or running out of memory on it
(:mod:`pipeline_lib.data.image_files`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
from PIL import Image

from pipeline_lib.data.base import DataError, ImageDataset, MissingDataError, check_class_name
from pipeline_lib.data.image_files import (
    DEFAULT_MAX_PIXELS,
    ImageError,
    ImageMemoryError,
    check_resized,
    crop_resize_shape,
    open_image,
)
from pipeline_lib.data.regular_files import image_entries
from pipeline_lib.data.split import holdout_split

__all__ = [
    "IMAGE_EXTENSIONS",
    "image_folder_class_names",
    "load_image",
    "read_image_folder",
]

logger = logging.getLogger(__name__)

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"})
_HOLDOUT_SEED = 0


def _require_path(path: str | os.PathLike | None) -> Path:
    if path is None or str(path) == "":
        raise DataError(
            "image_folder needs the option 'path' (the folder holding one sub-folder per "
            "class, or train/ and test/ each holding them)"
        )
    folder = Path(path)
    if not folder.is_dir():
        raise MissingDataError(
            f"image folder {folder}/ not found: expected {folder}/<class>/<images> or "
            f"{folder}/train/<class>/<images> and {folder}/test/<class>/<images>."
        )
    return folder


def _class_dirs(folder: Path) -> dict[str, Path]:
    """Sorted, validated class sub-folders of ``folder`` (hidden entries skipped)."""
    dirs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not dirs:
        raise DataError(f"{folder}/ has no class sub-folders")
    return {check_class_name(d.name, where=folder): d for d in dirs}


def _layout(folder: Path) -> tuple[Path, Path] | None:
    """``(train, test)`` folders for the split layout, None for the flat one."""
    train, test = folder / "train", folder / "test"
    if train.is_dir() and test.is_dir():
        return train, test
    if train.is_dir() or test.is_dir():
        raise DataError(
            f"{folder}/ has only one of train/ and test/: provide both, or put the class "
            "folders directly in it"
        )
    return None


def image_folder_class_names(
    root: object = None, *, path: str | os.PathLike | None = None, **_: object
) -> tuple[str, ...]:
    """List the class names of an image folder (its sorted class sub-folders).

    Parameters
    ----------
    root : object, default=None
        Ignored; the folder is given by ``path``.
    path : str or PathLike
        The image folder (relative paths are relative to the working directory).
    **_ : object
        Reader options that do not affect class names (``image_size``, ``test_fraction``).

    Returns
    -------
    tuple of str
        Sorted sub-folder names (of ``train/`` in the split layout).

    Raises
    ------
    DataError
        If ``path`` is missing or not a folder, or a class name is not wildcard-safe.
    """
    folder = _require_path(path)
    layout = _layout(folder)
    return tuple(_class_dirs(layout[0] if layout else folder))


def load_image(path: Path, image_size: int, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Read one image as RGB, shorter side resized to ``image_size``, centre-cropped.

    Parameters
    ----------
    path : Path
        Image file.
    image_size : int
        Side of the square output.
    max_pixels : int, default=DEFAULT_MAX_PIXELS
        Largest resize intermediate (pixels), checked from the header before decoding.

    Returns
    -------
    ndarray of shape (image_size, image_size, 3), dtype uint8

    Raises
    ------
    DataError
        If the file cannot be decoded; as :class:`~pipeline_lib.data.image_files.ImageError`
        subclasses if its format is not accepted, its intermediate is too large or it runs
        out of memory. Each message names the file.
    """
    try:
        with open_image(path) as img:
            width, height = img.size
            new_w, new_h = crop_resize_shape(width, height, image_size)
            check_resized(width, height, new_w, new_h, size=image_size, max_pixels=max_pixels)
            img = img.convert("RGB")
        img = img.resize((new_w, new_h), Image.Resampling.BILINEAR)
    except ImageError as err:
        raise type(err)(f"cannot use image {path}: {err}") from err
    except MemoryError as err:
        raise ImageMemoryError(f"ran out of memory reading image {path} ({err})") from err
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        # PIL reports some corrupt files as SyntaxError (e.g. a broken PNG chunk).
        raise DataError(f"cannot read image {path}: {err}") from err
    left, top = (new_w - image_size) // 2, (new_h - image_size) // 2
    img = img.crop((left, top, left + image_size, top + image_size))
    return np.asarray(img, dtype=np.uint8)


def _read_classes(
    class_dirs: dict[str, Path], class_names: tuple[str, ...], image_size: int
) -> tuple[np.ndarray, np.ndarray]:
    images, labels = [], []
    for label, name in enumerate(class_names):
        files = image_entries(class_dirs[name], IMAGE_EXTENSIONS)
        if not files:
            raise DataError(
                f"class folder {class_dirs[name]}/ holds no images "
                f"({', '.join(sorted(IMAGE_EXTENSIONS))})"
            )
        images.extend(load_image(f, image_size) for f in files)
        labels.extend([label] * len(files))
    return np.stack(images), np.asarray(labels, dtype=np.int64)


def read_image_folder(
    root: object = None,
    *,
    path: str | os.PathLike | None = None,
    image_size: int = 32,
    test_fraction: float = 0.3,
) -> ImageDataset:
    """Read an image-folder data set.

    Parameters
    ----------
    root : object, default=None
        Ignored; the folder is given by ``path``.
    path : str or PathLike
        The image folder (relative paths are relative to the working directory). Required.
    image_size : int, default=32
        Side of the square images after resize and centre crop.
    test_fraction : float, default=0.3
        Fraction of each class held out as test split in the flat layout (seed 0); unused
        when ``train/`` and ``test/`` exist.

    Returns
    -------
    ImageDataset
        Images of shape (image_size, image_size, 3); class names are the sorted sub-folder
        names. Files are read in sorted name order.

    Raises
    ------
    MissingDataError
        If ``path`` does not exist.
    DataError
        If ``path`` is not given, ``image_size`` or ``test_fraction`` is invalid, a class
        name is not wildcard-safe, the test classes differ from the train classes, a class
        has no images, or an image cannot be decoded.
    """
    folder = _require_path(path)
    if isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 1:
        raise DataError(
            f"image_folder option image_size must be a positive int, got {image_size!r}"
        )
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, int | float):
        raise DataError(
            f"image_folder option test_fraction must be a number, got {test_fraction!r}"
        )
    if not 0.0 < test_fraction < 1.0:
        raise DataError(f"image_folder option test_fraction must be in (0, 1), got {test_fraction}")
    layout = _layout(folder)
    if layout is not None:
        train_dirs, test_dirs = _class_dirs(layout[0]), _class_dirs(layout[1])
        if set(test_dirs) != set(train_dirs):
            raise DataError(
                f"class folders differ between {layout[0]}/ ({', '.join(train_dirs)}) and "
                f"{layout[1]}/ ({', '.join(test_dirs)})"
            )
        class_names = tuple(train_dirs)
        train_images, train_labels = _read_classes(train_dirs, class_names, image_size)
        test_images, test_labels = _read_classes(test_dirs, class_names, image_size)
    else:
        class_dirs = _class_dirs(folder)
        class_names = tuple(class_dirs)
        images, labels = _read_classes(class_dirs, class_names, image_size)
        train, test = holdout_split(labels, test_fraction=test_fraction, seed=_HOLDOUT_SEED)
        train_images, train_labels = images[train], labels[train]
        test_images, test_labels = images[test], labels[test]
    if len(test_images) == 0:
        raise DataError(f"{folder}/: the test split is empty (raise test_fraction or add images)")
    logger.info(
        "read image folder %s: %d train, %d test", folder, len(train_images), len(test_images)
    )
    return ImageDataset(
        name="image_folder",
        train_images=train_images,
        train_labels=train_labels,
        test_images=test_images,
        test_labels=test_labels,
        class_names=class_names,
    )
