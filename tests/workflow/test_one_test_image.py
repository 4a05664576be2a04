"""``max_test_per_class: 1`` through the real DAG: one test inlier leaves the AUC without an
interval over the test set, and the run still ends with its tables and summary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient

from pipeline_lib.detection.auroc_intervals import INTERVAL_FIELDS, INTERVAL_OMITTED
from pipeline_lib.paper.intervals import INTERVAL_LABELS
from pipeline_lib.results.tidy_table import load_results_csv
from pipeline_lib.tracking.mlflow_store import INTERVAL_OMITTED_TAG, KEY_TAG
from tests.workflow.conftest import ONE_THREAD_PER_JOB, REPO, run_snakemake

pytestmark = pytest.mark.workflow

RESULT = "digits/0/contam0/seed0/raw/train/kde/result.json"


@pytest.fixture(scope="module")
def one_test_image_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/configs/tiny.yaml cut to one job (raw pixels + KDE on class 0, one seed) whose
    test split keeps one image per class: 1 inlier against 9 outliers."""
    settings = yaml.safe_load((REPO / "tests/configs/tiny.yaml").read_text())
    settings["datasets"]["digits"] |= {"classes": ["0"], "max_test_per_class": 1}
    settings |= {"methods": ["raw"], "seeds": [0], "detectors": {"kde": {}}}
    settings["splits"]["contamination"] = [0.0]
    workdir = tmp_path_factory.mktemp("one_test_image")
    config = workdir / "config.yaml"
    config.write_text(yaml.safe_dump(settings))
    run_snakemake(workdir, "--cores", "2", *ONE_THREAD_PER_JOB, "--configfile", str(config))
    return workdir


def test_the_job_keeps_its_auc_and_records_why_it_has_no_interval(one_test_image_run) -> None:
    record = json.loads((one_test_image_run / RESULT).read_text())
    assert (record["n_test"], record["n_test_outliers"]) == (10, 9)
    assert 0.0 <= record["auroc"] <= 100.0
    assert not set(INTERVAL_FIELDS) & set(record)
    assert "9 outlier(s) and 1 inlier(s)" in record[INTERVAL_OMITTED]
    results = load_results_csv(one_test_image_run / "summary/results.csv")
    assert len(results) == 1 and results[list(INTERVAL_FIELDS)].isna().all(axis=None)
    assert results.loc[0, INTERVAL_OMITTED] == record[INTERVAL_OMITTED]


def test_tables_say_why_the_cell_has_no_interval(one_test_image_run) -> None:
    summary = one_test_image_run / "summary"
    shown = f"[{INTERVAL_LABELS['omitted']}]"
    for table in ("main_table.md", "per_class/digits.md"):
        assert shown in (summary / table).read_text(encoding="utf-8"), table
    study = pd.read_csv(one_test_image_run / "studies/main/main.csv")
    assert study["ci_over"].tolist() == ["omitted"] and np.isnan(study["ci_low"]).all()
    assert shown in (summary / "index.md").read_text(encoding="utf-8")


def test_the_jobs_mlflow_run_says_why_it_has_no_interval(one_test_image_run) -> None:
    client = MlflowClient(tracking_uri=f"sqlite:///{one_test_image_run}/mlflow/mlflow.db")
    runs = [
        run
        for experiment in client.search_experiments()
        for run in client.search_runs([experiment.experiment_id])
        if run.data.tags.get(KEY_TAG) == str(Path(RESULT).parent)
    ]
    assert runs  # the sweep's job run (and the main study's)
    for run in runs:
        assert "9 outlier(s) and 1 inlier(s)" in run.data.tags[INTERVAL_OMITTED_TAG]
