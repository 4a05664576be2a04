"""Image-folder reader on PNG trees written by the tests."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest

from pipeline_lib.data import DataError, MissingDataError, dataset_class_names, load_dataset
from pipeline_lib.data.provenance import record_data_provenance

COLORS = {"cat": (200, 10, 10), "dog": (10, 200, 10), "eel": (10, 10, 200)}


@pytest.fixture
def flat_tree(write_png, solid):
    """Function writing ``<root>/{cat,dog,eel}/NN.png`` (solid colours) and a README."""

    def make(root, per_class=5):
        for name, color in COLORS.items():
            for i in range(per_class):
                write_png(root / name / f"{i:02d}.png", solid(color, 12 + i, 16))
        (root / "cat" / "README.txt").write_text("not an image")
        return root

    return make


def test_flat_layout_is_split_per_class(tmp_path, flat_tree):
    root = flat_tree(tmp_path / "imgs")
    data = load_dataset("image_folder", path=root, image_size=8)
    assert data.class_names == ("cat", "dog", "eel")
    assert data.train_images.shape == (9, 8, 8, 3)
    assert data.test_images.shape == (6, 8, 8, 3)
    # round(0.3 * 5) = 2 test images per class, the rest train
    assert np.bincount(data.test_labels).tolist() == [2, 2, 2]
    assert np.bincount(data.train_labels).tolist() == [3, 3, 3]
    for label, color in enumerate(COLORS.values()):
        np.testing.assert_array_equal(data.train_images[data.train_labels == label][0, 4, 4], color)


def test_flat_layout_split_is_deterministic_and_follows_test_fraction(tmp_path, flat_tree):
    root = flat_tree(tmp_path / "imgs", per_class=10)
    a = load_dataset("image_folder", path=root, image_size=4, test_fraction=0.5)
    b = load_dataset("image_folder", path=str(root), image_size=4, test_fraction=0.5)
    assert np.bincount(a.test_labels).tolist() == [5, 5, 5]
    np.testing.assert_array_equal(a.train_images, b.train_images)
    np.testing.assert_array_equal(a.test_labels, b.test_labels)


def test_default_image_size_is_32(tmp_path, flat_tree):
    data = load_dataset("image_folder", path=flat_tree(tmp_path / "imgs"))
    assert data.train_images.shape[1:] == (32, 32, 3)


def test_train_test_layout_and_centre_crop(tmp_path, write_png):
    stripes = np.zeros((10, 30, 3), np.uint8)
    stripes[:, :10] = (255, 0, 0)
    stripes[:, 10:20] = (0, 255, 0)
    stripes[:, 20:] = (0, 0, 255)
    for split, n in (("train", 3), ("test", 2)):
        for name in ("a_1", "b_2"):
            for i in range(n):
                write_png(tmp_path / split / name / f"{i}.png", stripes)
    data = load_dataset("image_folder", path=tmp_path, image_size=10)
    assert data.class_names == ("a_1", "b_2")
    assert len(data.train_images) == 6 and len(data.test_images) == 4
    # shorter side already 10: the centre 10x10 crop is the green stripe
    assert (data.train_images == np.array([0, 255, 0], np.uint8)).all()
    assert dataset_class_names("image_folder", path=tmp_path) == ("a_1", "b_2")


def test_shorter_side_resized_before_crop(tmp_path, write_png):
    tall = np.zeros((40, 20, 3), np.uint8)
    tall[:4] = 255  # a white top band (rows 0..1 after halving) falls outside the crop
    for name in ("x", "y"):
        for i in range(4):
            write_png(tmp_path / name / f"{i}.png", tall)
    data = load_dataset("image_folder", path=tmp_path, image_size=10)
    assert data.train_images.shape[1:] == (10, 10, 3)
    assert data.train_images.max() == 0


def test_class_names_from_subfolders(tmp_path, flat_tree):
    root = flat_tree(tmp_path / "imgs")
    assert dataset_class_names("image_folder", path=root, image_size=8) == ("cat", "dog", "eel")


def test_unsafe_class_name_is_named(tmp_path, flat_tree, solid, write_png):
    root = flat_tree(tmp_path / "imgs")
    write_png(root / "bad-name" / "0.png", solid((1, 2, 3)))
    with pytest.raises(DataError, match="'bad-name'"):
        load_dataset("image_folder", path=root)
    with pytest.raises(DataError, match="'bad-name'"):
        dataset_class_names("image_folder", path=root)


def test_corrupt_image_is_named(tmp_path, flat_tree):
    root = flat_tree(tmp_path / "imgs")
    (root / "dog" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    with pytest.raises(DataError, match="broken.png"):
        load_dataset("image_folder", path=root)


def test_truncated_png_is_named(tmp_path, flat_tree, write_png):
    root = flat_tree(tmp_path / "imgs")
    write_png(
        root / "eel" / "big.png", np.random.default_rng(0).integers(0, 255, (64, 64, 3), np.uint8)
    )
    path = root / "eel" / "big.png"
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(DataError, match="big.png"):
        load_dataset("image_folder", path=root)


def test_path_option_is_required(tmp_path):
    with pytest.raises(DataError, match="'path'"):
        load_dataset("image_folder")
    with pytest.raises(DataError, match="'path'"):
        dataset_class_names("image_folder")


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(MissingDataError, match=str(tmp_path / "absent")):
        load_dataset("image_folder", path=tmp_path / "absent")


def test_only_train_folder_is_rejected(tmp_path, solid, write_png):
    write_png(tmp_path / "train" / "a" / "0.png", solid((1, 1, 1)))
    with pytest.raises(DataError, match="only one of train/ and test/"):
        load_dataset("image_folder", path=tmp_path)


def test_differing_train_and_test_classes_are_rejected(tmp_path, solid, write_png):
    write_png(tmp_path / "train" / "a" / "0.png", solid((1, 1, 1)))
    write_png(tmp_path / "test" / "b" / "0.png", solid((1, 1, 1)))
    with pytest.raises(DataError, match="class folders differ"):
        load_dataset("image_folder", path=tmp_path)


def test_empty_class_folder_is_named(tmp_path, flat_tree):
    root = flat_tree(tmp_path / "imgs")
    (root / "fox").mkdir()
    with pytest.raises(DataError, match="fox/ holds no images"):
        load_dataset("image_folder", path=root)


@pytest.mark.parametrize(("option", "value"), [("image_size", 0), ("test_fraction", 1.0)])
def test_bad_options_are_named(tmp_path, option, value, flat_tree):
    root = flat_tree(tmp_path / "imgs")
    with pytest.raises(DataError, match=option):
        load_dataset("image_folder", path=root, **{option: value})


def test_special_entries_are_skipped_named_logged_and_recorded(tmp_path, flat_tree, caplog):
    root = flat_tree(tmp_path / "imgs")
    os.mkfifo(root / "cat" / "pipe.png")  # opening it would wait for a writer
    (root / "dog" / "zero.png").symlink_to("/dev/zero")  # reading it would never end
    (root / "dog" / "gone.jpg").symlink_to(root / "nowhere.jpg")
    (root / "eel" / "linked.png").symlink_to(root / "eel" / "00.png")  # a link to a file: read
    with caplog.at_level(logging.WARNING, logger="pipeline_lib.data.regular_files"):
        record = record_data_provenance("image_folder", {"path": str(root), "image_size": 8})
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    cat, dog = warnings
    assert "skipped 1 of 6 image entries" in cat and "pipe.png (a FIFO (named pipe))" in cat
    assert "skipped 2 of 7 image entries" in dog
    assert "zero.png (a symlink to /dev/zero, a character device)" in dog
    assert "gone.jpg (a dangling symlink" in dog
    skipped = {Path(row["path"]).name: row["reason"] for row in record["skipped"]}
    assert skipped == {
        "pipe.png": "a FIFO (named pipe)",
        "zero.png": "a symlink to /dev/zero, a character device",
        "gone.jpg": f"a dangling symlink to {root / 'nowhere.jpg'}",
    }
    data = load_dataset("image_folder", path=root, image_size=8)
    assert np.bincount(np.concatenate([data.train_labels, data.test_labels])).tolist() == [5, 5, 6]
