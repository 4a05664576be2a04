"""Choosing the deployed cell from a sweep's results, and the deploy config checks."""

from __future__ import annotations

import pandas as pd
import pytest

from pipeline_lib.dag.config import ConfigError, validate_config
from pipeline_lib.deploy.step import choose_cell, recorded_auroc
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
