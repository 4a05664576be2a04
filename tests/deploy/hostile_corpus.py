"""A seeded corpus of hostile image files for the fuzz tests of the deploy readers.

:func:`hostile_inputs` builds, from one seed, a few hundred byte strings of the kinds a
production folder or a public endpoint receives: truncated and bit-flipped files of every
accepted format, headers that lie about the size (1,000,000 x 1, 0 x 0, 65,535 x 65,535),
random bytes, the magic numbers of formats that are not accepted (EPS, PDF, PSD, ICO, ZIP)
followed by junk, formats nested in one another, modes that are refused, empty files, a
zlib bomb in a PNG's pixel data and in a text chunk, and a few good images between them.
Each comes with what the reader must do: ``"score"``, ``"error"`` or ``"either"`` (a damaged
file that a decoder may still read in full).
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import numpy as np
from PIL import Image

#: Outcomes a corpus item may require.
SCORE, ERROR, EITHER = "score", "error", "either"


def _encode(image: Image.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def _chunk(kind: bytes, data: bytes, *, crc: int | None = None) -> bytes:
    """One PNG chunk (length, type, data, CRC: the right one unless ``crc`` is given)."""
    value = zlib.crc32(kind + data) if crc is None else crc
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", value & 0xFFFFFFFF)


def png_with_header(
    width: int, height: int, *, body: bytes = b"", color_type: int = 0, bad_crc: bool = False
) -> bytes:
    """A PNG whose IHDR declares ``width x height`` (8-bit) and whose IDAT holds ``body``."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", ihdr, crc=0xDEADBEEF if bad_crc else None)
        + _chunk(b"IDAT", zlib.compress(body))
        + _chunk(b"IEND", b"")
    )


def _patch(data: bytes, offset: int, fmt: str, *values: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, *values)
    return bytes(out)


def _jpeg_sof(data: bytes, height: int, width: int) -> bytes:
    at = data.index(b"\xff\xc0")  # SOF0: marker, length (2), precision (1), height, width
    return _patch(data, at + 5, ">HH", height, width)


def _tiff_tags(data: bytes, values: dict[int, int]) -> bytes:
    """A little-endian TIFF with the first IFD's SHORT/LONG tags in ``values`` rewritten."""
    out = bytearray(data)
    (ifd,) = struct.unpack_from("<I", out, 4)
    (count,) = struct.unpack_from("<H", out, ifd)
    for k in range(count):
        entry = ifd + 2 + 12 * k
        tag, kind, _ = struct.unpack_from("<HHI", out, entry)
        if tag in values:
            struct.pack_into("<H" if kind == 3 else "<I", out, entry + 8, values[tag])
    return bytes(out)


def hostile_inputs(seed: int = 0) -> list[tuple[str, bytes, str]]:
    """``(name, bytes, outcome)`` of every corpus item, the same for the same ``seed``."""
    rng = np.random.default_rng(seed)
    items: list[tuple[str, bytes, str]] = []

    def good_image(height: int = 20, width: int = 24) -> Image.Image:
        return Image.fromarray(rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8))

    def add(name: str, data: bytes, outcome: str) -> None:
        items.append((f"{len(items):03d}_{name}", data, outcome))

    formats = {
        "png": _encode(good_image(), "PNG"),
        "jpg": _encode(good_image(), "JPEG", quality=90),
        "bmp": _encode(good_image(), "BMP"),
        "gif": _encode(good_image(), "GIF"),
        "tif": _encode(good_image(), "TIFF"),
        "webp": _encode(good_image(), "WEBP"),
    }
    for fmt, data in formats.items():  # good files of every accepted format
        add(f"good.{fmt}", data, SCORE)

    # Truncated: a cut inside the signature or header cannot decode; later cuts may (GIF).
    for fmt, data in formats.items():
        for cut in rng.integers(1, len(data) - 1, size=8 if fmt in ("png", "jpg") else 4):
            add(f"truncated_{cut}.{fmt}", data[: int(cut)], EITHER)
        add(f"truncated_4.{fmt}", data[:4], ERROR)

    # Bit flips and byte overwrites anywhere in the file.
    for fmt, data in formats.items():
        for _ in range(6):
            flipped = bytearray(data)
            for at in rng.integers(0, len(data), size=int(rng.integers(1, 6))):
                flipped[int(at)] = int(rng.integers(0, 256))
            add(f"flipped.{fmt}", bytes(flipped), EITHER)

    # PNG headers that lie about the size (the data is 10 x 10 of gray).
    pixels = bytes(11 * 10)  # 10 rows of filter byte + 10 gray pixels
    for width, height in [
        (1_000_000, 1),
        (1, 1_000_000),
        (0, 0),
        (0, 10),
        (10, 0),
        (65_535, 65_535),
        (2**31 - 1, 1),
        (7_000, 7_000),
        (4_000, 1_000),
        (100, 100),
        (10, 10),
        (3, 2**20),
    ]:
        plausible = 0 < width * height <= 10**7 and max(width, height) <= 7_000
        outcome = SCORE if (width, height) == (10, 10) else EITHER if plausible else ERROR
        add(f"png_says_{width}x{height}.png", png_with_header(width, height, body=pixels), outcome)
        add(
            f"png_says_{width}x{height}_badcrc.png",
            png_with_header(width, height, body=pixels, bad_crc=True),
            ERROR if outcome == ERROR else EITHER,
        )
    add("png_bad_colour_type.png", png_with_header(10, 10, body=pixels, color_type=5), ERROR)
    add("png_says_rgba.png", png_with_header(10, 10, body=pixels, color_type=6), ERROR)

    # JPEG, BMP, GIF and TIFF headers that lie about the size.
    jpeg = formats["jpg"]
    for height, width in [(65_500, 65_500), (0, 24), (20, 0), (1, 65_500), (65_500, 1), (200, 240)]:
        outcome = ERROR if not height * width or max(height, width) > 10_000 else EITHER
        add(f"jpeg_says_{width}x{height}.jpg", _jpeg_sof(jpeg, height, width), outcome)
    bmp = formats["bmp"]
    for width, height in [
        (1_000_000, 1),
        (0, 20),
        (24, 0),
        (2**31 - 1, 2**31 - 1),
        (24, -20),
        (24, 2_000),
        (-24, 20),
    ]:
        outcome = EITHER if (width, height) == (24, -20) else ERROR
        add(f"bmp_says_{width}x{height}.bmp", _patch(bmp, 18, "<ii", width, height), outcome)
    gif = formats["gif"]
    for width, height in [(65_535, 65_535), (0, 0), (65_535, 1), (240, 200)]:
        patched = _patch(gif, 6, "<HH", width, height)
        add(f"gif_screen_says_{width}x{height}.gif", patched, EITHER)  # Pillow: frame's size
        at = patched.index(b"\x2c", 13)  # the image descriptor
        add(
            f"gif_frame_says_{width}x{height}.gif",
            _patch(patched, at + 5, "<HH", width, height),
            EITHER,
        )
    tiff = formats["tif"]
    for tags in [
        {256: 65_535, 257: 65_535},
        {256: 1_000_000 & 0xFFFF, 257: 1},
        {256: 0},
        {257: 0},
        {273: 10**9},  # strip offset beyond the end of the file
        {279: 10**9},  # strip byte count beyond the end of the file
        {258: 16},  # 16 bits per sample: refused mode or corrupt
        {277: 4},  # 4 samples per pixel
    ]:
        name = "_".join(f"{tag}-{value}" for tag, value in tags.items())
        add(f"tiff_says_{name}.tif", _tiff_tags(tiff, tags), EITHER)

    # Random bytes, of random lengths (0 included), and bytes that are almost images.
    for length in rng.integers(0, 4_096, size=30):
        add(f"random_{length}.bin", rng.bytes(int(length)), ERROR)
    add("empty.png", b"", ERROR)
    add("empty.jpg", b"", ERROR)
    add("one_byte.png", b"\x89", ERROR)
    add("zeros.png", bytes(1_000), ERROR)
    add("text.jpg", b"this is not a jpeg\n" * 20, ERROR)

    # Magic numbers of accepted and refused formats, followed by junk.
    magics = {
        "png": b"\x89PNG\r\n\x1a\n",
        "jpg": b"\xff\xd8\xff\xe0\x00\x10JFIF\x00",
        "gif": b"GIF89a",
        "bmp": b"BM",
        "tif": b"II*\x00",
        "tif_be": b"MM\x00*",
        "webp": b"RIFF\x00\x01\x00\x00WEBPVP8 ",
        "eps": b"%!PS-Adobe-3.0 EPSF-3.0\n",
        "eps_dos": b"\xc5\xd0\xd3\xc6",
        "pdf": b"%PDF-1.4\n",
        "psd": b"8BPS\x00\x01",
        "ico": b"\x00\x00\x01\x00\x01\x00",
        "zip": b"PK\x03\x04",
        "svg": b"<?xml version='1.0'?><svg xmlns='http://www.w3.org/2000/svg'>",
    }
    for name, magic in magics.items():
        for _ in range(3):
            add(f"magic_{name}.bin", magic + rng.bytes(int(rng.integers(0, 512))), ERROR)

    # Formats nested in one another.
    png, jpg = formats["png"], formats["jpg"]
    at = png.index(b"IDAT") - 4
    add(
        "png_with_jpeg_text_chunk.png", png[:at] + _chunk(b"tEXt", b"k\x00" + jpg) + png[at:], SCORE
    )
    add("jpeg_then_png.jpg", jpg + png, SCORE)
    add("png_sig_then_jpeg.png", b"\x89PNG\r\n\x1a\n" + jpg, ERROR)
    add(
        "eps_with_tiff_preview.eps",
        b"\xc5\xd0\xd3\xc6"
        + struct.pack("<IIIIII", 30, 20, 0, 0, 50, len(formats["tif"]))
        + b"\xff\xff"
        + b"%!PS-Adobe-3.0 EPSF-3.0\n"
        + bytes(4)
        + formats["tif"],
        ERROR,
    )
    add("pdf_with_jpeg.pdf", b"%PDF-1.4\n1 0 obj\n<< /Filter /DCTDecode >>\nstream\n" + jpg, ERROR)
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("inner.png", png)
    add("zip_with_png.png", zipped.getvalue(), ERROR)
    add("ico_with_png.ico", _encode(good_image(16, 16), "ICO"), ERROR)
    add("tiff_with_jpeg.tif", _encode(good_image(), "TIFF", compression="jpeg"), EITHER)
    mpo = _encode(good_image(), "MPO", save_all=True, append_images=[good_image()])
    add("two_pictures.mpo", mpo, SCORE)

    # Modes: refused (alpha, CMYK, 16-bit) or converted (bilevel, palette, gray).
    add("rgba.png", _encode(good_image().convert("RGBA"), "PNG"), ERROR)
    add("la.png", _encode(good_image().convert("LA"), "PNG"), ERROR)
    add("cmyk.jpg", _encode(good_image().convert("CMYK"), "JPEG"), ERROR)
    add("gray16.png", _encode(Image.new("I;16", (20, 20), 300), "PNG"), ERROR)
    add("bilevel.png", _encode(good_image().convert("1"), "PNG"), SCORE)
    add("palette.gif", _encode(good_image().convert("P"), "GIF"), SCORE)
    add("gray.jpg", _encode(good_image().convert("L"), "JPEG"), SCORE)

    # zlib bombs: 64 MB of pixel data declared 10 x 10, and a 64 MB zTXt chunk.
    bomb = bytes(64 * 2**20)
    add("png_idat_bomb.png", png_with_header(10, 10, body=bomb), EITHER)
    ztxt = _chunk(b"zTXt", b"k\x00\x00" + zlib.compress(bomb, 9))
    add("png_ztxt_bomb.png", png[:at] + ztxt + png[at:], EITHER)

    # Good images of every size class between the others, and two large legal ones.
    for k in range(12):
        height, width = (int(v) for v in rng.integers(8, 300, size=2))
        add(f"good_{k}.png", _encode(good_image(height, width), "PNG"), SCORE)
    add("large_gray.png", _encode(Image.new("L", (2_000, 1_000), 128), "PNG"), SCORE)
    add("large_rgb.jpg", _encode(Image.new("RGB", (1_500, 1_000), (9, 90, 200)), "JPEG"), SCORE)
    return items
