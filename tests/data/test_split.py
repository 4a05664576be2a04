"""One-class splits: sizes, contamination, clean subsets, determinism, persistence."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline_lib.data import DataError
from pipeline_lib.data.split import (
    OneClassSplit,
    holdout_split,
    load_split,
    one_class_split,
    save_split,
)


@pytest.fixture
def labels():
    rng = np.random.default_rng(7)
    train = rng.permutation(np.repeat(np.arange(5), 200))
    test = rng.permutation(np.repeat(np.arange(5), 30))
    return train, test


@pytest.mark.parametrize("contamination", [0.0, 0.005, 0.02, 0.1, 0.5])
def test_train_size_and_exact_contamination(labels, contamination):
    train, test = labels
    split = one_class_split(train, test, inlier=2, contamination=contamination, seed=0)
    n_out = round(contamination * 200)
    assert split.train_index.dtype == np.int64
    assert len(split.train_index) == 200
    assert np.all(np.diff(split.train_index) > 0)  # sorted, no repeats
    assert split.n_outliers_in_train == n_out
    assert np.sum(train[split.train_index] != 2) == n_out
    assert np.sum(train[split.train_index] == 2) == 200 - n_out


def test_clean_training_set_is_all_inliers(labels):
    train, test = labels
    split = one_class_split(train, test, inlier=4, seed=3)
    np.testing.assert_array_equal(split.train_index, np.flatnonzero(train == 4))
    assert split.contamination == 0.0 and split.n_outliers_in_train == 0


def test_test_labels(labels):
    train, test = labels
    split = one_class_split(train, test, inlier=1, contamination=0.1, seed=0)
    np.testing.assert_array_equal(split.test_index, np.arange(150))
    assert split.test_is_outlier.dtype == np.int8
    np.testing.assert_array_equal(split.test_is_outlier, (test != 1).astype(np.int8))
    assert split.test_is_outlier.sum() == 120


def test_determinism_and_seed_dependence(labels):
    train, test = labels
    kwargs = {"inlier": 0, "contamination": 0.1, "clean_inliers": (50,)}
    a = one_class_split(train, test, seed=1, **kwargs)
    b = one_class_split(train, test, seed=1, **kwargs)
    c = one_class_split(train, test, seed=2, **kwargs)
    np.testing.assert_array_equal(a.train_index, b.train_index)
    np.testing.assert_array_equal(a.clean_index[50], b.clean_index[50])
    assert not np.array_equal(a.train_index, c.train_index)
    assert not np.array_equal(a.clean_index[50], c.clean_index[50])
    other_class = one_class_split(train, test, seed=1, **{**kwargs, "inlier": 3})
    assert not np.array_equal(
        np.sort(train[a.train_index]), np.sort(train[other_class.train_index])
    )


def test_outliers_come_from_all_other_classes():
    train = np.repeat(np.arange(5), 1000)
    split = one_class_split(train, train, inlier=0, contamination=0.5, seed=0)
    counts = np.bincount(train[split.train_index], minlength=5)
    assert counts[0] == 500
    assert np.all((counts[1:] > 90) & (counts[1:] < 160))  # uniform: about 125 each
    assert counts[1:].sum() == 500


def test_clean_subsets_are_inliers_nested_and_contamination_free(labels):
    train, test = labels
    split = one_class_split(
        train, test, inlier=3, contamination=0.05, seed=0, clean_inliers=(10, 50, 200)
    )
    assert sorted(split.clean_index) == [10, 50, 200]
    for n, index in split.clean_index.items():
        assert index.dtype == np.int64 and len(index) == n
        assert len(np.unique(index)) == n
        assert np.all(train[index] == 3)
    assert set(split.clean_index[10]) <= set(split.clean_index[50])
    np.testing.assert_array_equal(split.clean_index[200], np.flatnonzero(train == 3))
    other = one_class_split(train, test, inlier=3, contamination=0.1, seed=0, clean_inliers=(50,))
    np.testing.assert_array_equal(other.clean_index[50], split.clean_index[50])


def test_clean_subset_larger_than_class_is_rejected(labels):
    train, test = labels
    with pytest.raises(ValueError, match="clean_inliers entry 201 exceeds the 200"):
        one_class_split(train, test, inlier=0, seed=0, clean_inliers=(201,))


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, float("nan"), "0.1"])
def test_bad_contamination_is_named(labels, bad):
    train, test = labels
    with pytest.raises(ValueError, match="contamination") as info:
        one_class_split(train, test, inlier=0, contamination=bad, seed=0)
    assert repr(bad) in str(info.value)


def test_bad_inlier_and_seed_are_named(labels):
    train, test = labels
    with pytest.raises(ValueError, match="inlier class 9 has no training images"):
        one_class_split(train, test, inlier=9, seed=0)
    with pytest.raises(ValueError, match="seed must be an integer >= 0, got -1"):
        one_class_split(train, test, inlier=0, seed=-1)
    with pytest.raises(ValueError, match="inlier must be an integer >= 0, got 'cat'"):
        one_class_split(train, test, inlier="cat", seed=0)


def test_save_and_load_round_trip(labels, tmp_path):
    train, test = labels
    split = one_class_split(
        train, test, inlier=2, contamination=0.02, seed=4, clean_inliers=(5, 20)
    )
    path = tmp_path / "split.npz"
    save_split(path, split)
    loaded = load_split(path)
    assert isinstance(loaded, OneClassSplit)
    assert (loaded.inlier, loaded.contamination, loaded.seed) == (2, 0.02, 4)
    assert loaded.n_outliers_in_train == 4
    for field in ("train_index", "test_index", "test_is_outlier"):
        np.testing.assert_array_equal(getattr(loaded, field), getattr(split, field))
        assert getattr(loaded, field).dtype == getattr(split, field).dtype
    assert sorted(loaded.clean_index) == [5, 20]
    np.testing.assert_array_equal(loaded.clean_index[20], split.clean_index[20])


def test_save_uses_exact_path_and_load_rejects_bad_files(labels, tmp_path):
    train, test = labels
    path = tmp_path / "split"  # no suffix added
    save_split(path, one_class_split(train, test, inlier=0, seed=0))
    assert path.is_file()
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"garbage")
    with pytest.raises(DataError, match="bad.npz"):
        load_split(bad)
    np.savez(tmp_path / "partial.npz", train_index=np.arange(3))
    with pytest.raises(DataError, match="partial.npz lacks inlier"):
        load_split(tmp_path / "partial.npz")


def test_holdout_split_is_stratified_and_deterministic():
    labels = np.repeat(np.arange(3), [30, 60, 9])
    train, test = holdout_split(labels, test_fraction=1 / 3, seed=0)
    again = holdout_split(labels, test_fraction=1 / 3, seed=0)
    np.testing.assert_array_equal(test, again[1])
    assert np.bincount(labels[test]).tolist() == [10, 20, 3]
    assert len(np.intersect1d(train, test)) == 0
    np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), np.arange(99))
    with pytest.raises(ValueError, match="test_fraction must be in \\(0, 1\\), got 1.0"):
        holdout_split(labels, test_fraction=1.0)
