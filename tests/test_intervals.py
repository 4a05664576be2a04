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
    MIN_CLASSES,
    SEED_STD_DDOF,
    cell_interval,
    interval_note,
    jobs_test_set,
    seed_std,
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


def test_two_classes_give_way_to_the_test_set():
    # a 2-class cell of one seed (Cat-vs-Dog): a t-interval over classes would have one
    # degree of freedom (t = 12.7) and be clipped to [0, 100]; the test set's is shown
    assert MIN_CLASSES == 3
    assert cell_interval([51.0], [50.0, 52.0], (48.5, 53.75)) == (48.5, 53.75, "test set")
    # without a test-set interval the cell has none, never a t-interval over two classes
    low, high, over = cell_interval([65.0], [60.0, 70.0])
    assert over == "" and np.isnan(low) and np.isnan(high)


def test_an_interval_covering_the_whole_range_gives_way():
    # two seeds 40 and 60: 50 -+ t(0.975, 1) * 14.1 / sqrt(2) = 50 -+ 127, all of [0, 100]
    assert t_interval([40.0, 60.0])[0] < 0 and t_interval([40.0, 60.0])[1] > 100
    assert cell_interval([40.0, 60.0], [], (45.0, 55.0)) == (45.0, 55.0, "test set")
    low, high, over = cell_interval([40.0, 60.0])
    assert over == "" and np.isnan(low)
    # three classes 10, 50, 90: 50 -+ 4.30 * 40 / sqrt(3) = 50 -+ 99.4, all of [0, 100]
    assert cell_interval([50.0], [10.0, 50.0, 90.0], (47.0, 52.0))[2] == "test set"
    # seeds that agree exactly (nothing varied with the seed): a zero-width interval over
    # seeds says nothing about the value; the test set's is shown
    assert cell_interval([99.5, 99.5], [], (98.0, 100.0)) == (98.0, 100.0, "test set")
    assert cell_interval([100.0], [100.0], (100.0, 100.0))[2] == ""
    # clipped at one end only: still informative, shown clipped
    low, high, over = cell_interval([97.0, 99.0])
    assert (high, over) == (100.0, "seeds") and 0.0 < low < 97.0


def test_note_states_the_ddof_once_and_counts_the_rules():
    note = interval_note()
    assert note.count("ddof") == 1 and f"ddof={SEED_STD_DDOF}" in note
    assert SEED_STD_DDOF == 1 and "paper" not in note
    assert "over the test set" in note and f"from {MIN_CLASSES} classes on" in note
    counted = interval_note(["seeds", "seeds", "test set", ""])
    assert counted.endswith(
        "here: 2 cells over seeds, 1 cell over the test set, 1 cell without an interval"
    )


def test_seed_std_is_the_sample_std():
    assert seed_std([1.0, 3.0]) == pytest.approx(math.sqrt(2.0), rel=4 * EPS)
    assert np.isnan(seed_std([1.0])) and np.isnan(seed_std([np.nan, 2.0]))


def test_cell_interval_is_clipped_to_the_auc_range():
    low, high, over = cell_interval([65.0], [60.0, 70.0, 65.0])
    # unclipped: 65 -+ t(0.975, 2) * sample std 5 / sqrt(3) = 65 -+ 12.4
    assert low == pytest.approx(65.0 - stats.t.ppf(0.975, 2) * 5.0 / math.sqrt(3), rel=16 * EPS)
    low, high, over = cell_interval([95.0], [90.0, 100.0, 95.0])
    assert (high, over) == (100.0, "classes")


REASON = "the test split has 9 outlier(s) and 1 inlier(s); ..."


def test_a_job_without_an_interval_says_so_in_its_cell():
    job = pd.DataFrame(
        {"seed": [0], "auroc": [82.0], "auroc_low": [np.nan], INTERVAL_OMITTED: [REASON]}
    )
    assert jobs_test_set(job) == {"test_set_omitted": True}
    low, high, over = cell_interval([82.0], [82.0], **jobs_test_set(job))
    assert over == "omitted" and np.isnan(low) and np.isnan(high)
    text = format_mean_std(
        82.0, np.nan, n_seeds=1, interval=(low, high), interval_label=INTERVAL_LABELS[over]
    )
    assert text == "82.0 (n=1) [no interval: a single inlier or outlier in the test set]"
    # an earlier rule that gives an interval wins, whatever the test set lacks
    three = [80.0, 82.0, 84.0]
    assert cell_interval([82.0], three, test_set_omitted=True)[2] == "classes"
    assert cell_interval([82.0, 84.0], [], test_set_omitted=True)[2] == "seeds"
    # below MIN_CLASSES classes, or where the earlier rules' intervals say nothing (all of
    # [0, 100], zero width), the test-set rule is reached and the omission shows
    assert cell_interval([82.0], three[:2], test_set_omitted=True)[2] == "omitted"
    assert cell_interval([40.0, 60.0], [], test_set_omitted=True)[2] == "omitted"
    assert cell_interval([100.0, 100.0], [], test_set_omitted=True)[2] == "omitted"
    assert cell_interval([], [], test_set_omitted=True)[2] == ""  # no value, no cell


def _jobs(ends: list[tuple[float, float]], seeds: list[int], reasons=None) -> pd.DataFrame:
    low, high = zip(*ends, strict=True)
    frame = pd.DataFrame({"seed": seeds, "auroc_low": low, "auroc_high": high})
    if reasons is not None:
        frame[INTERVAL_OMITTED] = reasons
    return frame


def test_jobs_test_set_averages_the_ends_as_the_value():
    # seed 0: classes (80, 84), (70, 76) -> (75, 80); seed 1: (81, 85) -> one class
    jobs = _jobs([(80.0, 84.0), (70.0, 76.0), (81.0, 85.0)], [0, 0, 1], ["", np.nan, ""])
    # per seed over classes, then over seeds: ((75 + 81) / 2, (80 + 85) / 2)
    assert jobs_test_set(jobs) == {"test_set": (78.0, 82.5)}
    assert jobs_test_set(jobs.iloc[:0]) == {}
    # ends missing without a recorded reason (results older than the intervals): none
    assert jobs_test_set(jobs.drop(columns=["auroc_low", "auroc_high"])) == {}
    unknown = jobs.copy()
    unknown.loc[1, ["auroc_low", "auroc_high"]] = np.nan
    assert jobs_test_set(unknown) == {}


def test_one_omitted_job_is_enough_to_omit_a_cells_test_set():
    # the average needs every job's ends: one job with a single inlier, the rest with theirs
    jobs = _jobs([(80.0, 84.0), (np.nan, np.nan), (81.0, 85.0)], [0, 0, 1], ["", REASON, ""])
    assert jobs_test_set(jobs) == {"test_set_omitted": True}
    # every job omitted, and an omission beside a job missing its ends without a reason
    every = _jobs([(np.nan, np.nan)] * 2, [0, 1], [REASON, REASON])
    assert jobs_test_set(every) == {"test_set_omitted": True}
    mixed = _jobs([(np.nan, np.nan)] * 2, [0, 0], [REASON, np.nan])
    assert jobs_test_set(mixed) == {"test_set_omitted": True}
    # a reason beside ends that are there is not an omission (the ends are used)
    jobs.loc[1, ["auroc_low", "auroc_high"]] = (70.0, 76.0)
    assert jobs_test_set(jobs) == {"test_set": (78.0, 82.5)}
    # other ends (MVTec's pixel AUC) are read the same way
    pixel = jobs.rename(columns={"auroc_low": "pixel_low", "auroc_high": "pixel_high"})
    assert jobs_test_set(pixel, ("pixel_low", "pixel_high")) == {"test_set": (78.0, 82.5)}


def test_note_counts_the_omitted_cells():
    note = interval_note()
    assert "a single inlier or outlier" in note
    counted = interval_note(["seeds", "omitted", "test set", "omitted", ""])
    assert counted.endswith(
        "here: 1 cell over seeds, 1 cell over the test set, 2 cells omitted (a single inlier "
        "or outlier in a test set), 1 cell without an interval"
    )
