"""Reading new images: resizing as in training, one clear error per bad item."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException
from PIL import Image, ImageFile

from pipeline_lib.deploy import serving
from pipeline_lib.deploy.image_package import PackagedDetector
from pipeline_lib.deploy.images import (
    DEFAULT_MAX_PIXELS,
    DEFAULT_REQUEST_PIXELS,
    ImageError,
    ImageFormatError,
    ImageMemoryError,
    ImageSizeError,
    RequestTooLargeError,
    check_request_pixels,
    collect_image_files,
    decode_image,
    header_pixels,
    image_from_array,
    read_images,
    request_pixels,
    resize_to,
)
from tests.data.hostile_images import EPS, PSD, WIDE, forbid_decoding, mpo, wide_png
from tests.deploy.conftest import png_bytes


def _encode(image: Image.Image, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def test_resize_keeps_training_size_and_crops_the_longer_side() -> None:
    image = np.zeros((40, 80, 3), np.uint8)
    image[:, 20:60] = 255  # the centre square is white
    out = resize_to(image, 32)
    assert out.shape == (32, 32, 3)
    # The centre crop holds (almost) only the white part; squashing would keep black sides.
    assert out[:, 2:-2].min() == 255 and out[:, :2].min() > 100
    same = np.arange(32 * 32 * 3, dtype=np.uint8).reshape(32, 32, 3)
    assert np.array_equal(resize_to(same, 32), same)


def test_bad_inputs_raise_clear_errors() -> None:
    good = np.full((20, 30, 3), 7, np.uint8)
    assert decode_image(png_bytes(good), size=16).shape == (16, 16, 3)
    gray = decode_image(_encode(Image.fromarray(good[..., 0])), size=16)
    assert np.all(gray == 7)
    with pytest.raises(ImageError, match="corrupt or truncated"):
        decode_image(_encode(Image.fromarray(good), "JPEG")[:200], size=16)
    with pytest.raises(ImageError, match="not a readable image"):
        decode_image(b"this is not an image", size=16)
    with pytest.raises(ImageError, match="empty file"):
        decode_image(b"", size=16)
    with pytest.raises(ImageError, match="RGBA"):
        decode_image(_encode(Image.new("RGBA", (8, 8))), size=16)
    with pytest.raises(ImageError, match="over the limit of 100"):
        decode_image(png_bytes(good), size=16, max_pixels=100)
    with pytest.raises(ImageError, match="4 channels"):
        image_from_array(np.zeros((8, 8, 4)), size=16)
    with pytest.raises(ImageError, match="integers"):
        image_from_array(np.full((8, 8), 0.5), size=16)
    assert (
        image_from_array(np.full((8, 8), 9).tolist(), size=4).tolist()
        == np.full((4, 4, 3), 9).tolist()
    )


def test_folders_expand_and_empty_ones_are_errors(tmp_path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.PNG").write_bytes(b"1")
    (tmp_path / "a" / "notes.txt").write_text("skip")
    (tmp_path / "empty").mkdir()
    files, errors = collect_image_files([tmp_path / "a", tmp_path / "empty", tmp_path / "nope"])
    assert files == [tmp_path / "a" / "x.PNG"]
    assert [path for path, _ in errors] == [str(tmp_path / "empty"), str(tmp_path / "nope")]
    assert "no image files" in errors[0][1]


def test_entries_that_are_not_regular_files_are_errors_never_opened(tmp_path) -> None:
    folder = tmp_path / "line"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.png").write_bytes(b"1")
    (folder / "sub" / "linked.png").symlink_to(folder / "a.png")  # a link to a file: kept
    os.mkfifo(folder / "pipe.png")
    (folder / "zero.png").symlink_to("/dev/zero")
    (folder / "gone.jpg").symlink_to(tmp_path / "nowhere.jpg")
    (folder / "loop.png").symlink_to(folder / "loop.png")
    (folder / "folder.png").mkdir()  # a folder named like an image is walked, not read
    os.mkfifo(tmp_path / "named.png")
    files, errors = collect_image_files([folder, tmp_path / "named.png"])
    assert files == [folder / "a.png", folder / "sub" / "linked.png"]
    reasons = {Path(path).name: reason for path, reason in errors}
    assert reasons == {
        "gone.jpg": f"not a regular file: a dangling symlink to {tmp_path / 'nowhere.jpg'}; "
        "not opened",
        "loop.png": f"not a regular file: a looping symlink to {folder / 'loop.png'}; not opened",
        "pipe.png": "not a regular file: a FIFO (named pipe); not opened",
        "zero.png": "not a regular file: a symlink to /dev/zero, a character device; not opened",
        "named.png": "not a regular file: a FIFO (named pipe); not opened",
    }


def test_a_fifo_put_in_place_of_a_listed_file_is_refused_without_waiting(tmp_path) -> None:
    os.mkfifo(tmp_path / "late.png")  # as if swapped in after the folder was listed
    good, errors = read_images([tmp_path / "late.png"], size=8)
    assert good == []
    assert errors == [
        (str(tmp_path / "late.png"), "not a regular file: a FIFO (named pipe); not opened")
    ]


def test_predict_reports_bad_rows_and_scores_the_others(kde_package) -> None:
    package = PackagedDetector.load(kde_package)
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
    frame = pd.DataFrame(
        {
            "name": ["good", "broken", "gray", "rgba"],
            "image": [base64.b64encode(png_bytes(image)).decode(), "!!notbase64", None, None],
            "array": [None, None, image[..., 0].tolist(), np.zeros((32, 32, 4)).tolist()],
        }
    )
    answer = serving.score_rows(package, frame)
    assert list(answer["name"]) == ["good", "broken", "gray", "rgba"]
    assert answer["error"][0] == "" and answer["error"][2] == ""
    assert "base64" in answer["error"][1] and "4 channels" in answer["error"][3]
    expected = package.anomaly_scores(np.stack([image, np.repeat(image[..., :1], 3, axis=-1)]))
    assert answer["score"][0] == pytest.approx(expected[0], abs=1e-9)
    assert answer["score"][2] == pytest.approx(expected[1], abs=1e-9)
    assert answer["score"][1] is None and answer["is_anomaly"][3] is None
    assert answer["is_anomaly"][0] == bool(expected[0] > package.threshold)


def test_requests_over_the_limits_are_refused_with_the_reason(kde_package, monkeypatch) -> None:
    package = PackagedDetector.load(kde_package)
    too_many = pd.DataFrame({"image": ["x"] * (serving.MAX_ROWS + 1)})
    with pytest.raises(MlflowException, match="over the limit of 256") as caught:
        serving.score_rows(package, too_many)
    assert caught.value.get_http_status_code() == 400
    monkeypatch.setattr(serving, "MAX_REQUEST_BYTES", 10)
    with pytest.raises(MlflowException, match="bytes of image data"):
        serving.score_rows(package, pd.DataFrame({"image": ["a" * 11]}))


# Hostile input: refused from the header, per item, by name (pipeline_lib.data.image_files).


def test_wide_png_is_refused_per_item_without_decoding(monkeypatch, tmp_path) -> None:
    data = wide_png()
    attempts = forbid_decoding(monkeypatch, size=WIDE)
    with pytest.raises(ImageSizeError, match=r"32000000 x 32 = 1,024,000,000-pixel intermediate"):
        decode_image(data, size=32)
    with pytest.raises(ImageSizeError, match="aspect ratio 1,000,000:1"):
        image_from_array(np.zeros((1, 1_000_000), np.uint8), size=32)
    good = np.full((20, 30, 3), 7, np.uint8)
    (tmp_path / "good.png").write_bytes(png_bytes(good))
    (tmp_path / "wide.png").write_bytes(data)
    scored, errors = read_images([tmp_path / "wide.png", tmp_path / "good.png"], size=16)
    assert [path.name for path, _ in scored] == ["good.png"]
    assert np.all(scored[0][1] == 7)
    assert errors[0][0] == str(tmp_path / "wide.png") and "intermediate" in errors[0][1]
    assert attempts == []
    # Stretch packages (MVTec) resize the whole image to size x size: no intermediate.
    assert decode_image(wide_png((2_000, 1)), size=8, resize="stretch").shape == (8, 8, 3)


def test_formats_other_than_the_accepted_ones_are_refused_by_name() -> None:
    with pytest.raises(ImageFormatError, match="EPS images are not accepted"):
        decode_image(EPS, size=16)
    with pytest.raises(ImageFormatError, match="PSD images are not accepted"):
        decode_image(PSD, size=16)
    with pytest.raises(ImageFormatError, match="not a readable image"):
        decode_image(b"this is not an image", size=16)
    out = decode_image(mpo((200, 30, 60)), size=16)
    assert out.shape == (16, 16, 3) and np.abs(out.astype(int) - (200, 30, 60)).max() <= 3
    for fmt in ("BMP", "GIF", "TIFF", "WEBP"):
        encoded = _encode(Image.new("RGB", (20, 20), (9, 9, 9)), fmt)
        assert np.all(decode_image(encoded, size=8) == 9)


def test_max_pixels_above_pillows_limit_is_honoured(monkeypatch) -> None:
    # Pillow's limit lowered to 100 stands for its 89.5 M: a 40 x 30 image is then 12 times it.
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)
    image = np.full((30, 40, 3), 5, np.uint8)
    assert np.all(decode_image(png_bytes(image), size=8, max_pixels=2_000) == 5)
    assert Image.MAX_IMAGE_PIXELS == 100  # restored after the call
    # Over Pillow's limit and over max_pixels: a size error naming our limit, not "corrupt".
    with pytest.raises(ImageSizeError, match="over the limit of 50 pixels"):
        decode_image(png_bytes(image), size=8, max_pixels=50)


def test_memory_error_on_one_item_names_it_and_the_others_score(kde_package, monkeypatch) -> None:
    package = PackagedDetector.load(kde_package)
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8) for _ in range(2)]
    original = ImageFile.ImageFile.load

    def load(self):
        if self.size == (48, 40):  # the middle item only
            raise MemoryError
        return original(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", load)
    hungry = np.zeros((40, 48, 3), np.uint8)
    encoded = [base64.b64encode(png_bytes(x)).decode() for x in (images[0], hungry, images[1])]
    answer = serving.score_rows(package, pd.DataFrame({"name": ["a", "b", "c"], "image": encoded}))
    assert answer["error"][0] == "" and answer["error"][2] == ""
    assert answer["error"][1].startswith("ran out of memory decoding or resizing this 48 x 40")
    expected = package.anomaly_scores(np.stack(images))
    assert answer["score"][0] == pytest.approx(expected[0], abs=1e-9)
    assert answer["score"][2] == pytest.approx(expected[1], abs=1e-9)
    assert answer["score"][1] is None
    with pytest.raises(ImageMemoryError):
        decode_image(png_bytes(hungry), size=32)


def test_request_pixels_are_summed_from_headers(monkeypatch) -> None:
    attempts = forbid_decoding(monkeypatch)
    png = base64.b64encode(png_bytes(np.zeros((20, 30, 3), np.uint8))).decode()
    wide = base64.b64encode(wide_png()).decode()
    eps = base64.b64encode(EPS).decode()
    images = [png, png.encode(), wide, eps, "!!notbase64", None, float("nan")]
    arrays = [np.zeros((8, 8)).tolist(), np.zeros((4, 5, 3)), None]
    expected = 600 + 600 + 1_000_000 + 64 + 20  # EPS, bad base64, None and NaN count 0
    assert request_pixels(images, arrays) == expected
    assert check_request_pixels(images, arrays, budget=expected) == expected
    with pytest.raises(
        RequestTooLargeError, match=f"{expected:,} pixels in total, over the budget"
    ):
        check_request_pixels(images, arrays, budget=expected - 1)
    # An item over max_pixels is refused on its own without decoding: it costs the request 0.
    assert request_pixels([wide, png], max_pixels=1_000) == 600
    assert header_pixels(base64.b64decode(png)) == 600
    assert attempts == []
    assert DEFAULT_REQUEST_PIXELS == 4 * DEFAULT_MAX_PIXELS


def test_request_over_the_pixel_budget_is_a_400_before_decoding(kde_package, monkeypatch) -> None:
    package = PackagedDetector.load(kde_package)
    image = np.full((20, 30, 3), 7, np.uint8)  # 600 pixels
    encoded = base64.b64encode(png_bytes(image)).decode()
    frame = pd.DataFrame(
        {
            "image": [encoded, encoded, None],
            "array": [np.zeros((9, 9)).tolist(), None, np.zeros((10, 10)).tolist()],
        }
    )
    total = 600 + 600 + 100  # row 0 decodes its image, not its array
    attempts = forbid_decoding(monkeypatch)
    with pytest.raises(MlflowException, match=f"{total:,} pixels in total") as caught:
        serving.score_rows(package, frame, request_pixels=total - 1)
    assert caught.value.get_http_status_code() == 400
    assert caught.value.error_code == "INVALID_PARAMETER_VALUE"
    assert f"over the budget of {total - 1:,}" in caught.value.message
    assert "DROC_REQUEST_PIXELS=<pixels>" in caught.value.message
    assert attempts == []
    # The budget from the server's environment, as `mlflow models serve` would see it.
    monkeypatch.setenv(serving.REQUEST_PIXELS_ENV, str(total - 1))
    with pytest.raises(MlflowException, match=f"over the budget of {total - 1:,}"):
        serving.score_rows(package, frame)
    monkeypatch.setenv(serving.REQUEST_PIXELS_ENV, "many")
    with pytest.raises(ValueError, match="DROC_REQUEST_PIXELS='many' is not a positive integer"):
        serving.score_rows(package, frame)
    monkeypatch.undo()
    monkeypatch.setenv(serving.REQUEST_PIXELS_ENV, f"{total:_}")
    answer = serving.score_rows(package, frame)  # within the budget: every row scores
    assert list(answer["error"]) == ["", "", ""]
    expected = package.anomaly_scores(
        np.stack([decode_image(png_bytes(image), size=package.image_size)] * 2)
    )
    # float32 embedding, another batch: the summation order may move a score by ~100 eps.
    assert answer["score"][1] == pytest.approx(expected[1], rel=1e-4)
