"""Config validation of detector parameters and head depths, at the top level and in studies."""

from __future__ import annotations

import pytest

from pipeline_lib.config.validate import validate_config
from tests.config_cases import SCHEMA, config_error, minimal_config

#: The smallest valid config (a fresh copy per test).
config = pytest.fixture(minimal_config, name="config")


OCSVM_PARAMETERS = (
    "nu, gamma, gamma_scale, normalize, tol, cache_size, max_iter, chunk_size, dtype, device"
)


def test_misspelt_detector_parameter_names_key_and_allowed_parameters(config) -> None:
    config["detectors"] = {"ocsvm": {"gama": 1}}
    assert config_error(config) == (
        "config key 'detectors.ocsvm': unknown parameter 'gama' (did you mean 'gamma'?); "
        f"allowed: {OCSVM_PARAMETERS}"
    )


def test_parameter_of_another_detector_is_unknown(config) -> None:
    config["detectors"] = {"knn": {}, "gde": {"gamma_scale": 2.0}}
    message = config_error(config)
    assert "'detectors.gde': unknown parameter 'gamma_scale'" in message
    assert message.endswith("allowed: normalize, reg_covar, random_state")


def test_misspelt_mvtec_detector_parameter_names_the_mvtec_key() -> None:
    config = {"methods": ["rotnet"], "seeds": [0], "mvtec": {"detectors": {"kde": {"chunk": 64}}}}
    message = config_error(config)
    assert "config key 'mvtec.detectors.kde': unknown parameter 'chunk'" in message
    assert "allowed: gamma, gamma_scale, normalize, chunk_size, dtype, device" in message


def test_registered_detector_parameters_pass(config) -> None:
    config["detectors"] = {"ocsvm": {"nu": 0.1, "gamma_scale": 1.0}, "knn": {"n_neighbors": 5}}
    assert validate_config(config, SCHEMA)["detectors"]["ocsvm"] == {"nu": 0.1, "gamma_scale": 1.0}


@pytest.mark.parametrize("method", ["rotnet", "denoising"])
def test_head_depth_of_a_headless_variant_names_key_and_the_methods_with_a_head(
    config, method
) -> None:
    config["variants"] = {"x": {"method": method, "train": {"head_depth": 2}}}
    config["methods"] = ["raw", "x"]
    message = config_error(config)
    assert message.startswith(
        f"config key 'variants.x.train.head_depth': head_depth: 2 but {method} has no MLP head"
    )
    assert "(methods with one: rotation, contrastive, contrastive_da)" in message


def test_top_level_head_depth_is_for_the_mlp_head_methods_only(config) -> None:
    from pipeline_lib.config.grids import variant_training

    config["methods"] = ["rotnet", "contrastive", "x"]
    config["train"] = {"head_depth": 2}
    config["variants"] = {"x": {"method": "denoising", "train": {"head_depth": None}}}
    filled = validate_config(config, SCHEMA)
    depth = {
        name: variant_training(name, filled["train"], filled["variants"])["head_depth"]
        for name in filled["methods"]
    }
    assert depth == {"rotnet": None, "contrastive": 2, "x": None}


def _study(detectors: dict) -> dict:
    return {
        "study": {"kind": "contamination"},
        "datasets": {"digits": {"classes": ["0"]}},
        "methods": ["raw"],
        "seeds": [0],
        "detectors": detectors,
    }


def test_conflicting_study_detector_parameters_name_both_sources(config) -> None:
    config["detectors"] = {"knn": {}}
    config["studies"] = [_study({"knn": {"n_neighbors": 5}})]
    assert config_error(config) == (
        "config key 'detectors.knn': study 'inline study' sets {'n_neighbors': 5} but the "
        "top-level detectors sets {}; a sweep runs a detector with one parameter set (its "
        "results share one path), so make them equal or drop knn from one of them"
    )


def test_study_detector_parameters_equal_after_defaults_merge(config) -> None:
    from pipeline_lib.config.validate import merge_detectors

    config["detectors"] = {"knn": {}}
    config["studies"] = [_study({"knn": {"n_neighbors": 1}, "gde": {}})]
    filled = validate_config(config, SCHEMA)
    assert merge_detectors(filled) == {"knn": {}, "gde": {}}
