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
    path = REPO / "config" / "cifar10_contrastive_cpu.yaml"
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
