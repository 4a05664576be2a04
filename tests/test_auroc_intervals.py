"""The AUC's uncertainty over the test set: DeLong's variance and the stratified bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from pipeline_lib.detection.auroc_intervals import (
    INTERVAL_FIELDS,
    INTERVAL_OMITTED,
    _auc_of_codes,
    auroc_interval_record,
    bootstrap_auroc_interval,
    delong_variance,
    interval_omission,
)

EPS = np.finfo(np.float64).eps


def _naive_delong(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """DeLong et al. (1988) from the placement values, by the O(m n) definition."""
    psi = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])  # (m, n)
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    return float(psi.mean()), np.var(v10, ddof=1) / len(x) + np.var(v01, ddof=1) / len(y)


def _scores(n: int, seed: int, shift: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.3).astype(int)
    return rng.normal(size=n) + shift * labels, labels


def test_delong_on_a_hand_computed_case():
    # outliers 0.8, 0.6, 0.4 against inliers 0.5, 0.3: placements V10 = (1, 1, 1/2),
    # V01 = (2/3, 1); AUC 5/6, Var = var(V10)/3 + var(V01)/2 = (1/12)/3 + (1/18)/2 = 1/18.
    auc, variance = delong_variance([0.8, 0.6, 0.4, 0.5, 0.3], [1, 1, 1, 0, 0])
    assert auc == pytest.approx(5 / 6, rel=8 * EPS)
    assert variance == pytest.approx(1 / 18, rel=64 * EPS)


def test_delong_matches_the_placement_definition_with_ties():
    scores, labels = _scores(300, seed=3)
    scores = np.round(scores, 1)  # many ties: midranks must count them half
    auc, variance = delong_variance(scores, labels)
    ref_auc, ref_var = _naive_delong(scores[labels == 1], scores[labels == 0])
    assert auc == pytest.approx(ref_auc, rel=1e3 * EPS)
    assert auc == pytest.approx(roc_auc_score(labels, scores), rel=1e3 * EPS)
    assert variance == pytest.approx(ref_var, rel=1e6 * EPS)


def test_bootstrap_statistic_is_the_auc_of_a_resample():
    scores, labels = _scores(200, seed=5)
    distinct, codes = np.unique(np.round(scores, 1), return_inverse=True)
    rng = np.random.default_rng(0)
    x_codes, y_codes = codes[labels == 1], codes[labels == 0]
    xi = rng.integers(len(x_codes), size=(4, len(x_codes)))
    yi = rng.integers(len(y_codes), size=(4, len(y_codes)))
    got = _auc_of_codes(len(distinct))(x_codes[xi], y_codes[yi], axis=-1)
    for b in range(4):
        x, y = distinct[x_codes[xi[b]]], distinct[y_codes[yi[b]]]
        expected = roc_auc_score(np.r_[np.ones(len(x)), np.zeros(len(y))], np.r_[x, y])
        assert got[b] == pytest.approx(expected, rel=1e3 * EPS)


def test_delong_and_bootstrap_agree_on_the_same_scores():
    # Both estimate the AUC's sampling spread over the test set: the percentile interval's
    # half-width and 1.96 DeLong standard errors agree to within the bootstrap's own
    # Monte-Carlo error (1,000 resamples: a few per cent) plus the normal approximation's.
    scores, labels = _scores(2000, seed=7)
    auc, variance = delong_variance(scores, labels)
    low, high = bootstrap_auroc_interval(scores, labels)
    assert low < auc < high
    half_width = 1.959964 * np.sqrt(variance)
    assert (high - low) / 2 == pytest.approx(half_width, rel=0.12)
    assert (low + high) / 2 == pytest.approx(auc, abs=0.25 * half_width)


def test_bootstrap_is_seeded_and_keeps_both_classes():
    scores, labels = _scores(150, seed=11)
    first = bootstrap_auroc_interval(scores, labels, n_resamples=200, seed=4)
    assert bootstrap_auroc_interval(scores, labels, n_resamples=200, seed=4) == first
    assert bootstrap_auroc_interval(scores, labels, n_resamples=200, seed=5) != first
    # perfectly separated classes: every stratified resample still has AUC 1
    separated = np.r_[np.zeros(20), np.ones(5)]
    assert bootstrap_auroc_interval(separated + np.arange(25) * 1e-3, separated) == (1.0, 1.0)


def test_record_is_x100_and_brackets_the_auc():
    scores, labels = _scores(400, seed=2)
    record = auroc_interval_record(scores, labels)
    assert tuple(record) == INTERVAL_FIELDS
    auc = 100 * roc_auc_score(labels, scores)
    assert record["auroc_low"] < auc < record["auroc_high"]
    assert record["auroc_se_delong"] == pytest.approx(
        100 * np.sqrt(delong_variance(scores, labels)[1]), rel=8 * EPS
    )


@pytest.mark.parametrize(
    ("scores", "labels", "match"),
    [([0.1, 0.2], [0, 0], "both inliers"), ([0.1, np.nan], [0, 1], "non-finite")],
)
def test_bad_input_is_named(scores, labels, match):
    with pytest.raises(ValueError, match=match):
        delong_variance(scores, labels)
    with pytest.raises(ValueError, match=match):
        bootstrap_auroc_interval(scores, labels)


@pytest.mark.parametrize(
    ("labels", "counts"),
    [
        ([0, 1, 1, 1, 1], "4 outlier(s) and 1 inlier(s)"),  # max_test_per_class: 1
        ([1, 0, 0, 0], "1 outlier(s) and 3 inlier(s)"),
        ([0, 1], "1 outlier(s) and 1 inlier(s)"),
    ],
)
def test_a_class_of_one_score_gives_no_interval_and_says_why(labels, counts):
    scores = np.linspace(0.0, 1.0, len(labels))
    reason = interval_omission(labels)
    assert reason is not None and counts in reason and "at least 2 of each" in reason
    # the job keeps its AUC: the record holds the reason instead of the interval fields
    assert auroc_interval_record(scores, labels) == {INTERVAL_OMITTED: reason}
    # called directly, the bootstrap names the counts (not scipy's one-element error)
    with pytest.raises(ValueError, match=r"no bootstrap interval: .*1 (in|out)lier\(s\)"):
        bootstrap_auroc_interval(scores, labels)


def test_two_scores_of_each_class_give_an_interval():
    assert interval_omission([0, 0, 1, 1]) is None
    record = auroc_interval_record([0.1, 0.3, 0.2, 0.4], [0, 0, 1, 1])
    assert tuple(record) == INTERVAL_FIELDS
    assert record["auroc_low"] <= 75.0 <= record["auroc_high"]
