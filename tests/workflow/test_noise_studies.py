"""A slice of config/experiments/noise_studies.yaml through the real DAG, on real Fashion-MNIST.

The slice keeps the config's studies, detectors and representation kinds, cuts the grid (one
class, raw pixels, one seed, fewer images) and asks only for the two studies' outputs, so that
it runs in CI in under a minute; the study tables it writes are what
benchmarks/noise_studies.py turns into docs/studies.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

from pipeline_lib.data import DataError, load_dataset
from tests.benchmark_scripts import load_benchmark
from tests.workflow.conftest import REPO, run_snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.realdata]

CONFIG = REPO / "config/experiments/noise_studies.yaml"


def _script():
    return load_benchmark("noise_studies.py")


def _slice(config: dict) -> dict:
    data = {
        "fmnist": {"classes": ["trouser"], "max_train_per_class": 200, "max_test_per_class": 40}
    }
    config.update(datasets=data, methods=["raw"], seeds=[0])
    contamination, semi = config["studies"]
    contamination.update(datasets=data, methods=["raw"], seeds=[0])
    contamination["splits"] = {"contamination": [0.0, 0.1]}
    semi.update(datasets=data, methods=["raw"], seeds=[0])
    semi["splits"] = {"contamination": [0.1], "clean_inliers": [50]}
    return config


def test_a_slice_of_the_noise_studies_runs_and_renders(tmp_path: Path) -> None:
    root = os.environ.get("DROC_DATA_ROOT")
    try:
        load_dataset("fmnist", root=Path(root) if root else None)
    except DataError as error:
        pytest.skip(f"real Fashion-MNIST not available ({error}); .ci/run provides it")
    config = _slice(yaml.safe_load(CONFIG.read_text()))
    studies = config["studies"]
    detectors = set(config["detectors"])
    path = tmp_path / "noise.yaml"
    path.write_text(yaml.safe_dump(config))
    # Only the two studies' jobs: the main table, its plots and the summary page of this
    # config are not what this test checks (the tiny end-to-end runs check those rules).
    targets = [f"studies/{s['study']['name']}/{s['study']['name']}.json" for s in studies]
    run_snakemake(tmp_path, *targets, "--cores", "2", "--configfile", str(path))

    tables = tmp_path / "studies"
    contamination = pd.read_csv(tables / "noise_contamination/noise_contamination.csv")
    semi = pd.read_csv(tables / "noise_semi_supervised/noise_semi_supervised.csv")
    assert set(contamination["detector"]) == set(semi["detector"]) == detectors
    assert set(contamination["contamination"]) == {0.0, 0.1}
    assert {"clean50", "train"} <= set(semi["fitset"])
    for table in (contamination, semi):
        assert table["mean"].between(0, 100).all() and (table["n_missing"] == 0).all()
    # paired tests between the rows that differ in one thing (2 outlier rates x 4 detectors:
    # 4 rate pairs + 2 x 6 detector pairs), on the slice's single class
    tests = pd.read_csv(tables / "noise_contamination/noise_contamination_wilcoxon.csv")
    assert len(tests) == 16 and (tests["n_blocks"] == 1).all()
    # Trousers against the other nine classes from raw pixels: every detector but the
    # linear OC-SVM (which the paper shows near chance) is well above chance.
    clean = contamination[contamination["contamination"] == 0.0].set_index("detector")["mean"]
    assert (clean.drop("ocsvm_linear") > 70).all(), clean

    script = _script()
    lines = script.render_contamination(contamination)
    assert lines[0].startswith("| data set | representation | detector | 0 % outliers")
    assert sum(line.startswith("| Fashion-MNIST | raw pixels |") for line in lines) == 4
    semi_lines = script.render_semi_supervised(semi)
    assert "50 clean" in semi_lines[2] and "training set" in semi_lines[2]
