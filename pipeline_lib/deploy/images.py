"""Read new images of any size into the training resolution, one error per bad item.

Why per item: a folder from a production line holds the odd truncated JPEG, a 16-bit TIFF
or a 20,000 x 20,000 scan; scoring must name that file and go on with the others, never
stop the batch (or a server) on it. Every reader here returns the image or raises
:class:`ImageError` with a message that says what is wrong and what is accepted; callers
turn that into a row of their error list.

Resizing follows :mod:`pipeline_lib.data.image_folder` (PROTOCOL.md "shorter side to s,
centre crop"): RGB, shorter side to ``size`` (bilinear), centre crop to ``size x size``.
An image already ``size x size`` (CIFAR, the digits cache) passes through unchanged.
MVTec patch models were trained on whole images resized to a square without cropping
(:mod:`pipeline_lib.data.mvtec`), so their packages ask for ``resize="stretch"``: the whole
image, bilinear, to ``size x size``; the anomaly map then covers the whole input.
Grayscale and palette images are converted to RGB, as the training readers do; images with
an alpha channel, CMYK or 16-bit / float pixels are refused, because silently dropping or
rescaling those channels would score something else than what the user sent.
"""

from __future__ import annotations

import base64
import binascii
import io
import os
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from pipeline_lib.data.image_folder import IMAGE_EXTENSIONS

#: Largest image accepted (pixels), checked from the header before decoding: decoding a
#: bigger one costs seconds and gigabytes for what becomes a 32 x 32 input.
DEFAULT_MAX_PIXELS = 50_000_000
#: PIL modes read as they are (converted to RGB); anything else is refused with its mode.
_ACCEPTED_MODES = {"RGB": "RGB", "L": "grayscale", "P": "palette", "1": "bilevel"}


#: How an image becomes ``size x size``: ``crop`` (shorter side, centre crop; the image
#: benchmarks) or ``stretch`` (whole image, aspect ratio not kept; the MVTec reader).
RESIZE_MODES = ("crop", "stretch")


class ImageError(ValueError):
    """One input cannot be scored; the message says why and what would be accepted."""


def resize_to(pixels: np.ndarray, size: int, resize: str = "crop") -> np.ndarray:
    """uint8 ``(h, w, 3)`` -> ``(size, size, 3)`` as the training reader did.

    ``crop``: shorter side to ``size`` (bilinear), centre crop (the image-folder readers,
    PROTOCOL.md). ``stretch``: the whole image to ``size x size`` (bilinear; the MVTec
    reader).
    """
    if resize not in RESIZE_MODES:
        raise ValueError(f"resize must be one of {RESIZE_MODES}, got {resize!r}")
    height, width = pixels.shape[:2]
    if (height, width) == (size, size):
        return np.ascontiguousarray(pixels)
    if resize == "stretch":
        image = Image.fromarray(pixels).resize((size, size), Image.Resampling.BILINEAR)
        return np.asarray(image, dtype=np.uint8).copy()
    scale = size / min(height, width)
    new_w, new_h = max(size, round(width * scale)), max(size, round(height * scale))
    image = Image.fromarray(pixels).resize((new_w, new_h), Image.Resampling.BILINEAR)
    top, left = (new_h - size) // 2, (new_w - size) // 2
    return np.asarray(image, dtype=np.uint8)[top : top + size, left : left + size].copy()


def _check_pixels(width: int, height: int, max_pixels: int) -> None:
    if width < 1 or height < 1:
        raise ImageError(f"image has no pixels ({width} x {height})")
    if width * height > max_pixels:
        raise ImageError(
            f"image is {width} x {height} = {width * height:,} pixels, over the limit of "
            f"{max_pixels:,}; downscale it first (it is resized to the model's input anyway)"
        )


def decode_image(
    data: bytes, *, size: int, max_pixels: int = DEFAULT_MAX_PIXELS, resize: str = "crop"
) -> np.ndarray:
    """Decode an encoded image (PNG, JPEG, BMP, TIFF, ...) to uint8 ``(size, size, 3)``.

    Raises
    ------
    ImageError
        If the bytes are empty, not an image, truncated or corrupt, too large, or in a mode
        that is not RGB / grayscale / palette.
    """
    if not data:
        raise ImageError("empty file (0 bytes)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            _check_pixels(image.width, image.height, max_pixels)  # header only, no decoding
            if image.mode not in _ACCEPTED_MODES:
                raise ImageError(
                    f"image mode {image.mode} ({len(image.getbands())} channels: "
                    f"{''.join(image.getbands())}) is not supported; send RGB or grayscale "
                    "8-bit images (drop the alpha channel / convert CMYK or 16-bit first)"
                )
            image.load()  # decodes now: truncation and corruption raise here
            rgb = image.convert("RGB")
    except ImageError:
        raise
    except (UnidentifiedImageError, Image.DecompressionBombError) as error:
        raise ImageError(f"not a readable image ({error})") from error
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombWarning) as error:
        raise ImageError(f"corrupt or truncated image ({type(error).__name__}: {error})") from error
    return resize_to(np.asarray(rgb, dtype=np.uint8), size, resize)


def image_from_array(
    array: Any, *, size: int, max_pixels: int = DEFAULT_MAX_PIXELS, resize: str = "crop"
) -> np.ndarray:
    """A pixel array ``(h, w)``, ``(h, w, 1)`` or ``(h, w, 3)`` of 0..255 -> ``(size, size, 3)``.

    Raises
    ------
    ImageError
        If the array is ragged, not 2-D / 3-D, has another channel count, holds values
        outside 0..255 or non-integers, or is too large.
    """
    try:
        values = np.asarray(array, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ImageError(f"array is ragged or not numeric ({error})") from error
    if values.ndim == 3 and values.shape[-1] == 1:
        values = values[..., 0]
    if values.ndim == 2:
        values = np.repeat(values[..., None], 3, axis=-1)
    if values.ndim != 3:
        raise ImageError(
            f"array has shape {values.shape}; expected (height, width), (height, width, 1) "
            "or (height, width, 3)"
        )
    if values.shape[-1] != 3:
        raise ImageError(
            f"array has {values.shape[-1]} channels (shape {values.shape}); expected 1 "
            "(grayscale) or 3 (RGB) in the last axis"
        )
    _check_pixels(values.shape[1], values.shape[0], max_pixels)
    if not np.all(np.isfinite(values)) or values.min() < 0 or values.max() > 255:
        raise ImageError("array values must be finite and within 0..255 (uint8 pixels)")
    if not np.all(values == np.round(values)):
        raise ImageError("array values must be integers 0..255 (uint8 pixels, not [0, 1] floats)")
    return resize_to(values.astype(np.uint8), size, resize)


def decode_base64_image(
    text: Any, *, size: int, max_pixels: int = DEFAULT_MAX_PIXELS, resize: str = "crop"
) -> np.ndarray:
    """A base64 string of an encoded image file -> uint8 ``(size, size, 3)``.

    Raises
    ------
    ImageError
        If ``text`` is not a base64 string, or as :func:`decode_image`.
    """
    if not isinstance(text, str | bytes):
        raise ImageError(f"'image' must be a base64 string, got {type(text).__name__}")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise ImageError(f"'image' is not valid base64 ({error})") from error
    return decode_image(data, size=size, max_pixels=max_pixels, resize=resize)


def read_image_file(
    path: str | os.PathLike,
    *,
    size: int,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    resize: str = "crop",
) -> np.ndarray:
    """Read one image file -> uint8 ``(size, size, 3)``.

    Raises
    ------
    ImageError
        If the file cannot be read, or as :func:`decode_image`.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ImageError(f"cannot read file ({error.strerror or error})") from error
    return decode_image(data, size=size, max_pixels=max_pixels, resize=resize)


def collect_image_files(
    paths: Sequence[str | os.PathLike],
) -> tuple[list[Path], list[tuple[str, str]]]:
    """Expand files and folders (recursively, sorted) into image files, plus errors.

    A folder contributes its files whose extension is an image extension
    (:data:`~pipeline_lib.data.image_folder.IMAGE_EXTENSIONS`, any case); hidden files and
    folders are skipped. A path named explicitly is always tried, whatever its extension.

    Returns
    -------
    files : list of Path
        In the order given, each folder's files sorted; duplicates removed.
    errors : list of (str, str)
        ``(path, reason)`` for a path that does not exist or a folder without images.
    """
    files: list[Path] = []
    errors: list[tuple[str, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and p.suffix.lower() in IMAGE_EXTENSIONS
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if not found:
                errors.append(
                    (
                        str(path),
                        "folder holds no image files (looked for "
                        f"{', '.join(sorted(IMAGE_EXTENSIONS))}, recursively)",
                    )
                )
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            errors.append((str(path), "no such file or folder"))
    return list(dict.fromkeys(files)), errors


def read_images(
    files: Iterable[Path], *, size: int, max_pixels: int = DEFAULT_MAX_PIXELS, resize: str = "crop"
) -> tuple[list[tuple[Path, np.ndarray]], list[tuple[str, str]]]:
    """Read every file; returns ``(path, pixels)`` of the good ones and ``(path, reason)``."""
    good: list[tuple[Path, np.ndarray]] = []
    errors: list[tuple[str, str]] = []
    for path in files:
        try:
            good.append(
                (path, read_image_file(path, size=size, max_pixels=max_pixels, resize=resize))
            )
        except ImageError as error:
            errors.append((str(path), str(error)))
    return good, errors
