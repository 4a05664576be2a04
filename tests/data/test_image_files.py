"""Opening untrusted image files: formats by name, sizes from the header, one shared formula."""

from __future__ import annotations

import io
import logging

import numpy as np
import pytest
from PIL import EpsImagePlugin, Image, PsdImagePlugin

from pipeline_lib.data import DataError, load_dataset
from pipeline_lib.data.image_files import (
    DEFAULT_MAX_PIXELS,
    ImageFormatError,
    ImageMemoryError,
    ImageSizeError,
    check_resized,
    crop_resize_shape,
    open_image,
    pil_pixel_limit,
    sniff_format,
)
from tests.data.hostile_images import EPS, PSD, WIDE, encode, forbid_decoding, mpo, wide_png


def test_crop_resize_shape_is_the_readers_formula() -> None:
    # shorter side to the size, each side rounded, never below it
    assert crop_resize_shape(40, 30, 32) == (43, 32)
    assert crop_resize_shape(30, 40, 32) == (32, 43)
    assert crop_resize_shape(500, 375, 64) == (85, 64)
    assert crop_resize_shape(10, 10, 32) == (32, 32)
    # the 1,000,000 x 1 file: its intermediate at 32 px is 32,000,000 x 32
    assert crop_resize_shape(*WIDE, 32) == (32_000_000, 32)


def test_intermediate_over_the_limit_is_refused_with_the_numbers() -> None:
    new_w, new_h = crop_resize_shape(*WIDE, 32)
    with pytest.raises(ImageSizeError, match=r"1000000 x 1 \(aspect ratio 1,000,000:1\)") as error:
        check_resized(*WIDE, new_w, new_h, size=32, max_pixels=DEFAULT_MAX_PIXELS)
    assert "1,024,000,000-pixel intermediate" in str(error.value)
    assert f"limit of {DEFAULT_MAX_PIXELS:,}" in str(error.value)
    # a photo's intermediate is far below it: nothing raised
    check_resized(4000, 3000, *crop_resize_shape(4000, 3000, 64), size=64, max_pixels=10_000)


def test_wide_png_is_refused_from_its_header(monkeypatch: pytest.MonkeyPatch) -> None:
    data = wide_png()
    assert len(data) < 2_000  # about 1 KB on disk, 32 GB-class resize in memory
    attempts = forbid_decoding(monkeypatch)
    with open_image(io.BytesIO(data)) as image:
        assert image.size == WIDE and image.format == "PNG"
    assert attempts == []  # opening read the header only


@pytest.mark.parametrize(
    ("data", "name", "plugin"),
    [(EPS, "EPS", EpsImagePlugin.EpsImageFile), (PSD, "PSD", PsdImagePlugin.PsdImageFile)],
)
def test_other_formats_are_refused_by_name_before_any_plugin_parses_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path, data: bytes, name: str, plugin: type
) -> None:
    def parse(self, *args, **kwargs):
        raise AssertionError(f"the {name} plugin parsed the file")

    monkeypatch.setattr(plugin, "_open", parse)
    assert sniff_format(data) == name
    with pytest.raises(ImageFormatError, match=f"^{name} images are not accepted; send PNG, JPEG"):
        open_image(io.BytesIO(data))
    path = tmp_path / "photo.png"  # the extension does not matter, the bytes do
    path.write_bytes(data)
    with pytest.raises(ImageFormatError, match=f"^{name} images are not accepted"):
        open_image(path)


def test_accepted_formats_open_and_mpo_is_accepted() -> None:
    image = Image.new("RGB", (12, 8), (10, 200, 30))
    for fmt in ("PNG", "JPEG", "BMP", "GIF", "TIFF", "WEBP"):
        with open_image(io.BytesIO(encode(image, fmt))) as opened:
            assert opened.format == fmt and opened.size == (12, 8)
    with open_image(io.BytesIO(mpo((200, 30, 60)))) as opened:
        assert opened.format == "MPO" and opened.n_frames == 2
        assert np.abs(np.asarray(opened.convert("RGB"), int) - (200, 30, 60)).max() <= 3


def test_no_image_at_all_stays_an_unreadable_file() -> None:
    # Readers treat it as before: an OSError, like a truncated file (skip or fail, named).
    with pytest.raises(OSError, match="cannot identify image file"):
        open_image(io.BytesIO(b"this is not an image at all"))


def test_pillow_limit_is_raised_within_the_block_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)
    with pil_pixel_limit(1_000):
        assert Image.MAX_IMAGE_PIXELS == 1_000
        with open_image(io.BytesIO(encode(Image.new("L", (40, 20))))) as image:
            assert image.size == (40, 20)  # 800 > 2 x 100: Pillow alone would refuse it
    assert Image.MAX_IMAGE_PIXELS == 100
    with pil_pixel_limit(50):  # a lower limit leaves Pillow's as it is
        assert Image.MAX_IMAGE_PIXELS == 100


# The training readers: image_folder fails naming the file (as for a corrupt one), Cat-vs-Dog
# skips it with a warning naming it (as for an unreadable one).


def _flat_folder(root, write_png, solid):
    for name in ("ant", "bee"):
        for i in range(3):
            write_png(root / name / f"{i}.png", solid((10 * i, 20, 30)))
    return root


def test_image_folder_fails_naming_a_wide_file_without_decoding_it(
    tmp_path, write_png, solid, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _flat_folder(tmp_path / "imgs", write_png, solid)
    (root / "bee" / "wide.png").write_bytes(wide_png())
    attempts = forbid_decoding(monkeypatch, size=WIDE)
    with pytest.raises(ImageSizeError, match=r"wide\.png.*aspect ratio 1,000,000:1"):
        load_dataset("image_folder", path=root)
    assert attempts == []  # the other files were decoded, wide.png never was


def test_image_folder_names_an_eps_file_and_a_memory_error(
    tmp_path, write_png, solid, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _flat_folder(tmp_path / "imgs", write_png, solid)
    (root / "bee" / "drawing.png").write_bytes(EPS)
    with pytest.raises(ImageFormatError, match=r"drawing\.png.*EPS images are not accepted"):
        load_dataset("image_folder", path=root)
    (root / "bee" / "drawing.png").unlink()

    def exhausted(self, *args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(Image.Image, "resize", exhausted)
    with pytest.raises(ImageMemoryError, match=r"out of memory reading image .*ant.0\.png"):
        load_dataset("image_folder", path=root)
    assert issubclass(ImageMemoryError, DataError)


def test_catvsdog_skips_refused_files_with_a_warning_naming_each(
    tmp_path, write_pet_images, caplog
) -> None:
    write_pet_images(tmp_path, broken=False)
    cats = tmp_path / "PetImages" / "Cat"
    (cats / "9001.jpg").write_bytes(wide_png((1, 200_000)))  # tall: 64 x 12,800,000
    (cats / "9002.jpg").write_bytes(EPS)
    (cats / "9003.jpg").write_bytes(mpo((250, 90, 200), size=(80, 64)))  # accepted
    with caplog.at_level(logging.WARNING, logger="pipeline_lib.data.catvsdog"):
        data = load_dataset(
            "catvsdog", root=tmp_path, layout="petimages", n_train_per_class=4, n_test_per_class=8
        )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("9001.jpg" in w and "aspect ratio 200,000:1" in w for w in warnings)
    assert any("9002.jpg" in w and "EPS images are not accepted" in w for w in warnings)
    assert any(
        "skipped 2 unreadable image(s) of 10" in w and "9001.jpg, 9002.jpg" in w for w in warnings
    )
    assert not any("9003.jpg" in w for w in warnings)
    # 7 fixture cats + the MPO: 8 readable, 4 train and 4 test
    assert np.bincount(data.test_labels).tolist()[0] == 4
    colours = np.concatenate([data.train_images, data.test_images])[:, 32, 32].astype(int)
    assert (np.abs(colours - (250, 90, 200)).max(axis=1) <= 3).sum() == 1  # the MPO is read


def test_catvsdog_kaggle_refuses_a_thin_file_by_its_weight_tables(tmp_path, caplog) -> None:
    from pipeline_lib.data.catvsdog import _check_kaggle_size

    # 10,000 x 10: intermediate 64,000 x 64 (4.1 M, fine) but a 64,000 x 10,000 table
    with pytest.raises(ImageSizeError, match="640,000,640 weight-table entries"):
        _check_kaggle_size(10_000, 10)
    _check_kaggle_size(500, 375)  # a real Kaggle photo: nothing raised


@pytest.mark.parametrize("shape", [(30, 40), (40, 30), (37, 91), (8, 8), (16, 16), (200, 150)])
def test_training_reader_and_deploy_path_preprocess_identically(tmp_path, shape) -> None:
    from pipeline_lib.data.image_folder import load_image
    from pipeline_lib.deploy.images import read_image_file

    pixels = np.random.default_rng(sum(shape)).integers(0, 256, (*shape, 3), dtype=np.uint8)
    path = tmp_path / "x.png"
    path.write_bytes(encode(Image.fromarray(pixels)))
    # Same formula, same PIL kernels: the deploy path must give the training pixels exactly.
    np.testing.assert_array_equal(read_image_file(path, size=16), load_image(path, 16))
