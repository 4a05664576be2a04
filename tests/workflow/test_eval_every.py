"""train.eval_every through the real DAG: the training job scores the test split as it trains.

One RotNet on digits class 3 for 2 epochs with eval_every 1: its train_history.json holds
the test AUCs of both epochs, the last of them equal to what the detector jobs report for
the trained model; the figure lies beside the history; MLflow has the curves stepped by
epoch and the figure on the training run; and turning eval_every off re-runs nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from pipeline_lib.registry import ROTATION_DETECTORS
from pipeline_lib.results.tidy_table import load_results_csv
from tests.workflow.conftest import ONE_THREAD_PER_JOB, run_snakemake

pytestmark = pytest.mark.workflow

CONFIG = {
    "experiment": "droc-eval-every",
    "datasets": {"digits": {"classes": ["3"], "max_train_per_class": 48}},
    "methods": ["rotnet"],
    "seeds": [0],
    "splits": {"contamination": [0.0], "clean_inliers": []},
    "train": {"epochs": 2, "batch_size": 16, "eval_every": 1},
    "embed": {"batch_size": 128, "width": 4},
    "detectors": {"kde": {}},
    "tracking": {"enabled": True, "timeout_s": 3},
}
MODEL = "results/digits/3/contam0/seed0/rotnet"


def test_eval_every_records_curves_and_reruns_nothing_when_turned_off(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    run_snakemake(tmp_path, "--cores", "2", *ONE_THREAD_PER_JOB, "--configfile", str(config))

    history = json.loads((tmp_path / MODEL / "train_history.json").read_text())["history"]
    assert [sorted(record["eval"]) for record in history] == [
        sorted(["kde", *ROTATION_DETECTORS])
    ] * 2
    results = load_results_csv(tmp_path / "results/summary/results.csv")
    reported = dict(zip(results["detector"], results["auroc"], strict=True))
    # After the last epoch the diagnostic scores the model the detector jobs score.
    assert history[-1]["eval"] == pytest.approx(reported, rel=1e-12)
    assert (tmp_path / MODEL / "eval_curve.png").read_bytes()[:4] == b"\x89PNG"

    client = MlflowClient(f"sqlite:///{tmp_path / 'results/mlflow/mlflow.db'}")
    experiment = client.get_experiment_by_name(CONFIG["experiment"])
    (run,) = client.search_runs(
        [experiment.experiment_id], filter_string="tags.`droc.kind` = 'training'"
    )
    kde = client.get_metric_history(run.info.run_id, "test_auroc/kde")
    assert sorted((m.step, m.value) for m in kde) == [
        (record["epoch"], record["eval"]["kde"]) for record in history
    ]
    assert [a.path for a in client.list_artifacts(run.info.run_id)] == ["eval_curve.png"]

    # An execution setting: neither params nor checkpoints name it, so neither the model
    # nor any result re-runs (the provenance page records the config itself, so it would).
    off = {**CONFIG, "train": {k: v for k, v in CONFIG["train"].items() if k != "eval_every"}}
    config.write_text(yaml.safe_dump(off))
    targets = (f"{MODEL}/model.pt", "results/summary/results.csv")
    dry = run_snakemake(tmp_path, *targets, "-n", "--configfile", str(config))
    assert "Nothing to be done" in dry.stdout + dry.stderr
