"""Read new images of any size into the training resolution, one error per bad item.

Why per item: a folder from a production line holds the odd truncated JPEG, a 16-bit TIFF
or a 20,000 x 20,000 scan; scoring must name that file and go on with the others, never
stop the batch (or a server) on it. Every reader here returns the image or raises
:class:`ImageError` with a message that says what is wrong and what is accepted; callers
turn that into a row of their error list.

Resizing follows :mod:`pipeline_lib.data.image_folder` (docs/protocol.md,
"Datasets and splits"): RGB, shorter side to ``size`` (bilinear), centre crop to ``size x size``.
An image already ``size x size`` (CIFAR, the digits cache) passes through unchanged.
MVTec patch models were trained on whole images resized to a square without cropping
(:mod:`pipeline_lib.data.mvtec`), so their packages ask for ``resize="stretch"``: the whole
image, bilinear, to ``size x size``; the anomaly map then covers the whole input.
Grayscale and palette images are converted to RGB, as the training readers do; images with
an alpha channel, CMYK or 16-bit / float pixels are refused, because silently dropping or
rescaling those channels would score something else than what the user sent.

Hostile input (:mod:`pipeline_lib.data.image_files`): only PNG, JPEG/MPO, BMP, GIF, TIFF and
WEBP are opened; the header's size is checked before decoding, against ``max_pixels`` for
the image and for its resize intermediate (a 1,000,000 x 1 PNG would need a 32,000,000 x 32
one); a ``MemoryError`` on one item is that item's error. A request as a whole is bounded by
:func:`check_request_pixels` (the sum of its items' header pixels).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import io
import os
import stat
import struct
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from pipeline_lib.data.image_files import (
    ACCEPTED_TEXT,
    DEFAULT_MAX_PIXELS,
    ImageError,
    ImageFormatError,
    ImageMemoryError,
    ImageSizeError,
    check_pixels,
    check_resized,
    crop_resize_shape,
    open_image,
    pil_pixel_limit,
)
from pipeline_lib.data.image_folder import IMAGE_EXTENSIONS
from pipeline_lib.data.regular_files import describe_mode, not_regular_reason, split_regular

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "DEFAULT_REQUEST_PIXELS",
    "RESIZE_MODES",
    "ImageError",
    "ImageFormatError",
    "ImageMemoryError",
    "ImageSizeError",
    "RequestTooLargeError",
    "check_request_pixels",
    "collect_image_files",
    "decode_base64_image",
    "decode_image",
    "header_pixels",
    "image_file_pixels",
    "image_from_array",
    "read_image_file",
    "read_images",
    "request_pixels",
    "resize_to",
]

#: PIL modes read as they are (converted to RGB); anything else is refused with its mode.
_ACCEPTED_MODES = {"RGB": "RGB", "L": "grayscale", "P": "palette", "1": "bilevel"}
#: Most header pixels one request may ask to decode, all items together: four images at
#: :data:`DEFAULT_MAX_PIXELS`. Each item is bounded on its own by ``max_pixels``; this bounds
#: the decoding time of a whole request (items are decoded one after the other).
DEFAULT_REQUEST_PIXELS = 4 * DEFAULT_MAX_PIXELS


#: How an image becomes ``size x size``: ``crop`` (shorter side, centre crop; the image
#: benchmarks) or ``stretch`` (whole image, aspect ratio not kept; the MVTec reader).
RESIZE_MODES = ("crop", "stretch")


class RequestTooLargeError(ValueError):
    """A request's images declare more pixels in total than the request budget."""


def resize_to(
    pixels: np.ndarray, size: int, resize: str = "crop", *, max_pixels: int = DEFAULT_MAX_PIXELS
) -> np.ndarray:
    """uint8 ``(h, w, 3)`` -> ``(size, size, 3)`` as the training reader did.

    ``crop``: shorter side to ``size`` (bilinear), centre crop (the image-folder readers,
    docs/protocol.md). ``stretch``: the whole image to ``size x size`` (bilinear; the MVTec
    reader).

    Raises
    ------
    ImageSizeError
        If the ``crop`` intermediate would exceed ``max_pixels`` (an extreme aspect ratio).
    """
    if resize not in RESIZE_MODES:
        raise ValueError(f"resize must be one of {RESIZE_MODES}, got {resize!r}")
    height, width = pixels.shape[:2]
    if (height, width) == (size, size):
        return np.ascontiguousarray(pixels)
    if resize == "stretch":
        image = Image.fromarray(pixels).resize((size, size), Image.Resampling.BILINEAR)
        return np.asarray(image, dtype=np.uint8).copy()
    new_w, new_h = crop_resize_shape(width, height, size)
    check_resized(width, height, new_w, new_h, size=size, max_pixels=max_pixels)
    image = Image.fromarray(pixels).resize((new_w, new_h), Image.Resampling.BILINEAR)
    top, left = (new_h - size) // 2, (new_w - size) // 2
    return np.asarray(image, dtype=np.uint8)[top : top + size, left : left + size].copy()


def _check_size(width: int, height: int, *, size: int, max_pixels: int, resize: str) -> None:
    """The image and its resize intermediate within ``max_pixels``, from the header alone."""
    check_pixels(width, height, max_pixels)
    if resize == "crop" and (width, height) != (size, size):
        new_w, new_h = crop_resize_shape(width, height, size)
        check_resized(width, height, new_w, new_h, size=size, max_pixels=max_pixels)


def _out_of_memory(shape: str, error: MemoryError) -> ImageMemoryError:
    detail = f" ({error})" if str(error) else ""
    return ImageMemoryError(
        f"ran out of memory decoding or resizing this {shape} image{detail}; lower max_pixels "
        "(--max-pixels) or give the process more memory"
    )


def decode_image(
    data: bytes, *, size: int, max_pixels: int = DEFAULT_MAX_PIXELS, resize: str = "crop"
) -> np.ndarray:
    """Decode an encoded image (PNG, JPEG/MPO, BMP, GIF, TIFF, WEBP) to uint8 ``(size, size, 3)``.

    The format, the size and the resize intermediate are checked from the header, before
    any pixel is decoded. A ``max_pixels`` above Pillow's ``Image.MAX_IMAGE_PIXELS`` is
    honoured (Pillow's limit is raised to it for this call, :func:`pil_pixel_limit`).

    Raises
    ------
    ImageError
        If the bytes are empty, not an image, truncated or corrupt, or in a mode that is not
        RGB / grayscale / palette; as its subclasses :class:`ImageFormatError` (a format
        other than the accepted ones, named), :class:`ImageSizeError` (over ``max_pixels``,
        or a resize intermediate over it) and :class:`ImageMemoryError` (out of memory).
    """
    if not data:
        raise ImageError("empty file (0 bytes)")
    return _decode_stream(io.BytesIO(data), size=size, max_pixels=max_pixels, resize=resize)


def _decode_stream(source: IO[bytes], *, size: int, max_pixels: int, resize: str) -> np.ndarray:
    """:func:`decode_image` of a binary file object, read only as far as Pillow needs.

    The header is parsed and checked first; pixels are decoded only after it passed, and
    Pillow reads the stream as its decoder asks, so a file is never read whole up front.
    """
    width = height = 0
    try:
        with _pillow_errors(max_pixels):
            image = open_image(source)
            width, height = image.size
            _check_size(width, height, size=size, max_pixels=max_pixels, resize=resize)
            if image.mode not in _ACCEPTED_MODES:
                raise ImageError(
                    f"image mode {image.mode} ({len(image.getbands())} channels: "
                    f"{''.join(image.getbands())}) is not supported; send RGB or grayscale "
                    "8-bit images (drop the alpha channel / convert CMYK or 16-bit first)"
                )
            image.load()  # decodes now: truncation and corruption raise here
            pixels = np.asarray(image.convert("RGB"), dtype=np.uint8)
            del image  # its pixels: only the RGB copy is resized
            return resize_to(pixels, size, resize, max_pixels=max_pixels)
    except MemoryError as error:
        raise _out_of_memory(f"{width} x {height}", error) from error


@contextlib.contextmanager
def _pillow_errors(max_pixels: int) -> Iterator[None]:
    """Pillow's errors inside the block as :class:`ImageError` (its subclasses), by cause.

    Pillow's limit is raised to ``max_pixels`` in the block (:func:`pil_pixel_limit`), and
    its decompression-bomb refusal, raised in ``Image.open`` before the caller sees the
    size, becomes the same "over the limit" :class:`ImageSizeError` as the caller's own
    check: an image over a ``max_pixels`` above Pillow's limit is over the limit, not corrupt.
    ``MemoryError`` passes through, for the caller to name the size it knows.
    """
    try:
        with pil_pixel_limit(max_pixels), warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            yield
    except ImageError:
        raise
    except UnidentifiedImageError as error:
        raise ImageFormatError(
            f"not a readable image ({error}); send {ACCEPTED_TEXT} files"
        ) from error
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise ImageSizeError(
            f"image is over the limit of {max_pixels:,} pixels ({error}); downscale it first"
        ) from error
    except (OSError, SyntaxError, ValueError, EOFError, struct.error) as error:
        raise ImageError(f"corrupt or truncated image ({type(error).__name__}: {error})") from error


def image_from_array(
    array: Any, *, size: int, max_pixels: int = DEFAULT_MAX_PIXELS, resize: str = "crop"
) -> np.ndarray:
    """A pixel array ``(h, w)``, ``(h, w, 1)`` or ``(h, w, 3)`` of 0..255 -> ``(size, size, 3)``.

    Raises
    ------
    ImageError
        If the array is ragged, not 2-D / 3-D, has another channel count, holds values
        outside 0..255 or non-integers; :class:`ImageSizeError` if it or its resize
        intermediate is over ``max_pixels``; :class:`ImageMemoryError` if out of memory.
    """
    try:
        return _array_to_image(array, size=size, max_pixels=max_pixels, resize=resize)
    except MemoryError as error:
        height, width = _array_shape(array)
        raise _out_of_memory(f"{width} x {height}", error) from error


def _array_to_image(array: Any, *, size: int, max_pixels: int, resize: str) -> np.ndarray:
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
    _check_size(values.shape[1], values.shape[0], size=size, max_pixels=max_pixels, resize=resize)
    if not np.all(np.isfinite(values)) or values.min() < 0 or values.max() > 255:
        raise ImageError("array values must be finite and within 0..255 (uint8 pixels)")
    if not np.all(values == np.round(values)):
        raise ImageError("array values must be integers 0..255 (uint8 pixels, not [0, 1] floats)")
    return resize_to(values.astype(np.uint8), size, resize, max_pixels=max_pixels)


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

    The file is read through Pillow as far as it needs, after its header passed the checks
    of :func:`image_file_pixels`: never whole into memory first (a 10 GB file named
    ``.png`` costs its header, not 10 GB).

    Raises
    ------
    ImageError
        If the file cannot be read, or as :func:`decode_image`.
    """
    with _open_file(path) as handle:
        return _decode_stream(handle, size=size, max_pixels=max_pixels, resize=resize)


def image_file_pixels(
    path: str | os.PathLike,
    *,
    size: int,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    resize: str = "crop",
) -> int:
    """Pixels an image file declares, after checking its header alone (nothing decoded).

    The checks :func:`read_image_file` makes before decoding: the file is not empty, its
    format is accepted, its size and resize intermediate are within ``max_pixels``.

    Returns
    -------
    int
        ``width * height`` from the header.

    Raises
    ------
    ImageError
        As :func:`read_image_file` would for these reasons (:class:`ImageFormatError`,
        :class:`ImageSizeError`, corrupt header, unreadable file).
    """
    with _open_file(path) as handle, _pillow_errors(max_pixels), open_image(handle) as image:
        width, height = image.size
        _check_size(width, height, size=size, max_pixels=max_pixels, resize=resize)
    return width * height


#: How an image file is opened: read only, never waiting on a FIFO (one put in place after
#: the folder was listed), not inherited by child processes. Symlinks are followed.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


@contextlib.contextmanager
def _open_file(path: str | os.PathLike) -> Iterator[IO[bytes]]:
    """The file opened for reading, or :class:`ImageError` (missing, unreadable, empty, or
    not a regular file: checked on the open descriptor, so nothing else is ever read)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as error:
        raise ImageError(f"cannot read file ({error.strerror or error})") from error
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise ImageError(_not_read(describe_mode(status.st_mode)))
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        if status.st_size == 0:
            raise ImageError("empty file (0 bytes)")
        yield handle


def collect_image_files(
    paths: Sequence[str | os.PathLike],
) -> tuple[list[Path], list[tuple[str, str]]]:
    """Expand files and folders (recursively, sorted) into image files, plus errors.

    A folder contributes its entries whose extension is an image extension
    (:data:`~pipeline_lib.data.image_folder.IMAGE_EXTENSIONS`, any case); hidden files and
    folders are skipped. A path named explicitly is always tried, whatever its extension.
    An entry that is not a regular file (a FIFO, a device, a socket, a dangling symlink or
    one to anything but a regular file) is an error naming what it is, and is never opened
    (:func:`~pipeline_lib.data.regular_files.not_regular_reason`); symlinks to regular files
    are read.

    Returns
    -------
    files : list of Path
        In the order given, each folder's files sorted; duplicates removed.
    errors : list of (str, str)
        ``(path, reason)`` for a path that does not exist, an entry that is not a regular
        file, or a folder without images.
    """
    files: list[Path] = []
    errors: list[tuple[str, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            entries = sorted(
                p
                for p in path.rglob("*")
                if p.suffix.lower() in IMAGE_EXTENSIONS
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
                and not p.is_dir()  # a folder named like an image: walked, not read
            )
            found, skipped = split_regular(entries)
            errors.extend((str(p), _not_read(reason)) for p, reason in skipped)
            if not entries:
                errors.append(
                    (
                        str(path),
                        "folder holds no image files (looked for "
                        f"{', '.join(sorted(IMAGE_EXTENSIONS))}, recursively)",
                    )
                )
            files.extend(found)
            continue
        reason = not_regular_reason(path)
        if reason is None:
            files.append(path)
        elif reason == "missing":
            errors.append((str(path), "no such file or folder"))
        else:
            errors.append((str(path), _not_read(reason)))
    return list(dict.fromkeys(files)), errors


def _not_read(reason: str) -> str:
    return f"not a regular file: {reason}; not opened"


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


def _array_shape(array: Any) -> tuple[int, int]:
    """``(height, width)`` of an array or nested lists without converting it; (0, 0) if unknown."""
    shape = getattr(array, "shape", None)
    if shape is not None:
        return (int(shape[0]), int(shape[1])) if len(shape) >= 2 else (0, 0)
    if isinstance(array, list | tuple) and array and isinstance(array[0], list | tuple):
        return len(array), len(array[0])
    return 0, 0


def header_pixels(data: bytes, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> int:
    """Pixels the header of encoded image bytes declares, when the image would be decoded.

    Reads the header only (nothing is decoded). Bytes that are no accepted image, or an
    image over ``max_pixels``, count 0: :func:`decode_image` refuses them unread.
    """
    try:
        with pil_pixel_limit(max_pixels), warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with open_image(io.BytesIO(data)) as image:
                width, height = image.size
    except (
        OSError,
        SyntaxError,
        ValueError,  # ImageError too
        Image.DecompressionBombError,
        Image.DecompressionBombWarning,
    ):
        return 0
    pixels = width * height
    return pixels if pixels <= max_pixels else 0


def request_pixels(
    images: Iterable[Any] = (), arrays: Iterable[Any] = (), *, max_pixels: int = DEFAULT_MAX_PIXELS
) -> int:
    """Sum of the pixels a request's items would decode, read from headers and shapes.

    Parameters
    ----------
    images : iterable
        The request's ``image`` values: base64 of encoded files (str or bytes); anything
        else (None, NaN, invalid base64) counts 0, as its row is refused on its own.
    arrays : iterable
        The request's ``array`` values (nested lists or arrays); ``height * width`` each.
    max_pixels : int, default=DEFAULT_MAX_PIXELS
        The per-item limit: larger items count 0 (they are refused without decoding).

    Returns
    -------
    int
    """
    total = 0
    for text in images:
        if not isinstance(text, str | bytes) or not text:
            continue
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            continue
        total += header_pixels(data, max_pixels=max_pixels)
    for array in arrays:
        height, width = _array_shape(array)
        if height * width <= max_pixels:
            total += height * width
    return total


def check_request_pixels(
    images: Iterable[Any] = (),
    arrays: Iterable[Any] = (),
    *,
    budget: int = DEFAULT_REQUEST_PIXELS,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> int:
    """Refuse a request whose items declare more than ``budget`` pixels in total.

    To be called once per request, before any item is decoded (the scoring server's
    ``score_rows``; per chunk of files in ``droc score``).

    Returns
    -------
    int
        The request's pixels (:func:`request_pixels`), when within the budget.

    Raises
    ------
    RequestTooLargeError
        Naming the total and the budget; the caller answers it for the whole request (HTTP
        400), since no single item is at fault.
    """
    total = request_pixels(images, arrays, max_pixels=max_pixels)
    if total > budget:
        raise RequestTooLargeError(
            f"request's images hold {total:,} pixels in total, over the budget of {budget:,} "
            "per request; send fewer or smaller images per request"
        )
    return total
