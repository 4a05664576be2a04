"""The tiny config through the real DAG: splits, features, detectors, tables, MLflow, report."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient
from scipy import stats

from pipeline_lib.paper.protocol import data_notes
from pipeline_lib.results.tidy_table import load_results_csv
from tests.workflow.conftest import REPO, relog_to_mlflow, run_snakemake

pytestmark = pytest.mark.workflow

TINY = yaml.safe_load((REPO / "tests/configs/tiny.yaml").read_text())
N_CLASSES = len(TINY["datasets"]["digits"]["classes"])
N_JOBS = (
    N_CLASSES
    * len(TINY["splits"]["contamination"])
    * len(TINY["seeds"])
    * len(TINY["methods"])
    * (1 + len(TINY["splits"]["clean_inliers"]))
    * len(TINY["detectors"])
)


def test_every_job_leaves_a_result(tiny_run: Path) -> None:
    results = load_results_csv(tiny_run / "summary/results.csv")
    assert len(results) == N_JOBS
    keys = ["inlier", "contamination", "seed", "method", "fitset", "detector"]
    assert not results.duplicated(keys).any()
    assert results["auroc"].between(0, 100).all()
    # every job keeps its AUC's interval over the test set, around its AUC
    assert (results["auroc_low"] <= results["auroc"]).all()
    assert (results["auroc"] <= results["auroc_high"]).all()
    assert (results["auroc_se_delong"] >= 0).all()
    clean = {f"clean{n}" for n in TINY["splits"]["clean_inliers"]}
    assert set(results["fitset"]) == {"train", *clean}
    assert set(results["inlier"]) == {"0", "8"}


def test_local_jobs_ran_in_warm_workers_that_stopped_with_the_run(tiny_run: Path) -> None:
    """Every script job of the run was forked from the run's warm server, exited 0, and the
    server and its socket are gone (pipeline_lib/runtime/warm_jobs.py)."""
    served = re.findall(
        r"^ran tmp\w+\.(\w+)\.py \(pid \d+\): exit (\d+)$",
        "".join(log.read_text() for log in (tiny_run / ".snakemake/log").glob("warm_jobs.*.log")),
        flags=re.MULTILINE,
    )
    assert {code for _, code in served} == {"0"}
    detector_jobs = list((tiny_run / "benchmarks/score_detectors").rglob("*.tsv"))
    assert len(detector_jobs) == N_JOBS // len(TINY["detectors"])
    assert sum(script == "score_detectors" for script, _ in served) == len(detector_jobs)
    assert {"prepare_split", "embed_frozen_dataset", "collect_results"} <= {s for s, _ in served}
    servers = [
        entry
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit()
        and b"pipeline_lib.runtime.warm_jobs" in _read(entry / "cmdline")
        and str(tiny_run) in str(_cwd(entry))
    ]
    assert servers == []


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _cwd(entry: Path) -> Path | None:
    try:
        return (entry / "cwd").readlink()
    except OSError:
        return None


def test_data_provenance_is_recorded_and_stated_only_beside_published_numbers(
    tiny_run: Path,
) -> None:
    record = json.loads((tiny_run / "digits/data_provenance.json").read_text())
    # Digits ship with scikit-learn: no file under the data root, no official checksums.
    assert record["dataset"] == "digits" and record["official"] == "unknown"
    assert (
        record["files"] == [] and record["reason"] == "no official checksums are known for digits"
    )
    # the data set as the pipeline holds it: its splits' sizes and the image size
    with np.load(tiny_run / "digits/dataset.npz") as cache:
        assert record["n_train"] == len(cache["train_images"])
        assert record["n_test"] == len(cache["test_images"])
        assert record["image_size"] == list(cache["train_images"].shape[1:3]) == [32, 32]
    note = (
        "Data: digits files are not checked against an official release (no official "
        "checksums are known for digits)."
    )
    assert data_notes([record]) == [note]
    # digits has no published number: the note qualifies nothing and stands in no table
    for table in ("main_table", "per_class/digits"):
        for suffix in (".md", ".html"):
            text = (tiny_run / f"summary/{table}{suffix}").read_text()
            assert note not in text and "Reproduction: nothing to compare" in text


def test_raw_pixels_separate_digits(tiny_run: Path) -> None:
    # Digit 0 is easy to tell from the other digits even on raw pixels with kNN / KDE.
    results = load_results_csv(tiny_run / "summary/results.csv")
    easy = results.query("inlier == '0' and method == 'raw' and detector in ['knn', 'kde']")
    assert (easy["auroc"] > 90).all()


def test_linear_ocsvm_on_random_features_is_near_chance(tiny_run: Path) -> None:
    # The paper's ~50 for linear OC-SVM on random ResNet features (raw, unnormalised f).
    results = load_results_csv(tiny_run / "summary/results.csv")
    linear = results.query("method == 'resnet18_random' and detector == 'ocsvm_linear'")
    assert 35 < linear["auroc"].mean() < 65


def test_contaminated_split_has_the_configured_outliers(tiny_run: Path) -> None:
    split_dir = tiny_run / "digits/8/contam0.1/seed1"
    with np.load(split_dir / "split.npz") as split:
        train_index = split["train_index"]
        n_outliers = int(split["n_outliers_in_train"])
    per_class = TINY["datasets"]["digits"]["max_train_per_class"]
    assert len(train_index) == per_class
    assert n_outliers == round(0.1 * per_class)


def test_main_table_matches_the_results(tiny_run: Path) -> None:
    results = load_results_csv(tiny_run / "summary/results.csv")
    one_class = results.query("contamination == 0 and fitset == 'train'")
    cell = one_class.query("method == 'resnet18_random' and detector == 'kde'")
    per_seed = cell.groupby("seed")["auroc"].mean()
    # ± is the sample std over seeds (ddof=1), as in every table
    expected = f"{per_seed.mean():.1f} ± {per_seed.std(ddof=1):.1f}"
    # the 95 % t-interval over the seeds' class means, clipped to the AUC's range [0, 100];
    # one that covers all of it or has zero width gives way to the jobs' test-set intervals,
    # averaged as the value is (per seed over classes, then over seeds)
    half = stats.t.ppf(0.975, len(per_seed) - 1) * per_seed.std(ddof=1) / np.sqrt(len(per_seed))
    low, high = max(per_seed.mean() - half, 0.0), min(per_seed.mean() + half, 100.0)
    if (low, high) == (0.0, 100.0) or half == 0:
        ends = cell.groupby("seed")[["auroc_low", "auroc_high"]].mean().mean()
        expected += f" [{ends['auroc_low']:.1f}, {ends['auroc_high']:.1f}] over the test set"
    else:
        expected += f" [{low:.1f}, {high:.1f}]"
    table = pd.read_csv(tiny_run / "summary/main_table.csv", dtype=str)
    row = table[(table.iloc[:, 0] == "ResNet-18 (random)") & (table.iloc[:, 1] == "KDE")]
    assert len(row) == 1
    assert expected in row.to_string()
    latex = expected.replace(" ± ", r" $\pm$ ")
    for suffix, cell_text in ((".md", expected), (".html", expected), (".tex", latex)):
        text = (tiny_run / f"summary/main_table{suffix}").read_text()
        assert cell_text in text


def test_plots_are_written(tiny_run: Path) -> None:
    for name in ("per_class_digits.png", "roc_digits.png"):
        png = (tiny_run / "summary/plots" / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_every_summary_file_is_group_and_world_readable(tiny_run: Path) -> None:
    # The atomic writer once left tables and figures 0o600, unreadable to a web server.
    files = [path for path in (tiny_run / "summary").rglob("*") if path.is_file()]
    assert len(files) > 10
    private = [
        f"{path.relative_to(tiny_run)} {stat.filemode(path.stat().st_mode)}"
        for path in files
        if (path.stat().st_mode & (stat.S_IRGRP | stat.S_IROTH)) != (stat.S_IRGRP | stat.S_IROTH)
    ]
    assert private == []


def sweep_runs(client: MlflowClient, experiment_id: str, sweep: str) -> list:
    """Runs of one sweep (the sweep's own, not its studies' parents and children)."""
    return client.search_runs(
        [experiment_id], filter_string=f"tags.`droc.sweep` = '{sweep}'", max_results=5000
    )


def test_mlflow_store_holds_one_run_per_result_and_a_parent(tiny_run: Path) -> None:
    logged = json.loads((tiny_run / "mlflow/logged.json").read_text())
    assert logged["status"] == "logged"
    client = MlflowClient(tracking_uri=f"sqlite:///{tiny_run}/mlflow/mlflow.db")
    experiment = client.get_experiment_by_name(TINY["experiment"])
    runs = sweep_runs(client, experiment.experiment_id, logged["sweep"])
    assert len(runs) == N_JOBS + 1
    parent = [run for run in runs if run.data.tags.get("droc.kind") == "summary"]
    assert len(parent) == 1
    children = [run for run in runs if run.data.tags.get("mlflow.parentRunId")]
    assert len(children) == N_JOBS
    assert {"dataset", "inlier", "method", "seed", "detector"} <= set(children[0].data.params)
    assert 0 <= children[0].data.metrics["auroc"] <= 100
    assert children[0].data.tags["droc.sweep"] == logged["sweep"]
    assert len(children[0].data.tags["git_commit"]) >= 7
    artifacts = {item.path for item in client.list_artifacts(parent[0].info.run_id, "summary")}
    assert "summary/main_table.csv" in artifacts


def test_rerun_resumes_and_relogging_creates_no_duplicates(tiny_run: Path) -> None:
    dry = run_snakemake(tiny_run, "-n", "--configfile", str(REPO / "tests/configs/tiny.yaml"))
    assert "Nothing to be done" in dry.stdout + dry.stderr
    relog_to_mlflow(tiny_run)
    logged = json.loads((tiny_run / "mlflow/logged.json").read_text())
    assert logged["created"] == 0 and logged["unchanged"] == N_JOBS
    client = MlflowClient(tracking_uri=f"sqlite:///{tiny_run}/mlflow/mlflow.db")
    experiment = client.get_experiment_by_name(TINY["experiment"])
    assert len(sweep_runs(client, experiment.experiment_id, logged["sweep"])) == N_JOBS + 1
    # The main grid's study run logs the same results under its own parent, once too.
    study = logged["studies"]["main"]
    assert study["created"] == 0 and study["unchanged"] == N_JOBS
    assert (
        len(sweep_runs(client, experiment.experiment_id, f"{logged['sweep']}-main")) == N_JOBS + 1
    )


def test_snakemake_report_builds(tiny_run: Path) -> None:
    report = tiny_run / "report.html"
    run_snakemake(
        tiny_run, "--configfile", str(REPO / "tests/configs/tiny.yaml"), "--report", str(report)
    )
    html = report.read_text(errors="replace")
    assert len(html) > 100_000 and "main_table" in html


def test_paired_comparisons_and_verdicts_are_written(tiny_run: Path) -> None:
    text = (tiny_run / "summary/main_table_wilcoxon.md").read_text()
    # two inlier classes: the signed-rank test cannot reach significance, and says so
    assert "Holm" in text and "2/2^2 = 0.5" in text
    assert "ranks across data sets need 3 data sets or more; this table has 1" in text
    verdicts = pd.read_csv(tiny_run / "summary/main_table_verdicts.csv")
    # digits has no published number: the table opens with that, not with how the tiny
    # protocol differs from the paper's (no published number for it to qualify)
    assert set(verdicts["verdict"]) == {"no paper value"}
    main_md = (tiny_run / "summary/main_table.md").read_text()
    assert (
        "Reproduction: nothing to compare" in main_md
        and "the paper reports no results on Digits" in main_md
    )
    assert "Reproduction: not comparable" not in main_md and "Protocol differs" not in main_md
