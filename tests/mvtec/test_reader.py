"""MVTec AD reader: layout, masks (complete, absent or broken), resizing, grouping."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pipeline_lib.data import DataError, MissingDataError
from pipeline_lib.data.mvtec import (
    MVTEC_CATEGORIES,
    MVTEC_OBJECTS,
    MVTEC_TEXTURES,
    category_from_arrays,
    category_group,
    category_to_arrays,
    discover_categories,
    read_mvtec_category,
    resolve_category_paths,
)

#: MVTec AD's bottle, in the development data: $DROC_SHARED, else ``shared`` beside the checkout.
SHARED = os.environ.get("DROC_SHARED") or Path(__file__).resolve().parents[2].parent / "shared"
REAL_BOTTLE = Path(SHARED) / "data/mvtec_ad/bottle"


def test_reads_layout_labels_files_and_masks(mvtec_category):
    folder = mvtec_category(size=40, n_train=5, n_good=2, defects={"spot": 2, "crack": 1})
    category = read_mvtec_category(folder, image_size=40)
    assert category.name == "widget" and category.group == "other"
    assert category.train_images.shape == (5, 40, 40, 3)
    assert category.test_images.shape == (5, 40, 40, 3)
    # good first, then the defect folders in sorted order
    assert category.test_defects == ("good", "good", "crack", "spot", "spot")
    assert category.test_labels.tolist() == [0, 0, 1, 1, 1]
    assert category.test_files[2] == "test/crack/000.png"
    masks = category.test_masks
    assert masks.shape == (5, 40, 40) and set(np.unique(masks)) <= {0, 1}
    assert masks[:2].sum() == 0 and all(m.sum() == 64 for m in masks[2:])  # 8x8 squares
    # the mask marks exactly the off-colour square
    defect_pixels = np.all(category.test_images[2] == (230, 40, 200), axis=-1)
    assert np.array_equal(defect_pixels, masks[2].astype(bool))


def test_images_and_masks_are_resized_together(mvtec_category):
    folder = mvtec_category(size=80, n_train=2, n_good=1, defects={"spot": 1}, defect_side=20)
    category = read_mvtec_category(folder, image_size=40)
    assert category.test_images.shape[1:] == (40, 40, 3)
    mask = category.test_masks[1]
    assert mask.sum() == 100  # the 20x20 square becomes 10x10 with nearest neighbour
    assert set(np.unique(mask)) == {0, 1}


def test_grayscale_images_become_rgb(mvtec_category):
    folder = mvtec_category(size=32, n_train=2, n_good=1, defects={"spot": 1})
    gray = folder / "train/good/000.png"
    Image.open(gray).convert("L").save(gray)
    category = read_mvtec_category(folder, image_size=32)
    first = category.train_images[0]
    assert first.shape == (32, 32, 3)
    assert np.array_equal(first[..., 0], first[..., 2])


def test_missing_mask_names_the_image_and_the_expected_mask(mvtec_category):
    folder = mvtec_category(size=32, n_train=2, n_good=1, defects={"spot": 2})
    (folder / "ground_truth/spot/001_mask.png").unlink()
    with pytest.raises(DataError) as info:
        read_mvtec_category(folder, image_size=32)
    message = str(info.value)
    assert str(folder / "test/spot/001.png") in message
    assert str(folder / "ground_truth/spot/001_mask.png") in message


def test_mask_of_another_size_names_the_mask(mvtec_category):
    folder = mvtec_category(size=32, n_train=2, n_good=1, defects={"spot": 1})
    bad = folder / "ground_truth/spot/000_mask.png"
    Image.new("L", (16, 16)).save(bad)
    with pytest.raises(DataError, match="000_mask.png is 16x16 but its image .* is 32x32"):
        read_mvtec_category(folder, image_size=32)


def test_without_ground_truth_masks_are_none_and_logged(mvtec_category, caplog):
    folder = mvtec_category(size=32, n_train=2, n_good=1, defects={"spot": 1}, masks=False)
    with caplog.at_level(logging.WARNING, logger="pipeline_lib.data.mvtec"):
        category = read_mvtec_category(folder, image_size=32)
    assert category.test_masks is None and not category.has_masks
    assert any("only image-level metrics" in r.getMessage() for r in caplog.records)
    with pytest.raises(DataError, match="masks are required"):
        read_mvtec_category(folder, image_size=32, masks="required")


def test_masks_none_ignores_ground_truth(mvtec_category):
    folder = mvtec_category(size=32, n_train=2, n_good=1, defects={"spot": 1})
    assert read_mvtec_category(folder, image_size=32, masks="none").test_masks is None


def test_subsets_for_smoke_runs_keep_the_first_files(mvtec_category):
    folder = mvtec_category(size=32, n_train=6, n_good=3, defects={"a": 3, "b": 3})
    category = read_mvtec_category(folder, image_size=32, max_train=2, max_test_per_type=1)
    assert len(category.train_images) == 2
    assert category.test_files == ("test/good/000.png", "test/a/000.png", "test/b/000.png")


@pytest.mark.parametrize(
    ("broken", "error", "message"),
    [
        ("train/good", MissingDataError, "train/good/ not found"),
        ("test/good", DataError, "test/good/ not found"),
    ],
)
def test_missing_folders_are_named(mvtec_category, broken, error, message):
    folder = mvtec_category(size=32, n_train=2, n_good=1, defects={"spot": 1})
    for file in (folder / broken).iterdir():
        file.unlink()
    (folder / broken).rmdir()
    with pytest.raises(error, match=message):
        read_mvtec_category(folder, image_size=32)


def test_corrupt_image_is_named(mvtec_category):
    folder = mvtec_category(size=32, n_train=2, n_good=1, defects={"spot": 1})
    (folder / "test/good/000.png").write_bytes(b"not a png")
    with pytest.raises(DataError, match="cannot read image .*test/good/000.png"):
        read_mvtec_category(folder, image_size=32)


def test_other_image_formats_are_refused_by_name(mvtec_category):
    from tests.data.hostile_images import EPS

    folder = mvtec_category(size=32, n_train=2, n_good=1, defects={"spot": 1})
    (folder / "train/good/000.png").write_bytes(EPS)  # PostScript under a .png name
    with pytest.raises(DataError, match="train/good/000.png: EPS images are not accepted"):
        read_mvtec_category(folder, image_size=32)


def test_npz_round_trip_keeps_everything(mvtec_category):
    category = read_mvtec_category(mvtec_category(size=32, n_train=2), image_size=32)
    again = category_from_arrays(category_to_arrays(category))
    assert again.name == category.name and again.test_files == category.test_files
    assert np.array_equal(again.test_masks, category.test_masks)
    assert again.test_defects == category.test_defects


def test_fifteen_categories_in_two_groups():
    assert len(MVTEC_CATEGORIES) == 15 and len(MVTEC_OBJECTS) == 10 and len(MVTEC_TEXTURES) == 5
    assert category_group("bottle") == "object" and category_group("grid") == "texture"
    assert category_group("my_part") == "other"
    assert category_group("my_part", {"my_part": "texture"}) == "texture"


def test_categories_by_name_all_and_user_paths(tmp_path, mvtec_category):
    mvtec_category("bottle", size=32, n_train=2)
    mvtec_category("zeta", size=32, n_train=2)
    user = tmp_path / "elsewhere"
    user.mkdir()
    assert discover_categories(tmp_path) == ("bottle", "zeta")
    resolved = resolve_category_paths(tmp_path, "all", {"part": user})
    assert list(resolved) == ["bottle", "part", "zeta"]
    assert resolved["part"] == user and resolved["bottle"] == tmp_path / "bottle"
    listed = resolve_category_paths(None, ["part"], {"part": user})
    assert listed == {"part": user}
    with pytest.raises(DataError, match="add it to mvtec.paths"):
        resolve_category_paths(None, ["bottle"], {})
    with pytest.raises(MissingDataError, match="not found"):
        resolve_category_paths(tmp_path / "missing", "all")


@pytest.mark.skipif(not REAL_BOTTLE.is_dir(), reason=f"needs {REAL_BOTTLE} (DROC_SHARED)")
def test_real_bottle_copy_has_no_masks():
    category = read_mvtec_category(REAL_BOTTLE, max_train=3)
    assert category.train_images.shape == (3, 256, 256, 3)
    assert len(category.test_images) == 83 and int(category.test_labels.sum()) == 63
    assert set(category.test_defects) == {"good", "broken_large", "broken_small", "contamination"}
    assert category.test_masks is None and category.group == "object"


def test_special_entries_are_skipped_and_named_in_the_log(mvtec_category, caplog):
    folder = mvtec_category(size=16, n_train=3, n_good=1, defects={"spot": 1})
    os.mkfifo(folder / "train" / "good" / "pipe.png")
    (folder / "test" / "spot" / "zero.png").symlink_to("/dev/zero")
    with caplog.at_level(logging.WARNING, logger="pipeline_lib.data.regular_files"):
        category = read_mvtec_category(folder, image_size=16)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "skipped 1 of 4 image entries" in warnings[0] and "pipe.png (a FIFO" in warnings[0]
    assert "zero.png (a symlink to /dev/zero, a character device)" in warnings[1]
    assert len(category.train_images) == 3 and category.test_defects == ("good", "spot")
