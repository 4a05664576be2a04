"""benchmarks/run_record.py reads a run's folder into one record per job: its AUCs by
detector (a clean fit set's under ``detector/clean{n}``), its trained model's summary, its
jobs' wall seconds and its split's sizes. The whole path, Snakemake's run of a trained cell
included: tests/test_full_cell.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline_lib.data.split import one_class_split, save_split
from pipeline_lib.runtime.io import save_json
from tests.benchmark_scripts import load_benchmark

SPLIT = "digits/3/contam0.1/seed1"


@pytest.fixture(scope="module")
def run_record():
    return load_benchmark("run_record.py")


def _benchmark(path: Path, seconds: float) -> None:
    """A Snakemake benchmark file: a header and one row, ``s`` first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"s\th:m:s\tmax_rss\n{seconds}\t0:00:01\t100.0\n")


@pytest.fixture
def run_folder(tmp_path: Path) -> Path:
    """A run of one split: random weights and RotNet, fit on the split and on 5 clean
    inliers; RotNet trained two epochs (evaluated after the second)."""
    rng = np.random.default_rng(0)
    split = one_class_split(
        rng.integers(0, 10, 200),
        rng.integers(0, 10, 90),
        inlier=3,
        contamination=0.1,
        seed=1,
        clean_inliers=[5],
    )
    (tmp_path / SPLIT).mkdir(parents=True)
    save_split(tmp_path / SPLIT / "split.npz", split)
    rows = [
        ("resnet18_random", "train", "kde", 61.0),
        ("resnet18_random", "clean5", "kde", 58.5),
        ("rotnet", "train", "kde", 80.25),
        ("rotnet", "clean5", "kde", 77.0),
        ("rotnet", "train", "rotation_classifier", 70.0),
    ]
    (tmp_path / "summary").mkdir()
    pd.DataFrame(
        [
            {"dataset": "digits", "inlier": "3", "contamination": 0.1, "seed": 1, "method": m}
            | {"fitset": fitset, "detector": detector, "auroc": auroc}
            for m, fitset, detector, auroc in rows
        ]
    ).to_csv(tmp_path / "summary" / "results.csv", index=False)
    history = [
        {"epoch": 1, "loss": 1.4, "lr": 0.01, "images_per_s": 90.0},
        {"epoch": 2, "loss": 1.1, "lr": 0.0, "images_per_s": 95.0, "eval": {"kde": 80.25}},
    ]
    save_json(
        tmp_path / SPLIT / "rotnet" / "train_history.json",
        {"method": "rotnet", "arguments": {"batch_size": 16}, "history": history}
        | {"device": "cpu"},
    )
    benchmarks = tmp_path / "benchmarks"
    _benchmark(benchmarks / "train_representation" / SPLIT / "rotnet.tsv", 12.5)
    _benchmark(benchmarks / "embed_trained" / SPLIT / "rotnet.tsv", 2.0)
    _benchmark(benchmarks / "embed_frozen_dataset/digits/resnet18_random/seed1.tsv", 3.0)
    for method in ("resnet18_random", "rotnet"):
        for fitset in ("train", "clean5"):
            _benchmark(benchmarks / "score_detectors" / SPLIT / method / f"{fitset}.tsv", 0.5)
    _benchmark(benchmarks / "score_rotation_classifier" / SPLIT / "rotnet.tsv", 0.25)
    return tmp_path


def test_each_job_of_the_tidy_table_is_one_record(run_record, run_folder: Path) -> None:
    frozen, trained = run_record.job_records(run_folder)
    job = {"dataset": "digits", "inlier": "3", "contamination": 0.1, "seed": 1}
    assert {k: frozen[k] for k in job} == job == {k: trained[k] for k in job}
    assert frozen["auroc"] == {"kde": 61.0, "kde/clean5": 58.5}
    assert trained["auroc"] == {"kde": 80.25, "kde/clean5": 77.0, "rotation_classifier": 70.0}
    assert frozen["training"] == {} and "device" not in frozen
    assert trained["device"] == "cpu"
    assert trained["training"] == {
        "epochs": 2,
        "first_loss": 1.4,
        "last_loss": 1.1,
        "images_per_s_last_epoch": 95.0,
        "batch_size": 16,
        "eval": [{"epoch": 2, "kde": 80.25}],
    }
    assert frozen["timings"] == {"embed_s": 3.0, "detect_s": 1.0}
    assert trained["timings"] == {"train_s": 12.5, "embed_s": 2.0, "detect_s": 1.25}
    split = np.load(run_folder / SPLIT / "split.npz")
    sizes = {"n_train": len(split["train_index"]), "n_test": len(split["test_index"])}
    assert {k: trained[k] for k in sizes} == sizes == {k: frozen[k] for k in sizes}
    assert run_record.job_stem(trained) == "digits-3-c0.1-s1-rotnet"


def test_a_folder_without_the_tidy_table_is_refused(run_record, tmp_path: Path) -> None:
    config = Path(__file__).resolve().parents[1] / "tests/configs/tiny.yaml"
    with pytest.raises(SystemExit, match=r"summary/results.csv not found: run the workflow"):
        run_record.main(["--configfile", str(config), "--workdir", str(tmp_path), "--out", "x"])
