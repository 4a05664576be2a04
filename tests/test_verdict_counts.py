"""Verdict counts of a table's cells (aggregate.table_verdicts, verdict.verdict_counts)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipeline_lib.paper.aggregate import table_verdicts
from pipeline_lib.paper.verdict import (
    VERDICTS,
    count_line,
    no_counterpart_line,
    opening_line,
    verdict_counts,
)


def _cell(dataset, mean, std, n_seeds, paper, paper_std, complete=True):
    return {
        "method": "contrastive",
        "detector": "kde",
        "dataset": dataset,
        "mean": mean,
        "std": std,
        "n_seeds": n_seeds,
        "complete": complete,
        "published_mean": paper,
        "published_std": paper_std,
    }


def test_each_cell_gets_its_verdict_and_the_counts_add_up():
    long = pd.DataFrame(
        [
            _cell("a", 90.0, 0.0, 1, 91.0, 0.6),  # |d| 1.0 <= 2 * 0.6: within
            _cell("b", 90.0, 0.0, 1, 92.0, 0.5),  # 2.0 > 1.0, ours lower: below
            _cell("c", 95.0, 0.0, 1, 92.0, 0.5),  # above
            _cell("d", 80.0, 0.0, 1, np.nan, np.nan),  # no paper value
            _cell("e", 90.0, 0.5, 3, 91.0, 0.6, complete=False),  # incomplete
            _cell("f", np.nan, np.nan, 0, 91.0, 0.6, complete=False),  # no result
            _cell("mean", 90.0, 0.0, 1, 91.0, 0.6),  # not a cell of its own
        ]
    )
    verdicts = table_verdicts(long)
    assert verdicts["dataset"].tolist() == ["a", "b", "c", "d", "e", "f"]
    assert verdicts["verdict"].tolist() == [
        "within",
        "below",
        "above",
        "no paper value",
        "not comparable",
        "not comparable",
    ]
    counts = verdict_counts(verdicts["verdict"])
    assert list(counts) == list(VERDICTS) and sum(counts.values()) == 6
    assert count_line(counts).startswith("1 of 3 published cells reproduced")
    with pytest.raises(ValueError, match="'maybe' is not a verdict"):
        verdict_counts(["maybe"])


def test_our_std_enters_as_the_sample_std():
    # ddof=0 std 1.0 over 2 seeds is a sample std of sqrt(2): |d| = 2.5 lies within
    # 2 * hypot(sqrt(2), 0) = 2.83 but not within 2 * hypot(1.0, 0) = 2.0
    long = pd.DataFrame([_cell("a", 90.0, 1.0, 2, 92.5, 0.0)])
    assert 2 * math.sqrt(2) > 2.5 > 2.0
    assert table_verdicts(long, ddof=0)["verdict"].tolist() == ["within"]
    assert table_verdicts(long, ddof=1)["verdict"].tolist() == ["below"]


def test_a_protocol_break_makes_every_cell_not_comparable():
    long = pd.DataFrame([_cell("a", 90.0, 0.0, 1, 91.0, 0.6), _cell("b", 1.0, 0, 1, np.nan, 0)])
    verdicts = table_verdicts(long, breaks=["20 training epochs (paper 2048)"])
    assert verdicts["verdict"].tolist() == ["not comparable", "no paper value"]


def test_opening_line_says_why_nothing_is_comparable():
    cells = table_verdicts(
        pd.DataFrame(
            [
                _cell("digits", 99.0, 0.1, 2, np.nan, np.nan),
                _cell("cifar10", 80.0, 0.1, 2, np.nan, np.nan),
            ]
        )
    )
    line = opening_line(cells, breaks=["a class subset"], published_datasets={"cifar10"})
    # nothing has a published number: no "0 of 0 reproduced", no count, but why per data set
    assert line == no_counterpart_line(cells, {"cifar10"})
    assert line.startswith("Reproduction: nothing to compare. No cell of this run")
    assert "the paper reports no results on Digits" in line
    assert "on CIFAR-10 it reports no number for this run's representations (Contrastive)" in line
    assert "0 of 0" not in line
    # one published cell: the count line, as before
    published = table_verdicts(pd.DataFrame([_cell("cifar10", 90.0, 0.0, 1, 91.0, 0.6)]))
    assert opening_line(published, published_datasets={"cifar10"}) == count_line(
        verdict_counts(published["verdict"])
    )
