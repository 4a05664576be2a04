"""MVTec tables: group means per seed, then over seeds, beside the published numbers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pipeline_lib.data.mvtec import MVTEC_CATEGORIES, MVTEC_GROUPS, MVTEC_OBJECTS
from pipeline_lib.mvtec.tables import (
    format_per_category,
    format_summary,
    group_summary,
    mvtec_results_frame,
    paper_comparison_notes,
    per_category_table,
)
from pipeline_lib.paper.published import load_published


def _records() -> list[dict]:
    values = {  # (category, seed) -> image AUC of rotnet + KDE
        ("bottle", 0): 90.0,
        ("bottle", 1): 80.0,
        ("cable", 0): 70.0,
        ("cable", 1): 60.0,
        ("grid", 0): 50.0,
        ("grid", 1): 40.0,
    }
    groups = {"bottle": "object", "cable": "object", "grid": "texture"}
    return [
        {
            "category": category,
            "group": groups[category],
            "method": "rotnet",
            "detector": "kde",
            "seed": seed,
            "image_auroc": value,
            "pixel_auroc": value + 5 if category != "grid" else None,
            "aupro": None,
        }
        for (category, seed), value in values.items()
    ]


def _cell(values, label: str = "") -> str:
    """The main tables' cell for ``values``: mean ± std (ddof=1) [95 % t-interval, clipped];
    a t-interval covering all of [0, 100] is not shown (no test-set interval here)."""
    x = np.asarray(values, dtype=float)
    half = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
    low, high = np.clip([x.mean() - half, x.mean() + half], 0.0, 100.0)
    spread = f" ± {x.std(ddof=1):.1f}" if not label else " (n=1)"
    if (low, high) == (0.0, 100.0):
        return f"{x.mean():.1f}{spread}"
    return f"{x.mean():.1f}{spread} [{low:.1f}, {high:.1f}]" + (f" {label}" if label else "")


def test_frame_sorts_categories_in_mvtec_order():
    frame = mvtec_results_frame(list(reversed(_records())))
    assert frame["category"].tolist()[::2] == ["bottle", "cable", "grid"]
    with pytest.raises(ValueError, match="lack column"):
        mvtec_results_frame([{"category": "bottle"}])


def test_group_means_are_per_seed_then_over_seeds():
    summary = group_summary(mvtec_results_frame(_records())).set_index(["metric", "group"])
    obj = summary.loc[("image_auroc", "object")]
    # seed 0: (90 + 70) / 2 = 80, seed 1: 70 -> mean 75, std sqrt(50)
    assert obj["mean"] == pytest.approx(75.0) and obj["std"] == pytest.approx(np.sqrt(50.0))
    assert obj["n_categories"] == 2 and obj["n_seeds"] == 2
    # 2 of the paper's 10 object categories: not the paper's quantity, so no paper number
    assert summary["paper_mean"].isna().all() and summary["paper_std"].isna().all()
    assert summary.loc[("image_auroc", "all"), "mean"] == pytest.approx(65.0)
    assert summary.loc[("image_auroc", "texture"), "mean"] == pytest.approx(45.0)
    # no masks for the texture: its localisation row is left out, 'all' uses what exists
    assert ("pixel_auroc", "texture") not in summary.index
    assert summary.loc[("pixel_auroc", "all"), "mean"] == pytest.approx(80.0)
    assert "aupro" not in summary.index.get_level_values("metric")


def test_display_tables_have_the_paper_shape():
    frame = mvtec_results_frame(_records())
    summary = format_summary(group_summary(frame))
    assert summary.index[0] == "Detection on object"
    assert list(summary.columns) == ["RotNet + KDE"]  # a subset: no paper column at all
    # seeds 0 and 1 of the object group: (90 + 70) / 2 and (80 + 60) / 2
    assert summary.loc["Detection on object", "RotNet + KDE"] == _cell([80.0, 70.0])
    assert summary.loc["Detection on object", "RotNet + KDE"].startswith("75.0 ± 7.1 [")
    full = format_summary(group_summary(mvtec_results_frame(_all_categories())))
    assert list(full.columns) == ["RotNet + KDE", "RotNet + KDE (paper)"]
    assert full.loc["Detection on object", "RotNet + KDE (paper)"] == "85.9 ± 2.1"
    per_category = format_per_category(per_category_table(frame, metric="image_auroc"))
    # two seeds at 50 and 40: the t-interval covers all of [0, 100] and says nothing; with
    # no interval over the test set recorded, none is shown (never "[0.0, 100.0]")
    assert per_category.loc["grid (texture)", "RotNet + KDE"] == "45.0 ± 7.1"
    assert _cell([50.0, 40.0]) == "45.0 ± 7.1"
    pixel = format_per_category(per_category_table(frame, metric="pixel_auroc"))
    assert pixel.loc["grid (texture)", "RotNet + KDE"] == "n/a"


def test_one_seed_has_no_std():
    frame = mvtec_results_frame([r for r in _records() if r["seed"] == 0])
    table = per_category_table(frame, metric="image_auroc")
    assert table["std"].isna().all() and (table["n_seeds"] == 1).all()
    # no interval recorded for the job: none shown
    assert format_per_category(table).iloc[0, 0] == "90.0 (n=1)"
    # one seed of the object group's two categories (bottle 90, cable 70): too few for an
    # interval over categories, and no job interval recorded: none
    summary = group_summary(frame).set_index(["metric", "group"])
    assert summary.loc[("image_auroc", "object"), "ci_over"] == ""
    shown = format_summary(group_summary(frame)).loc["Detection on object", "RotNet + KDE"]
    assert shown == "80.0 (n=1)"


def test_one_seed_shows_each_metrics_interval_over_the_test_set():
    records = [
        r
        | {"auroc_low": r["image_auroc"] - 4.75, "auroc_high": r["image_auroc"] + 4.5}
        | (
            {"pixel_auroc_low": r["pixel_auroc"] - 2.0, "pixel_auroc_high": r["pixel_auroc"] + 1.0}
            if r["pixel_auroc"] is not None
            else {"pixel_auroc_low": None, "pixel_auroc_high": None}
        )
        for r in _records()
        if not r["seed"]
    ]
    frame = mvtec_results_frame(records)
    table = per_category_table(frame, metric="image_auroc")
    assert format_per_category(table).iloc[0, 0] == "90.0 (n=1) [85.2, 94.5] over the test set"
    assert (table["ci_over"] == "test set").all()
    pixel = per_category_table(frame, metric="pixel_auroc").set_index("category")
    assert (pixel.loc["bottle", "ci_low"], pixel.loc["bottle", "ci_high"]) == (93.0, 96.0)
    assert pixel.loc["grid", "ci_over"] == ""  # no masks: no pixel AUC, no interval
    # the object group of one seed, two categories: the mean of their intervals' ends
    summary = group_summary(frame).set_index(["metric", "group"])
    detection = summary.loc[("image_auroc", "object")]
    assert (detection["ci_low"], detection["ci_high"]) == (75.25, 84.5)
    assert detection["ci_over"] == "test set"
    localisation = summary.loc[("pixel_auroc", "object")]
    assert (localisation["ci_low"], localisation["ci_high"], localisation["ci_over"]) == (
        83.0,
        86.0,
        "test set",
    )


def test_a_single_good_or_defective_test_image_omits_every_metrics_interval():
    # bottle's test set had a single defective image: its job recorded why it has no image
    # AUC interval, and its pixel intervals (same images, same strata) are NaN
    reason = "the test split has 1 outlier(s) and 4 inlier(s); an interval over ..."
    records = []
    for r in _records():
        if r["seed"]:
            continue
        ends = {"auroc_low": r["image_auroc"] - 4.75, "auroc_high": r["image_auroc"] + 4.5}
        if r["pixel_auroc"] is not None:
            ends |= {"pixel_auroc_low": r["pixel_auroc"] - 2.0, "pixel_auroc_high": 99.0}
        if r["category"] == "bottle":
            ends = {"pixel_auroc_low": np.nan, "pixel_auroc_high": np.nan}
            ends["auroc_interval_omitted"] = reason
        records.append(r | ends)
    frame = mvtec_results_frame(records)
    shown = "90.0 (n=1) [no interval: a single inlier or outlier in the test set]"
    for metric in ("image_auroc", "pixel_auroc"):
        table = per_category_table(frame, metric=metric).set_index("category")
        bottle = table.loc["bottle"]
        assert bottle["ci_over"] == "omitted" and np.isnan(bottle["ci_low"])
        assert table.loc["cable", "ci_over"] == "test set"
    image = format_per_category(per_category_table(frame, metric="image_auroc"))
    assert image.loc["bottle (object)", "RotNet + KDE"] == shown
    cable = image.loc["cable (object)", "RotNet + KDE"]
    assert cable == "70.0 (n=1) [65.2, 74.5] over the test set"
    # the object group of one seed (bottle, cable): two categories reach the test-set rule,
    # and bottle's job cannot give its ends
    summary = group_summary(frame).set_index(["metric", "group"])
    assert summary.loc[("image_auroc", "object"), "ci_over"] == "omitted"
    assert summary.loc[("pixel_auroc", "object"), "ci_over"] == "omitted"
    assert summary.loc[("image_auroc", "texture"), "ci_over"] == "test set"
    texts = format_summary(group_summary(frame))
    assert texts.loc["Detection on object", "RotNet + KDE"] == (
        "80.0 (n=1) [no interval: a single inlier or outlier in the test set]"
    )


def _all_categories(extra: dict[str, str] | None = None) -> list[dict]:
    """One rotnet + KDE record per seed 0/1 of every MVTec category (and ``extra``)."""
    groups = {**MVTEC_GROUPS, **(extra or {})}
    return [
        {
            "category": category,
            "group": group,
            "method": "rotnet",
            "detector": "kde",
            "seed": seed,
            "image_auroc": 70.0 + index + seed,
            "pixel_auroc": None,
            "aupro": None,
        }
        for index, (category, group) in enumerate(groups.items())
        for seed in (0, 1)
    ]


def test_paper_means_only_beside_the_papers_categories():
    paper = load_published("mvtec_results").set_index(["metric", "inlier", "method", "detector"])
    full = group_summary(mvtec_results_frame(_all_categories())).set_index("group")
    for group in ("object", "texture", "all"):
        assert full.loc[group, "paper_mean"] == paper.loc[("auroc", group, "rotnet", "kde"), "mean"]
    assert paper_comparison_notes(mvtec_results_frame(_all_categories())) == []
    # the 15 categories plus the user's own object category 'screwdriver' (mvtec.paths)
    frame = mvtec_results_frame(_all_categories({"screwdriver": "object"}))
    mixed = group_summary(frame, own_categories=["screwdriver"]).set_index("group")
    assert np.isnan(mixed.loc["object", "paper_mean"]) and np.isnan(mixed.loc["all", "paper_mean"])
    assert (
        mixed.loc["texture", "paper_mean"]
        == paper.loc[("auroc", "texture", "rotnet", "kde"), "mean"]
    )
    notes = paper_comparison_notes(frame, own_categories=["screwdriver"])
    assert len(notes) == 2 and all("your own category screwdriver" in n for n in notes)
    assert notes[0].startswith("No paper number beside 'object'")


def test_own_category_alone_gets_per_category_numbers_and_a_reason():
    records = [r for r in _all_categories({"bottle": "object"}) if r["category"] == "bottle"]
    frame = mvtec_results_frame(records)
    # named like an MVTec category, but read from mvtec.paths: the user's own data
    summary = group_summary(frame, own_categories=["bottle"])
    assert summary["paper_mean"].isna().all()
    assert list(format_summary(summary).columns) == ["RotNet + KDE"]
    notes = paper_comparison_notes(frame, own_categories=["bottle"])
    assert [n.split(":")[0] for n in notes] == [
        "No paper number beside 'object'",
        "No paper number beside 'all'",
    ]
    # named as the user's data, not counted as one of the paper's categories
    assert "your own category bottle and none of the paper's" in notes[0]
    assert f"all {len(MVTEC_OBJECTS)} MVTec AD object categories" in notes[0]
    assert f"all {len(MVTEC_CATEGORIES)} MVTec AD categories" in notes[1]
    assert "per_category" in notes[0]
    subset = mvtec_results_frame(_records())
    assert "2 of the paper's 10 categories (missing: capsule," in paper_comparison_notes(subset)[0]
    per_category = format_per_category(per_category_table(frame, metric="image_auroc"))
    assert per_category.loc["bottle (object)", "RotNet + KDE"] == _cell([70.0, 71.0])
