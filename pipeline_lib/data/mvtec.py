"""Reader for MVTec AD and for user data in the same folder layout.

Layout of one category (Bergmann et al., CVPR 2019; the official download)::

    <category>/train/good/*.png                      defect-free training images
    <category>/test/good/*.png                       defect-free test images
    <category>/test/<defect>/<name>.png              defective test images, one folder per type
    <category>/ground_truth/<defect>/<name>_mask.png pixel mask of each defective test image

A category is found by name under the MVTec root (``<root>/<category>/``), or given as a
path, so an industrial user can point the pipeline at their own product images in this
layout.

Protocol (docs/protocol.md, "MVTec AD"; paper App. E.2): every image is resized to
``image_size`` x ``image_size`` (256; bilinear) and converted to RGB (the grey-scale
categories are replicated to three channels). Masks are resized with nearest neighbour, so
they stay binary, and any non-zero mask value marks a defective pixel.

Masks: a category either has a complete mask set (every defective test image has its
mask, of the same size as the image) or none at all (no ``ground_truth/`` folder, e.g.
the shared ``bottle`` copy); without masks only image-level metrics can be computed, and
the reader says so in the log. A partial mask set, or a mask of another size than its
image, is an error naming the file.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from pipeline_lib.data.base import DataError, MissingDataError, check_class_name
from pipeline_lib.data.image_files import open_image
from pipeline_lib.data.image_folder import IMAGE_EXTENSIONS
from pipeline_lib.data.regular_files import image_entries

__all__ = [
    "MASK_MODES",
    "MVTEC_PATHS_ENV",
    "MVTEC_CATEGORIES",
    "MVTEC_GROUPS",
    "MVTEC_OBJECTS",
    "MVTEC_TEXTURES",
    "MVTecCategory",
    "category_from_arrays",
    "category_group",
    "category_path_from_env",
    "category_to_arrays",
    "discover_categories",
    "export_category_paths",
    "read_mvtec_category",
    "resolve_category_paths",
]

logger = logging.getLogger(__name__)

#: The 10 object categories of MVTec AD (paper App. E.1).
MVTEC_OBJECTS: tuple[str, ...] = (
    "bottle",
    "cable",
    "capsule",
    "hazelnut",
    "metal_nut",
    "pill",
    "screw",
    "toothbrush",
    "transistor",
    "zipper",
)
#: The 5 texture categories of MVTec AD.
MVTEC_TEXTURES: tuple[str, ...] = ("carpet", "grid", "leather", "tile", "wood")
#: All 15 categories, objects first (the order of the tables).
MVTEC_CATEGORIES: tuple[str, ...] = MVTEC_OBJECTS + MVTEC_TEXTURES
#: Category -> ``"object"`` or ``"texture"`` (the paper's summary rows).
MVTEC_GROUPS: Mapping[str, str] = {
    **{name: "object" for name in MVTEC_OBJECTS},
    **{name: "texture" for name in MVTEC_TEXTURES},
}
#: How masks are handled: ``auto`` reads them when ``ground_truth/`` exists (and then needs
#: every one), ``required`` fails without them, ``none`` ignores them.
MASK_MODES: tuple[str, ...] = ("auto", "required", "none")

#: Environment variable through which the workflow hands category folders to its jobs
#: (a JSON object name -> absolute path): a file location, like the data root, so moving
#: the data never re-runs finished jobs.
MVTEC_PATHS_ENV = "DROC_MVTEC_PATHS"

_GOOD = "good"
_MASK_SUFFIX = "_mask"


@dataclass(frozen=True)
class MVTecCategory:
    """One category read with the protocol's preprocessing.

    Attributes
    ----------
    name : str
        Category name (wildcard-safe).
    group : str
        ``"object"``, ``"texture"`` or, for user categories without a declared group,
        ``"other"``.
    train_images : ndarray of shape (n_train, size, size, 3), uint8
        ``train/good``, sorted by file name.
    test_images : ndarray of shape (n_test, size, size, 3), uint8
        ``test/good`` first, then each defect folder in sorted order, files sorted.
    test_labels : ndarray of shape (n_test,), int64
        0 for ``good``, 1 for a defect (the outlier is the positive class).
    test_defects : tuple of str
        Defect type (sub-folder name) of each test image, ``"good"`` for the good ones.
    test_files : tuple of str
        Path of each test image relative to the category folder (for figures and logs).
    test_masks : ndarray of shape (n_test, size, size), uint8 in {0, 1}, or None
        Pixel masks (all zero for good images); None when the category has no masks.
    """

    name: str
    group: str
    train_images: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    test_defects: tuple[str, ...]
    test_files: tuple[str, ...]
    test_masks: np.ndarray | None

    @property
    def has_masks(self) -> bool:
        """Whether pixel-level metrics (pixel AUC, PRO) can be computed."""
        return self.test_masks is not None


def category_group(name: str, groups: Mapping[str, str] | None = None) -> str:
    """Group of a category: ``groups[name]`` if given, else MVTec's, else ``"other"``."""
    if groups and name in groups:
        return groups[name]
    return MVTEC_GROUPS.get(name, "other")


def _image_files(folder: Path) -> list[Path]:
    return image_entries(folder, IMAGE_EXTENSIONS)


def _is_category(folder: Path) -> bool:
    return (folder / "train" / _GOOD).is_dir()


def discover_categories(root: str | os.PathLike) -> tuple[str, ...]:
    """Category folders under ``root`` (those holding ``train/good``), sorted.

    Raises
    ------
    MissingDataError
        If ``root`` is not a folder or holds no category.
    """
    root = Path(root)
    if not root.is_dir():
        raise MissingDataError(
            f"MVTec root {root}/ not found: expected <root>/<category>/train/good/ (the MVTec AD "
            "download unpacked there), or set mvtec.root / mvtec.paths in the config"
        )
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and _is_category(p))
    if not names:
        raise MissingDataError(
            f"MVTec root {root}/ holds no category: expected <category>/train/good/ folders"
        )
    return tuple(check_class_name(name, where=root) for name in names)


def resolve_category_paths(
    root: str | os.PathLike | None,
    categories: str | Sequence[str],
    paths: Mapping[str, str | os.PathLike] | None = None,
) -> dict[str, Path]:
    """Category name -> folder, for the config's ``mvtec.categories`` and ``mvtec.paths``.

    Parameters
    ----------
    root : str, PathLike or None
        Folder holding the categories by name; may be None when every category is given
        in ``paths``.
    categories : "all" or sequence of str
        ``"all"``: every category folder found under ``root`` plus every entry of
        ``paths``; a list: these names, each from ``paths`` if listed there, else
        ``<root>/<name>`` (not checked here, so a dry run needs no data).
    paths : mapping of str to path, optional
        User categories: name -> category folder in the MVTec layout.

    Returns
    -------
    dict of str to Path
        In the order given (``"all"``: the standard categories first, objects then
        textures, then the others sorted).

    Raises
    ------
    DataError
        If a name is not wildcard-safe, or a listed category is neither in ``paths`` nor
        can be looked up because ``root`` is None.
    MissingDataError
        With ``"all"``, if ``root`` is given but holds no category.
    """
    paths = {
        check_class_name(name, where="mvtec.paths"): Path(p) for name, p in (paths or {}).items()
    }
    if categories == "all":
        found = list(discover_categories(root)) if root is not None else []
        names = [n for n in MVTEC_CATEGORIES if n in found or n in paths]
        names += sorted({*found, *paths} - set(names))
        if not names:
            raise DataError(
                "mvtec.categories is 'all' but neither mvtec.root nor mvtec.paths is set"
            )
    else:
        names = [check_class_name(name, where="mvtec.categories") for name in categories]
    resolved: dict[str, Path] = {}
    for name in names:
        if name in paths:
            resolved[name] = paths[name]
        elif root is None:
            raise DataError(
                f"MVTec category {name!r} has no folder: add it to mvtec.paths or set mvtec.root"
            )
        else:
            resolved[name] = Path(root) / name
    return resolved


def _open_as(path: Path, mode: str, what: str) -> Image.Image:
    """Decode ``path`` and convert it to ``mode``; a ``DataError`` naming the ``what`` file."""
    # open_image: PNG, JPEG/MPO, BMP, GIF, TIFF or WEBP only (user categories are foreign
    # files); another format raises ImageFormatError, a ValueError, named below.
    try:
        with open_image(path) as img:
            img.load()
            return img.convert(mode)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        raise DataError(f"cannot read {what} {path}: {err}") from err


def _open_rgb(path: Path) -> Image.Image:
    return _open_as(path, "RGB", "image")


def _resize_image(img: Image.Image, size: int) -> np.ndarray:
    if img.size != (size, size):
        img = img.resize((size, size), Image.Resampling.BILINEAR)
    return np.asarray(img, dtype=np.uint8)


def _read_mask(
    path: Path, image_size_wh: tuple[int, int], image_path: Path, size: int
) -> np.ndarray:
    mask = _open_as(path, "L", "mask")
    if mask.size != image_size_wh:
        raise DataError(
            f"mask {path} is {mask.size[0]}x{mask.size[1]} but its image {image_path} is "
            f"{image_size_wh[0]}x{image_size_wh[1]}: a mask must have its image's size"
        )
    if mask.size != (size, size):
        mask = mask.resize((size, size), Image.Resampling.NEAREST)
    return (np.asarray(mask) > 0).astype(np.uint8)


def _mask_path(ground_truth: Path, defect: str, image: Path) -> Path | None:
    """``ground_truth/<defect>/<stem>_mask.<ext>`` (MVTec writes .png), or None if absent."""
    for suffix in (".png", *sorted(IMAGE_EXTENSIONS - {".png"})):
        candidate = ground_truth / defect / f"{image.stem}{_MASK_SUFFIX}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def read_mvtec_category(
    path: str | os.PathLike,
    *,
    name: str | None = None,
    group: str | None = None,
    image_size: int = 256,
    masks: str = "auto",
    max_train: int | None = None,
    max_test_per_type: int | None = None,
) -> MVTecCategory:
    """Read one category folder in the MVTec AD layout.

    Parameters
    ----------
    path : str or PathLike
        The category folder (holding ``train/``, ``test/`` and optionally
        ``ground_truth/``).
    name : str or None, default=None
        Category name; None uses the folder name.
    group : str or None, default=None
        ``"object"`` / ``"texture"``; None uses MVTec's grouping, ``"other"`` for names
        outside MVTec.
    image_size : int, default=256
        Side every image (and mask) is resized to (the paper: 256).
    masks : {"auto", "required", "none"}, default="auto"
        ``auto``: read the masks when ``ground_truth/`` exists, then require all of them;
        without ``ground_truth/`` return ``test_masks=None`` and log that only image-level
        metrics are possible. ``required``: fail without masks. ``none``: ignore masks.
    max_train : int or None, default=None
        Keep the first ``max_train`` training images in file-name order (smoke runs).
    max_test_per_type : int or None, default=None
        Keep the first ``max_test_per_type`` images of each test folder (smoke runs).

    Returns
    -------
    MVTecCategory

    Raises
    ------
    MissingDataError
        If the folder or ``train/good`` is missing.
    DataError
        If an image cannot be decoded, ``train/good`` or ``test/good`` is empty, there is no
        defect folder, a defective test image has no mask while ``ground_truth/`` exists
        (or ``masks="required"``), a mask's size differs from its image's, or an option
        is invalid. The message names the file or folder.
    """
    folder = Path(path)
    sizes = {"image_size": image_size, "max_train": max_train}
    _check_options(masks, {**sizes, "max_test_per_type": max_test_per_type})
    name = check_class_name(name or folder.name, where=folder.parent)
    train_dir, gt_dir = folder / "train" / _GOOD, folder / "ground_truth"
    defects = _defect_types(folder, name)
    with_masks = _with_masks(masks, gt_dir, name)
    train_files = _image_files(train_dir)[:max_train]
    if not train_files:
        raise DataError(f"MVTec category {name!r}: {train_dir}/ holds no image")
    train = np.stack([_resize_image(_open_rgb(f), image_size) for f in train_files])
    test = _read_test(
        folder,
        name,
        (_GOOD, *defects),
        image_size=image_size,
        max_per_type=max_test_per_type,
        gt_dir=gt_dir if with_masks else None,
    )
    labels = np.array([0 if d == _GOOD else 1 for d in test["defects"]], dtype=np.int64)
    logger.info(
        "read MVTec category %r from %s: %d train, %d test images (%d good, %d defective in "
        "%d defect types), masks: %s",
        name,
        folder,
        len(train),
        len(labels),
        int((labels == 0).sum()),
        int(labels.sum()),
        len(defects),
        "yes" if with_masks else "no",
    )
    return MVTecCategory(
        name=name,
        group=group or category_group(name),
        train_images=train,
        test_images=np.stack(test["images"]),
        test_labels=labels,
        test_defects=tuple(test["defects"]),
        test_files=tuple(test["files"]),
        test_masks=np.stack(test["masks"]) if with_masks else None,
    )


def _check_options(masks: str, sizes: Mapping[str, int | None]) -> None:
    """Raise ``DataError`` unless ``masks`` is a mask mode and every size a positive int."""
    if masks not in MASK_MODES:
        raise DataError(f"masks must be one of {', '.join(MASK_MODES)}, got {masks!r}")
    for option, value in sizes.items():
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise DataError(f"MVTec option {option} must be a positive int, got {value!r}")


def _defect_types(folder: Path, name: str) -> list[str]:
    """The defect folders of ``test/`` in name order, after checking the layout."""
    train_dir, test_dir = folder / "train" / _GOOD, folder / "test"
    if not train_dir.is_dir():
        raise MissingDataError(
            f"MVTec category {name!r}: {train_dir}/ not found; expected the MVTec AD layout "
            f"{folder}/train/good/, {folder}/test/good/, {folder}/test/<defect>/ and "
            f"{folder}/ground_truth/<defect>/<name>_mask.png"
        )
    if not (test_dir / _GOOD).is_dir():
        raise DataError(
            f"MVTec category {name!r}: {test_dir / _GOOD}/ not found (defect-free test images)"
        )
    defects = sorted(
        p.name
        for p in test_dir.iterdir()
        if p.is_dir() and p.name != _GOOD and not p.name.startswith(".")
    )
    if not defects:
        raise DataError(f"MVTec category {name!r}: {test_dir}/ has no defect folder besides good/")
    return defects


def _with_masks(masks: str, gt_dir: Path, name: str) -> bool:
    """Whether to read masks: per the ``masks`` mode and whether ``ground_truth/`` exists."""
    with_masks = masks != "none" and gt_dir.is_dir()
    if masks == "required" and not with_masks:
        raise DataError(
            f"MVTec category {name!r}: {gt_dir}/ not found but masks are required; "
            "set mvtec.masks to 'auto' for image-level metrics only"
        )
    if masks == "auto" and not with_masks:
        logger.warning(
            "MVTec category %r has no %s/ folder: no masks, so only image-level metrics "
            "(image AUC) are computed; pixel AUC and PRO are skipped",
            name,
            gt_dir,
        )
    return with_masks


def _read_test(
    folder: Path,
    name: str,
    types: Sequence[str],
    *,
    image_size: int,
    max_per_type: int | None,
    gt_dir: Path | None,
) -> dict[str, list]:
    """The test images of each type folder (``good`` first), their defect types, files
    relative to ``folder`` and, with ``gt_dir``, masks (all zero for ``good``)."""
    test: dict[str, list] = {"images": [], "masks": [], "defects": [], "files": []}
    for defect in types:
        files = _image_files(folder / "test" / defect)[:max_per_type]
        if not files:
            raise DataError(f"MVTec category {name!r}: {folder / 'test' / defect}/ holds no image")
        for file in files:
            img = _open_rgb(file)
            test["images"].append(_resize_image(img, image_size))
            test["defects"].append(defect)
            test["files"].append(file.relative_to(folder).as_posix())
            if gt_dir is not None:
                test["masks"].append(_test_mask(gt_dir, defect, file, img.size, name, image_size))
    return test


def _test_mask(
    gt_dir: Path, defect: str, file: Path, image_size_wh: tuple[int, int], name: str, size: int
) -> np.ndarray:
    """The mask of test image ``file``: all zero for ``good``, else its ground-truth file."""
    if defect == _GOOD:
        return np.zeros((size, size), dtype=np.uint8)
    mask_path = _mask_path(gt_dir, defect, file)
    if mask_path is None:
        raise DataError(
            f"MVTec category {name!r}: test image {file} has no mask; expected "
            f"{gt_dir / defect / (file.stem + _MASK_SUFFIX + '.png')} (a category "
            "needs all its masks, or no ground_truth/ folder at all)"
        )
    return _read_mask(mask_path, image_size_wh, file, size)


def category_to_arrays(category: MVTecCategory) -> dict[str, np.ndarray]:
    """Arrays of a category for an ``.npz`` cache (see :func:`category_from_arrays`)."""
    arrays = {
        "name": np.array(category.name),
        "group": np.array(category.group),
        "train_images": category.train_images,
        "test_images": category.test_images,
        "test_labels": category.test_labels,
        "test_defects": np.array(category.test_defects),
        "test_files": np.array(category.test_files),
    }
    if category.test_masks is not None:
        arrays["test_masks"] = category.test_masks
    return arrays


def category_from_arrays(arrays: Mapping[str, np.ndarray]) -> MVTecCategory:
    """Rebuild a :class:`MVTecCategory` from :func:`category_to_arrays`' arrays."""
    masks = arrays.get("test_masks")
    return MVTecCategory(
        name=str(arrays["name"]),
        group=str(arrays["group"]),
        train_images=arrays["train_images"],
        test_images=arrays["test_images"],
        test_labels=arrays["test_labels"].astype(np.int64),
        test_defects=tuple(str(d) for d in arrays["test_defects"]),
        test_files=tuple(str(f) for f in arrays["test_files"]),
        test_masks=None if masks is None else masks.astype(np.uint8),
    )


def export_category_paths(paths: Mapping[str, str | os.PathLike]) -> None:
    """Hand the category folders to jobs as ``$DROC_MVTEC_PATHS`` (absolute paths)."""
    os.environ[MVTEC_PATHS_ENV] = json.dumps(
        {name: str(Path(path).resolve()) for name, path in paths.items()}
    )


def category_path_from_env(name: str) -> Path:
    """The folder of category ``name`` exported by :func:`export_category_paths`.

    Raises
    ------
    DataError
        If the variable is unset or does not list ``name``.
    """
    try:
        paths = json.loads(os.environ.get(MVTEC_PATHS_ENV, "{}"))
    except json.JSONDecodeError as error:
        raise DataError(f"${MVTEC_PATHS_ENV} is not a JSON object: {error}") from error
    if name not in paths:
        raise DataError(
            f"${MVTEC_PATHS_ENV} names no folder for MVTec category {name!r} (has "
            f"{sorted(paths)}); run the job through the workflow, which sets it from the config"
        )
    return Path(paths[name])
