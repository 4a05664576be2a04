"""The pure step functions of ``pipeline_lib.detection.runner``."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pipeline_lib.data.split import OneClassSplit, one_class_split
from pipeline_lib.detection.auroc_intervals import INTERVAL_FIELDS, INTERVAL_OMITTED
from pipeline_lib.detection.detectors import make_detector
from pipeline_lib.detection.metrics import auroc
from pipeline_lib.detection.runner import (
    fit_index_for,
    limit_fit_index,
    rows_for,
    run_detection,
    run_rotation_detection,
)

N_CLASSES, N_TRAIN_PER_CLASS, N_TEST_PER_CLASS, DIM = 3, 40, 15, 4


@pytest.fixture(scope="module")
def labels() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    train = rng.permutation(np.repeat(np.arange(N_CLASSES), N_TRAIN_PER_CLASS)).astype(np.int64)
    test = rng.permutation(np.repeat(np.arange(N_CLASSES), N_TEST_PER_CLASS)).astype(np.int64)
    return train, test


@pytest.fixture(scope="module")
def split(labels) -> OneClassSplit:
    train, test = labels
    return one_class_split(train, test, inlier=1, contamination=0.0, seed=0, clean_inliers=[10])


@pytest.fixture(scope="module")
def features(labels) -> dict[str, np.ndarray]:
    """Each class clusters around its own centre, far apart from the others (global order)."""
    train, test = labels
    rng = np.random.default_rng(1)
    centres = 6.0 * np.eye(N_CLASSES, DIM)
    return {
        "train_index": np.arange(len(train), dtype=np.int64),
        "f_train": (centres[train] + 0.5 * rng.standard_normal((len(train), DIM))).astype(
            np.float32
        ),
        "test_index": np.arange(len(test), dtype=np.int64),
        "f_test": (centres[test] + 0.5 * rng.standard_normal((len(test), DIM))).astype(np.float32),
    }


def _shuffled(features: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """The same features with rows stored in a random order (indices travel with them)."""
    rng = np.random.default_rng(seed)
    out = {}
    for part in ("train", "test"):
        order = rng.permutation(len(features[f"{part}_index"]))
        out[f"{part}_index"] = features[f"{part}_index"][order]
        out[f"f_{part}"] = features[f"f_{part}"][order]
    return out


def test_fit_index_for_train_and_clean(split) -> None:
    np.testing.assert_array_equal(fit_index_for(split, "train"), split.train_index)
    clean = fit_index_for(split, "clean10")
    np.testing.assert_array_equal(clean, split.clean_index[10])
    assert len(clean) == 10
    assert np.isin(clean, split.train_index).all()


@pytest.mark.parametrize("fitset", ["test", "clean", "cleanx", "clean-5", "Train", "clean10a"])
def test_fit_index_for_rejects_bad_names(split, fitset: str) -> None:
    with pytest.raises(ValueError, match="must be 'train' or 'clean<n>'") as info:
        fit_index_for(split, fitset)
    assert repr(fitset) in str(info.value)


def test_fit_index_for_missing_clean_size_names_sizes(split) -> None:
    with pytest.raises(ValueError, match=r"no clean subset of 20 inliers \(has \[10\]\)") as info:
        fit_index_for(split, "clean20")
    assert "splits.clean_inliers" in str(info.value)


def test_limit_fit_index_keeps_small_index_unchanged() -> None:
    index = np.array([9, 2, 5])
    assert limit_fit_index(index, max_fit=3, seed=0) is index


def test_limit_fit_index_subset_is_sorted_deterministic_and_seeded() -> None:
    index = np.arange(100, 200, dtype=np.int64)[::-1]
    subset = limit_fit_index(index, max_fit=30, seed=7)
    assert subset.shape == (30,)
    assert len(np.unique(subset)) == 30
    assert np.isin(subset, index).all()
    assert np.all(np.diff(subset) > 0)
    np.testing.assert_array_equal(limit_fit_index(index, max_fit=30, seed=7), subset)
    assert not np.array_equal(limit_fit_index(index, max_fit=30, seed=8), subset)


def test_rows_for_picks_rows_of_shuffled_available_indices() -> None:
    available = np.array([40, 10, 30, 0, 20])
    features = np.array([[4.0], [1.0], [3.0], [0.0], [2.0]])
    rows = rows_for(np.array([20, 0, 40, 20]), available, features)
    np.testing.assert_array_equal(rows, [[2.0], [0.0], [4.0], [2.0]])


@pytest.mark.parametrize("missing", [[15], [50], [-1], [0, 45]])
def test_rows_for_missing_index_is_named(missing) -> None:
    available = np.array([40, 10, 30, 0, 20])
    features = np.arange(5.0)[:, None]
    with pytest.raises(ValueError, match="features are missing images") as info:
        rows_for(np.array(missing), available, features)
    assert str([m for m in missing if m not in available.tolist()]) in str(info.value)


@pytest.mark.parametrize("fitset", ["train", "clean10"])
def test_run_detection_separates_clustered_inliers(split, features, fitset) -> None:
    record, scores = run_detection(
        split, features, fitset=fitset, detector="gde", detector_params={}, max_fit=1000, seed=0
    )
    assert record["auroc"] > 90.0
    assert record["n_fit"] == (N_TRAIN_PER_CLASS if fitset == "train" else 10)
    assert record["n_test"] == N_CLASSES * N_TEST_PER_CLASS
    assert record["n_test_outliers"] == (N_CLASSES - 1) * N_TEST_PER_CLASS
    assert record["feature_dim"] == DIM
    assert record["space"] == "f"
    assert record["fit_seconds"] >= 0.0 and record["score_seconds"] >= 0.0
    assert record["auroc"] == pytest.approx(auroc(scores["anomaly_score"], scores["is_outlier"]))


def test_run_detection_scores_follow_test_order(labels, split, features) -> None:
    _, test = labels
    # Features stored in a random row order must still give scores in test-split order.
    record, scores = run_detection(
        split,
        _shuffled(features, seed=3),
        fitset="train",
        detector="gde",
        detector_params={},
        max_fit=1000,
        seed=0,
    )
    np.testing.assert_array_equal(scores["test_index"], np.arange(len(test)))
    np.testing.assert_array_equal(scores["is_outlier"], (test != 1).astype(np.int8))
    assert scores["is_outlier"].dtype == np.int8
    assert scores["anomaly_score"].dtype == np.float64
    fit = features["f_train"][split.train_index]
    expected = -make_detector("gde").fit(fit).score_samples(features["f_test"])
    np.testing.assert_allclose(scores["anomaly_score"], expected, rtol=1e-6, atol=1e-9)
    # Outliers score above every inlier on well separated clusters.
    outlier = scores["is_outlier"] == 1
    assert scores["anomaly_score"][outlier].min() > scores["anomaly_score"][~outlier].max()
    assert record["auroc"] == 100.0


def test_run_detection_max_fit_limits_the_fit_set(split, features) -> None:
    record, _ = run_detection(
        split, features, fitset="train", detector="knn", detector_params={}, max_fit=12, seed=0
    )
    assert record["n_fit"] == 12


def test_run_detection_is_deterministic(split, features) -> None:
    kwargs = dict(fitset="train", detector="ocsvm", detector_params={}, max_fit=25, seed=5)
    first_record, first = run_detection(split, features, **kwargs)
    second_record, second = run_detection(split, features, **kwargs)
    np.testing.assert_array_equal(first["anomaly_score"], second["anomaly_score"])
    assert first_record["auroc"] == second_record["auroc"]
    assert first_record["n_fit"] == 25


def test_run_detection_missing_features_are_named(split, features) -> None:
    partial = dict(features)
    keep = features["train_index"] != split.train_index[0]
    partial["train_index"] = features["train_index"][keep]
    partial["f_train"] = features["f_train"][keep]
    with pytest.raises(ValueError, match=rf"missing images \[{split.train_index[0]}\]"):
        run_detection(
            split, partial, fitset="train", detector="knn", detector_params={}, max_fit=1000, seed=0
        )


@pytest.mark.parametrize("detector", ["kde", "ocsvm"])
def test_run_detection_records_the_fitted_gamma(split, features, detector: str) -> None:
    # The result says which RBF width produced its AUC: the one gamma_scale chose ...
    record, _ = run_detection(
        split, features, fitset="train", detector=detector, detector_params={}, max_fit=1000, seed=0
    )
    fit_rows = rows_for(fit_index_for(split, "train"), features["train_index"], features["f_train"])
    expected = make_detector(detector).fit(fit_rows).gamma_
    assert record["gamma_"] == pytest.approx(expected) and expected > 0
    # ... or the one given.
    given, _ = run_detection(
        split,
        features,
        fitset="train",
        detector=detector,
        detector_params={"gamma": 0.25},
        max_fit=1000,
        seed=0,
    )
    assert given["gamma_"] == 0.25


@pytest.mark.parametrize("detector", ["gde", "knn", "ocsvm_linear"])
def test_run_detection_records_no_gamma_without_a_kernel(split, features, detector: str) -> None:
    record, _ = run_detection(
        split, features, fitset="train", detector=detector, detector_params={}, max_fit=1000, seed=0
    )
    assert "gamma_" not in record


def _one_test_image_of(split: OneClassSplit, outlier: int) -> OneClassSplit:
    """``split`` with a single test image of one class left (``max_test_per_class: 1``)."""
    first = np.flatnonzero(split.test_is_outlier == outlier)[0]
    keep = np.sort(np.r_[first, np.flatnonzero(split.test_is_outlier != outlier)])
    return dataclasses.replace(
        split, test_index=split.test_index[keep], test_is_outlier=split.test_is_outlier[keep]
    )


@pytest.mark.parametrize("outlier", [0, 1])
def test_a_single_test_inlier_or_outlier_keeps_the_auc_and_records_why_no_interval(
    split, features, outlier
) -> None:
    one = _one_test_image_of(split, outlier)
    assert int((one.test_is_outlier == outlier).sum()) == 1
    record, scores = run_detection(
        one, features, fitset="train", detector="gde", detector_params={}, max_fit=1000, seed=0
    )
    assert record["auroc"] == pytest.approx(auroc(scores["anomaly_score"], scores["is_outlier"]))
    assert record["n_test"] == len(one.test_index)
    assert not set(INTERVAL_FIELDS) & set(record)
    n_outliers = int(one.test_is_outlier.sum())
    counts = f"{n_outliers} outlier(s) and {len(one.test_index) - n_outliers} inlier(s)"
    assert counts in record[INTERVAL_OMITTED]
    # the rotation classifier's jobs go the same way
    rotation = features | {"sum_p_rotations_test": -features["f_test"][:, 1]}
    record, _ = run_rotation_detection(one, rotation, detector="rotation_classifier")
    assert 0.0 <= record["auroc"] <= 100.0 and not set(INTERVAL_FIELDS) & set(record)
    assert "at least 2 of each" in record[INTERVAL_OMITTED]
