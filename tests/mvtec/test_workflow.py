"""The MVTec DAG end to end with real Snakemake, on a synthetic category with easy defects.

One run covers a user category given by path (with masks), a frozen and a trained
representation, RotNet's own classifier as a patch detector, tables, the heat-map figure,
MLflow, and the deployment of the RotNet + KDE cell with its anomaly maps, registered and
then served over HTTP by ``mlflow models serve`` (one start, one request). The explanation
rule runs on hand-made inputs of a tiny digits sweep. Sizes are cut for CI (48x48 images,
16x16 patches, stride 4, width 4, one epoch); the paper's constants are the config
defaults. Categories without masks and categories found by name are covered by
tests/mvtec/test_reader.py and test_patches.py.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from mlflow.tracking import MlflowClient
from PIL import Image

from pipeline_lib.data import load_dataset
from pipeline_lib.data.mvtec import category_from_arrays
from pipeline_lib.data.split import one_class_split, save_split
from pipeline_lib.deploy.package_kinds import load_package_folder
from pipeline_lib.deploy.serving import decode_map
from pipeline_lib.detection.metrics import auroc
from pipeline_lib.models.checkpoints import save_representation
from pipeline_lib.models.embed import embed_dataset, embed_split
from pipeline_lib.models.representation import build_representation
from pipeline_lib.mvtec.tables import INTERVAL_FIELDS
from pipeline_lib.paper.published import display_name
from pipeline_lib.runtime.io import load_npz, save_image_dataset, save_npz
from tests.deploy.conftest import png_bytes
from tests.mvtec.conftest import write_category
from tests.serving import post_json, served_model
from tests.ssl.tiny_runs import keyword_train
from tests.workflow.conftest import ONE_THREAD_PER_JOB, REPO, run_snakemake

pytestmark = pytest.mark.workflow

SUMMARY = "summary/mvtec"
#: The kinds of MLflow run a sweep has (pipeline_lib.tracking.mlflow_store).
KINDS = ("summary", "training", "job")


@pytest.fixture(scope="module")
def mvtec_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("mvtec_run")
    widget = write_category(workdir / "data", "widget", size=48, n_train=8, n_good=4, seed=1)
    config = {
        "experiment": "droc-mvtec-tiny",
        "methods": ["resnet18_random", "rotnet"],
        "seeds": [0],
        "embed": {"width": 4},
        "train": {"epochs": 1, "batch_size": 16, "checkpoint_every": 1},
        "mvtec": {
            "categories": ["widget"],
            "paths": {"widget": str(widget)},
            "groups": {"widget": "object"},
            "image_size": 48,
            "patches": {"size": 16, "stride": 4, "per_image": 4},
            "embed": {"batch_size": 512, "max_fit_patches": 400},
            "localize": {"sigma": 4.0},
            "figures": {"n_images": 2},
        },
        "tracking": {"enabled": True, "timeout_s": 3},
        "deploy": {
            "dataset": "mvtec",
            "inlier": "widget",
            "method": "rotnet",
            "detector": "kde",
            "registered_name": "droc-widget",
            "target_fpr": 0.1,
        },
    }
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    run_snakemake(workdir, "--cores", "2", *ONE_THREAD_PER_JOB, "--configfile", str(path))
    return workdir


def test_every_method_and_detector_has_a_result(mvtec_run):
    results = pd.read_csv(mvtec_run / SUMMARY / "results.csv")
    rows = set(zip(results["category"], results["method"], results["detector"], strict=True))
    assert rows == {
        ("widget", "resnet18_random", "kde"),
        ("widget", "rotnet", "kde"),
        ("widget", "rotnet", "rotation_classifier"),
    }
    assert (results["group"] == "object").all() and (results["grid"] == 9).all()  # (48-16)/4+1


def test_easy_defects_are_detected_and_localised_better_than_chance(mvtec_run):
    results = pd.read_csv(mvtec_run / SUMMARY / "results.csv").set_index(["method", "detector"])
    for method in ("resnet18_random", "rotnet"):
        widget = results.loc[(method, "kde")]
        assert widget["image_auroc"] > 75, method
        assert widget["pixel_auroc"] > 75, method
        assert 0 < widget["aupro"] <= 100 and widget["n_fit"] == 400
    assert results["has_masks"].all()


def test_tables_and_heat_map_are_written(mvtec_run):
    summary = pd.read_csv(mvtec_run / SUMMARY / "summary.csv", index_col=0)
    assert {"Detection on object", "Detection on all", "Localization on object"} <= set(
        summary.index
    )
    # "widget" is the user's own category: the paper's 10-object means are not comparable,
    # so no paper column, and the Markdown table says why above it.
    assert not [column for column in summary.columns if column.endswith("(paper)")]
    note = (mvtec_run / SUMMARY / "summary.md").read_text()
    assert "widget" in note and "per category" in note
    per_category = pd.read_csv(mvtec_run / SUMMARY / "per_category_aupro.csv", index_col=0)
    assert list(per_category.index) == ["widget (object)"]
    # one seed of one category: each cell of every metric carries its job's interval over
    # the test set, in the main tables' format (none where the bootstrap has zero width, as
    # for a perfect detector: an interval [100.0, 100.0] says nothing)
    results = pd.read_csv(mvtec_run / SUMMARY / "results.csv")
    for metric, (low, high) in INTERVAL_FIELDS.items():
        table = pd.read_csv(mvtec_run / SUMMARY / f"per_category_{metric}.csv", index_col=0)
        for column, cell in table.loc["widget (object)"].items():
            method, detector = column.split(" + ")
            job = results[
                (results["method"].map(lambda m: display_name("method", m)) == method)
                & (results["detector"].map(lambda d: display_name("detector", d)) == detector)
            ].iloc[0]
            assert job[low] <= job[high], (metric, column)
            if job[low] < job[high]:
                pattern = r"\d+\.\d \(n=1\) \[\d+\.\d, \d+\.\d\] over the test set"
            else:
                pattern = r"\d+\.\d \(n=1\)"
            assert re.fullmatch(pattern, cell), (metric, cell)
    assert (results["auroc_low"] <= results["image_auroc"]).all()
    assert not summary.apply(lambda c: c.str.contains(r"\[0\.0, 100\.0\]")).any(axis=None)
    # what ran, from the models' own records: RotNet trained on the CPU, in float32; and the
    # spread's one ddof, stated once
    for name in ("summary", "per_category_aupro"):
        text = (mvtec_run / SUMMARY / f"{name}.md").read_text()
        assert "Training: float32 on the CPU (1 model)." in text
        assert "autocast" not in text
        assert text.count("ddof") == 1 and "ddof=1" in text
    with Image.open(mvtec_run / SUMMARY / "heatmaps" / "widget.png") as image:
        pixels = np.asarray(image.convert("RGB"))
    assert pixels.shape[0] > 200 and pixels.std() > 10  # drawn, not blank


def test_results_reach_mlflow_features_are_temporary_and_a_rerun_does_nothing(mvtec_run):
    logged = yaml.safe_load((mvtec_run / "mlflow/mvtec_logged.json").read_text())
    assert logged["status"] == "logged" and logged["created"] == 3 + 1  # 3 jobs, 1 training
    client = MlflowClient(tracking_uri=f"sqlite:///{mvtec_run / 'mlflow/mlflow.db'}")
    runs = client.search_runs(
        [logged["experiment_id"]], filter_string=f"tags.`droc.sweep` = '{logged['sweep']}'"
    )
    assert {run.data.tags["benchmark"] for run in runs} == {"mvtec"} and len(runs) == 5
    kinds = {kind: [r for r in runs if r.data.tags["droc.kind"] == kind] for kind in KINDS}
    (parent,), (training,) = kinds["summary"], kinds["training"]
    assert logged["sweep"].endswith("-mvtec")
    assert parent.info.run_name == f"droc-mvtec-tiny-{logged['sweep']}"
    assert training.info.run_name == "train mvtec/widget/seed0/rotnet"
    assert {"loss", "lr"} <= set(training.data.metrics)
    jobs = {run.info.run_name: run for run in kinds["job"]}
    assert set(jobs) == {
        f"mvtec/widget/0.0/0/{method}/train/{detector}"
        for method, detector in [
            ("resnet18_random", "kde"),
            ("rotnet", "kde"),
            ("rotnet", "rotation_classifier"),
        ]
    }
    kde = jobs["mvtec/widget/0.0/0/rotnet/train/kde"]
    assert kde.data.params["inlier"] == "widget" and kde.data.params["detector"] == "kde"
    assert {"image_auroc", "pixel_auroc", "aupro", "n_fit"} <= set(kde.data.metrics)
    artifacts = {item.path for item in client.list_artifacts(parent.info.run_id, "mvtec")}
    artifacts |= {item.path for item in client.list_artifacts(parent.info.run_id, "heatmaps")}
    assert {"mvtec/results.csv", "mvtec/summary.md", "heatmaps/widget.png"} <= artifacts
    assert not list((mvtec_run / "mvtec").rglob("patch_features.npz"))
    again = run_snakemake(
        mvtec_run, "--cores", "1", "-n", "--configfile", str(mvtec_run / "config.yaml")
    )
    assert "Nothing to be done" in again.stdout + again.stderr


def test_the_deployed_cell_is_registered_and_scores_as_the_benchmark(mvtec_run):
    record = yaml.safe_load((mvtec_run / "deploy/droc-widget/deployed.json").read_text())
    assert record["registry"]["status"] == "registered"
    assert record["registry"]["registered_uri"] == "models:/droc-widget/1"
    assert record["cell"] == {
        "dataset": "mvtec",
        "inlier": "widget",
        "method": "rotnet",
        "detector": "kde",
        "seed": 0,
        "contamination": 0.0,
    }
    metrics = record["metrics"]
    results = pd.read_csv(mvtec_run / SUMMARY / "results.csv").set_index(["method", "detector"])
    recorded = results.loc[("rotnet", "kde")]
    assert metrics["image_auroc_recorded"] == pytest.approx(recorded["image_auroc"])
    # Same fit patches (seeded subset of 400), same test images: the benchmark's AUCs.
    assert metrics["image_auroc"] == pytest.approx(recorded["image_auroc"], abs=1e-6)
    assert metrics["pixel_auroc"] == pytest.approx(recorded["pixel_auroc"], abs=1e-3)
    assert metrics["n_fit_patches"] == 400
    package = yaml.safe_load((mvtec_run / "deploy/droc-widget/package/package.json").read_text())
    assert package["kind"] == "patch" and package["anomaly_map"]["size"] == [48, 48]


def test_the_served_cell_answers_with_the_package_scores_and_maps(mvtec_run):
    """One server start, one request: the test images as PNG rows and a corrupt one."""
    category = category_from_arrays(load_npz(mvtec_run / "mvtec/widget/category.npz"))
    images, names = category.test_images, list(category.test_files)
    records = [
        {"name": name, "image": base64.b64encode(png_bytes(image)).decode()}
        for name, image in zip(names, images, strict=True)
    ]
    records.insert(1, {"name": "broken", "image": base64.b64encode(b"\x89PNG\r\n").decode()})
    tracking_uri = f"sqlite:///{mvtec_run / 'mlflow/mlflow.db'}"
    with served_model("models:/droc-widget/1", tracking_uri=tracking_uri, workdir=mvtec_run) as url:
        status, answer = post_json(f"{url}/invocations", {"dataframe_records": records})
    assert status == 200, answer
    rows = answer["predictions"]
    assert [row["name"] for row in rows] == [names[0], "broken", *names[1:]]
    broken = rows.pop(1)
    assert "image" in broken["error"] and broken["score"] is None
    assert broken["anomaly_map"] is None and broken["is_anomaly"] is None
    assert [row["error"] for row in rows] == [""] * len(images)

    package = load_package_folder(mvtec_run / "deploy/droc-widget/package")
    expected = package.score(images)
    served = np.array([row["score"] for row in rows])
    maps = np.stack([decode_map(row["anomaly_map"]) for row in rows])
    size = package.image_size
    assert maps.shape == (len(images), size, size) == expected.maps.shape
    assert maps.dtype == np.float32
    print(
        f"served vs in-process over {len(images)} images: scores max |diff| "
        f"{np.max(np.abs(served - expected.scores)):.3g}, maps max |diff| "
        f"{np.max(np.abs(maps - expected.maps)):.3g}"
    )
    # Equal here (max |diff| 0); the tolerance allows the server's torch another thread count
    # than this process's one, which may change float32 summation order.
    np.testing.assert_allclose(served, expected.scores, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(maps, expected.maps, rtol=1e-5, atol=1e-6)
    flags = [row["is_anomaly"] for row in rows]
    assert flags == list(served > package.threshold) == list(expected.is_anomaly)
    record = yaml.safe_load((mvtec_run / "deploy/droc-widget/deployed.json").read_text())
    assert auroc(served, category.test_labels) == pytest.approx(
        record["metrics"]["image_auroc"], abs=1e-9
    )


def _explain_inputs(workdir: Path) -> None:
    """The files the explanation rule reads, made in-process (a tiny digits sweep)."""
    dataset = load_dataset("digits")
    keep_train = np.flatnonzero(dataset.train_labels == 0)[:32]
    keep_test = np.concatenate([np.flatnonzero(dataset.test_labels == k)[:3] for k in (0, 1)])
    dataset = type(dataset)(
        name="digits",
        train_images=dataset.train_images[keep_train],
        train_labels=dataset.train_labels[keep_train],
        test_images=dataset.test_images[keep_test],
        test_labels=dataset.test_labels[keep_test],
        class_names=dataset.class_names,
    )
    save_image_dataset(workdir / "digits/dataset.npz", dataset)
    split = one_class_split(dataset.train_labels, dataset.test_labels, inlier=0, seed=0)
    folder = workdir / "digits/0/contam0/seed0"
    folder.mkdir(parents=True)
    save_split(folder / "split.npz", split)
    torch.manual_seed(0)
    model, _ = keyword_train(
        "rotnet", dataset.train_images[split.train_index], seed=0, epochs=1, batch_size=16, width=4
    )
    save_representation(folder / "rotnet/model.pt", model, method="rotnet", config_dict={})
    save_npz(folder / "rotnet/features.npz", embed_split(model, dataset, split.train_index))
    frozen = build_representation("resnet18_random", seed=0, width=4)
    save_npz(
        workdir / "digits/_frozen/resnet18_random/seed0/features.npz",
        embed_dataset(frozen, dataset),
    )


def test_explanation_figure_has_the_paper_columns(tmp_path):
    _explain_inputs(tmp_path)
    config = {
        "datasets": {"digits": {"classes": ["0"]}},
        "detectors": {"kde": {}},
        "methods": ["resnet18_random", "rotnet"],
        "seeds": [0],
        "embed": {"width": 4},
        "explain": {"dataset": "digits", "n_images": 2, "ig_steps": 16, "baseline": "mean"},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    target = "summary/explanations/digits/0.png"
    # Only this rule: its inputs are the hand-made files above.
    run_snakemake(
        tmp_path,
        target,
        "--cores",
        "1",
        "--configfile",
        str(path),
        "--allowed-rules",
        "explain_detectors",
        "--set-threads",
        "explain_detectors=1",
    )
    assert (tmp_path / target).stat().st_size > 10_000
    with np.load(tmp_path / "summary/explanations/digits/0.npz") as saved:
        columns = saved["columns"].tolist()
        heatmaps, gaps, scores = saved["heatmaps"], saved["completeness_gaps"], saved["scores"]
        test_index, baseline_scores = saved["test_index"], saved["baseline_scores"]
    assert columns == [
        "IG: ResNet-18 (random) + KDE",
        "IG: RotNet + KDE",
        "IG: RotNet + rotation classifier",
        "GradCAM: ResNet-18 (random) + KDE",
        "GradCAM: RotNet + KDE",
        "GradCAM: RotNet + rotation classifier",
    ]
    assert heatmaps.shape == (2, 6, 32, 32) and (heatmaps.max(axis=(2, 3)) > 0).all()
    assert set(test_index.tolist()) <= {3, 4, 5}  # the explained images are outliers (1s)
    assert gaps.shape == scores.shape == baseline_scores.shape == (3, 2)
    assert np.isfinite(gaps).all() and np.isfinite(scores).all()


@pytest.mark.parametrize(
    ("config", "jobs"),
    [
        (
            "config/mvtec.yaml",
            # 15 categories x 5 seeds x 4 methods; the RotNet and rotation prediction jobs
            # also score with the rotation classifier
            {
                "prepare_mvtec_category": 15,
                "train_patch_representation": 300,
                "embed_patches": 300,
                "score_patches": 150,
                "score_patches_and_rotation_classifier": 150,
                "plot_mvtec_heatmaps": 15,
            },
        ),
        (
            "config/mvtec_bottle_reduced.yaml",
            {
                "prepare_mvtec_category": 1,
                "train_patch_representation": 5,
                "embed_patches": 6,
                "score_patches": 4,
                "score_patches_and_rotation_classifier": 2,
                "plot_mvtec_heatmaps": 1,
            },
        ),
    ],
)
def test_shipped_mvtec_configs_plan_their_jobs(tmp_path, config, jobs):
    result = run_snakemake(tmp_path, "-n", "--configfile", str(REPO / config))
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, flags=re.MULTILINE))
    assert {rule: int(counts.get(rule, 0)) for rule in jobs} == jobs
    assert int(counts["make_mvtec_tables"]) == 1
