"""Randomly rotated data sets: same labels and pixels, each image turned by k x 90 degrees."""

from __future__ import annotations

import numpy as np

from pipeline_lib.data import load_dataset
from pipeline_lib.data.rotated import rotate_randomly


def test_every_image_is_a_quarter_turn_of_the_original() -> None:
    original, rotated = load_dataset("digits"), load_dataset("digits_rotated")
    assert rotated.name == "digits_rotated"
    assert np.array_equal(original.train_labels, rotated.train_labels)
    assert np.array_equal(original.test_labels, rotated.test_labels)
    turns = []
    for before, after in zip(original.test_images, rotated.test_images, strict=True):
        matches = [k for k in range(4) if np.array_equal(np.rot90(before, k, axes=(0, 1)), after)]
        assert matches, "a rotated image is not a quarter turn of its original"
        turns.append(matches[0])
    # All four orientations occur (digits are not rotation-symmetric in general).
    assert set(turns) == {0, 1, 2, 3}


def test_rotation_draw_is_fixed() -> None:
    images = np.arange(4 * 2 * 2 * 1, dtype=np.uint8).reshape(4, 2, 2, 1)
    first = rotate_randomly(images, np.random.default_rng(0))
    again = rotate_randomly(images, np.random.default_rng(0))
    assert np.array_equal(first, again)
