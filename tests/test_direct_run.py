"""The direct runner keeps the workflow's config and can run part of its rows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def load_direct_run():
    spec = importlib.util.spec_from_file_location(
        "direct_run", REPO / "benchmarks" / "direct_run.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_methods_subset_keeps_config_order_and_rejects_unknown_rows():
    direct_run = load_direct_run()
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
