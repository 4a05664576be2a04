"""train.eval_every through the real DAG: the training job scores the test split as it trains.

The session's studies toy run (tests/configs/studies_toy.yaml) sets eval_every 1. Its main
RotNet on digits class 0 (3 epochs) holds the test AUCs of every epoch in its
train_history.json, the last of them equal to what the detector jobs report for the trained
model; the figure lies beside the history; MLflow has the curves stepped by epoch and the
figure on the training run; and turning eval_every off, or drawing the steps' random
numbers on the device, re-runs nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from pipeline_lib.registry import ROTATION_DETECTORS
from pipeline_lib.results.tidy_table import load_results_csv
from tests.workflow.conftest import REPO, run_snakemake

pytestmark = pytest.mark.workflow

TOY = yaml.safe_load((REPO / "tests/configs/studies_toy.yaml").read_text())
MODEL = "digits/0/contam0/seed0/rotnet"


def test_eval_every_records_curves_and_execution_settings_rerun_nothing(
    studies_run: Path, tmp_path: Path
) -> None:
    assert TOY["train"]["eval_every"] == 1
    history = json.loads((studies_run / MODEL / "train_history.json").read_text())["history"]
    assert [sorted(record["eval"]) for record in history] == [
        sorted([*TOY["detectors"], *ROTATION_DETECTORS])
    ] * TOY["train"]["epochs"]
    results = load_results_csv(studies_run / "summary/results.csv")
    rotnet = results[results["method"] == "rotnet"]
    reported = dict(zip(rotnet["detector"], rotnet["auroc"], strict=True))
    # After the last epoch the diagnostic scores the model the detector jobs score.
    assert history[-1]["eval"] == pytest.approx(reported, rel=1e-12)
    assert (studies_run / MODEL / "eval_curve.png").read_bytes()[:4] == b"\x89PNG"

    client = MlflowClient(f"sqlite:///{studies_run / 'mlflow/mlflow.db'}")
    experiment = client.get_experiment_by_name(TOY["experiment"])
    trainings = client.search_runs(
        [experiment.experiment_id], filter_string="tags.`droc.kind` = 'training'"
    )
    (run,) = [run for run in trainings if run.info.run_name == f"train {MODEL}"]
    kde = client.get_metric_history(run.info.run_id, "test_auroc/kde")
    assert sorted((m.step, m.value) for m in kde) == [
        (record["epoch"], record["eval"]["kde"]) for record in history
    ]
    assert [a.path for a in client.list_artifacts(run.info.run_id)] == ["eval_curve.png"]

    # Execution settings (eval_every off, draws on the device): neither params nor
    # checkpoints name them, so neither the model nor any result re-runs (the provenance
    # page records the config itself, so it would).
    off = {**TOY, "train": {k: v for k, v in TOY["train"].items() if k != "eval_every"}}
    elsewhere = {**TOY, "train": {**TOY["train"], "draws": "device"}}
    targets = (f"{MODEL}/model.pt", "summary/results.csv")
    for name, changed in (("off", off), ("device_draws", elsewhere)):
        config = tmp_path / f"{name}.yaml"
        config.write_text(yaml.safe_dump(changed, sort_keys=False))  # params compare as written
        dry = run_snakemake(studies_run, *targets, "-n", "--configfile", str(config))
        assert "Nothing to be done" in dry.stdout + dry.stderr, name
