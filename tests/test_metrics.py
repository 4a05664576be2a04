"""ROC AUC direction and the uniformity MMD."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline_lib.detection.metrics import (
    auroc,
    feature_uniformity,
    roc_curve_points,
    uniformity_mmd,
)


def test_auroc_outlier_is_positive_class() -> None:
    is_outlier = np.array([0, 0, 0, 1, 1])
    assert auroc([0.1, 0.2, 0.3, 0.8, 0.9], is_outlier) == 100.0
    assert auroc([0.9, 0.8, 0.7, 0.2, 0.1], is_outlier) == 0.0
    assert auroc(np.zeros(5), is_outlier) == 50.0
    # One swapped pair out of 3 x 2: 5/6 of the pairs are ordered.
    assert auroc([0.1, 0.2, 0.85, 0.8, 0.9], is_outlier) == pytest.approx(100.0 * 5 / 6)


def test_auroc_accepts_bool_labels_and_returns_float() -> None:
    value = auroc(np.array([1.0, 2.0]), np.array([False, True]))
    assert isinstance(value, float)
    assert value == 100.0


@pytest.mark.parametrize(
    ("scores", "labels", "message"),
    [
        ([0.1, 0.2, 0.3], [0, 1], "3 entries but is_outlier has 2"),
        ([0.1, 0.2], [1, 1], "only the value 1"),
        ([0.1, 0.2], [0, 0], "only the value 0"),
        ([0.1, 0.2], [0, 2], "0/1"),
        ([0.1, np.nan], [0, 1], "non-finite"),
        ([[0.1, 0.2]], [0, 1], "1-D"),
    ],
)
def test_auroc_rejects_bad_input(scores, labels, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        auroc(scores, labels)


def test_roc_curve_points_perfect_and_chance() -> None:
    fpr, tpr, thresholds = roc_curve_points([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])
    assert fpr.shape == tpr.shape == thresholds.shape
    assert (fpr[0], tpr[0], fpr[-1], tpr[-1]) == (0.0, 0.0, 1.0, 1.0)
    # The perfect detector reaches tpr = 1 at fpr = 0.
    assert np.any((fpr == 0.0) & (tpr == 1.0))
    assert np.all(np.diff(thresholds) < 0)
    with pytest.raises(ValueError, match="only the value"):
        roc_curve_points([0.1, 0.2], [0, 0])


def _uniform_sphere(n: int, d: int, seed: int) -> np.ndarray:
    z = np.random.default_rng(seed).standard_normal((n, d))
    return z / np.linalg.norm(z, axis=1, keepdims=True)


def test_uniformity_mmd_small_for_uniform_large_for_cluster() -> None:
    n, d = 600, 16
    uniform = uniformity_mmd(_uniform_sphere(n, d, seed=11), seed=0)
    # Biased MMD of an exactly uniform sample: only the O(1/n) bias, below its
    # high-dimension value sqrt(2 (1 - e^-1) / n) = 0.046.
    assert 0.0 < uniform < 0.05

    rng = np.random.default_rng(12)
    direction = np.eye(d)[0]
    cluster = direction + 0.2 * rng.standard_normal((n, d))
    concentrated = uniformity_mmd(cluster, seed=0)
    assert concentrated > 0.5
    assert concentrated > 10 * uniform


def test_uniformity_mmd_scale_invariant_and_seeded() -> None:
    x = _uniform_sphere(200, 8, seed=5) + 0.3
    assert uniformity_mmd(5.0 * x, seed=1) == pytest.approx(uniformity_mmd(x, seed=1), rel=1e-12)
    assert uniformity_mmd(x, seed=1) == uniformity_mmd(x, seed=1)
    assert uniformity_mmd(x, seed=1) != uniformity_mmd(x, seed=2)


def test_uniformity_mmd_matches_direct_formula() -> None:
    x = _uniform_sphere(50, 4, seed=7) + 0.5
    x_n = x / np.linalg.norm(x, axis=1, keepdims=True)
    z = np.random.default_rng(3).standard_normal((30, 4))
    z /= np.linalg.norm(z, axis=1, keepdims=True)

    def k(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        sq = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
        return np.exp(-sq / (2.0 * 0.7**2))

    expected = np.sqrt(k(x_n, x_n).mean() + k(z, z).mean() - 2.0 * k(x_n, z).mean())
    got = uniformity_mmd(x, n_reference=30, bandwidth=0.7, seed=3)
    assert got == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize(
    ("features", "kwargs", "message"),
    [
        (np.ones(5), {}, "2-D"),
        (np.vstack([np.ones(3), np.zeros(3)]), {}, "row 1 is all zero"),
        (np.ones((4, 3)), {"bandwidth": 0.0}, "bandwidth"),
        (np.ones((4, 3)), {"n_reference": 1}, "n_reference"),
        (np.full((4, 3), np.nan), {}, "NaN"),
    ],
)
def test_uniformity_mmd_rejects_bad_input(features, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        uniformity_mmd(features, **kwargs)


def test_feature_uniformity_measures_g_else_f_on_a_seeded_subset() -> None:
    rng = np.random.default_rng(0)
    f = rng.normal(size=(50, 4))
    g = rng.normal(size=(50, 3))
    with_head = feature_uniformity({"f_train": f, "g_train": g}, seed=2)
    assert with_head == {"mmd": uniformity_mmd(g, seed=2), "space": "g", "n": 50}
    plain = feature_uniformity({"f_train": f}, seed=2, max_points=20)
    keep = np.sort(np.random.default_rng(2).choice(50, 20, replace=False))
    assert plain == {"mmd": uniformity_mmd(f[keep], seed=2), "space": "f", "n": 20}
