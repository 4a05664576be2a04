"""Every study of the paper at toy scale, really run by Snakemake (tests/configs/studies_toy.yaml).

One module-scoped run; each test reads its outputs: every trained representation's falling
loss, detector rows, main table and training curves in MLflow; the tables and figures of
every study, the Pearson r of the uniformity study recomputed from the jobs' own numbers,
the MLflow parent run of every study, and the summary pages, complete and with results
missing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from pipeline_lib.paper.published import display_name
from pipeline_lib.registry import ROTATION_DETECTORS
from pipeline_lib.results.tidy_table import load_results_csv
from tests.workflow.conftest import REPO, run_snakemake

pytestmark = pytest.mark.workflow

CONFIG = REPO / "tests/configs/studies_toy.yaml"
TOY = yaml.safe_load(CONFIG.read_text())
TRAINED = ["rotnet", "rotation", "denoising", "contrastive", "contrastive_da"]
MAIN_SPLIT = "digits/0/contam0/seed0"
STUDIES = [
    "main",
    *(entry["study"].get("name", entry["study"]["kind"]) for entry in TOY["studies"]),
]


#: Trained rows whose loss the toy's 9 SGD steps move by less than its batch-to-batch noise:
#: plain contrastive learning under the released view augmentation (additive, unclamped
#: colour jitter) on 16-image batches. tests/ssl/test_train.py checks that its loss falls at
#: a learnable size; here its job must still train, save and clean up like the others.
NOISY_AT_TOY_SCALE = ("contrastive",)


@pytest.mark.parametrize("method", TRAINED)
def test_each_method_lowers_its_loss(studies_run: Path, method: str) -> None:
    folder = studies_run / MAIN_SPLIT / method
    history = json.loads((folder / "train_history.json").read_text())
    losses = [record["loss"] for record in history["history"]]
    assert len(losses) == TOY["train"]["epochs"]
    assert np.isfinite(losses).all()
    if method not in NOISY_AT_TOY_SCALE:
        assert losses[-1] < losses[0]
    # The finished job removes its resumable checkpoint; the model file stays.
    assert not (folder / "checkpoint.pt").exists()
    assert (folder / "model.pt").stat().st_size > 10_000


def test_every_method_and_detector_of_the_main_grid_has_a_result(studies_run: Path) -> None:
    assert set(TRAINED) < set(TOY["methods"])
    results = load_results_csv(studies_run / "summary/results.csv")
    pairs = set(zip(results["method"], results["detector"], strict=True))
    expected = {(method, detector) for method in TOY["methods"] for detector in TOY["detectors"]}
    expected |= {
        (method, detector) for method in ("rotnet", "rotation") for detector in ROTATION_DETECTORS
    }
    assert pairs == expected
    assert results["auroc"].between(0, 100).all()
    table = (studies_run / "summary/main_table.md").read_text()
    assert "| RotNet " in table
    assert all(display_name("detector", d) in table for d in ROTATION_DETECTORS)


def test_training_curves_reach_mlflow(studies_run: Path) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{studies_run / 'mlflow/mlflow.db'}")
    experiment = client.get_experiment_by_name(TOY["experiment"])
    runs = client.search_runs(
        [experiment.experiment_id], filter_string="tags.`droc.kind` = 'training'"
    )
    by_key = {run.data.tags["droc.result_key"]: run for run in runs}
    for method in TRAINED:
        run = by_key[f"train:{MAIN_SPLIT}/{method}"]
        losses = client.get_metric_history(run.info.run_id, "loss")
        assert [metric.step for metric in losses] == list(range(1, TOY["train"]["epochs"] + 1))


def test_every_study_writes_its_table_and_figures(studies_run: Path) -> None:
    assert len(STUDIES) == 11
    for name in STUDIES:
        folder = studies_run / "studies" / name
        # The main grid's human tables are the main table, written once under summary/.
        human = folder / name if name != "main" else studies_run / "summary/main_table"
        for suffix in (".md", ".tex", ".html"):
            assert human.with_suffix(suffix).stat().st_size > 0, (name, suffix)
            assert (folder / f"{name}{suffix}").exists() == (name != "main"), (name, suffix)
        assert (folder / f"{name}.csv").stat().st_size > 0, name
        figures = sorted(path.name for path in (folder / "figures").glob("*.png"))
        manifest = json.loads((folder / f"{name}.json").read_text())
        assert figures == [f"{name}_{key}.png" for key in manifest["figures"]], name
        # The main grid (digits only) has no published cell to chart; every study does.
        assert figures or name == "main", f"study {name} drew no figure"
        assert all((folder / "figures" / png).read_bytes()[:4] == b"\x89PNG" for png in figures)
        results = pd.read_csv(folder / "results.csv")
        expected = pd.read_csv(folder / "expected.csv")
        # A complete run: every result the grid asks for was found.
        assert len(results) == len(expected) > 0, name
        assert results["auroc"].between(0, 100).all()


def test_variants_change_what_is_trained(studies_run: Path) -> None:
    split = studies_run / "digits/0/contam0/seed0"
    histories = {
        name: json.loads((split / name / "train_history.json").read_text())
        for name in ("contrastive_bs4", "contrastive", "contrastive_da_n16")
    }
    assert histories["contrastive_bs4"]["arguments"]["batch_size"] == 4
    assert histories["contrastive"]["arguments"]["batch_size"] == 16
    assert histories["contrastive_bs4"]["method"] == "contrastive"
    # DA batches draw instances of the training set expanded by the 3 rotations (released
    # code): 16 of the 48 images give 64 instances, 4 steps per epoch at batch 16, against
    # 12 for all 48.
    assert histories["contrastive_da_n16"]["history"][0]["steps"] == 4 * 16 // 16
    default = json.loads((split / "contrastive_da" / "train_history.json").read_text())
    assert default["history"][0]["steps"] == 4 * 48 // 16


def test_uniformity_pearson_r_is_computed_from_the_jobs(studies_run: Path) -> None:
    folder = studies_run / "studies/uniformity"
    results = pd.read_csv(folder / "results.csv")
    table = pd.read_csv(folder / "uniformity.csv")
    g = results[results["space"] == "g"]
    # The main grid's contrastive row has no batch-size override: it is the study's
    # default_batch_size point.
    study = next(
        entry["study"] for entry in TOY["studies"] if entry["study"]["kind"] == "uniformity"
    )
    g = g.fillna({"batch_size": float(study["options"]["default_batch_size"])})
    # One class, one seed: a point per batch size (the study's correlation_batch_sizes).
    points = g.groupby("batch_size").agg(auroc=("auroc", "mean"), mmd=("mmd", "mean"))
    assert len(points) == 3 and points["mmd"].gt(0).all()
    ours = np.corrcoef(np.log(points["mmd"]), points["auroc"])[0, 1]
    reported = table.loc[table["quantity"] == "pearson_r_g", "mean"].item()
    assert reported == pytest.approx(ours, abs=1e-9)
    # The MMD comes from each model's own uniformity.json.
    model = studies_run / "digits/0/contam0/seed0/contrastive_bs8"
    mmd = json.loads((model / "uniformity.json").read_text())["mmd"]
    assert points.loc[8.0, "mmd"] == pytest.approx(mmd)


def test_g_space_of_every_depth_is_the_128_d_projection(studies_run: Path) -> None:
    results = pd.read_csv(studies_run / "studies/head_depth/results.csv")
    by_space = results.pivot_table(index="method", columns="space", values="auroc")
    assert {"contrastive_depth0", "contrastive"} <= set(by_space.index)
    assert by_space[["f", "g"]].notna().all().all()
    # Depth 0 is the released [512 x 0, 128]: one Linear to 128, not the identity, so the
    # detectors on g(f) see a 128-d projection of f (64-d at the toy's width 8); the
    # default depth 2 (the main grid's contrastive row) ends in the same 128-d layer.
    split = studies_run / "digits/0/contam0/seed0"
    for name in ("contrastive_depth0", "contrastive"):
        with np.load(split / name / "features.npz") as features:
            assert features["f_train"].shape[1] == 64
            assert features["g_train"].shape[1] == 128


def test_every_study_has_an_mlflow_parent_run(studies_run: Path) -> None:
    from mlflow.tracking import MlflowClient

    logged = json.loads((studies_run / "mlflow/logged.json").read_text())
    assert set(logged["studies"]) == set(STUDIES)
    client = MlflowClient(f"sqlite:///{studies_run / 'mlflow/mlflow.db'}")
    experiment = client.get_experiment_by_name("droc-studies-toy")
    runs = client.search_runs([experiment.experiment_id], max_results=5000)
    parents = {r.data.tags.get("study") for r in runs if r.data.tags.get("droc.kind") == "summary"}
    assert set(STUDIES) <= parents
    for name in STUDIES:
        expected = len(pd.read_csv(studies_run / f"studies/{name}/results.csv"))
        assert logged["studies"][name]["created"] + logged["studies"][name]["unchanged"] == expected


def test_summary_page_lists_every_study(studies_run: Path) -> None:
    page = (studies_run / "summary/index.md").read_text()
    for name in STUDIES:
        assert name in page
    html = (studies_run / "summary/index.html").read_text()
    assert "<html" in html.lower() and "figures/" in html
    # The main study links the one main table instead of a copy of its own.
    assert "main_table.tex" in page and "studies/main/main.tex" not in page


def test_partial_summary_marks_missing_results(studies_run: Path, tmp_path: Path) -> None:
    """A results folder with a few jobs missing: the summary says so instead of averaging."""
    partial = tmp_path / "partial"
    # The outputs, without the run's Snakemake records (.snakemake/)
    shutil.copytree(studies_run, partial, ignore=shutil.ignore_patterns(".snakemake"))
    removed = sorted((partial / "digits/0/contam0.1/seed0/rotnet").rglob("result.json"))
    assert removed
    for path in removed:
        path.unlink()
    run_snakemake(
        partial,
        "partial_summary",
        "--cores",
        "1",
        "--configfile",
        str(CONFIG),
        "--forcerun",
        "partial_summary",
    )
    contamination = pd.read_csv(partial / "summary/partial/contamination/contamination.csv")
    assert contamination["n_missing"].sum() > 0
    page = (partial / "summary/partial/index.md").read_text()
    assert "missing" in page.lower()
    # Nothing was recomputed: the removed results are still absent.
    assert not any(path.exists() for path in removed)
