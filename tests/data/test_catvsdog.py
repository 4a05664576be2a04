"""Cat-vs-Dog reader on tiny PetImages trees written by the tests."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from PIL import Image

from pipeline_lib.data import DataError, MissingDataError, dataset_class_names, load_dataset
from pipeline_lib.data.area_resize import area_resize

SMALL = {"n_train_per_class": 4, "n_test_per_class": 2}


def _identities(images: np.ndarray) -> list[int]:
    """Fixture image index of each output image, from the red channel (20 * index + 10)."""
    return [round((int(red) - 10) / 20) for red in images[:, 32, 32, 0]]


def _expected_split(names: list[str], n_train: int, n_test: int) -> tuple[list[int], list[int]]:
    """Oracle: seed-0 permutation of the sorted readable files; file indices per split."""
    order = np.random.default_rng(0).permutation(len(names))
    index = [int(names[k].removesuffix(".jpg")) for k in range(len(names))]
    train = [index[k] for k in np.sort(order[:n_train])]
    test = [index[k] for k in np.sort(order[n_train : n_train + n_test])]
    return train, test


def test_shapes_labels_and_class_names(tmp_path, write_pet_images):
    write_pet_images(tmp_path)
    data = load_dataset("catvsdog", root=tmp_path, **SMALL)
    assert data.name == "catvsdog" and data.class_names == ("cat", "dog")
    assert data.train_images.shape == (8, 64, 64, 3) and data.train_images.dtype == np.uint8
    assert data.test_images.shape == (4, 64, 64, 3)
    assert data.train_labels.tolist() == [0] * 4 + [1] * 4
    assert data.test_labels.tolist() == [0, 0, 1, 1]
    assert dataset_class_names("catvsdog", root=tmp_path / "absent") == ("cat", "dog")


def test_split_is_the_seed0_permutation_of_sorted_readable_files(
    tmp_path, write_pet_images, pet_color
):
    # 12 cats: "10.jpg" and "11.jpg" sort before "2.jpg" (file-name order, not numeric)
    names = write_pet_images(tmp_path, n_cat=12)
    assert names["Cat"][:4] == ["0.jpg", "1.jpg", "10.jpg", "11.jpg"]
    data = load_dataset("catvsdog", root=tmp_path, **SMALL)
    again = load_dataset("catvsdog", root=tmp_path, **SMALL)
    np.testing.assert_array_equal(data.train_images, again.train_images)
    np.testing.assert_array_equal(data.test_images, again.test_images)
    for label, folder in enumerate(("Cat", "Dog")):
        train, test = _expected_split(names[folder], 4, 2)
        got_train = _identities(data.train_images[data.train_labels == label])
        got_test = _identities(data.test_images[data.test_labels == label])
        assert got_train == train and got_test == test
        assert not set(got_train) & set(got_test)
        # solid JPEGs decode to their colour everywhere after resize and crop
        first = data.train_images[data.train_labels == label][0].astype(int)
        assert np.abs(first - np.array(pet_color(folder, train[0]))).max() <= 3


def test_unreadable_images_are_skipped_and_counted(tmp_path, write_pet_images, caplog):
    write_pet_images(tmp_path)
    with caplog.at_level(logging.WARNING, logger="pipeline_lib.data.catvsdog"):
        data = load_dataset("catvsdog", root=tmp_path, **SMALL)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    cat, dog = warnings
    # Thumbs.db is not an image: neither read nor counted
    assert "skipped 1 unreadable image(s) of 8" in cat and "666.jpg" in cat
    assert "skipped 1 unreadable image(s) of 7" in dog and "corrupt.jpg" in dog
    assert np.bincount(data.train_labels).tolist() == [4, 4]


def test_no_warning_without_unreadable_images(tmp_path, write_pet_images, caplog):
    write_pet_images(tmp_path, broken=False)
    with caplog.at_level(logging.WARNING, logger="pipeline_lib.data.catvsdog"):
        load_dataset("catvsdog", root=tmp_path, **SMALL)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_too_few_readable_images_name_the_folder_and_count(tmp_path, write_pet_images):
    write_pet_images(tmp_path)
    # 6 leaves a test image among the 7 readable cats, none among the 6 readable dogs
    # (the corrupt one is not counted)
    with pytest.raises(DataError, match=r"Dog/ holds 6 readable images, not more than") as info:
        load_dataset("catvsdog", root=tmp_path, n_train_per_class=6, n_test_per_class=2)
    assert "n_train_per_class = 6" in str(info.value)


def test_test_split_takes_the_rest_up_to_its_size(tmp_path, write_pet_images):
    # The real download has 12,500 files per class with a few unreadable ones: the test
    # split must shrink rather than fail.
    write_pet_images(tmp_path)
    dataset = load_dataset("catvsdog", root=tmp_path, n_train_per_class=5, n_test_per_class=2)
    assert np.bincount(dataset.test_labels).tolist() == [2, 1]
    assert np.bincount(dataset.train_labels).tolist() == [5, 5]


def test_nested_catvsdog_folder_is_found(tmp_path, write_pet_images):
    write_pet_images(tmp_path / "catvsdog", broken=False)
    data = load_dataset("catvsdog", root=tmp_path, **SMALL)
    assert data.train_images.shape == (8, 64, 64, 3)


def test_shorter_side_to_64_then_centre_crop_and_rgb(tmp_path, write_pet_images):
    write_pet_images(tmp_path, n_cat=5, broken=False)
    # a grey JPEG 128 wide and 256 high: halved to 64x128, the crop keeps original rows
    # 64..191, inside the black band 48..207; the white ends fall outside
    tall = np.full((256, 128), 255, dtype=np.uint8)
    tall[48:208] = 0
    Image.fromarray(tall).save(tmp_path / "PetImages" / "Cat" / "tall.jpg")
    data = load_dataset("catvsdog", root=tmp_path, n_train_per_class=5, n_test_per_class=1)
    # all 6 readable cats are used; the solid fixture cats have blue 200, "tall" is black
    cats = np.concatenate(
        [data.train_images[data.train_labels == 0], data.test_images[data.test_labels == 0]]
    )
    dark = cats[cats.reshape(len(cats), -1).max(axis=1) < 40]
    assert len(cats) == 6 and dark.shape == (1, 64, 64, 3)
    assert dark.max() <= 8


def test_missing_folder_says_where_and_how_to_get_it(tmp_path):
    with pytest.raises(MissingDataError) as info:
        load_dataset("catvsdog", root=tmp_path, download=True)  # nothing to download
    message = str(info.value)
    assert str(tmp_path / "PetImages") in message
    assert str(tmp_path / "catvsdog" / "PetImages") in message
    assert "Kaggle Cats and Dogs Dataset" in message and "Microsoft Download Center" in message


def test_only_cat_folder_is_missing_data(tmp_path, write_pet_images):
    write_pet_images(tmp_path)
    (tmp_path / "PetImages" / "Dog").rename(tmp_path / "PetImages" / "Dogs")
    with pytest.raises(MissingDataError, match="Cat/ and Dog/"):
        load_dataset("catvsdog", root=tmp_path, **SMALL)


@pytest.mark.parametrize(("option", "value"), [("n_train_per_class", 0), ("n_test_per_class", 2.5)])
def test_bad_options_are_named(tmp_path, option, value):
    with pytest.raises(DataError, match=f"catvsdog option {option}"):
        load_dataset("catvsdog", root=tmp_path, **{**SMALL, option: value})


def test_unknown_option_is_refused(tmp_path):
    with pytest.raises(DataError, match=r"unknown option\(s\) \['image_size'\]"):
        load_dataset("catvsdog", root=tmp_path, image_size=32)


# --- cv2.INTER_AREA in numpy (pipeline_lib.data.area_resize) ---------------------------------


def test_area_resize_integer_factor_is_block_mean_with_ties_up():
    image = np.arange(24, dtype=np.uint8).reshape(6, 4)
    # 2x2 block sums 10, 18, 42, 50, 74, 82: means 2.5, 4.5, ... all ties, rounded up as
    # OpenCV's (sum + 2) >> 2
    assert area_resize(image, 3, 2).tolist() == [[3, 5], [11, 13], [19, 21]]
    # 3x3 blocks go through cvRound (ties to even): block sums of 9 * [[1, 2], [3, 4]]
    blocks = np.kron(np.array([[1, 2], [3, 4]], dtype=np.uint8), np.ones((3, 3), np.uint8))
    assert area_resize(blocks, 2, 2).tolist() == [[1, 2], [3, 4]]


def test_area_resize_non_integer_ratio_matches_hand_weights():
    # 5 -> 3: cells of 5/3 pixels; covered fractions / (5/3) by hand
    w5to3 = np.array(
        [[0.6, 0.4, 0, 0, 0], [0, 0.2, 0.6, 0.2, 0], [0, 0, 0, 0.4, 0.6]], dtype=np.float64
    )
    image = (np.arange(25, dtype=np.uint8) * 10).reshape(5, 5)
    # linear in the pixel index: rows [0.4, 2.0, 3.6] * 50 + columns [0.4, 2.0, 3.6] * 10
    assert area_resize(image, 3, 3).tolist() == [[24, 40, 56], [104, 120, 136], [184, 200, 216]]
    noisy = np.random.default_rng(0).integers(0, 256, size=(4, 5, 3)).astype(np.uint8)
    # rows: 4 -> 2 is a plain pair mean, columns 5 -> 3 fractional: the general area path
    w4to2 = np.array([[0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5]])
    oracle = np.rint(np.einsum("yh,hwc,xw->yxc", w4to2, noisy.astype(float), w5to3))
    np.testing.assert_array_equal(area_resize(noisy, 2, 3), oracle.astype(np.uint8))


def test_area_resize_enlarging_is_opencvs_bilinear_variant():
    # OpenCV INTER_AREA when enlarging 3 -> 5: weights (1), (2/3, 1/3), (1), (1/3, 2/3), (1)
    w3to5 = np.array([[1, 0, 0], [2 / 3, 1 / 3, 0], [0, 1, 0], [0, 1 / 3, 2 / 3], [0, 0, 1]])
    image = np.array([[0, 30, 90], [60, 120, 240], [255, 0, 9]], dtype=np.uint8)
    oracle = np.rint(w3to5 @ image.astype(float) @ w3to5.T).astype(np.uint8)
    np.testing.assert_array_equal(area_resize(image, 5, 5), oracle)
    assert area_resize(image, 5, 5)[0].tolist() == [0, 10, 30, 70, 90]


def test_area_resize_refuses_non_uint8():
    with pytest.raises(ValueError, match="uint8"):
        area_resize(np.zeros((4, 4), dtype=np.float32), 2, 2)
