"""Tests of the aggregation into the main and per-class tables, and of the table writers.

The synthetic results have two toy data sets (3 and 2 classes) and 3 seeds, with AUCs chosen
so that every number can be worked out by hand:

toy_a (classes a0, a1, a2), seed s: AUCs 80 + s, 82 + s, 84 + s -> class mean 82 + s
toy_b (classes b0, b1),     seed s: AUCs 60 + 2 s, 70         -> class mean 65 + s
So over seeds 0, 1, 2: toy_a 83 and toy_b 66, both with sample std 1 (ddof=1); the
class-weighted mean per seed is (3 (82 + s) + 2 (65 + s)) / 5 = 75.2 + s -> 76.2.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pipeline_lib.paper.aggregate import (
    MAIN_COLUMNS,
    PER_CLASS_COLUMNS,
    format_main_table,
    format_per_class_table,
    main_table,
    per_class_table,
)
from pipeline_lib.paper.published import CLASS_NAMES, PAPER_DATASET_CLASSES, load_published
from pipeline_lib.results.table_files import TABLE_SUFFIXES, write_table

STD3 = 1.0  # sample std (ddof=1, every table's) of three consecutive integers
# 95 % t-interval half-width over three consecutive integers (sample std 1, ddof=1)
HALF3 = stats.t.ppf(0.975, 2) / math.sqrt(3)


def _ci(mean: float, half: float) -> str:
    return f"[{mean - half:.1f}, {mean + half:.1f}]"


def _row(dataset, inlier, seed, auroc, method="contrastive", detector="kde", **setting):
    return {
        "dataset": dataset,
        "inlier": inlier,
        "method": method,
        "seed": seed,
        "contamination": setting.get("contamination", 0.0),
        "fitset": setting.get("fitset", "train"),
        "detector": detector,
        "auroc": auroc,
    }


@pytest.fixture
def results() -> pd.DataFrame:
    rows = []
    for seed in range(3):
        for k, inlier in enumerate(["a0", "a1", "a2"]):
            rows.append(_row("toy_a", inlier, seed, 80.0 + 2 * k + seed))
        rows.append(_row("toy_b", "b0", seed, 60.0 + 2 * seed))
        rows.append(_row("toy_b", "b1", seed, 70.0))
        # a second detector, 10 points lower everywhere
        for k, inlier in enumerate(["a0", "a1", "a2"]):
            rows.append(_row("toy_a", inlier, seed, 70.0 + 2 * k + seed, detector="ocsvm"))
        rows.append(_row("toy_b", "b0", seed, 50.0 + 2 * seed, detector="ocsvm"))
        rows.append(_row("toy_b", "b1", seed, 60.0, detector="ocsvm"))
        # other settings, which must be ignored
        rows.append(_row("toy_a", "a0", seed, 1.0, contamination=0.05))
        rows.append(_row("toy_a", "a0", seed, 2.0, fitset="clean50"))
    return pd.DataFrame(rows)


@pytest.fixture
def published() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "dataset": ["toy_a", "toy_b", "toy_a", "toy_a"],
            "inlier": ["", "", "a0", "mean"],
            "method": ["contrastive"] * 4,
            "detector": ["kde"] * 4,
            "mean": [82.0, 66.5, 80.0, 82.5],
            "std": [1.0, 0.5, 0.2, np.nan],
        }
    )


def _cell(long: pd.DataFrame, dataset: str, detector: str = "kde") -> pd.Series:
    rows = long[(long["dataset"] == dataset) & (long["detector"] == detector)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_main_table_means_stds_and_weighted_mean(results, published) -> None:
    long = main_table(results, published)
    assert tuple(long.columns) == MAIN_COLUMNS
    assert len(long) == 2 * 3  # two detectors x (toy_a, toy_b, mean)
    a, b, mean = (_cell(long, d) for d in ("toy_a", "toy_b", "mean"))
    assert a["mean"] == pytest.approx(83.0) and a["std"] == pytest.approx(STD3)
    assert b["mean"] == pytest.approx(66.0) and b["std"] == pytest.approx(STD3)
    assert mean["mean"] == pytest.approx(76.2) and mean["std"] == pytest.approx(STD3)
    assert (a["n_seeds"], a["n_classes"], a["expected_classes"], a["n_results"]) == (3, 3, 3, 9)
    assert (mean["n_classes"], mean["expected_classes"], mean["n_results"]) == (5, 5, 15)
    assert long["complete"].all()
    ocsvm = _cell(long, "mean", "ocsvm")
    assert ocsvm["mean"] == pytest.approx(66.2)
    assert np.isnan(ocsvm["published_mean"]) and np.isnan(ocsvm["delta"])


def test_main_table_deltas_against_published(results, published) -> None:
    long = main_table(results, published)
    a, b, mean = (_cell(long, d) for d in ("toy_a", "toy_b", "mean"))
    assert (a["published_mean"], a["published_std"], a["delta"]) == pytest.approx((82, 1, 1))
    assert (b["published_mean"], b["published_std"], b["delta"]) == pytest.approx((66.5, 0.5, -0.5))
    # toy data sets are not the paper's five, so the mean is derived: (3*82 + 2*66.5) / 5
    assert mean["published_mean"] == pytest.approx(75.8) and mean["published_derived"]
    assert mean["delta"] == pytest.approx(0.4) and np.isnan(mean["published_std"])
    assert not a["published_derived"]


def test_main_table_population_std_with_ddof_0(results) -> None:
    long = main_table(results, ddof=0)
    assert _cell(long, "toy_a")["std"] == pytest.approx(math.sqrt(2.0 / 3.0))


def test_missing_class_of_one_seed_is_flagged(results) -> None:
    drop = (results["inlier"] == "a2") & (results["seed"] == 2) & (results["detector"] == "kde")
    long = main_table(results[~drop])
    a, b, mean = (_cell(long, d) for d in ("toy_a", "toy_b", "mean"))
    # seed 2 averages a0, a1 only: (82 + 84) / 2 = 83, so seeds give 82, 83, 83
    assert a["mean"] == pytest.approx(248 / 3)
    assert (a["n_seeds"], a["n_classes"], a["n_results"], a["expected_results"]) == (3, 3, 8, 9)
    assert not a["complete"] and b["complete"] and not mean["complete"]
    assert _cell(long, "toy_a", "ocsvm")["complete"]
    wide = format_main_table(long)
    kde = wide[wide["Detector"] == "KDE"].iloc[0]
    # seeds 82, 83, 83: sample std sqrt(1/3), so the half-width is t(0.975, 2) / 3
    half = stats.t.ppf(0.975, 2) / 3
    assert kde["toy_a"] == f"82.7 ± 0.6 {_ci(248 / 3, half)} [8/9 runs, 3/3 seeds]"
    assert kde["toy_a"] == "82.7 ± 0.6 [81.2, 84.1] [8/9 runs, 3/3 seeds]"
    assert kde["toy_b"] == f"66.0 ± 1.0 {_ci(66.0, HALF3)}"


def test_missing_seed_is_flagged(results) -> None:
    drop = (results["dataset"] == "toy_b") & (results["seed"] == 2)
    long = main_table(results[~drop])
    b, mean = _cell(long, "toy_b"), _cell(long, "mean")
    assert (b["n_seeds"], b["expected_seeds"], b["complete"]) == (2, 3, False)
    # seeds 65 and 66: sample std sqrt(1/2)
    assert b["mean"] == pytest.approx(65.5) and b["std"] == pytest.approx(math.sqrt(0.5))
    # seed 2 of the mean has toy_a only: seeds give 75.2, 76.2, 84
    assert mean["mean"] == pytest.approx((75.2 + 76.2 + 84.0) / 3) and not mean["complete"]


def test_missing_dataset_of_one_pair_is_flagged(results) -> None:
    drop = (results["dataset"] == "toy_b") & (results["detector"] == "ocsvm")
    long = main_table(results[~drop])
    b, mean = _cell(long, "toy_b", "ocsvm"), _cell(long, "mean", "ocsvm")
    assert np.isnan(b["mean"]) and (b["n_seeds"], b["n_results"], b["complete"]) == (0, 0, False)
    assert mean["mean"] == pytest.approx(73.0) and not mean["complete"]  # toy_a only
    assert _cell(long, "mean")["complete"]
    ocsvm = format_main_table(long).set_index("Detector").loc["OC-SVM"]
    assert ocsvm["toy_b"] == "— [0/6 runs, 0/3 seeds]"


def test_expected_seeds_and_classes_can_be_given(results) -> None:
    long = main_table(results, seeds=[0, 1, 2, 3], class_counts={"toy_a": 4})
    a = _cell(long, "toy_a")
    assert (a["expected_seeds"], a["expected_classes"], a["expected_results"]) == (4, 4, 16)
    assert not long["complete"].any()
    # the mean is weighted by the expected class counts: (4*(82+s) + 2*(65+s)) / 6
    assert _cell(long, "mean")["mean"] == pytest.approx((4 * 83 + 2 * 66) / 6)


def test_main_table_rejects_bad_input(results) -> None:
    with pytest.raises(ValueError, match="auroc"):
        main_table(results.drop(columns="auroc"))
    with pytest.raises(ValueError, match="duplicate"):
        main_table(pd.concat([results, results.iloc[[0]]]))
    with pytest.raises(ValueError, match="fitset='clean500'"):
        main_table(results, fitset="clean500")
    bad = results.copy()
    bad.loc[0, "auroc"] = 0.9 * 1000
    with pytest.raises(ValueError, match="x100"):
        main_table(bad)


def test_main_table_uses_the_paper_mean_for_the_paper_datasets() -> None:
    published = load_published()
    full = published[published["table"] == "visual_results_full"]
    row = full[(full["method"] == "contrastive_da") & (full["detector"] == "ocsvm")]
    value = dict(zip(row["dataset"], row["mean"], strict=True))
    rows = []
    for dataset in PAPER_DATASET_CLASSES:
        classes = CLASS_NAMES.get(dataset, ("no_eyeglasses",))
        for seed in range(2):
            for inlier in classes:
                rows.append(_row(dataset, inlier, seed, value[dataset], "contrastive_da", "ocsvm"))
    long = main_table(pd.DataFrame(rows), published)
    assert long["complete"].all()
    per_dataset = long[long["dataset"] != "mean"]
    np.testing.assert_allclose(per_dataset["delta"], 0.0, atol=1e-9)
    mean = _cell(long, "mean", "ocsvm")
    assert not mean["published_derived"] and mean["published_mean"] == 89.9
    assert abs(mean["delta"]) < 0.15


def test_format_main_table_cells(results, published) -> None:
    wide = format_main_table(main_table(results, published))
    assert list(wide.columns) == [
        "Representation",
        "Detector",
        "toy_a",
        "toy_a paper",
        "toy_b",
        "toy_b paper",
        "Mean",
        "Mean paper",
    ]
    kde = wide[wide["Detector"] == "KDE"].iloc[0]
    assert kde["Representation"] == "Contrastive"
    assert kde["toy_a"] == f"83.0 ± 1.0 {_ci(83.0, HALF3)}" == "83.0 ± 1.0 [80.5, 85.5]"
    assert kde["toy_a paper"] == "82.0 ± 1.0, Δ +1.0"
    assert kde["toy_b paper"] == "66.5 ± 0.5, Δ -0.5"
    assert kde["Mean"] == f"76.2 ± 1.0 {_ci(76.2, HALF3)}"
    assert kde["Mean paper"] == "75.8 (derived), Δ +0.4"
    assert wide[wide["Detector"] == "OC-SVM"].iloc[0]["toy_a paper"] == ""


def test_one_seed_shows_n1_instead_of_a_zero_std(results, published, tmp_path) -> None:
    one = results[results["seed"] == 1]
    long = main_table(one, published)
    kde = long[(long["detector"] == "kde") & (long["dataset"] == "toy_a")].iloc[0]
    assert np.isnan(kde["std"]) and kde["n_seeds"] == 1  # one value has no sample std
    wide = format_main_table(long)
    row = wide[wide["Detector"] == "KDE"].iloc[0]
    # one seed of three classes 81, 83, 85: the interval is over classes (sample std 2)
    half = stats.t.ppf(0.975, 2) * 2 / math.sqrt(3)
    assert (kde["ci_over"], kde["ci_low"]) == ("classes", pytest.approx(83.0 - half))
    assert row["toy_a"] == f"83.0 (n=1) {_ci(83.0, half)} over classes"
    # the published numbers keep their spread: it was measured over the paper's seeds
    assert row["toy_a paper"] == "82.0 ± 1.0, Δ +1.0"
    per_class = format_per_class_table(per_class_table(one, "toy_a", published))
    assert per_class.loc[0, "Contrastive / KDE"] == "81.0 (n=1) (paper 80.0 ± 0.2, Δ +1.0)"
    paths = write_table(wide, tmp_path / "main", caption="one seed")
    for path in paths:
        text = path.read_text()
        assert "± 0.0" not in text and "$\\pm$ 0.0" not in text
        assert "83.0 (n=1)" in text
    cells = wide.drop(columns=["Representation", "Detector"]).to_numpy().ravel()
    ours = [c for c in cells if c and "Δ" not in c and "derived" not in c]
    assert all("(n=1)" in c and "±" not in c for c in ours)


def test_per_class_table(results, published) -> None:
    long = per_class_table(results, "toy_a", published)
    assert tuple(long.columns) == PER_CLASS_COLUMNS
    kde = long[long["detector"] == "kde"].set_index("inlier")
    assert list(kde.index) == ["a0", "a1", "a2", "mean"]
    np.testing.assert_allclose(kde["mean"], [81.0, 83.0, 85.0, 83.0])
    np.testing.assert_allclose(kde["std"], STD3)
    assert kde.loc["a0", "published_mean"] == 80.0 and kde.loc["a0", "delta"] == pytest.approx(1.0)
    assert kde.loc["mean", "published_mean"] == 82.5  # the per-class table's own mean row
    assert kde.loc["mean", "delta"] == pytest.approx(0.5)
    assert np.isnan(kde.loc["a1", "published_mean"])
    assert kde["complete"].all() and (kde["n_seeds"] == 3).all()
    wide = format_per_class_table(long)
    assert list(wide["Class"]) == ["a0", "a1", "a2", "mean"]
    np.testing.assert_allclose(kde["ci_high"] - kde["mean"], HALF3)
    assert (kde["ci_over"] == "seeds").all()
    assert wide.loc[0, "Contrastive / KDE"] == (
        f"81.0 ± 1.0 {_ci(81.0, HALF3)} (paper 80.0 ± 0.2, Δ +1.0)"
    )
    assert wide.loc[1, "Contrastive / KDE"] == f"83.0 ± 1.0 {_ci(83.0, HALF3)}"


def test_per_class_table_flags_missing_results(results) -> None:
    drop = (results["inlier"] == "a1") & (results["detector"] == "ocsvm")
    drop |= (results["inlier"] == "a2") & (results["seed"] == 0) & (results["detector"] == "kde")
    long = per_class_table(results[~drop], "toy_a")
    ocsvm = long[long["detector"] == "ocsvm"].set_index("inlier")
    assert ocsvm.loc["a1", "n_seeds"] == 0 and np.isnan(ocsvm.loc["a1", "mean"])
    assert not ocsvm.loc["a1", "complete"] and not ocsvm.loc["mean", "complete"]
    assert ocsvm.loc["mean", "mean"] == pytest.approx(73.0)  # mean of a0 (71), a2 (75)
    kde = long[long["detector"] == "kde"].set_index("inlier")
    assert (kde.loc["a2", "n_seeds"], kde.loc["a2", "complete"]) == (2, False)
    assert kde.loc["a2", "mean"] == pytest.approx(85.5)
    assert kde.loc["a0", "complete"] and not kde.loc["mean", "complete"]
    wide = format_per_class_table(long)
    # two seeds 85, 86: sample std sqrt(1/2); t(0.975, 1) * std / sqrt(2) = t(0.975, 1) / 2
    half = stats.t.ppf(0.975, 1) / 2
    assert wide.loc[2, "Contrastive / KDE"] == f"85.5 ± 0.7 {_ci(85.5, half)} [2/3 seeds]"
    assert wide.loc[1, "Contrastive / OC-SVM"] == "— [0/3 seeds]"
    assert wide.loc[3, "Contrastive / KDE"].endswith("[incomplete]")


def test_per_class_table_orders_paper_classes() -> None:
    names = CLASS_NAMES["fmnist"]
    rows = [_row("fmnist", name, 0, 90.0) for name in reversed(names)]
    long = per_class_table(pd.DataFrame(rows), "fmnist")
    assert list(long["inlier"]) == [*names, "mean"]
    with pytest.raises(ValueError, match="'cifar10'"):
        per_class_table(pd.DataFrame(rows), "cifar10")


def test_write_table_writes_four_files_with_the_numbers(results, published, tmp_path) -> None:
    wide = format_main_table(main_table(results, published))
    stem = tmp_path / "tables" / "main_toy"
    paths = write_table(wide, stem, caption="Toy main table: AUC 100%")
    assert [p.name for p in paths] == [f"main_toy{s}" for s in TABLE_SUFFIXES]
    texts = {p.suffix: p.read_text(encoding="utf-8") for p in paths}
    for suffix, text in texts.items():
        assert "83.0" in text and "76.2" in text, suffix
    assert "83.0 ± 1.0 [80.5, 85.5]" in texts[".md"] and texts[".md"].startswith("Toy main table")
    assert (
        r"83.0 $\pm$ 1.0" in texts[".tex"]
        and r"\caption{Toy main table: AUC 100\%}" in (texts[".tex"])
    )
    assert r"toy\_a paper" in texts[".tex"] and r"$\Delta$ +1.0" in texts[".tex"]
    assert "<title>Toy main table: AUC 100%</title>" in texts[".html"]
    assert texts[".html"].startswith("<!DOCTYPE html>")
    assert "<td>83.0 ± 1.0 [80.5, 85.5]</td>" in texts[".html"]
    assert pd.read_csv(paths[0], keep_default_na=False).equals(wide)
    assert sorted(p.name for p in stem.parent.iterdir()) == sorted(p.name for p in paths)


def test_write_table_keeps_long_numeric_frames(results, tmp_path) -> None:
    long = main_table(results)
    paths = write_table(long, tmp_path / "long", caption="Long")
    back = pd.read_csv(paths[0])
    np.testing.assert_allclose(back["mean"], long["mean"])
    assert "| contrastive" in paths[1].read_text(encoding="utf-8")


def test_write_table_rejects_bad_arguments(tmp_path) -> None:
    frame = pd.DataFrame({"x": [1.0]})
    with pytest.raises(ValueError, match="main.csv"):
        write_table(frame, tmp_path / "main.csv", caption="x")
    with pytest.raises(ValueError, match="caption"):
        write_table(frame, tmp_path / "main", caption=" ")
    with pytest.raises(ValueError, match="table suffixes"):
        write_table(frame, tmp_path / "main", caption="x", suffixes=(".md", ".pdf"))


def test_write_table_writes_the_chosen_files_with_notes_above_and_below(tmp_path) -> None:
    # A study writes its tidy CSV itself and the human table here, with its notes below it.
    frame = pd.DataFrame({"Method": ["RotNet"], "AUC": ["90.1 ± 0.2"]})
    paths = write_table(
        frame,
        tmp_path / "study",
        caption="Study",
        notes=["protocol: 3 epochs"],
        footnotes=["one note", "a <second> note"],
        suffixes=(".html", ".md"),
    )
    assert [p.name for p in paths] == ["study.md", "study.html"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["study.html", "study.md"]
    md = paths[0].read_text(encoding="utf-8")
    assert md.startswith("Study\n\nprotocol: 3 epochs\n\n|")
    assert md.endswith("|\n\nNotes:\n\n- one note\n- a <second> note\n")
    page = paths[1].read_text(encoding="utf-8")
    assert page.index('<p class="note">protocol: 3 epochs</p>') < page.index("<table")
    assert page.endswith(
        "</table>\n<p>Notes:</p>\n<ul><li>one note</li><li>a &lt;second&gt; note</li></ul>\n"
        "</body>\n</html>\n"
    )


def test_one_seed_of_one_class_shows_the_jobs_interval_over_the_test_set(results) -> None:
    one = results[(results["seed"] == 1) & (results["dataset"] == "toy_a")].copy()
    one["auroc_low"], one["auroc_high"] = one["auroc"] - 1.25, one["auroc"] + 0.75
    per_class = per_class_table(one, "toy_a").set_index(["detector", "inlier"])
    cell = per_class.loc[("kde", "a0")]
    assert (cell["ci_low"], cell["ci_high"], cell["ci_over"]) == (79.75, 81.75, "test set")
    # the class mean of one seed is class-averaged: its interval is over the classes
    assert per_class.loc[("kde", "mean"), "ci_over"] == "classes"
    wide = format_per_class_table(per_class_table(one, "toy_a"))
    assert wide.loc[0, "Contrastive / KDE"] == "81.0 (n=1) [79.8, 81.8] over the test set"
    single = main_table(one[(one["inlier"] == "a0") & (one["detector"] == "kde")])
    assert single.loc[0, "ci_over"] == "test set"
    assert format_main_table(single).loc[0, "toy_a"] == "81.0 (n=1) [79.8, 81.8] over the test set"


def test_one_job_whose_test_split_gave_no_interval_says_so(results) -> None:
    one = results[(results["seed"] == 1) & (results["dataset"] == "toy_a")].copy()
    one["auroc_low"], one["auroc_high"] = one["auroc"] - 1.25, one["auroc"] + 0.75
    single = one[(one["inlier"] == "a0") & (one["detector"] == "kde")].copy()
    single[["auroc_low", "auroc_high"]] = np.nan
    single["auroc_interval_omitted"] = "the test split has 9 outlier(s) and 1 inlier(s); ..."
    main = main_table(single)
    assert main.loc[0, "ci_over"] == "omitted" and np.isnan(main.loc[0, "ci_low"])
    assert format_main_table(main).loc[0, "toy_a"] == (
        "81.0 (n=1) [no interval: a single inlier or outlier in the test set]"
    )
    # beside jobs that have theirs, only its own cell says so
    rest = one[~((one["inlier"] == "a0") & (one["detector"] == "kde"))]
    per_class = per_class_table(pd.concat([single, rest]), "toy_a").set_index(
        ["detector", "inlier"]
    )
    assert per_class.loc[("kde", "a0"), "ci_over"] == "omitted"
    assert per_class.loc[("kde", "a1"), "ci_over"] == "test set"


def test_two_classes_of_one_seed_take_the_mean_of_their_test_set_intervals(results) -> None:
    # Cat-vs-Dog's shape: two classes, one seed. An interval over two classes has one
    # degree of freedom (t = 12.7): 75 -+ 12.7 * 7.07 / sqrt(2) covers all of [0, 100].
    two = results[(results["seed"] == 0) & (results["dataset"] == "toy_b")].copy()
    two = two[(two["contamination"] == 0.0) & (two["fitset"] == "train")]
    two["auroc_low"], two["auroc_high"] = two["auroc"] - 3.0, two["auroc"] + 1.0
    kde = main_table(two).set_index("detector").loc["kde"]
    # b0 60, b1 70: class mean 65; the jobs' ends averaged as the values are: 62 and 66
    assert (kde["ci_low"], kde["ci_high"], kde["ci_over"]) == (62.0, 66.0, "test set")
    wide = format_main_table(main_table(two)).set_index("Detector")
    assert wide.loc["KDE", "toy_b"] == "65.0 (n=1) [62.0, 66.0] over the test set"
    # the same cell without job intervals has no interval, never a clipped [0.0, 100.0]
    bare = two.drop(columns=["auroc_low", "auroc_high"])
    texts = format_main_table(main_table(bare)).set_index("Detector")
    assert texts.loc["KDE", "toy_b"] == "65.0 (n=1)"
    assert not texts.apply(lambda column: column.str.contains(r"\[0\.0, 100\.0\]")).any(axis=None)


def test_the_weighted_mean_takes_the_test_set_interval_weighted_as_its_values(results) -> None:
    one = results[(results["seed"] == 0) & (results["fitset"] == "train")].copy()
    one = one[(one["contamination"] == 0.0) & (one["inlier"].isin(["a0", "b0"]))]
    one["auroc_low"], one["auroc_high"] = one["auroc"] - 2.0, one["auroc"] + 4.0
    mean = main_table(one, class_counts={"toy_a": 3, "toy_b": 2})
    cell = mean[(mean["dataset"] == "mean") & (mean["detector"] == "kde")].iloc[0]
    # one seed, two classes (a0 80, b0 60): no interval over classes; the test set's ends
    # weighted 3 : 2 as the values are, 72 - 2 and 72 + 4
    assert cell["mean"] == pytest.approx(72.0)
    assert (cell["ci_low"], cell["ci_high"], cell["ci_over"]) == (
        pytest.approx(70.0),
        pytest.approx(76.0),
        "test set",
    )


def test_a_two_class_cell_with_an_omitted_job_says_so(results) -> None:
    # toy_b's two classes of one seed reach the test-set rule (below MIN_CLASSES); b0's
    # test split had a single inlier, so the average of the jobs' ends cannot be formed
    two = results[(results["seed"] == 0) & (results["dataset"] == "toy_b")].copy()
    two = two[(two["contamination"] == 0.0) & (two["fitset"] == "train")]
    two["auroc_low"], two["auroc_high"] = two["auroc"] - 3.0, two["auroc"] + 1.0
    two["auroc_interval_omitted"] = ""
    b0 = two["inlier"] == "b0"
    two.loc[b0, ["auroc_low", "auroc_high"]] = np.nan
    two.loc[b0, "auroc_interval_omitted"] = "the test split has 9 outlier(s) and 1 inlier(s); ..."
    kde = main_table(two).set_index("detector").loc["kde"]
    assert kde["ci_over"] == "omitted" and np.isnan(kde["ci_low"]) and np.isnan(kde["ci_high"])
    wide = format_main_table(main_table(two)).set_index("Detector")
    assert wide.loc["KDE", "toy_b"] == (
        "65.0 (n=1) [no interval: a single inlier or outlier in the test set]"
    )
    # the weighted mean over toy_a (a0, with its interval) and toy_b: two classes of one
    # seed, and toy_b's test set cannot give its ends: omitted too
    a0 = results[(results["seed"] == 0) & (results["inlier"] == "a0")].copy()
    a0 = a0[(a0["contamination"] == 0.0) & (a0["fitset"] == "train")]
    a0["auroc_low"], a0["auroc_high"] = a0["auroc"] - 2.0, a0["auroc"] + 4.0
    a0["auroc_interval_omitted"] = ""
    both = pd.concat([a0, two[two["inlier"] == "b0"]])
    mean = main_table(both, class_counts={"toy_a": 3, "toy_b": 2}).set_index(
        ["dataset", "detector"]
    )
    assert mean.loc[("mean", "kde"), "ci_over"] == "omitted"
    assert mean.loc[("toy_a", "kde"), "ci_over"] == "test set"
    # with three seeds, the interval over seeds stands whatever one job lacks
    seeds = results[(results["dataset"] == "toy_b") & (results["fitset"] == "train")].copy()
    seeds = seeds[seeds["contamination"] == 0.0]
    seeds["auroc_interval_omitted"] = np.where(
        (seeds["seed"] == 0) & (seeds["inlier"] == "b0"), "a single inlier ...", ""
    )
    assert main_table(seeds).set_index("detector").loc["kde", "ci_over"] == "seeds"
