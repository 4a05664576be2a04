"""Reading new images: resizing as in training, one clear error per bad item."""

from __future__ import annotations

import base64
import io

import numpy as np
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException
from PIL import Image

from pipeline_lib.deploy import pyfunc
from pipeline_lib.deploy.images import (
    ImageError,
    collect_image_files,
    decode_image,
    image_from_array,
    resize_to,
)
from pipeline_lib.deploy.package import PackagedDetector
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
    answer = pyfunc.score_rows(package, frame)
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
    too_many = pd.DataFrame({"image": ["x"] * (pyfunc.MAX_ROWS + 1)})
    with pytest.raises(MlflowException, match="over the limit of 256") as caught:
        pyfunc.score_rows(package, too_many)
    assert caught.value.get_http_status_code() == 400
    monkeypatch.setattr(pyfunc, "MAX_REQUEST_BYTES", 10)
    with pytest.raises(MlflowException, match="bytes of image data"):
        pyfunc.score_rows(package, pd.DataFrame({"image": ["a" * 11]}))
