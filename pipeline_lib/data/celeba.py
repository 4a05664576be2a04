"""Reader for CelebA eyeglasses (torchvision's on-disk layout of the aligned images).

Layout: ``<root>/celeba/img_align_celeba/*.jpg``, ``<root>/celeba/list_attr_celeba.txt`` and
``<root>/celeba/list_eval_partition.txt`` (or the same directly under ``<root>/``).

Protocol (docs/protocol.md, "Datasets and splits"): each 218x178 aligned image is cropped to
``[40:-20, 10:-10]`` (rows 40..197, columns 10..167: 158x158), resized to 64x64 and converted
to RGB. The paper does not name the filter; the authors' ``script/prepare_celeba.py`` calls
PIL's ``resize`` without one, which is bicubic (Pillow >= 7; the released code pins 8.0), so
``resize="bicubic"`` is the default and ``"bilinear"`` a variant. The
training split is the training partition *without* eyeglasses; the test split is the whole
test partition, where eyeglasses mark the outliers. The validation partition is not used.

As a two-class data set: label 0 ``"no_eyeglasses"`` (the inlier class of the benchmark),
label 1 ``"eyeglasses"``. The training split holds label 0 only, so a one-class split with
inlier ``"eyeglasses"`` or with contamination > 0 has nothing to draw from. The data set
registry (:data:`pipeline_lib.data.DATASETS`) records both facts, so the config validation
refuses such a config before any job (and ``classes: all`` runs ``no_eyeglasses`` only);
:func:`pipeline_lib.data.split.one_class_split` would raise a ``ValueError`` too.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import NoReturn

import numpy as np
from PIL import Image

from pipeline_lib.data.base import DataError, ImageDataset, MissingDataError
from pipeline_lib.data.regular_files import split_regular

__all__ = [
    "CELEBA_ATTR_FILE",
    "CELEBA_CLASSES",
    "CELEBA_IMAGE_DIR",
    "CELEBA_PARTITION_FILE",
    "CELEBA_RESIZE_FILTERS",
    "CELEBA_SIZE",
    "celeba_candidates",
    "read_attributes",
    "read_celeba",
    "read_partition",
]

logger = logging.getLogger(__name__)

CELEBA_CLASSES: tuple[str, ...] = ("no_eyeglasses", "eyeglasses")
CELEBA_SIZE = 64
CELEBA_IMAGE_DIR = "img_align_celeba"
CELEBA_ATTR_FILE = "list_attr_celeba.txt"
CELEBA_PARTITION_FILE = "list_eval_partition.txt"

#: ``resize`` option -> PIL filter: the released code's (PIL's default) first.
CELEBA_RESIZE_FILTERS: dict[str, Image.Resampling] = {
    "bicubic": Image.Resampling.BICUBIC,
    "bilinear": Image.Resampling.BILINEAR,
}

_ALIGNED_SIZE = (178, 218)  # PIL (width, height) of an aligned image
# PIL crop box (left, upper, right, lower) of numpy's [40:-20, 10:-10] on a 218x178 image.
_CROP_BOX = (10, 40, 178 - 10, 218 - 20)
_TRAIN, _VALID, _TEST = 0, 1, 2
_N_LISTED = 5  # missing image names quoted in an error


def celeba_candidates(root: Path) -> tuple[Path, ...]:
    """Folders searched for the CelebA files under ``root``, in order: ``<root>/celeba``
    (torchvision's layout) and ``<root>`` itself."""
    return (Path(root) / "celeba", Path(root))


def _find_folder(root: Path) -> Path:
    candidates = celeba_candidates(root)
    needed = (CELEBA_IMAGE_DIR, CELEBA_ATTR_FILE, CELEBA_PARTITION_FILE)
    for folder in candidates:
        if (
            (folder / CELEBA_IMAGE_DIR).is_dir()
            and (folder / CELEBA_ATTR_FILE).is_file()
            and (folder / CELEBA_PARTITION_FILE).is_file()
        ):
            return folder
    raise MissingDataError(
        f"CelebA not found: expected {CELEBA_IMAGE_DIR}/ (the aligned JPEGs), "
        f"{CELEBA_ATTR_FILE} and {CELEBA_PARTITION_FILE} in one of: "
        f"{', '.join(f'{c}/' for c in candidates)} (missing in {candidates[0]}/: "
        f"{', '.join(n for n in needed if not (candidates[0] / n).exists()) or 'nothing'})."
    )


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"cannot read {path}: {err}") from err


def read_attributes(path: Path) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
    """Parse ``list_attr_celeba.txt``.

    The file holds the number of images, a line of attribute names, then one line per
    image: its file name and one value per attribute, ``-1`` (absent) or ``1`` (present).

    Parameters
    ----------
    path : Path
        The attribute file.

    Returns
    -------
    names : tuple of str
        Attribute names (40 in the official file), e.g. ``"Eyeglasses"``.
    values : dict of str to ndarray of shape (n_attributes,), dtype int8
        Image file name -> its attribute values in {-1, 1}.

    Raises
    ------
    DataError
        If the file cannot be read or is malformed (bad count line, a row with the wrong
        number of values or a value other than -1/1, a repeated image, or fewer or more rows
        than the count says); the message names the file and line.
    """
    path = Path(path)
    # (line number, text) of the non-blank lines, so errors quote the file's own numbering.
    lines = [(i, line) for i, line in enumerate(_read_lines(path), start=1) if line.strip()]
    if len(lines) < 2:
        raise DataError(f"{path} is malformed: expected a count line and an attribute-name line")
    try:
        count = int(lines[0][1])
    except ValueError:
        raise DataError(
            f"{path} is malformed: line {lines[0][0]} should be the number of images, "
            f"got {lines[0][1][:60]!r}"
        ) from None
    names = tuple(lines[1][1].split())
    body = lines[2:]
    # Fast path (the official file has 202,599 rows): split off the image names, then parse
    # every value at once; a row of the wrong length shows up as a size mismatch.
    heads = [line.split(None, 1) for _, line in body]
    image_names = [head[0] for head in heads]
    try:
        flat = np.fromstring(
            " ".join(head[1] if len(head) == 2 else "" for head in heads), dtype=np.int64, sep=" "
        )
    except ValueError:  # a token that is not an integer
        flat = None
    if flat is None or flat.size != len(body) * len(names):
        _raise_bad_row(path, body, len(names))
    if len(body) != count:
        raise DataError(
            f"{path} is malformed or truncated: line {lines[0][0]} announces {count} images, "
            f"{len(body)} rows follow"
        )
    table = flat.reshape(len(body), len(names))  # (n_images, n_attributes)
    valid = np.isin(table, (-1, 1))
    if not valid.all():
        number = body[int(np.flatnonzero(~valid.all(axis=1))[0])][0]
        raise DataError(f"{path} is malformed: line {number} has values other than -1 and 1")
    values = table.astype(np.int8)
    if len(set(image_names)) != len(image_names):
        repeated = [name for name, n in Counter(image_names).items() if n > 1]
        raise DataError(f"{path} is malformed: image {repeated[0]} is listed more than once")
    return names, dict(zip(image_names, values, strict=True))


def _raise_bad_row(path: Path, body: list[tuple[int, str]], n_attributes: int) -> NoReturn:
    """Name the first row of an attribute file with a wrong length or a non-integer value."""
    for number, line in body:
        fields = line.split()
        if len(fields) != n_attributes + 1:
            raise DataError(
                f"{path} is malformed: line {number} has {len(fields) - 1} values for "
                f"{n_attributes} attributes"
            )
        try:
            [int(value) for value in fields[1:]]
        except ValueError:
            raise DataError(f"{path} is malformed: line {number} has a non-integer value") from None
    raise DataError(f"{path} is malformed: its attribute values cannot be parsed")


def read_partition(path: Path) -> dict[str, int]:
    """Parse ``list_eval_partition.txt`` (``<file name> <0|1|2>`` per line).

    Parameters
    ----------
    path : Path
        The partition file.

    Returns
    -------
    dict of str to int
        Image file name -> partition: 0 train, 1 validation, 2 test (in file order).

    Raises
    ------
    DataError
        If the file cannot be read, a line is not ``<name> <0|1|2>``, an image is listed
        twice, or it lists no image; the message names the file and line.
    """
    path = Path(path)
    partition: dict[str, int] = {}
    for number, line in enumerate(_read_lines(path), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2 or fields[1] not in ("0", "1", "2"):
            raise DataError(
                f"{path} is malformed: line {number} should be '<file name> <0|1|2>', "
                f"got {line[:60]!r}"
            )
        if fields[0] in partition:
            raise DataError(f"{path} is malformed: image {fields[0]} is listed twice")
        partition[fields[0]] = int(fields[1])
    if not partition:
        raise DataError(f"{path} lists no images")
    return partition


def _load_face(path: Path, resample: Image.Resampling) -> np.ndarray:
    """Crop [40:-20, 10:-10] of an aligned image, resize to 64x64: (64, 64, 3) uint8."""
    try:
        with Image.open(path) as img:
            img = img.convert("RGB")
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        raise DataError(f"cannot read image {path}: {err}") from err
    if img.size != _ALIGNED_SIZE:
        raise DataError(
            f"image {path} is {img.size[0]}x{img.size[1]} (width x height), expected the "
            f"aligned CelebA size {_ALIGNED_SIZE[0]}x{_ALIGNED_SIZE[1]} ({CELEBA_IMAGE_DIR})"
        )
    img = img.crop(_CROP_BOX).resize((CELEBA_SIZE, CELEBA_SIZE), resample)
    return np.asarray(img, dtype=np.uint8)


def _load_faces(folder: Path, names: list[str], resample: Image.Resampling) -> np.ndarray:
    images = np.empty((len(names), CELEBA_SIZE, CELEBA_SIZE, 3), dtype=np.uint8)
    for i, name in enumerate(names):
        images[i] = _load_face(folder / name, resample)
    return images


def read_celeba(root: Path, *, resize: str = "bicubic") -> ImageDataset:
    """Read CelebA eyeglasses from ``<root>/celeba/`` (or ``<root>/``).

    Parameters
    ----------
    root : Path
        Data root.
    resize : {"bicubic", "bilinear"}, default="bicubic"
        PIL filter of the resize to 64x64: the released code's (bicubic) or bilinear.

    Returns
    -------
    ImageDataset
        Training split: the training partition's images without eyeglasses, all label 0.
        Test split: every image of the test partition, label 1 when it has eyeglasses.
        Images of shape (64, 64, 3) in partition-file order; classes
        ``("no_eyeglasses", "eyeglasses")``.

    Raises
    ------
    MissingDataError
        If no candidate folder holds the image folder and both text files.
    DataError
        If ``resize`` is not a known filter, the attribute or partition file is malformed or
        lacks the ``Eyeglasses`` attribute or an image of the partition file, a partition is
        empty, or an image is missing, unreadable or not 218x178; the message names the file.
    """
    if resize not in CELEBA_RESIZE_FILTERS:
        allowed = ", ".join(CELEBA_RESIZE_FILTERS)
        raise DataError(f"celeba option resize must be one of {allowed}, got {resize!r}")
    resample = CELEBA_RESIZE_FILTERS[resize]
    folder = _find_folder(root)
    attr_path = folder / CELEBA_ATTR_FILE
    names, attributes = read_attributes(attr_path)
    partition = read_partition(folder / CELEBA_PARTITION_FILE)
    if "Eyeglasses" not in names:
        raise DataError(f"{attr_path} has no 'Eyeglasses' attribute (attributes: {names})")
    column = names.index("Eyeglasses")
    unlisted = [n for n, part in partition.items() if part != _VALID and n not in attributes]
    if unlisted:
        raise DataError(
            f"{attr_path} has no row for {len(unlisted)} image(s) of "
            f"{folder / CELEBA_PARTITION_FILE}: {', '.join(unlisted[:_N_LISTED])}"
        )
    train_names = [
        name
        for name, part in partition.items()
        if part == _TRAIN and attributes[name][column] == -1
    ]
    test_names = [name for name, part in partition.items() if part == _TEST]
    for split, split_names in (("training", train_names), ("test", test_names)):
        if not split_names:
            raise DataError(
                f"{folder / CELEBA_PARTITION_FILE}: the {split} split is empty "
                f"(no {split} images{' without eyeglasses' if split == 'training' else ''})"
            )
    image_dir = folder / CELEBA_IMAGE_DIR
    # Check every file before decoding ~170,000 images, so a gap is reported at once.
    # A listed entry that is not a regular file (a FIFO, a device, a dangling symlink) is
    # named with what it is, never opened; the split is fixed, so none is left out silently.
    _, unusable = split_regular(image_dir / n for n in (*train_names, *test_names))
    if unusable:
        shown = ", ".join(f"{path} ({reason})" for path, reason in unusable[:_N_LISTED])
        raise DataError(
            f"{len(unusable)} image(s) listed in {folder / CELEBA_PARTITION_FILE} are missing "
            f"from {image_dir}/ or not regular files: {shown}"
            f"{', ...' if len(unusable) > _N_LISTED else ''}; unzip img_align_celeba.zip again"
        )
    test_labels = np.array([attributes[n][column] == 1 for n in test_names], dtype=np.int64)
    logger.info(
        "reading CelebA from %s: %d train (no eyeglasses), %d test (%d with eyeglasses)",
        folder,
        len(train_names),
        len(test_names),
        int(test_labels.sum()),
    )
    return ImageDataset(
        name="celeba",
        train_images=_load_faces(image_dir, train_names, resample),
        train_labels=np.zeros(len(train_names), dtype=np.int64),
        test_images=_load_faces(image_dir, test_names, resample),
        test_labels=test_labels,
        class_names=CELEBA_CLASSES,
    )
