"""Shared cases of the config validation tests: the smallest valid config and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline_lib.config.validate import ConfigError, validate_config

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
DATASETS = "cifar10, cifar100, fmnist, catvsdog, celeba, mnist, digits, image_folder"
DETECTORS = "ocsvm, ocsvm_linear, kde, gde, knn"
DIGITS = tuple(str(k) for k in range(10))


def minimal_config() -> dict:
    """The smallest valid config: every required key, nothing else."""
    return {
        "datasets": {"digits": {"classes": ["0", "8"]}},
        "methods": ["raw"],
        "seeds": [0],
        "detectors": {"knn": {}},
    }


def config_error(config: dict) -> str:
    """The message of the ConfigError that validating ``config`` raises."""
    with pytest.raises(ConfigError) as info:
        validate_config(config, SCHEMA)
    return str(info.value)
