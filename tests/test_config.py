"""Config validation against the shipped JSON schema: defaults, errors, sweep id, execution.

The workflow's parse-time errors and the train execution settings are here too; methods and
data sets in test_config_recipes.py, detectors and heads in test_config_detectors.py.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from pipeline_lib.config.validate import ConfigError, resolve_classes, sweep_id, validate_config
from pipeline_lib.registry import ROTATION_DETECTORS
from tests.config_cases import (
    DATASETS,
    DETECTORS,
    DIGITS,
    ROOT,
    SCHEMA,
    config_error,
    minimal_config,
)

#: The smallest valid config (a fresh copy per test).
config = pytest.fixture(minimal_config, name="config")


def test_defaults_are_filled(config) -> None:
    filled = validate_config(config, SCHEMA)
    assert filled["splits"] == {"contamination": [0.0], "clean_inliers": []}
    assert filled["tracking"] == {"enabled": True, "timeout_s": 5}
    assert filled["data"] == {"root": None, "download": False}
    assert filled["embed"] == {
        "batch_size": 256,
        "width": 64,
        "imagenet_weights": None,
        "imagenet_size": 224,
    }
    assert filled["detect"] == {
        "max_fit": 20000,
        "rotation_classifier": True,
        "rotation_detectors": list(ROTATION_DETECTORS),
    }
    assert filled["train"]["epochs"] == 2048 and filled["train"]["lr"] == 0.01
    assert filled["experiment"] == "droc-bench"
    # Per-data-set defaults come from additionalProperties.
    assert filled["datasets"]["digits"] == {
        "classes": ["0", "8"],
        "options": {},
        "max_train_per_class": None,
        "max_test_per_class": None,
    }


def test_defaults_do_not_touch_the_input(config) -> None:
    original = copy.deepcopy(config)
    validate_config(config, SCHEMA)
    assert config == original


def test_given_values_win_over_defaults(config) -> None:
    config["splits"] = {"contamination": [0.1]}
    config["tracking"] = {"timeout_s": 2}
    filled = validate_config(config, SCHEMA)
    assert filled["splits"] == {"contamination": [0.1], "clean_inliers": []}
    assert filled["tracking"] == {"enabled": True, "timeout_s": 2}


def test_classes_default_to_all(config) -> None:
    config["datasets"] = {"mnist": {}}
    assert validate_config(config, SCHEMA)["datasets"]["mnist"]["classes"] == "all"


def test_null_detector_params_become_an_empty_mapping(config) -> None:
    config["detectors"] = {"kde": None, "ocsvm": {"nu": 0.1}}
    assert validate_config(config, SCHEMA)["detectors"] == {"kde": {}, "ocsvm": {"nu": 0.1}}


def test_shipped_tiny_config_is_valid() -> None:
    raw = yaml.safe_load((ROOT / "tests" / "configs" / "tiny.yaml").read_text())
    filled = validate_config(raw, SCHEMA)
    assert filled["datasets"]["digits"]["classes"] == ["0", "8"]
    assert filled["tracking"]["timeout_s"] == 3


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("datasets", {"cifar11": {}}, ["'datasets'", "'cifar11'", DATASETS]),
        ("datasets", {"digits": {}, "cifar11": {}}, ["'cifar11'", DATASETS]),
        ("methods", ["raw", "simclr"], ["'methods[1]'", "'simclr'", "raw, resnet18_random"]),
        ("detectors", {"lof": {}}, ["'detectors'", "'lof'", DETECTORS]),
    ],
    ids=["dataset", "dataset-beside-a-known-one", "method", "detector"],
)
def test_unknown_name_names_key_and_allowed_values(config, key, value, expected) -> None:
    config[key] = value
    message = config_error(config)
    for part in expected:
        assert part in message


@pytest.mark.parametrize(
    ("value", "bound"),
    [(1.0, "outside the allowed range [0, 1)"), (-0.1, "outside the allowed range [0, 1)")],
)
def test_contamination_out_of_range_names_key_and_bound(config, value, bound) -> None:
    config["splits"] = {"contamination": [0.0, value]}
    message = config_error(config)
    assert "'splits.contamination[1]'" in message
    assert str(value) in message
    assert bound in message


def test_unknown_top_level_key_lists_allowed_keys(config) -> None:
    config["bogus"] = 1
    message = config_error(config)
    assert "'<top level>'" in message
    assert "'bogus' was unexpected" in message
    assert (
        "allowed keys: data, datasets, deploy, detect, detectors, embed, experiment, explain, "
        "methods, mvtec, plugins, seeds, spaces, splits, studies, study, tracking, train, "
        "variants" in message
    )


def test_unknown_dataset_setting_lists_allowed_keys(config) -> None:
    config["datasets"] = {"digits": {"clases": ["0"]}}
    message = config_error(config)
    assert "'datasets.digits'" in message
    assert "'clases' was unexpected" in message
    assert "classes, max_test_per_class, max_train_per_class, options" in message


def test_missing_required_key_is_named(config) -> None:
    del config["seeds"]
    assert "'seeds' is a required property" in config_error(config)


@pytest.mark.parametrize("classes", ["0", 3, []])
def test_classes_not_a_list_names_the_key(config, classes) -> None:
    config["datasets"] = {"digits": {"classes": classes}}
    message = config_error(config)
    assert "'datasets.digits.classes'" in message
    assert repr(classes) in message


def test_classes_not_a_list_names_the_allowed_forms(config) -> None:
    config["datasets"] = {"digits": {"classes": "0"}}
    message = config_error(config)
    assert "'all'" in message or '"all"' in message
    assert "list" in message


def test_detector_params_not_a_mapping_are_rejected(config) -> None:
    config["detectors"] = {"knn": [1]}
    message = config_error(config)
    assert "'detectors.knn'" in message
    assert "'object', 'null'" in message


def test_every_schema_problem_is_reported_in_one_error(config) -> None:
    """Three mistakes take one run to see, not three: one line per problem, each with its key."""
    config["bogus"] = 1
    config["splits"] = {"contamination": [0.0, 1.0]}
    config["detectors"] = {"knn": {}, "lof": {}}
    message = config_error(config)
    lines = message.splitlines()
    assert lines[0] == "3 problems in the config:"
    assert len(lines) == 4 and all(line.startswith("  - config key '") for line in lines[1:])
    assert "'bogus' was unexpected" in message
    assert "'splits.contamination[1]'" in message and "[0, 1)" in message
    assert "'lof'" in message and "ocsvm_linear" in message


def test_every_problem_beyond_the_schema_is_reported_in_one_error(config) -> None:
    """Checks that need a schema-valid config run side by side too."""
    config["methods"] = ["raw", "resnet50_imagenet"]
    config["train"] = {"fuse": 2, "amp": "float16"}
    config["detectors"] = {"knn": {"n_neighbours": 3}}
    message = config_error(config)
    assert message.startswith("3 problems in the config:\n")
    assert "'embed.imagenet_weights'" in message
    assert "'train.fuse'" in message and "float16" in message
    assert "'detectors.knn'" in message and "n_neighbours" in message


def test_one_problem_is_reported_as_before(config) -> None:
    config["bogus"] = 1
    message = config_error(config)
    assert message.startswith("config key '<top level>'") and "\n" not in message


def test_resolve_classes_expands_all_and_keeps_requested_order() -> None:
    assert resolve_classes("digits", "all", DIGITS) == list(DIGITS)
    assert resolve_classes("digits", ["8", "0"], DIGITS) == ["8", "0"]


def test_resolve_classes_unknown_class_names_key_and_allowed_names() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_classes("digits", ["0", "ten"], DIGITS)
    message = str(info.value)
    assert "'datasets.digits.classes'" in message
    assert "'ten'" in message
    assert "allowed: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9" in message
    with pytest.raises(ConfigError, match="unknown classes 'ten', 'eleven'; allowed: 0, 1"):
        resolve_classes("digits", ["ten", "0", "eleven"], DIGITS)


def test_sweep_id_is_stable_for_equal_configs(config) -> None:
    first = sweep_id(validate_config(config, SCHEMA))
    second = sweep_id(validate_config(copy.deepcopy(config), SCHEMA))
    assert first == second
    assert len(first) == 12 and int(first, 16) >= 0
    # Key order does not matter.
    reordered = dict(reversed(list(validate_config(config, SCHEMA).items())))
    assert sweep_id(reordered) == first


def test_sweep_id_changes_with_the_seeds(config) -> None:
    base = sweep_id(validate_config(config, SCHEMA))
    config["seeds"] = [0, 1]
    assert sweep_id(validate_config(config, SCHEMA)) != base


def test_sweep_id_ignores_data_root_and_tracking(config) -> None:
    base = sweep_id(validate_config(config, SCHEMA))
    config["data"] = {"root": "/somewhere/else", "download": True}
    config["tracking"] = {"enabled": False, "timeout_s": 1}
    assert sweep_id(validate_config(config, SCHEMA)) == base


def test_sweep_id_ignores_the_imagenet_weights_path(config, tmp_path) -> None:
    weights = tmp_path / "resnet50.pth"
    weights.write_bytes(b"")
    config["methods"] = ["raw", "resnet50_imagenet"]
    config["embed"] = {"imagenet_weights": str(weights)}
    base = sweep_id(validate_config(config, SCHEMA))
    moved = tmp_path / "elsewhere.pth"
    moved.write_bytes(b"")
    config["embed"] = {"imagenet_weights": str(moved)}
    assert sweep_id(validate_config(config, SCHEMA)) == base
    config["embed"]["imagenet_size"] = 128
    assert sweep_id(validate_config(config, SCHEMA)) != base


# The config errors the workflow stops on at parse time, checked in-process: the same steps
# as workflow/rules/common.smk (validate_config, the study grids, each grid's classes), whose
# ConfigError, DataError or GridError the Snakefile prints as "Invalid config: ..." before any
# job. tests/workflow/test_config_errors.py keeps one such case end to end through
# `snakemake -n` (the message, the exit status, no output written).
TINY = yaml.safe_load((ROOT / "tests" / "configs" / "tiny.yaml").read_text())


def _workflow_config_error(changes: dict) -> str:
    """The message the Snakefile stops with for the tiny config with ``changes`` applied."""
    from pipeline_lib.config.grids import GridError, study_grids
    from pipeline_lib.data import DataError, dataset_class_names

    config = copy.deepcopy({**TINY, **changes})
    with pytest.raises((ConfigError, DataError, GridError)) as info:
        validated = validate_config(config, SCHEMA)
        for grid in study_grids(validated, validated["studies"]):
            for name, settings in grid.datasets.items():
                names = dataset_class_names(
                    name, root=validated["data"]["root"], **settings.get("options", {})
                )
                resolve_classes(name, settings.get("classes", "all"), names)
    return str(info.value)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"methods": ["raw", "simclr"]}, ["methods[1]", "'simclr'", "resnet18_random"]),
        ({"detectors": {"ocsvm": {}, "lof": {}}}, ["detectors", "'lof'", "ocsvm_linear"]),
        ({"datasets": {"svhn": {"classes": "all"}}}, ["datasets", "'svhn'", "cifar10"]),
        ({"splits": {"contamination": [0.0, 1.0]}}, ["splits.contamination[1]", "1.0"]),
        (
            {"methods": ["raw", "resnet50_imagenet"]},
            ["embed.imagenet_weights", "resnet50_imagenet", "resnet50-0676ba61.pth"],
        ),
        (
            {"datasets": {"digits": {"classes": ["0", "eleven"]}}},
            ["datasets.digits.classes", "'eleven'", "allowed: 0, 1, 2"],
        ),
        (
            {"datasets": {"celeba": {"classes": "all"}}},
            ["splits.contamination", "0.1", "'celeba'", "no outliers"],
        ),
        (
            {"splits": {"contamination": [0.0], "clean_inliers": [61]}},
            ["splits.clean_inliers", "61", "max_train_per_class keeps 60"],
        ),
    ],
)
def test_invalid_tiny_config_stops_the_workflow_naming_the_key(
    changes: dict, expected: list[str]
) -> None:
    message = _workflow_config_error(changes)
    for fragment in expected:
        assert fragment in message


def test_train_fuse_is_a_positive_integer(config) -> None:
    assert "fuse" not in validate_config(config, SCHEMA)["train"]  # absent: no default written
    for bad in (0, -1, 1.5, "two", "1.5", True):
        config["train"] = {"fuse": bad}
        assert "config key 'train.fuse'" in config_error(copy.deepcopy(config)), bad
    config["train"] = {"fuse": 3}
    assert validate_config(config, SCHEMA)["train"]["fuse"] == 3


def test_nested_command_line_values_get_the_schema_types(config) -> None:
    """Snakemake reads a nested --config (and a profile's config: entries) with every scalar a
    string: `--config "train={fuse: 10, amp: null}"` gives {'fuse': '10', 'amp': 'null'}."""
    from snakemake.cli import parse_config

    given = parse_config(["train={fuse: 10, epochs: 3, amp: null, lr: 0.5}", "seeds=[0, 1]"])
    assert given["train"]["fuse"] == "10"  # what Snakemake hands over
    filled = validate_config({**config, **given}, SCHEMA)
    assert filled["train"]["fuse"] == 10 and filled["train"]["epochs"] == 3
    assert filled["train"]["amp"] is None and filled["train"]["lr"] == 0.5
    assert filled["seeds"] == [0, 1]
    # Strings the schema allows stay strings (class names), and nonsense is still refused.
    assert validate_config(config, SCHEMA)["datasets"]["digits"]["classes"] == ["0", "8"]
    config["train"] = {"epochs": "many"}
    assert "config key 'train.epochs'" in config_error(config)


def test_the_slurm_profile_fuses_ten_models_per_training_job(config) -> None:
    """profiles/slurm sets train.fuse 10 through Snakemake's own config parsing."""
    from snakemake.cli import parse_config
    from snakemake.utils import update_config

    profile = yaml.safe_load((ROOT / "profiles/slurm/config.v8+.yaml").read_text())
    config["train"] = {"epochs": 5}  # merged into, not replaced (Snakemake's own merge)
    merged = copy.deepcopy(config)
    update_config(merged, parse_config(profile["config"]))
    filled = validate_config(merged, SCHEMA)
    assert filled["train"]["fuse"] == 10 and filled["train"]["epochs"] == 5


def test_train_fuse_refuses_float16(config) -> None:
    config["train"] = {"fuse": 2, "amp": "float16"}
    assert "train.fuse" in config_error(config) and "float16" in config_error(config)
    config["train"] = {"fuse": 1, "amp": "float16"}  # one model per job: as before
    validate_config(config, SCHEMA)


def _assert_execution_setting(config: dict, key: str, bad: tuple, good: tuple, method: str) -> None:
    """``train.<key>`` refuses each of ``bad`` naming the key; each of ``good`` is kept as
    given, with no default written and no effect on the sweep id or ``method``'s training."""
    from pipeline_lib.config.grids import variant_training

    base = validate_config(config, SCHEMA)
    assert key not in base["train"]
    for value in bad:
        config["train"] = {key: value}
        assert f"config key 'train.{key}'" in config_error(copy.deepcopy(config)), value
    for value in good:
        chosen = validate_config({**config, "train": {key: value}}, SCHEMA)
        assert chosen["train"][key] == value
        assert sweep_id(chosen) == sweep_id(base)
        trained, default = (variant_training(method, c["train"], {}) for c in (chosen, base))
        assert trained == default


def test_train_step_mode_is_an_execution_setting(config) -> None:
    """auto, eager, graph or compiled: no default written, no effect on sweep ids or the
    training settings."""
    _assert_execution_setting(
        config, "step_mode", ("inductor", 1, True), ("auto", "eager", "graph", "compiled"), "rotnet"
    )


def test_train_draws_is_an_execution_setting(config) -> None:
    """host or device: no default written, no effect on sweep ids or the training settings."""
    _assert_execution_setting(config, "draws", ("gpu", 1, None), ("host", "device"), "denoising")


def test_train_eval_every_is_an_execution_setting(config) -> None:
    """No default written, no effect on sweep ids or the training settings; fused jobs
    refuse it (the fused trainer has no evaluation hook)."""
    _assert_execution_setting(config, "eval_every", (-1, 1.5, "often"), (None, 0, 256), "rotnet")
    config["train"] = {"eval_every": 4, "fuse": 10}
    message = config_error(copy.deepcopy(config))
    assert "config key 'train.eval_every': 4" in message and "train.fuse 10" in message
    for fuse in (1, 10):  # off, or one model per job: fine
        validate_config(
            {**config, "train": {"eval_every": 4 if fuse == 1 else 0, "fuse": fuse}}, SCHEMA
        )


def test_train_step_mode_graph_refuses_float16(config) -> None:
    config["train"] = {"step_mode": "graph", "amp": "float16"}
    assert "train.step_mode" in config_error(config) and "float16" in config_error(config)
    config["train"] = {"step_mode": "compiled", "amp": "float16"}
    assert "train.step_mode': compiled" in config_error(config) and "float16" in config_error(
        config
    )
    config["train"] = {"step_mode": "auto", "amp": "float16"}  # auto falls back to eager
    validate_config(config, SCHEMA)


def test_train_fuse_leaves_the_sweep_id_and_the_training_settings(config) -> None:
    """How many models a job trains is not science: results of any fuse are the same files."""
    from pipeline_lib.config.grids import variant_training

    base = validate_config(config, SCHEMA)
    for fuse in (1, 4):
        fused = validate_config({**config, "train": {"fuse": fuse}}, SCHEMA)
        assert sweep_id(fused) == sweep_id(base)
        assert variant_training("rotnet", fused["train"], {}) == variant_training(
            "rotnet", base["train"], {}
        )
