"""The torch-free registry: ids the schema must agree with, detector parameters, head depth."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipeline_lib import registry
from pipeline_lib.config.validate import load_schema
from pipeline_lib.registry import (
    DETECTOR_DEFAULTS,
    GAMMA_SCALE,
    detector_settings,
    method_training,
    training_arguments,
    unknown_detector_parameters,
)

SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"


@pytest.fixture(scope="module")
def schema() -> dict:
    return load_schema(SCHEMA)["properties"]


def test_schema_detector_ids_equal_the_registry(schema) -> None:
    top = schema["detectors"]["propertyNames"]["enum"]
    patch = schema["mvtec"]["properties"]["detectors"]["propertyNames"]["enum"]
    assert top == list(registry.DETECTORS) == ["ocsvm", "ocsvm_linear", "kde", "gde", "knn"]
    assert patch == list(registry.DETECTORS)


def test_rotation_detector_ids_agree_everywhere(schema) -> None:
    """Schema, registry, display names, the paper config and docs/protocol.md list all four."""
    from pipeline_lib.paper.published import DETECTOR_DISPLAY

    ids = list(registry.ROTATION_DETECTORS)
    assert ids == ["rotation_classifier", "rotation_log_p", "rotation_p0", "rotation_released"]
    listed = schema["detect"]["properties"]["rotation_detectors"]
    assert listed["items"]["enum"] == listed["default"] == ids
    assert len(set(registry.ROTATION_DETECTORS.values())) == len(ids)
    assert set(ids) <= set(DETECTOR_DISPLAY)
    assert len({DETECTOR_DISPLAY[i] for i in ids}) == len(ids)  # each its own name
    root = SCHEMA.parents[2]
    paper = yaml.safe_load((root / "config" / "paper.yaml").read_text())
    assert paper["detect"]["rotation_detectors"] == ids
    protocol = (root / "docs" / "protocol.md").read_text()
    assert all(f"`{i}`" in protocol for i in ids)
    assert "`rotation_log_p` Golan et al.'s sum of log p" in " ".join(protocol.split())


def test_schema_method_ids_are_the_method_tables(schema) -> None:
    variant = schema["variants"]["additionalProperties"]["properties"]["method"]["enum"]
    mvtec = schema["mvtec"]["properties"]["methods"]["items"]["enum"]
    explain = schema["explain"]["properties"]["methods"]["items"]["enum"]
    assert variant == list(registry.TRAINED_METHODS)
    assert mvtec == list(registry.METHODS)
    assert explain == [m for m in registry.METHODS if m != "raw"]
    # The file names no method: the enums come from the table when the schema is loaded.
    raw = SCHEMA.read_text()
    assert "x-methods: trained" in raw and "contrastive_da]" not in raw


def test_a_method_added_to_the_table_validates_and_is_reserved(monkeypatch) -> None:
    """Any row of the table (a built-in or another) is a method of the schema and the grids."""
    flip = registry.MethodSpec(
        "flip",
        trained=True,
        head="projection",
        task="tasks:FLIP",
        batch_size=8,
        views_per_instance=2,
    )
    monkeypatch.setitem(registry.METHOD_SPECS, "flip", flip)
    schema = load_schema(SCHEMA)["properties"]
    assert schema["variants"]["additionalProperties"]["properties"]["method"]["enum"][-1] == "flip"
    assert registry.is_trained("flip") and registry.method_ids(trained=True)[-1] == "flip"
    assert registry.training_arguments("flip", {"temperature": 0.5})["batch_size"] == 8
    monkeypatch.delitem(registry.METHOD_SPECS, "flip")
    assert (
        "flip"
        not in load_schema(SCHEMA)["properties"]["mvtec"]["properties"]["methods"]["items"]["enum"]
    )


def test_a_spec_states_a_consistent_method() -> None:
    with pytest.raises(ValueError, match="unknown head kind 'mlp'"):
        registry.MethodSpec("x", trained=True, head="mlp", task="m:T", batch_size=8)
    with pytest.raises(ValueError, match="names its task and a head kind"):
        registry.MethodSpec("x", trained=True, head="projection", batch_size=8)
    with pytest.raises(ValueError, match="default batch size and its views"):
        registry.MethodSpec("x", trained=True, head="projection", task="m:T")
    with pytest.raises(ValueError, match="views_switch 'views' is not one of"):
        registry.MethodSpec(
            "x",
            trained=True,
            head="decoder",
            task="m:T",
            batch_size=8,
            views_per_instance=1,
            views_switch="views",
        )


def test_schema_dataset_ids_equal_the_data_set_registry(schema) -> None:
    from pipeline_lib.data import DATASETS

    assert sorted(schema["datasets"]["propertyNames"]["enum"]) == sorted(DATASETS)


def test_gamma_scale_is_the_papers_ten_and_the_rbf_detectors_default() -> None:
    assert GAMMA_SCALE == 10.0
    assert DETECTOR_DEFAULTS["ocsvm"]["gamma_scale"] == GAMMA_SCALE
    assert DETECTOR_DEFAULTS["kde"]["gamma_scale"] == GAMMA_SCALE


def test_unknown_detector_parameters_are_listed_in_order() -> None:
    assert unknown_detector_parameters("ocsvm", {"nu": 0.1, "gama": 1, "kernel": "rbf"}) == [
        "gama",
        "kernel",
    ]
    assert unknown_detector_parameters("gde", {"normalize": False}) == []
    with pytest.raises(KeyError):
        unknown_detector_parameters("svm", {})


def test_detector_settings_fill_the_registry_defaults() -> None:
    assert detector_settings("knn", None) == {
        "n_neighbors": 1,
        "chunk_size": 2048,
        "dtype": "float32",
        "device": "auto",
    }
    assert detector_settings("knn", {"n_neighbors": 5})["n_neighbors"] == 5
    assert detector_settings("ocsvm", {}) == detector_settings("ocsvm", {"nu": 0.5})


def test_top_level_head_depth_sizes_only_the_mlp_head_methods() -> None:
    training = {"head_depth": 2, "lr": 0.01}
    assert method_training("contrastive", training)["head_depth"] == 2
    assert method_training("rotation", training)["head_depth"] == 2
    for headless in ("rotnet", "denoising"):
        assert method_training(headless, training) == {"head_depth": None, "lr": 0.01}
        arguments = training_arguments(headless, method_training(headless, training))
        assert arguments["head_depth"] is None


def test_variant_overrides_win_over_the_top_level() -> None:
    merged = method_training("contrastive", {"head_depth": 2, "lr": 0.01}, {"head_depth": 0})
    assert merged == {"head_depth": 0, "lr": 0.01}
    assert method_training("rotnet", {"lr": 0.01}, {"head_depth": None}) == {
        "lr": 0.01,
        "head_depth": None,
    }


@pytest.mark.parametrize("method", ["rotnet", "denoising"])
def test_a_head_depth_for_a_headless_method_raises_instead_of_being_dropped(method) -> None:
    with pytest.raises(ValueError, match=rf"head_depth: 2 but {method} has no MLP head"):
        method_training(method, {}, {"head_depth": 2})
    with_head = r"methods with one: rotation, contrastive, contrastive_da"
    with pytest.raises(ValueError, match=with_head):
        training_arguments(method, {"head_depth": 2})
