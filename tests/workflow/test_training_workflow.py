"""Every trained representation through the real DAG on CPU: train, embed, detect, tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from pipeline_lib.results import load_results_csv
from tests.workflow.conftest import REPO, run_snakemake

pytestmark = pytest.mark.workflow

CONFIG = REPO / "tests/configs/tiny_train.yaml"
TRAINED = yaml.safe_load(CONFIG.read_text())["methods"]
MODEL_DIR = "results/digits/0/contam0/seed0"


@pytest.fixture(scope="module")
def train_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("train_run")
    run_snakemake(workdir, "--cores", "2", "--configfile", str(CONFIG))
    return workdir


@pytest.mark.parametrize("method", TRAINED)
def test_each_method_lowers_its_loss(train_run: Path, method: str) -> None:
    history = json.loads((train_run / MODEL_DIR / method / "train_history.json").read_text())
    losses = [record["loss"] for record in history["history"]]
    assert len(losses) == 3
    assert losses[-1] < losses[0]
    # The finished job removes its resumable checkpoint; the model file stays.
    assert not (train_run / MODEL_DIR / method / "checkpoint.pt").exists()
    assert (train_run / MODEL_DIR / method / "model.pt").stat().st_size > 10_000


def test_every_method_and_detector_has_a_result(train_run: Path) -> None:
    results = load_results_csv(train_run / "results/summary/results.csv")
    pairs = set(zip(results["method"], results["detector"], strict=True))
    expected = {(method, detector) for method in TRAINED for detector in ("kde", "gde")}
    expected |= {
        (method, detector)
        for method in ("rotnet", "rotation")
        for detector in ("rotation_classifier", "rotation_p0")
    }
    assert pairs == expected
    assert results["auroc"].between(0, 100).all()


def test_main_table_has_rotnet_rows(train_run: Path) -> None:
    table = (train_run / "results/summary/main_table.md").read_text()
    assert "| RotNet " in table and "Rotation classifier " in table
    assert "Rotation classifier p(0|x)" in table


def test_training_curves_reach_mlflow(train_run: Path) -> None:
    client = MlflowClient(tracking_uri=f"sqlite:///{train_run}/results/mlflow/mlflow.db")
    experiment = client.get_experiment_by_name("droc-tiny-train")
    runs = client.search_runs(
        [experiment.experiment_id], filter_string="tags.`droc.kind` = 'training'"
    )
    assert len(runs) == len(TRAINED)
    losses = client.get_metric_history(runs[0].info.run_id, "loss")
    assert [metric.step for metric in losses] == [1, 2, 3]
