"""The interval rule of every table cell (pipeline_lib.paper.intervals)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pipeline_lib.detection.auroc_intervals import INTERVAL_OMITTED
from pipeline_lib.paper.intervals import (
    INTERVAL_LABELS,
    cell_interval,
    interval_note,
    single_job_interval,
    t_interval,
)
from pipeline_lib.results.table_files import format_mean_std

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


def test_a_job_without_an_interval_says_so_in_its_cell():
    reason = "the test split has 9 outlier(s) and 1 inlier(s); ..."
    job = pd.DataFrame({"auroc": [82.0], "auroc_low": [np.nan], INTERVAL_OMITTED: [reason]})
    assert single_job_interval(job) == {"job_interval_omitted": True}
    low, high, over = cell_interval([82.0], [82.0], **single_job_interval(job))
    assert over == "omitted" and np.isnan(low) and np.isnan(high)
    text = format_mean_std(
        82.0, 0.0, n_seeds=1, interval=(low, high), interval_label=INTERVAL_LABELS[over]
    )
    assert text == "82.0 (n=1) [no interval: a single inlier or outlier in the test set]"
    # a class-averaged or multi-seed cell keeps its own interval whatever one job lacks
    assert cell_interval([82.0], [80.0, 84.0], job_interval_omitted=True)[2] == "classes"
    assert cell_interval([82.0, 84.0], [], job_interval_omitted=True)[2] == "seeds"


def test_single_job_interval_reads_one_row_only():
    job = pd.DataFrame({"auroc_low": [81.0], "auroc_high": [83.5], INTERVAL_OMITTED: [""]})
    assert single_job_interval(job) == {"job_interval": (81.0, 83.5)}
    assert single_job_interval(pd.concat([job, job])) == {}
    assert single_job_interval(pd.DataFrame({"auroc": [82.0]})) == {}
    # a tidy CSV read back holds NaN where a job gave its interval
    nan_reason = job.assign(**{INTERVAL_OMITTED: [np.nan]})
    assert single_job_interval(nan_reason) == {"job_interval": (81.0, 83.5)}
