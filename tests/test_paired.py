"""Paired comparisons of table rows: Wilcoxon signed-rank blocked on classes, Holm-adjusted."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pipeline_lib.paper.paired import (
    class_blocks,
    compared_columns,
    differing_columns,
    friedman_p,
    holm,
    main_table_comparisons,
    main_table_ranks,
    min_attainable_p,
    paired_tests,
    power_sentence,
    study_comparisons,
    study_comparisons_markdown,
)
from pipeline_lib.paper.plots import write_rank_plot
from pipeline_lib.paper.published import display_name
from pipeline_lib.studies.files import write_comparisons

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


def test_a_zero_difference_is_dropped_before_the_floor_is_counted():
    """6 classes, one with the same AUC in both rows: the signed-rank test ranks 5, so its
    smallest p is 2/2^5 = 0.0625 and the tables must say no difference can be significant."""
    diffs = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])  # every non-zero difference positive
    blocks = pd.DataFrame({"a": 90.0 + diffs, "b": np.full(6, 90.0)}, index=list("uvwxyz"))
    test = paired_tests(blocks).iloc[0]
    assert (test["n_blocks"], test["n_nonzero"]) == (6, 5)
    # the test that runs reaches exactly the floor of the non-zero differences
    assert test["p"] == pytest.approx(min_attainable_p(5), rel=8 * EPS)
    assert test["p"] == pytest.approx(stats.wilcoxon(diffs, zero_method="wilcox").pvalue)
    sentence = power_sentence([test["n_nonzero"]])
    assert "no difference can be significant" in sentence and "2/2^5 = 0.0625" in sentence
    # the markdown under the matrix says so too
    setting = {"dataset": "toy", "seed": 0, "contamination": 0.0, "fitset": "train"}
    rows = [
        setting | {"inlier": c, "method": m, "detector": "kde", "auroc": float(blocks.loc[c, r])}
        for c in blocks.index
        for m, r in (("contrastive", "a"), ("rotnet", "b"))
    ]
    assert "2/2^5 = 0.0625" in main_table_comparisons(pd.DataFrame(rows))


def test_the_power_sentence_names_the_comparisons_that_cannot_reach_alpha():
    assert power_sentence([6, 7]) == ""
    some = power_sentence([6, 5, 7])
    assert some.startswith("1 of 3 comparisons have at most 5 non-zero class differences")
    assert "2/2^5 = 0.0625" in some and "6 non-zero differences or more are needed" in some


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


def _study_frame(n_classes: int) -> pd.DataFrame:
    """A contamination-like study: two detectors x two outlier rates on two data sets."""
    rng = np.random.default_rng(1)
    rows = []
    for dataset in ("toy", "toy2"):
        for k in range(n_classes):
            for seed in (0, 1):
                base = 70 + 3 * k + rng.normal()
                for detector, shift in (("kde", 2.0), ("ocsvm", 0.0)):
                    for contamination, drop in ((0.0, 0.0), (0.1, -4.0)):
                        rows.append(
                            {
                                "dataset": dataset,
                                "inlier": f"c{k}",
                                "seed": seed,
                                "method": "raw",
                                "contamination": contamination,
                                "fitset": "train",
                                "detector": detector,
                                "space": "f",
                                "auroc": base + shift + drop + rng.normal(scale=0.3),
                            }
                        )
    return pd.DataFrame(rows)


def test_study_comparisons_match_scipy_and_adjust_over_the_whole_study():
    frame = _study_frame(7)
    assert compared_columns(frame) == ["contamination", "detector"]
    tests = study_comparisons(frame)
    # 4 rows per data set; the 4 pairs that differ in one thing (rate or detector), on two
    # data sets: one Holm family of 8. Pairs differing in both are not tested.
    assert len(tests) == 8 and set(tests["dataset"]) == {"toy", "toy2"}
    for r in tests.itertuples(index=False):
        assert len(differing_columns(r.a, r.b, ["contamination", "detector"])) == 1
    assert not (
        (tests["a"] == "0 % outliers / KDE") & (tests["b"] == "10 % outliers / OC-SVM")
    ).any()
    assert (tests["n_blocks"] == 7).all()
    raw = []
    for r in tests.itertuples(index=False):
        part = frame[frame["dataset"] == r.dataset]
        blocks = {}
        for name in (r.a, r.b):
            rate, detector = name.split(" / ")
            rows = part[
                (part["contamination"] * 100 == float(rate.split(" %")[0]))
                & (part["detector"].map(lambda d: display_name("detector", d)) == detector)
            ]
            blocks[name] = rows.groupby("inlier")["auroc"].mean()  # seeds averaged per class
        expected = stats.wilcoxon(blocks[r.a], blocks[r.b])
        assert r.p == pytest.approx(expected.pvalue, rel=8 * EPS)
        assert r.statistic == expected.statistic
        raw.append(expected.pvalue)
    np.testing.assert_allclose(tests["p_holm"], holm(raw), rtol=8 * EPS)
    # KDE clean is above KDE with 10 % outliers on every class: the exact floor 2/2^7
    pair = tests[(tests["a"] == "0 % outliers / KDE") & (tests["b"] == "10 % outliers / KDE")]
    assert pair["p"].iloc[0] == pytest.approx(min_attainable_p(7))
    assert pair["median_diff"].iloc[0] > 3


def test_study_comparisons_markdown_states_the_floor_below_six_classes(tmp_path):
    frame = _study_frame(4)
    text = study_comparisons_markdown(frame, study_comparisons(frame), name="noise")
    assert "all 8 pairs of the study are Holm-adjusted" in text
    squeezed = " ".join(text.split(" "))
    while "  " in squeezed:
        squeezed = squeezed.replace("  ", " ")
    assert "| 0 % outliers / KDE | 10 % outliers / KDE | contamination | 4 |" in squeezed
    assert text.count("2/2^4 = 0.125") == 2  # one sentence per data set
    paths = write_comparisons(frame, tmp_path, "noise")
    assert [p.name for p in paths] == ["noise_wilcoxon.md", "noise_wilcoxon.csv"]
    written = pd.read_csv(paths[1])
    assert len(written) == 8 and written["p_holm"].between(0, 1).all()
    # a study that varies nothing compares nothing, and says so
    one = frame[(frame["detector"] == "kde") & (frame["contamination"] == 0.0)]
    assert compared_columns(one) == [] and study_comparisons(one).empty
    assert "Nothing to compare" in study_comparisons_markdown(one, study_comparisons(one), name="x")


def test_rank_plot_is_written_with_three_data_sets_and_not_with_two(tmp_path):
    three = pd.concat([_results(3).assign(dataset=d) for d in ("toy", "toy2", "toy3")])
    ranks = main_table_ranks(three)
    # contrastive leads everywhere; rotnet is 0.2 points above imagenet on average
    assert list(ranks.index)[0] == "Contrastive / KDE"
    assert (ranks.loc["Contrastive / KDE"] == 1.0).all()
    assert list(ranks.columns) == ["toy", "toy2", "toy3", "mean_rank"]
    per_dataset = ranks.drop(columns="mean_rank")
    expected = stats.friedmanchisquare(*per_dataset.to_numpy()).pvalue
    assert friedman_p(ranks) == pytest.approx(expected, rel=8 * EPS)
    path = write_rank_plot(three, tmp_path / "ranks.png")
    assert path == tmp_path / "ranks.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    two = three[three["dataset"] != "toy3"]
    assert main_table_ranks(two) is None
    assert write_rank_plot(two, tmp_path / "ranks2.png") is None
    assert not (tmp_path / "ranks2.png").exists()
