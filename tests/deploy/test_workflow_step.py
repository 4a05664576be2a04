"""Choosing the deployed cell from a sweep's results, and the deploy config checks."""

from __future__ import annotations

import pandas as pd
import pytest

from pipeline_lib.config.validate import ConfigError, validate_config
from pipeline_lib.deploy.workflow_step import UNPACKABLE_DETECTORS, choose_cell, recorded_auroc
from tests.workflow.conftest import REPO


def _results() -> pd.DataFrame:
    rows = []
    for method, detector, aucs in [
        ("raw", "kde", [70.0, 72.0]),
        ("rotnet", "kde", [90.0, 80.0]),  # mean 85
        ("rotnet", "knn", [95.0, 78.0]),  # best single seed, mean 86.5: the best mean
    ]:
        for seed, auc in enumerate(aucs):
            rows.append(
                dict(
                    dataset="digits",
                    inlier="0",
                    contamination=0.0,
                    seed=seed,
                    method=method,
                    fitset="train",
                    detector=detector,
                    auroc=auc,
                    space="f",
                )
            )
    rows.append(dict(rows[0], inlier="1", method="raw", detector="knn", auroc=99.0))
    return pd.DataFrame(rows)


def test_best_is_the_highest_mean_auc_of_the_class() -> None:
    deploy = {"dataset": "digits", "inlier": "0", "best": True, "method": None, "detector": None}
    chosen = choose_cell(_results(), deploy, contamination=0.0)
    assert (chosen["method"], chosen["detector"]) == ("rotnet", "knn")
    assert chosen["best_mean_auroc"] == pytest.approx(86.5)
    cell = {
        "dataset": "digits",
        "inlier": "0",
        "method": "rotnet",
        "detector": "kde",
        "seed": 1,
        "contamination": 0.0,
    }
    assert recorded_auroc(_results(), cell) == 80.0


def test_deploy_config_must_name_a_cell_of_the_sweep() -> None:
    import yaml

    config = yaml.safe_load((REPO / "tests/configs/deploy_toy.yaml").read_text())
    schema = REPO / "workflow/schemas/config.schema.yaml"
    assert validate_config(config, schema)["deploy"]["target_fpr"] == 0.05
    with pytest.raises(ConfigError, match="deploy.method'.*'contrastive'"):
        validate_config({**config, "deploy": {**config["deploy"], "method": "contrastive"}}, schema)
    with pytest.raises(ConfigError, match="best chooses method"):
        validate_config({**config, "deploy": {**config["deploy"], "best": True}}, schema)


def test_mvtec_deploy_config_names_a_category_cell() -> None:
    schema = REPO / "workflow/schemas/config.schema.yaml"
    config = {
        "methods": ["resnet18_random", "rotnet"],
        "seeds": [0],
        "mvtec": {"categories": ["bottle", "wood"], "detectors": {"kde": {}}},
        "deploy": {
            "dataset": "mvtec",
            "inlier": "wood",
            "method": "rotnet",
            "detector": "kde",
            "registered_name": "droc-wood",
        },
    }
    assert validate_config(config, schema)["deploy"]["inlier"] == "wood"
    deploy = config["deploy"]
    with pytest.raises(ConfigError, match=r"deploy.inlier'.*'carpet'.*bottle, wood"):
        validate_config({**config, "deploy": {**deploy, "inlier": "carpet"}}, schema)
    with pytest.raises(ConfigError, match=r"deploy.detector'.*'knn'.*mvtec.detectors"):
        validate_config({**config, "deploy": {**deploy, "detector": "knn"}}, schema)
    with pytest.raises(ConfigError, match=r"deploy.method'.*'contrastive'.*mvtec.methods"):
        validate_config({**config, "deploy": {**deploy, "method": "contrastive"}}, schema)
    without = {k: v for k, v in config.items() if k != "mvtec"}
    with pytest.raises(ConfigError, match=r"deploy.dataset'.*no 'mvtec' section"):
        image_sweep = {"datasets": {"digits": {"classes": ["0"]}}, "detectors": {"kde": {}}}
        validate_config({**without, **image_sweep}, schema)


def test_best_mvtec_cell_skips_the_rotation_classifier() -> None:
    results = _results().assign(dataset="mvtec", inlier="wood")
    extra = dict(results.iloc[0], method="rotnet", detector="rotation_classifier", auroc=100.0)
    results = pd.concat([results, pd.DataFrame([extra])], ignore_index=True)
    packable = results[~results["detector"].isin(UNPACKABLE_DETECTORS)]
    deploy = {"dataset": "mvtec", "inlier": "wood", "best": True, "method": None, "detector": None}
    assert choose_cell(packable, deploy, contamination=0.0)["detector"] == "knn"
