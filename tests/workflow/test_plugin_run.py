"""The example plugin package through the real DAG on digits: its method (flip prediction)
trained beside RotNet, its detector (local outlier factor) beside KDE, in the results, the
tables, the paired tests and MLflow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from mlflow.tracking import MlflowClient

from pipeline_lib.deploy.image_package import PackagedDetector
from pipeline_lib.runtime.io import load_image_dataset
from tests.deploy.conftest import png_bytes
from tests.plugin_packages import example_paths
from tests.workflow.conftest import ONE_THREAD_PER_JOB, run_snakemake

pytestmark = pytest.mark.workflow

CONFIG = {
    "experiment": "droc-plugin-toy",
    "plugins": ["droc_plugin_example"],
    "datasets": {
        "digits": {"classes": ["0", "8"], "max_train_per_class": 48, "max_test_per_class": 12}
    },
    "methods": ["rotnet", "flip"],
    "seeds": [0],
    "embed": {"batch_size": 128, "width": 8},
    "train": {"epochs": 2, "batch_size": 16, "plugin": {"label_smoothing": 0.1}},
    "detect": {"rotation_classifier": False},
    "detectors": {"kde": {}, "lof": {"n_neighbors": 5}},
    "tracking": {"enabled": True, "timeout_s": 3},
    # The plugin's method packages as data: the scorer rebuilds it from its head kind.
    "deploy": {
        "dataset": "digits",
        "inlier": "0",
        "method": "flip",
        "detector": "kde",
        "registered_name": "droc-digits-flip",
        "target_fpr": 0.05,
    },
}


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The config above run end to end; the jobs find the example package as this process
    does (installed, or its throwaway distribution on PYTHONPATH)."""
    workdir = tmp_path_factory.mktemp("plugin_run")
    paths = [str(path) for path in example_paths(tmp_path_factory.mktemp("plugin_dist"))]
    inherited = os.environ.get("PYTHONPATH")
    env = {"PYTHONPATH": os.pathsep.join([*paths, *([inherited] if inherited else [])])}
    configfile = workdir / "plugin.yaml"
    configfile.write_text(yaml.safe_dump(CONFIG))
    result = run_snakemake(
        workdir, "--cores", "2", *ONE_THREAD_PER_JOB, "--configfile", str(configfile), env=env
    )
    assert "droc-plugin-example==0.1.0 provides method flip, detector lof" in result.stderr
    return workdir


def test_the_plugin_rows_are_in_the_results(plugin_run: Path) -> None:
    results = pd.read_csv(plugin_run / "summary/results.csv")
    cells = set(zip(results["method"], results["detector"], strict=True))
    assert cells == {(m, d) for m in ("rotnet", "flip") for d in ("kde", "lof")}
    # Two classes, one contamination, one seed: one AUC per class for every cell.
    assert results.groupby(["method", "detector"]).size().eq(2).all()
    assert results["auroc"].between(0, 100).all()


def test_the_tables_and_the_paired_tests_show_the_plugin_rows(plugin_run: Path) -> None:
    table = pd.read_csv(plugin_run / "summary/main_table.csv")
    # Plugin rows keep their ids (never a paper method's display name).
    rows = set(zip(table["Representation"], table["Detector"], strict=True))
    assert rows == {("RotNet", "KDE"), ("RotNet", "lof"), ("flip", "KDE"), ("flip", "lof")}
    paired = (plugin_run / "summary/main_table_wilcoxon.md").read_text()
    header = next(line for line in paired.splitlines() if line.startswith("|  "))
    assert [cell.strip() for cell in header.split("|")[2:-1]] == [
        "flip / KDE",
        "flip / lof",
        "RotNet / KDE",
        "RotNet / lof",
    ]
    assert "| flip / lof   | 1 (" in paired  # a p-value against every other row
    verdicts = pd.read_csv(plugin_run / "summary/main_table_verdicts.csv")
    # Digits has no published number, and a plugin row never gets one.
    assert set(verdicts["verdict"]) == {"no paper value"}


def test_the_plugin_runs_are_in_mlflow(plugin_run: Path) -> None:
    client = MlflowClient(tracking_uri=f"sqlite:///{plugin_run / 'mlflow/mlflow.db'}")
    (experiment,) = [e for e in client.search_experiments() if e.name == "droc-plugin-toy"]
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    logged = {(r.data.params.get("method"), r.data.params.get("detector")) for r in runs}
    assert {("flip", "lof"), ("flip", "kde"), ("rotnet", "lof")} <= logged


#: ``droc score`` with every import of the example package refused, and no plugin named in
#: its environment: what a package's consumer runs.
_SCORE_WITHOUT_THE_PLUGIN = """
import importlib.abc, sys

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "droc_plugin_example":
            raise ImportError(f"droc score imported {name}")

sys.meta_path.insert(0, Refuse())
from pipeline_lib.deploy.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_plugin_method_packages_as_data_and_scores_without_its_code(
    plugin_run: Path, tmp_path: Path
) -> None:
    package = plugin_run / "deploy/droc-digits-flip/package"
    record = json.loads((plugin_run / "deploy/droc-digits-flip/deployed.json").read_text())
    assert record["cell"]["method"] == "flip"
    assert record["metrics"]["auroc_pixels"] == pytest.approx(
        record["metrics"]["auroc_recorded"], abs=1e-9
    )
    spec = torch.load(package / "representation.pt", map_location="meta", weights_only=True)
    assert (spec["head"], spec["backbone"]) == ("projection", "resnet18_small")
    dataset = load_image_dataset(plugin_run / "digits/dataset.npz")
    images = dataset.test_images[:6]
    folder = tmp_path / "images"
    folder.mkdir()
    for index, image in enumerate(images):
        (folder / f"{index}.png").write_bytes(png_bytes(image))
    output = tmp_path / "scores.csv"
    env = {k: v for k, v in os.environ.items() if k != "DROC_PLUGINS"}
    command = [sys.executable, "-c", _SCORE_WITHOUT_THE_PLUGIN, "score", "--model"]
    command += [str(package), str(folder), "--output", str(output), "--no-progress"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    scored = pd.read_csv(output).sort_values("file")
    expected = PackagedDetector.load(package).anomaly_scores(images)
    # The same package scoring the same decoded pixels on the same CPU: float32 rounding of
    # batch composition apart at most (1e-4 of the scores' spread).
    spread = float(np.ptp(expected)) or 1.0
    assert np.allclose(scored["anomaly_score"].to_numpy(), expected, atol=1e-4 * spread)
