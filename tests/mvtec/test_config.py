"""The mvtec and explain config sections: defaults and errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline_lib.config.validate import ConfigError, validate_config

SCHEMA = Path(__file__).resolve().parents[2] / "workflow/schemas/config.schema.yaml"


def _mvtec(**mvtec) -> dict:
    return {"methods": ["rotnet"], "seeds": [0], "mvtec": mvtec}


def test_mvtec_alone_is_a_valid_config_with_the_paper_defaults():
    filled = validate_config(_mvtec(categories=["bottle"]), SCHEMA)
    mvtec = filled["mvtec"]
    assert filled["datasets"] == {} and filled["detectors"] == {}
    assert mvtec["image_size"] == 256 and mvtec["patches"] == {
        "size": 32,
        "stride": 4,
        "per_image": 64,
    }
    assert mvtec["embed"]["max_fit_patches"] is None  # all dense patches, as the paper
    assert mvtec["detectors"] == {"kde": {}} and mvtec["methods"] == ["rotnet"]
    assert mvtec["localize"] == {"sigma": 10.0, "normalize": True} and mvtec["pro_max_fpr"] == 0.3


def test_neither_datasets_nor_mvtec_is_refused():
    with pytest.raises(ConfigError, match="needs 'datasets'.*'mvtec'"):
        validate_config({"methods": ["rotnet"], "seeds": [0]}, SCHEMA)


@pytest.mark.parametrize(
    ("mvtec", "message"),
    [
        ({"patches": {"stride": 5}}, "'mvtec.patches.stride': 5 does not tile"),
        ({"patches": {"size": 300}}, "'mvtec.patches.size': 300 is larger"),
        ({"masks": "maybe"}, "'mvtec.masks'"),
        ({"detectors": {"lof": {}}}, "'mvtec.detectors'"),
        ({"categories": ["bad-name"]}, "'mvtec.categories'"),
        ({"methods": ["simclr"]}, "'mvtec.methods"),
    ],
)
def test_bad_mvtec_values_name_the_key(mvtec, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(_mvtec(**mvtec), SCHEMA)


def test_explain_needs_a_sweep_dataset_and_methods():
    config = {
        "datasets": {"digits": {"classes": ["0"]}},
        "methods": ["raw", "rotnet"],
        "seeds": [0],
        "detectors": {"kde": {}},
        "explain": {"dataset": "digits"},
    }
    assert validate_config(config, SCHEMA)["explain"]["methods"] == ["rotnet"]
    config["explain"] = {"dataset": "cifar10"}
    with pytest.raises(ConfigError, match="'explain.dataset': 'cifar10'"):
        validate_config(config, SCHEMA)
    config["explain"] = {"dataset": "digits", "methods": ["contrastive"]}
    with pytest.raises(ConfigError, match="'explain.methods'"):
        validate_config(config, SCHEMA)
