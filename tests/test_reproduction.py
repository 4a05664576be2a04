"""The verdict rule and docs/reproduction.md, generated from benchmarks/fullcell/."""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import pytest

from pipeline_lib.paper.reproduction import (
    FULLCELL,
    JPEG_SUMMARY,
    PAGE,
    build_page,
    cell_rows,
    main,
    paper_value,
    read_inputs,
    score_meaning,
)
from pipeline_lib.paper.verdict import VERDICTS, reproduction_verdict

REPO = Path(__file__).resolve().parents[1]
RUN = json.loads((REPO / FULLCELL / "h200-2026-11-27.json").read_text())


@pytest.mark.parametrize(
    ("ours", "paper", "paper_std", "ours_std", "expected"),
    [
        (96.7, 96.7, 0.1, None, "within"),
        (90.5, 90.0, 0.25, None, "within"),  # on the band's edge: 2 x 0.25 (exact in binary)
        (90.5, 90.0, 0.2, None, "above"),  # one seed: the band is 2 std_paper = 0.4
        (94.6, 96.7, 0.1, None, "below"),
        (90.5, 90.0, 0.2, 0.15, "within"),  # 2 sqrt(0.2^2 + 0.15^2) = 0.5
        (89.4, 90.0, 0.2, 0.15, "below"),
        (91.0, 90.0, float("nan"), None, "above"),  # a paper value without std: std 0
        (90.0, 90.0, float("nan"), None, "within"),
        (90.0, None, None, None, "no paper value"),
        (90.0, float("nan"), float("nan"), None, "no paper value"),
    ],
)
def test_verdict_on_hand_made_rows(ours, paper, paper_std, ours_std, expected) -> None:
    assert reproduction_verdict(ours, paper, paper_std, ours_std) == expected
    assert expected in VERDICTS


def test_verdict_not_comparable_and_bad_input() -> None:
    assert reproduction_verdict(96.7, 96.7, 0.1, comparable=False) == "not comparable"
    # Nothing to compare with beats another score.
    assert reproduction_verdict(96.7, None, None, comparable=False) == "no paper value"
    with pytest.raises(ValueError, match="finite"):
        reproduction_verdict(math.nan, 96.7, 0.1)
    with pytest.raises(ValueError, match=">= 0"):
        reproduction_verdict(96.0, 96.7, -0.1)


def test_paper_values_come_from_the_published_tables() -> None:
    assert paper_value("cifar10", "automobile", "rotnet", "kde") == (96.7, 0.1)
    assert paper_value("cifar10", "automobile", "rotnet", "rotation_classifier") == (91.2, 0.3)
    assert paper_value("cifar10", "automobile", "rotnet", "ocsvm") is None
    assert paper_value("cifar10", "automobile", "rotnet", None) is None
    assert paper_value("digits", "3", "rotnet", "kde") is None


def test_rotation_classifier_means_the_paper_score_only_after_the_rename() -> None:
    _, paper, same = score_meaning("rotation_classifier", ["kde", "rotation_classifier"])
    assert (paper, same) == ("rotation_classifier", False)  # then: the sum of log p
    keys = ["rotation_classifier", "rotation_log_p", "rotation_p0"]
    label, paper, same = score_meaning("rotation_classifier", keys)
    assert (paper, same) == ("rotation_classifier", True) and "sum_k p(" in label


def test_rows_of_the_measured_cell() -> None:
    rows = {row["detector"]: row for row in cell_rows(RUN, source="run.json")}
    assert rows.keys() == set(RUN["results"][0]["auroc"])
    kde = rows["kde"]
    assert kde["ours_mean"] == RUN["results"][0]["auroc"]["kde"] and kde["ours_std"] is None
    assert (kde["paper_mean"], kde["paper_std"], kde["verdict"]) == (96.7, 0.1, "below")
    assert rows["ocsvm"]["verdict"] == "no paper value"
    assert rows["rotation_classifier"]["verdict"] == "not comparable"  # sum of log p then
    assert kde["commit"] == RUN["commit"] and kde["seeds"] == [0]
    differences = "; ".join(kde["differences"])
    assert "JPEG" in differences and "bf16 autocast" in differences and "compiled" in differences
    assert "1 seed (paper 5)" in differences


def test_two_seeds_pool_and_a_short_run_is_not_comparable() -> None:
    run = copy.deepcopy(RUN)
    second = copy.deepcopy(run["results"][0]) | {"seed": 1}
    second["auroc"] = {**second["auroc"], "kde": 96.5}
    run["results"].append(second)
    (kde,) = [row for row in cell_rows(run, source="r") if row["detector"] == "kde"]
    assert kde["seeds"] == [0, 1]
    assert kde["ours_mean"] == pytest.approx((RUN["results"][0]["auroc"]["kde"] + 96.5) / 2)
    assert kde["ours_std"] == pytest.approx(abs(RUN["results"][0]["auroc"]["kde"] - 96.5) / 2**0.5)
    assert kde["verdict"] == "within"  # 95.55 vs 96.7: within 2 sqrt(1.35^2 + 0.1^2)
    run["config"]["train"]["epochs"] = 128
    (kde,) = [row for row in cell_rows(run, source="r") if row["detector"] == "kde"]
    assert kde["verdict"] == "not comparable"
    assert "128 training epochs (paper 2048)" in kde["differences"]


def test_page_is_up_to_date_with_the_files(tmp_path: Path) -> None:
    """docs/reproduction.md is what the generator makes of benchmarks/fullcell/ today."""
    out = tmp_path / "reproduction.md"
    assert main(["--root", str(REPO), "--out", str(out)]) == 0
    assert out.read_text() == (REPO / PAGE).read_text(), (
        "docs/reproduction.md is out of date: run python -m pipeline_lib.paper.reproduction"
    )
    assert main(["--root", str(REPO), "--check"]) == 0


def test_page_shows_the_pending_runs_and_the_kde_gap(tmp_path: Path) -> None:
    runs, pending, _ = read_inputs(REPO)
    page = build_page(runs, pending, None)
    assert "**Not run yet.**" in page
    assert "Paper: KDE 97.5 +- 0.3, OC-SVM 96.9 +- 0.2." in page  # rotation, from published
    assert page.count("\n| `h200-2026-11-27.json` |") == len(RUN["results"][0]["auroc"])
    summary = {
        "conclusion": "The data alone is unlikely to move the KDE by half a point.",
        "predicted_kde_change": {"central": 0.12, "low": -0.05, "high": 0.3},
        "command": "python benchmarks/jpeg_dose.py",
    }
    page = build_page(runs, pending, summary)
    assert "Not run yet" not in page
    assert summary["conclusion"] in page and "| AUC points | +0.12 | -0.05 | +0.30 |" in page
    # --check fails on a stale page and on a run added without regenerating.
    root = tmp_path / "repo"
    shutil.copytree(REPO / FULLCELL, root / FULLCELL)
    if (REPO / JPEG_SUMMARY).exists():  # the page's KDE-gap section reads it
        (root / JPEG_SUMMARY).parent.mkdir(parents=True)
        shutil.copy(REPO / JPEG_SUMMARY, root / JPEG_SUMMARY)
    (root / PAGE).parent.mkdir(parents=True)
    (root / PAGE).write_text((REPO / PAGE).read_text())
    assert main(["--root", str(root), "--check"]) == 0
    extra = copy.deepcopy(RUN)
    extra["results"][0]["seed"] = 1
    (root / FULLCELL / "h200-seed1.json").write_text(json.dumps(extra))
    assert main(["--root", str(root), "--check"]) == 1
    assert main(["--root", str(root)]) == 0
    assert "`h200-seed1.json`" in (root / PAGE).read_text()


def test_a_run_recorded_before_a_recipe_switch_lists_what_it_ran() -> None:
    """The H200 cell ran before epoch_order, init and momentum_form existed: its recorded
    config lacks them, so it ran the permutation order, torch's init and torch's momentum form.
    That is a known difference beside its commit, as its precision is; neither takes the
    verdict away."""
    rows = {row["detector"]: row for row in cell_rows(RUN, source="run")}
    differences = rows["kde"]["differences"]
    assert "recipe then: init torch (now init released)" in differences
    assert "recipe then: epoch_order permutation (now epoch_order released)" in differences
    assert "recipe then: momentum_form torch (now momentum_form released)" in differences
    assert not any("autocast on CUDA (paper: float32)" in d for d in differences)
    assert rows["kde"]["verdict"] == "below"

    current = copy.deepcopy(RUN)
    current["config"]["train"].update(
        epoch_order="released", init="released", momentum_form="released"
    )
    differences = cell_rows(current, source="run")[0]["differences"]
    assert not any(d.startswith("recipe then") for d in differences)
    # A recorded run that left the recipe on purpose is not comparable.
    current["config"]["train"]["init"] = "torch"
    assert {row["verdict"] for row in cell_rows(current, source="run")} == {
        "not comparable",
        "no paper value",
    }
