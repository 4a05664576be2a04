"""The direct runner keeps the workflow's config and can run part of its rows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def direct_run():
    spec = importlib.util.spec_from_file_location(
        "direct_run", REPO / "benchmarks" / "direct_run.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_methods_subset_keeps_config_order_and_rejects_unknown_rows(direct_run):
    path = REPO / "config" / "experiments" / "cifar10_contrastive_cpu.yaml"
    config = direct_run.load_config(path)
    subset = direct_run.restrict_methods(
        config, ["contrastive_head2", "resnet18_random"], source=path
    )
    assert subset["methods"] == ["resnet18_random", "contrastive_head2"]
    assert config["methods"] == ["resnet18_random", "contrastive", "contrastive_head2"]
    assert subset["variants"]["contrastive_head2"]["train"] == {"head_depth": 2}
    with pytest.raises(SystemExit, match="rotnet: not among the methods of .*contrastive_cpu"):
        direct_run.restrict_methods(config, ["rotnet", "contrastive"], source=path)


def result(inlier: str, method: str, ocsvm: float) -> dict:
    return {
        "inlier": inlier,
        "method": method,
        "seed": 0,
        "auroc": {"ocsvm": ocsvm},
        "training": {},
    }


def test_table_gains_are_differences_to_random_weights(direct_run, capsys):
    rows = [result("cat", "resnet18_random", 50.0), result("dog", "resnet18_random", 60.0)]
    rows += [result("cat", "rotnet", 80.0), result("dog", "rotnet", 90.0)]
    direct_run.print_table(rows, [])
    out = capsys.readouterr().out.splitlines()
    rotnet = next(line.split() for line in out if "rotnet" in line.split())
    random = next(line.split() for line in out if "resnet18_random" in line.split())
    assert rotnet[-4:] == ["80.0", "90.0", "85.0", "30.0"]  # cat, dog, mean, gain
    assert random[-2:] == ["55.0", "0.0"]


def test_table_without_random_weights_has_no_gain_column(direct_run, capsys):
    direct_run.print_table([result("cat", "rotnet", 80.0)], [])
    out = capsys.readouterr().out
    assert "80.0" in out and "gain_vs_random" not in out


def test_run_job_runs_the_workflow_chain_with_its_clean_fit_sets(direct_run, tmp_path):
    """One frozen and one trained job through the scripts' library calls, on tiny digits."""
    import numpy as np

    from pipeline_lib.data.split import one_class_split
    from pipeline_lib.detection.runner import run_detection
    from pipeline_lib.models.embed import embed_frozen
    from pipeline_lib.registry import ROTATION_DETECTORS
    from pipeline_lib.runtime.io import load_image_dataset

    config = direct_run.load_config(REPO / "tests" / "configs" / "tiny.yaml")
    config = config | {
        "methods": ["resnet18_random", "rotnet"],
        "seeds": [0],
        "splits": {"contamination": [0.0], "clean_inliers": [20]},
        "detectors": {"kde": {}},
        "train": {**config["train"], "epochs": 1},
    }
    prepared = direct_run.prepare_datasets(config, tmp_path)
    cache, classes = prepared["digits"]
    assert classes == ["0", "8"]
    jobs = {
        method: direct_run.Job("digits", "0", 0.0, 0, method, cache, "", "cpu", 1)
        for method in config["methods"]
    }
    results = {}
    for method, job in jobs.items():
        job = direct_run.Job(**{**job.__dict__, "out": str(tmp_path / f"{method}.json")})
        results[method] = direct_run.run_job(job, config)
    assert set(results["resnet18_random"]["auroc"]) == {"kde", "kde/clean20"}
    assert set(results["rotnet"]["auroc"]) == {"kde", "kde/clean20", *ROTATION_DETECTORS}
    assert results["rotnet"]["training"]["epochs"] == 1
    assert results["rotnet"]["training"]["batch_size"] == 64
    # The frozen row is what the embed_frozen_dataset and score_detectors calls give.
    dataset = load_image_dataset(cache)
    split = one_class_split(
        dataset.train_labels,
        dataset.test_labels,
        inlier=0,
        contamination=0.0,
        seed=0,
        clean_inliers=[20],
    )
    features = embed_frozen(
        "resnet18_random", dataset, seed=0, width=8, batch_size=128, device="cpu"
    )
    for fitset, key in (("train", "kde"), ("clean20", "kde/clean20")):
        record, _ = run_detection(
            split,
            features,
            fitset=fitset,
            detector="kde",
            detector_params={},
            max_fit=config["detect"]["max_fit"],
            seed=0,
        )
        assert results["resnet18_random"]["auroc"][key] == record["auroc"]
    assert results["resnet18_random"]["feature_checksum"] == float(np.abs(features["f_test"]).sum())
