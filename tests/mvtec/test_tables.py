"""MVTec tables: group means per seed, then over seeds, beside the published numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline_lib.mvtec_tables import (
    format_per_category,
    format_summary,
    group_summary,
    mvtec_results_frame,
    per_category_table,
)


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
    assert obj["paper_mean"] == 85.9 and obj["paper_std"] == 2.1  # RotNet + KDE, paper
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
    assert list(summary.columns) == ["RotNet + KDE", "RotNet + KDE (paper)"]
    assert summary.loc["Detection on object", "RotNet + KDE"] == "75.0 ± 7.1"
    assert summary.loc["Detection on object", "RotNet + KDE (paper)"] == "85.9 ± 2.1"
    per_category = format_per_category(per_category_table(frame, metric="image_auroc"))
    assert per_category.loc["grid (texture)", "RotNet + KDE"] == "45.0 ± 7.1"
    pixel = format_per_category(per_category_table(frame, metric="pixel_auroc"))
    assert pixel.loc["grid (texture)", "RotNet + KDE"] == "n/a"


def test_one_seed_has_no_std():
    frame = mvtec_results_frame([r for r in _records() if r["seed"] == 0])
    table = per_category_table(frame, metric="image_auroc")
    assert table["std"].isna().all() and (table["n_seeds"] == 1).all()
    assert format_per_category(table).iloc[0, 0] == "90.0"
    assert isinstance(group_summary(frame), pd.DataFrame)
