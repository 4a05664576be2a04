"""The interval rule of every table cell (pipeline_lib.paper.intervals)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pipeline_lib.paper.intervals import cell_interval, interval_note, t_interval

EPS = np.finfo(np.float64).eps


def test_t_interval_is_the_hand_formula():
    values = [91.0, 93.5, 92.0, 94.0, 90.5]
    mean = sum(values) / 5
    sample_std = math.sqrt(sum((v - mean) ** 2 for v in values) / 4)  # ddof=1
    half = stats.t.ppf(0.975, 4) * sample_std / math.sqrt(5)
    low, high = t_interval(values)
    assert low == pytest.approx(mean - half, rel=16 * EPS)
    assert high == pytest.approx(mean + half, rel=16 * EPS)
    # t(0.975, 4) = 2.776..., wider than the normal 1.96 at five seeds
    assert 2.77 < stats.t.ppf(0.975, 4) < 2.78


def test_t_interval_needs_two_values():
    assert all(np.isnan(t_interval([90.0])))
    assert all(np.isnan(t_interval([90.0, np.nan])))


def test_cell_interval_rule():
    low, high, over = cell_interval([80.0, 82.0], [1.0, 2.0, 3.0], (0.0, 1.0))
    assert over == "seeds" and (low + high) / 2 == pytest.approx(81.0)
    low, high, over = cell_interval([82.0], [80.0, 82.0, 84.0], (0.0, 1.0))
    assert over == "classes"
    assert high - 82.0 == pytest.approx(stats.t.ppf(0.975, 2) * 2 / math.sqrt(3))
    assert cell_interval([82.0], [82.0], (81.0, 83.5)) == (81.0, 83.5, "test set")
    low, high, over = cell_interval([82.0], [82.0], (np.nan, np.nan))
    assert over == "" and np.isnan(low) and np.isnan(high)
    assert cell_interval([], [], None)[2] == ""


def test_note_names_both_spreads():
    note = interval_note(0)
    assert "ddof=0" in note and "ddof=1" in note and "over the test set" in note


def test_cell_interval_is_clipped_to_the_auc_range():
    low, high, over = cell_interval([65.0], [60.0, 70.0])
    # unclipped: 65 -+ t(0.975, 1) * sample std 7.07 / sqrt(2) = 65 -+ 63.5
    assert low == pytest.approx(65.0 - stats.t.ppf(0.975, 1) * 5.0, rel=16 * EPS)
    assert (high, over) == (100.0, "classes")
