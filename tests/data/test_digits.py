"""sklearn digits as a 32x32 RGB data set with a fixed stratified split."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits

from pipeline_lib.data import dataset_class_names, load_dataset
from pipeline_lib.data.split import holdout_split


def test_digits_shapes_split_and_values(tmp_path):
    data = load_dataset("digits", root=tmp_path / "unused")
    assert data.train_images.shape == (1198, 32, 32, 3)
    assert data.test_images.shape == (599, 32, 32, 3)
    assert data.train_images.dtype == np.uint8 and data.train_labels.dtype == np.int64
    assert data.class_names == tuple("0123456789")
    assert dataset_class_names("digits") == data.class_names
    # grey replicated to 3 channels, full 0..255 range used
    np.testing.assert_array_equal(data.train_images[..., 0], data.train_images[..., 2])
    assert data.train_images.min() == 0 and data.train_images.max() == 255
    # stratified: every class has about a third of its images in the test split
    total = np.bincount(load_digits().target, minlength=10)
    test_share = np.bincount(data.test_labels, minlength=10) / total
    assert np.all(np.abs(test_share - 1 / 3) < 0.01)
    assert len(data.train_labels) + len(data.test_labels) == total.sum()


def test_digits_is_deterministic_and_matches_source():
    first, second = load_dataset("digits"), load_dataset("digits")
    np.testing.assert_array_equal(first.train_images, second.train_images)
    np.testing.assert_array_equal(first.test_labels, second.test_labels)
    # the fixed split is the seed-0 stratified hold-out of the source order
    source = load_digits()
    train, test = holdout_split(source.target, test_fraction=1 / 3, seed=0)
    np.testing.assert_array_equal(first.train_labels, source.target[train])
    np.testing.assert_array_equal(first.test_labels, source.target[test])
    # 4x4 block means of the 32x32 image follow the 8x8 source (scaled to 0..255)
    blocks = first.train_images[..., 0].astype(float).reshape(-1, 8, 4, 8, 4).mean(axis=(2, 4))
    expected = source.images[train] * 255 / 16
    assert np.corrcoef(blocks.ravel(), expected.ravel())[0, 1] > 0.95
