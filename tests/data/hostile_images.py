"""Hostile and unusual image files, shared by the data-reader and the deploy tests."""

from __future__ import annotations

import io

import pytest
from PIL import Image, ImageFile

#: 1,000,000 x 1: a 1 KB PNG under any pixel limit whose shorter-side resize is enormous.
WIDE = (1_000_000, 1)
#: The first bytes of an Encapsulated PostScript file (Pillow renders EPS with Ghostscript).
EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n%%EOF\n"
#: The first bytes of a Photoshop file: an image format Pillow reads, not accepted here.
PSD = b"8BPS\x00\x01" + bytes(20)


def encode(image: Image.Image, fmt: str = "PNG", **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def wide_png(size: tuple[int, int] = WIDE) -> bytes:
    """A black grayscale PNG of ``size`` (compresses to about 1 KB at 1,000,000 x 1)."""
    return encode(Image.new("L", size, 0))


def mpo(color: tuple[int, int, int], size: tuple[int, int] = (40, 30)) -> bytes:
    """A two-picture MPO (what a stereo or multi-shot camera writes): ``color`` first, black
    second."""
    first, second = Image.new("RGB", size, color), Image.new("RGB", size, (0, 0, 0))
    data = encode(first, "MPO", save_all=True, append_images=[second])
    assert Image.open(io.BytesIO(data)).format == "MPO"  # the fixture is what it says
    return data


def forbid_decoding(
    monkeypatch: pytest.MonkeyPatch, size: tuple[int, int] | None = None
) -> list[str]:
    """Fail the test on any decoding or resizing (of images of ``size`` only, if given).

    Returns the list of attempts, for a test to assert it stayed empty.
    """
    attempts: list[str] = []

    def guard(owner: type, name: str) -> None:
        original = getattr(owner, name)

        def call(self, *args, **kwargs):
            if size is None or self.size == size:
                attempts.append(name)
                raise AssertionError(f"{name} was called on a {self.size} image: it was decoded")
            return original(self, *args, **kwargs)

        monkeypatch.setattr(owner, name, call)

    guard(ImageFile.ImageFile, "load")
    guard(Image.Image, "convert")
    guard(Image.Image, "resize")
    return attempts
