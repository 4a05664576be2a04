"""Opening image files from untrusted sources: known formats only, sizes checked first.

Every reader that decodes a file it did not write (the image-folder and Cat-vs-Dog readers,
the deploy path's :mod:`pipeline_lib.deploy.images`) opens it here, so one set of rules
holds everywhere:

* **Formats.** Only PNG, JPEG (with MPO, the multi-picture JPEG that cameras write), BMP,
  GIF, TIFF and WEBP are opened (``Image.open(..., formats=...)``). Another format (EPS,
  which Pillow renders through Ghostscript, PSD, ICNS, ...) is refused by name from its
  first bytes, before any plugin parses or decodes it.
* **Sizes, from the header.** The readers resize the shorter side to the model size and
  then crop (docs/protocol.md). A 1 KB PNG can declare 1,000,000 x 1 pixels: it passes a pixel
  limit on the file, and decodes to 1 MB, but its intermediate at 32 px is a
  32,000,000 x 32 image (3 GB of RGB). :func:`check_resized` refuses such a file from its
  declared size, before anything is decoded; how a normal image is resized and cropped is
  unchanged (:func:`crop_resize_shape` is the one formula every reader uses).
* **Memory.** A ``MemoryError`` while decoding or resizing one file becomes
  :class:`ImageMemoryError` for that file (callers catch it per item).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import IO, Any

from PIL import Image, UnidentifiedImageError

from pipeline_lib.data.base import DataError

__all__ = [
    "ACCEPTED_FORMATS",
    "ACCEPTED_TEXT",
    "DEFAULT_MAX_PIXELS",
    "ImageError",
    "ImageFormatError",
    "ImageMemoryError",
    "ImageSizeError",
    "check_pixels",
    "check_resized",
    "crop_resize_shape",
    "open_image",
    "pil_pixel_limit",
    "sniff_format",
]

#: Pillow formats opened (``Image.open``'s ``formats``). JPEG's opener also returns MPO files
#: (a JPEG with further pictures appended); "MPO" is no opener of its own in Pillow.
ACCEPTED_FORMATS: tuple[str, ...] = ("PNG", "JPEG", "BMP", "GIF", "TIFF", "WEBP")
#: The same, for messages.
ACCEPTED_TEXT = "PNG, JPEG (MPO too), BMP, GIF, TIFF or WEBP"
#: Largest image (pixels) decoded, and largest resize intermediate, per file: 150 MB of
#: uint8 RGB. The deploy path takes it as ``max_pixels``; the training readers use it for
#: the intermediate (their files' own size is bounded by Pillow's MAX_IMAGE_PIXELS).
DEFAULT_MAX_PIXELS = 50_000_000

_SNIFF_BYTES = 16  # what Image.open hands each format's accept() test
_PIL_LIMIT_LOCK = threading.Lock()


class ImageError(DataError):
    """One image cannot be used; the message says why and what would be accepted."""


class ImageFormatError(ImageError):
    """The bytes are not one of :data:`ACCEPTED_FORMATS` (the message names what they are)."""


class ImageSizeError(ImageError):
    """The header declares an image, or a resize intermediate, over the pixel limit."""


class ImageMemoryError(ImageError):
    """Decoding or resizing this one image ran out of memory."""


def crop_resize_shape(width: int, height: int, size: int) -> tuple[int, int]:
    """``(new_width, new_height)`` of an image whose shorter side is resized to ``size``.

    The readers' formula (docs/protocol.md, "Datasets and splits"): scale
    ``size / min(width, height)``, each side rounded, never below ``size``.
    """
    scale = size / min(width, height)
    return max(size, round(width * scale)), max(size, round(height * scale))


def check_pixels(width: int, height: int, max_pixels: int) -> None:
    """Refuse an image without pixels or with more than ``max_pixels`` (from its header).

    Raises
    ------
    ImageSizeError
        Naming the size and the limit.
    """
    if width < 1 or height < 1:
        raise ImageSizeError(f"image has no pixels ({width} x {height})")
    if width * height > max_pixels:
        raise ImageSizeError(
            f"image is {width} x {height} = {width * height:,} pixels, over the limit of "
            f"{max_pixels:,}; downscale it first (it is resized to the model's input anyway)"
        )


def check_resized(
    width: int, height: int, new_width: int, new_height: int, *, size: int, max_pixels: int
) -> None:
    """Refuse an image whose resize intermediate ``new_width x new_height`` is too large.

    The intermediate of "shorter side to ``size``" grows with the aspect ratio, not with the
    file: ``size**2 * long / short`` pixels. Called with the header's size, before decoding.

    Raises
    ------
    ImageSizeError
        Naming the image's size, the intermediate, the limit and what to do.
    """
    pixels = new_width * new_height
    if pixels > max_pixels:
        long, short = max(width, height), max(1, min(width, height))
        raise ImageSizeError(
            f"image is {width} x {height} (aspect ratio {long / short:,.0f}:1): resizing its "
            f"shorter side to {size} would build a {new_width} x {new_height} = {pixels:,}-pixel "
            f"intermediate, over the limit of {max_pixels:,}; crop it to the part to score "
            "(an aspect ratio this extreme is not a photo of one object)"
        )


def sniff_format(prefix: bytes) -> str | None:
    """The Pillow format whose signature test accepts ``prefix`` (first bytes), if any.

    Only each plugin's ``accept`` test is run (a look at the first bytes, no parsing), so a
    refused file can be named without opening it with the plugin that would decode it.
    """
    Image.init()
    for name in Image.ID:
        _, accept = Image.OPEN[name]
        if accept is None:  # a plugin without a signature (TGA, ...) would claim anything
            continue
        try:
            if accept(prefix[:_SNIFF_BYTES]):
                return name
        except Exception:  # noqa: BLE001, S112 - a plugin's sniff test failing means: not it
            continue
    return None


def open_image(source: str | Any | IO[bytes]) -> Image.Image:
    """``Image.open`` restricted to :data:`ACCEPTED_FORMATS`; reads the header only.

    Parameters
    ----------
    source : path or binary file object
        The file (a path, or e.g. ``io.BytesIO`` of its bytes).

    Returns
    -------
    PIL.Image.Image
        Lazily opened (nothing decoded yet); use it as a context manager to close the file.

    Raises
    ------
    ImageFormatError
        If the bytes are an image of another format (named, e.g. EPS).
    PIL.UnidentifiedImageError
        If they are no image that Pillow knows (an ``OSError``, as a damaged file).
    OSError, SyntaxError, ValueError
        As ``Image.open`` for a damaged header of an accepted format.
    PIL.Image.DecompressionBombError
        Above twice ``Image.MAX_IMAGE_PIXELS`` (see :func:`pil_pixel_limit`).
    """
    try:
        image = Image.open(source, formats=ACCEPTED_FORMATS)
    except UnidentifiedImageError as error:
        if hasattr(source, "seek"):
            source.seek(0)
            prefix = source.read(_SNIFF_BYTES)
        else:
            with open(source, "rb") as handle:
                prefix = handle.read(_SNIFF_BYTES)
        found = sniff_format(prefix)
        if found is not None:
            raise ImageFormatError(
                f"{found} images are not accepted; send {ACCEPTED_TEXT} (convert it first)"
            ) from error
        raise  # no image at all: the callers' "unreadable" (an OSError), as before
    return image


@contextlib.contextmanager
def pil_pixel_limit(max_pixels: int) -> Iterator[None]:
    """Raise Pillow's decompression-bomb limit to ``max_pixels`` within the block, if lower.

    Pillow refuses images above twice ``Image.MAX_IMAGE_PIXELS`` (89.5 M) in ``Image.open``,
    before its caller sees the size; a ``max_pixels`` above that would otherwise be a limit
    that cannot be reached. The callers check ``max_pixels`` themselves from the header, so
    raising Pillow's limit to it loses no protection. ``Image.MAX_IMAGE_PIXELS`` is
    process-wide: the change is made under a lock, for the block only, and only when
    ``max_pixels`` exceeds it (other threads then see the higher limit meanwhile).
    """
    current = Image.MAX_IMAGE_PIXELS
    if current is None or max_pixels <= current:
        yield
        return
    with _PIL_LIMIT_LOCK:
        saved = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = max_pixels
        try:
            yield
        finally:
            Image.MAX_IMAGE_PIXELS = saved
