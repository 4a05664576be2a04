"""Paired comparisons of table rows: Wilcoxon signed-rank blocked on classes, Holm-adjusted."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pipeline_lib.report.paired import (
    class_blocks,
    holm,
    main_table_comparisons,
    min_attainable_p,
    paired_tests,
    power_sentence,
)

EPS = np.finfo(np.float64).eps


def test_holm_on_a_hand_made_case():
    # sorted 0.01, 0.03, 0.04 -> 3 * 0.01, max(0.03, 2 * 0.03), max(0.06, 1 * 0.04)
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06], rtol=8 * EPS)
    # 2 * 0.5 = 1, then max(1, 0.9): the step-down keeps the adjusted p-values monotone
    np.testing.assert_allclose(holm([0.5, 0.9]), [1.0, 1.0], rtol=8 * EPS)
    out = holm([0.02, np.nan])
    assert out[0] == pytest.approx(0.02) and np.isnan(out[1])  # NaN is not in the family


def _results(n_classes: int, seeds=(0, 1)) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for k in range(n_classes):
        for seed in seeds:
            base = 80 + 2 * k + rng.normal()
            for method, shift in (("contrastive", 1.5), ("rotnet", 0.0), ("imagenet", -0.2)):
                rows.append(
                    {
                        "dataset": "toy",
                        "inlier": f"c{k}",
                        "method": method,
                        "seed": seed,
                        "contamination": 0.0,
                        "fitset": "train",
                        "detector": "kde",
                        "auroc": base + shift + rng.normal(scale=0.5),
                    }
                )
    return pd.DataFrame(rows)


def test_paired_tests_match_scipy_on_seed_averaged_blocks():
    results = _results(8)
    blocks = class_blocks(results, ["method"])
    assert blocks.shape == (8, 3)
    # a block is the class's AUC averaged over seeds
    first = results[(results["inlier"] == "c0") & (results["method"] == "rotnet")]["auroc"]
    assert blocks.loc["c0", "rotnet"] == pytest.approx(first.mean(), rel=8 * EPS)
    tests = paired_tests(blocks).set_index(["a", "b"])
    assert len(tests) == 3
    raw = {}
    for a, b in tests.index:
        expected = stats.wilcoxon(blocks[a], blocks[b])
        assert tests.loc[(a, b), "p"] == pytest.approx(expected.pvalue, rel=8 * EPS)
        assert tests.loc[(a, b), "statistic"] == expected.statistic
        raw[(a, b)] = expected.pvalue
    np.testing.assert_allclose(tests["p_holm"], holm([raw[k] for k in tests.index]), rtol=8 * EPS)
    # contrastive is 1.5 points above rotnet on every class: the smallest exact p, 2 / 2^8
    assert tests.loc[("contrastive", "rotnet"), "p"] == pytest.approx(2 / 2**8)
    assert tests.loc[("contrastive", "rotnet"), "median_diff"] > 0


def test_minimum_attainable_p_and_the_power_sentence():
    assert min_attainable_p(5) == 2 / 32 and min_attainable_p(6) == 2 / 64
    # the exact test reaches the floor when every difference has one sign
    assert stats.wilcoxon(np.arange(1.0, 7.0)).pvalue == pytest.approx(min_attainable_p(6))
    assert "cannot" not in power_sentence(6) and power_sentence(6) == ""
    assert "no difference can be significant" in power_sentence(5)
    assert "0.0625" in power_sentence(5)


def test_main_table_comparisons_markdown():
    results = _results(3, seeds=(0,))
    text = main_table_comparisons(results)
    assert "Holm" in text and "## toy" in text
    assert "2/2^3 = 0.25" in text  # three classes: the test cannot reach significance
    # one row per (representation, detector), under display names; contrastive above rotnet
    # on all three classes: p = 2 / 2^3 = 0.25, adjusted at most 3 * 0.25 = 0.75
    blocks = class_blocks(results, ["method"])
    median = float(np.median(blocks["contrastive"] - blocks["rotnet"]))
    tests = paired_tests(blocks).set_index(["a", "b"])
    adjusted = tests.loc[("contrastive", "rotnet"), "p_holm"]
    assert adjusted == pytest.approx(0.75)
    assert "| Contrastive / KDE |" in text
    assert f"{adjusted:.3g} ({median:+.1f})" in text


def test_ranks_need_three_data_sets():
    two = pd.concat([_results(3).assign(dataset=d) for d in ("toy", "toy2")])
    assert "this table has 2" in main_table_comparisons(two)
    three = pd.concat([_results(3).assign(dataset=d) for d in ("toy", "toy2", "toy3")])
    text = main_table_comparisons(three)
    rank_part = text.split("## Ranks across data sets")[1]
    # contrastive is 1.5 points above the others everywhere: rank 1 on every data set
    first = [line for line in rank_part.splitlines() if line.startswith("| Contrastive")][0]
    assert first.replace(" ", "").endswith("|1.0|1.0|1.0|1.0|")
