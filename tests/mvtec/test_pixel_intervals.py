"""Intervals of the pixel AUC and the AUPRO over the test images (mvtec.pixel_intervals)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline_lib.detection.metrics import auroc
from pipeline_lib.mvtec.pixel_intervals import (
    LOCALIZATION_INTERVAL_FIELDS,
    binned_metrics,
    localization_intervals,
    pixel_counts,
    weighted_metrics,
)
from pipeline_lib.mvtec.pro import aupro

EPS = np.finfo(np.float64).eps


def _test_set(n_good: int = 8, n_defective: int = 8, side: int = 24, seed: int = 0):
    """Good images, then defective ones with one or two square defects; noisy maps that
    score the defects higher. Returns maps, masks, image labels."""
    rng = np.random.default_rng(seed)
    n = n_good + n_defective
    masks = np.zeros((n, side, side), dtype=np.uint8)
    for i in range(n_good, n):
        top, left = rng.integers(0, side - 6, size=2)
        masks[i, top : top + 6, left : left + 6] = 1
        if i % 2:
            masks[i, 0:2, 0:3] = 1  # a second, small region
    maps = rng.normal(size=masks.shape) + 1.5 * masks
    labels = np.r_[np.zeros(n_good, int), np.ones(n_defective, int)]
    return maps, masks, labels


def _exact(maps: np.ndarray, masks: np.ndarray) -> tuple[float, float]:
    truth = (masks > 0).ravel().astype(np.int8)
    return auroc(maps.ravel(), truth), aupro(maps, masks)


def test_few_distinct_scores_give_the_exact_metrics() -> None:
    maps, masks, _ = _test_set()
    coarse = np.round(maps, 1)  # about 80 distinct scores: one bin each
    # the same sums in another order: float64 rounding of a few hundred terms
    np.testing.assert_allclose(binned_metrics(coarse, masks), _exact(coarse, masks), rtol=1e3 * EPS)


def test_weights_are_images_taken_that_many_times() -> None:
    maps, masks, _ = _test_set()
    coarse = np.round(maps, 1)
    counts = pixel_counts(coarse, masks)
    weights = np.random.default_rng(1).integers(0, 3, size=len(coarse))
    weights[[0, -1]] = 1  # keep a good and a defective image
    auc, area = weighted_metrics(counts, weights[None, :].astype(float), 0.3)[:, 0]
    repeated = np.repeat(coarse, weights, axis=0), np.repeat(masks, weights, axis=0)
    np.testing.assert_allclose((100.0 * auc, 100.0 * area), _exact(*repeated), rtol=1e3 * EPS)


def test_quantile_bins_stay_within_their_bound() -> None:
    maps, masks, _ = _test_set()
    n_bins = 64  # few bins: the approximation shows, and must stay within its bound
    counts = pixel_counts(maps, masks, n_bins=n_bins)
    assert counts.normal.shape[1] <= n_bins
    share = counts.normal.sum(axis=0).max() / counts.normal.sum()
    binned, exact = binned_metrics(maps, masks, n_bins=n_bins), _exact(maps, masks)
    assert binned != pytest.approx(exact, abs=1e-9)  # binned, not exact
    assert abs(binned[0] - exact[0]) <= 100.0 * share / 2
    assert abs(binned[1] - exact[1]) <= 100.0 * share / 0.3


def test_intervals_hold_the_estimates_and_repeat() -> None:
    maps, masks, labels = _test_set()
    quick = {"n_resamples": 200, "n_bins": 256}  # cheap; the defaults only cost more time
    out = localization_intervals(maps, masks, labels, **quick)
    assert list(out) == list(LOCALIZATION_INTERVAL_FIELDS)
    pixel, area = binned_metrics(maps, masks, n_bins=256)
    assert out["pixel_auroc_low"] < pixel < out["pixel_auroc_high"]
    assert out["aupro_low"] < area < out["aupro_high"]
    assert all(0.0 <= value <= 100.0 for value in out.values())
    assert localization_intervals(maps, masks, labels, **quick) == out  # seeded
    # four times the test images, a narrower interval
    narrow = localization_intervals(*_test_set(n_good=32, n_defective=32), **quick)
    assert narrow["aupro_high"] - narrow["aupro_low"] < out["aupro_high"] - out["aupro_low"]


def test_no_stratified_resample_without_both_kinds_of_image() -> None:
    maps, masks, labels = _test_set()
    defective = labels == 1
    out = localization_intervals(maps[defective], masks[defective], labels[defective])
    assert all(np.isnan(value) for value in out.values())
    with pytest.raises(ValueError, match="one 0/1 label per image"):
        localization_intervals(maps, masks, labels[:-1])


@pytest.mark.parametrize(("n_good", "n_defective"), [(4, 1), (1, 4)])
def test_a_single_image_of_one_kind_gives_no_interval(n_good, n_defective) -> None:
    """A one-image stratum has no spread (scipy's bootstrap refuses it): NaN, as the image
    AUC's interval is omitted for the same test set, instead of failing the job."""
    maps, masks, labels = _test_set(n_good=n_good, n_defective=n_defective)
    out = localization_intervals(maps, masks, labels, n_resamples=50)
    assert list(out) == list(LOCALIZATION_INTERVAL_FIELDS)
    assert all(np.isnan(value) for value in out.values())
    # two of each kind is enough for a stratified resample
    maps, masks, labels = _test_set(n_good=2, n_defective=2)
    out = localization_intervals(maps, masks, labels, n_resamples=50)
    assert all(0.0 <= value <= 100.0 for value in out.values())
