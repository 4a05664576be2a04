"""CelebA eyeglasses reader on a 12-image tree written by the tests."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from pipeline_lib.data import DataError, MissingDataError, dataset_class_names, load_dataset
from pipeline_lib.data.split import one_class_split

# Fixture (conftest.py): images 1..6 train, 7..8 valid, 9..12 test; eyeglasses on 2, 5, 7,
# 10, 12; image i is grey 20 * i in rows 40..197 and white elsewhere.
TRAIN_IDS = [1, 3, 4, 6]  # training partition without eyeglasses
TEST_IDS = [9, 10, 11, 12]
TEST_LABELS = [0, 1, 0, 1]


def _ids(images: np.ndarray) -> list[int]:
    return [round(int(v) / 20) for v in images[:, 32, 32, 0]]


def test_splits_labels_and_class_names(tmp_path, write_celeba):
    write_celeba(tmp_path)
    data = load_dataset("celeba", root=tmp_path)
    assert data.name == "celeba" and data.class_names == ("no_eyeglasses", "eyeglasses")
    assert data.train_images.shape == (4, 64, 64, 3) and data.train_images.dtype == np.uint8
    assert data.test_images.shape == (4, 64, 64, 3)
    assert data.train_labels.tolist() == [0, 0, 0, 0]  # no eyeglasses in train
    assert _ids(data.train_images) == TRAIN_IDS  # 2 and 5 (eyeglasses) and valid 7, 8 left out
    assert _ids(data.test_images) == TEST_IDS
    assert data.test_labels.tolist() == TEST_LABELS  # follows the Eyeglasses attribute
    assert dataset_class_names("celeba", root=tmp_path / "absent") == data.class_names


def test_crop_rows_40_to_198_cols_10_to_168_then_resize(tmp_path, write_celeba):
    write_celeba(tmp_path)
    data = load_dataset("celeba", root=tmp_path)
    # the white rows 0..39 and 198..217 fall outside the crop: every pixel is the band grey
    for image, i in zip(data.train_images, TRAIN_IDS, strict=True):
        assert np.abs(image.astype(int) - 20 * i).max() <= 3


def test_crop_matches_numpy_slicing_oracle(tmp_path, write_celeba):
    folder = write_celeba(tmp_path)
    noise = np.random.default_rng(0).integers(0, 256, (218, 178, 3), dtype=np.uint8)
    Image.fromarray(noise).save(folder / "img_align_celeba" / "000009.jpg", quality=90)
    with Image.open(folder / "img_align_celeba" / "000009.jpg") as img:
        decoded = np.asarray(img.convert("RGB"))
    crop = Image.fromarray(decoded[40:-20, 10:-10])
    # PIL's default filter (bicubic), as the released script/prepare_celeba.py resizes
    data = load_dataset("celeba", root=tmp_path)
    np.testing.assert_array_equal(data.test_images[0], np.asarray(crop.resize((64, 64))))
    bilinear = load_dataset("celeba", root=tmp_path, resize="bilinear")
    expected = np.asarray(crop.resize((64, 64), Image.Resampling.BILINEAR))
    np.testing.assert_array_equal(bilinear.test_images[0], expected)
    assert not np.array_equal(bilinear.test_images[0], data.test_images[0])


def test_an_unknown_resize_filter_is_refused(tmp_path, write_celeba):
    write_celeba(tmp_path)
    with pytest.raises(DataError, match="celeba option resize must be one of bicubic, bilinear"):
        load_dataset("celeba", root=tmp_path, resize="lanczos")


def test_files_directly_under_root_are_found(tmp_path, write_celeba):
    write_celeba(tmp_path, flat=True)
    data = load_dataset("celeba", root=tmp_path)
    assert _ids(data.test_images) == TEST_IDS


def test_one_class_split_of_celeba(tmp_path, write_celeba):
    write_celeba(tmp_path)
    data = load_dataset("celeba", root=tmp_path)
    split = one_class_split(data.train_labels, data.test_labels, inlier=0, seed=0)
    assert split.train_index.tolist() == [0, 1, 2, 3]
    assert split.test_is_outlier.tolist() == TEST_LABELS
    # no eyeglasses in train: contamination and the "eyeglasses" inlier fail with a clear error
    with pytest.raises(ValueError, match="needs 1 outliers, only 0 exist"):
        one_class_split(data.train_labels, data.test_labels, inlier=0, contamination=0.25, seed=0)
    with pytest.raises(ValueError, match="inlier class 1 has no training images"):
        one_class_split(data.train_labels, data.test_labels, inlier=1, seed=0)


def _edit_line(path, number, text):
    lines = path.read_text().splitlines()
    lines[number - 1] = text
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("line", "text", "message"),
    [
        (1, "twelve", "line 1 should be the number of images"),
        (1, "13", "line 1 announces 13 images, 12 rows follow"),
        (5, "000003.jpg " + " ".join(["1"] * 39), "line 5 has 39 values for 40 attributes"),
        (6, "000004.jpg " + " ".join(["1"] * 39 + ["x"]), "line 6 has a non-integer value"),
        (7, "000005.jpg " + " ".join(["1"] * 39 + ["0"]), "line 7 has values other than -1"),
        (8, "000005.jpg " + " ".join(["1"] * 40), "image 000005.jpg is listed more than once"),
    ],
)
def test_malformed_attribute_file_is_named(tmp_path, write_celeba, line, text, message):
    path = write_celeba(tmp_path) / "list_attr_celeba.txt"
    _edit_line(path, line, text)
    with pytest.raises(DataError, match=message) as info:
        load_dataset("celeba", root=tmp_path)
    assert str(path) in str(info.value)


def test_truncated_attribute_file_is_named(tmp_path, write_celeba):
    path = write_celeba(tmp_path) / "list_attr_celeba.txt"
    path.write_text(path.read_text()[:-60])  # cuts the last row short
    with pytest.raises(DataError, match=r"line 14 has \d+ values for 40 attributes") as info:
        load_dataset("celeba", root=tmp_path)
    assert str(path) in str(info.value)


def test_attribute_file_without_eyeglasses_is_named(tmp_path, write_celeba):
    path = write_celeba(tmp_path) / "list_attr_celeba.txt"
    path.write_text(path.read_text().replace("Eyeglasses", "Sunglasses"))
    with pytest.raises(DataError, match="no 'Eyeglasses' attribute") as info:
        load_dataset("celeba", root=tmp_path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [("000003.jpg 3", "line 3 should be '<file name> <0|1|2>'"), ("000003.jpg", "line 3")],
)
def test_malformed_partition_file_is_named(tmp_path, write_celeba, text, message):
    path = write_celeba(tmp_path) / "list_eval_partition.txt"
    _edit_line(path, 3, text)
    with pytest.raises(DataError, match=message) as info:
        load_dataset("celeba", root=tmp_path)
    assert str(path) in str(info.value)


def test_partition_image_without_attributes_is_named(tmp_path, write_celeba):
    folder = write_celeba(tmp_path)
    with (folder / "list_eval_partition.txt").open("a") as fh:
        fh.write("000013.jpg 2\n")
    with pytest.raises(DataError, match="no row for 1 image.*000013.jpg") as info:
        load_dataset("celeba", root=tmp_path)
    assert str(folder / "list_attr_celeba.txt") in str(info.value)


def test_missing_image_is_named(tmp_path, write_celeba):
    folder = write_celeba(tmp_path)
    (folder / "img_align_celeba" / "000010.jpg").unlink()
    (folder / "img_align_celeba" / "000007.jpg").unlink()  # validation: not needed
    with pytest.raises(DataError, match="1 image") as info:
        load_dataset("celeba", root=tmp_path, download=True)
    assert not isinstance(info.value, MissingDataError)  # a download would not fix it
    assert str(folder / "img_align_celeba" / "000010.jpg") in str(info.value)


def test_a_listed_image_that_is_not_a_regular_file_is_named_unopened(tmp_path, write_celeba):
    folder = write_celeba(tmp_path)
    image = folder / "img_align_celeba" / "000010.jpg"
    image.unlink()
    os.mkfifo(image)  # opening it would wait for a writer
    with pytest.raises(DataError, match=r"1 image\(s\) .* not regular files") as info:
        load_dataset("celeba", root=tmp_path)
    assert f"{image} (a FIFO (named pipe))" in str(info.value)


def test_corrupt_or_wrong_size_image_is_named(tmp_path, write_celeba):
    folder = write_celeba(tmp_path)
    (folder / "img_align_celeba" / "000011.jpg").write_bytes(b"\xff\xd8\xff\xe0 broken")
    with pytest.raises(DataError, match="cannot read image .*000011.jpg"):
        load_dataset("celeba", root=tmp_path)
    Image.new("RGB", (178, 178)).save(folder / "img_align_celeba" / "000011.jpg")
    with pytest.raises(DataError, match=r"000011.jpg is 178x178 .* expected .* 178x218"):
        load_dataset("celeba", root=tmp_path)


def test_missing_files_suggest_download(tmp_path, write_celeba):
    folder = write_celeba(tmp_path)
    (folder / "list_eval_partition.txt").unlink()
    with pytest.raises(MissingDataError) as info:
        load_dataset("celeba", root=tmp_path)
    message = str(info.value)
    assert str(folder) in message and "missing in" in message
    assert "list_eval_partition.txt" in message and "download: true" in message
