"""Config validation of ``pipeline_lib.config.validate`` against the shipped JSON schema."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from pipeline_lib.config.validate import ConfigError, resolve_classes, sweep_id, validate_config
from pipeline_lib.registry import ROTATION_DETECTORS

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
DATASETS = "cifar10, cifar100, fmnist, catvsdog, celeba, mnist, digits, image_folder"
DETECTORS = "ocsvm, ocsvm_linear, kde, gde, knn"
DIGITS = tuple(str(k) for k in range(10))


@pytest.fixture
def config() -> dict:
    """The smallest valid config: every required key, nothing else."""
    return {
        "datasets": {"digits": {"classes": ["0", "8"]}},
        "methods": ["raw"],
        "seeds": [0],
        "detectors": {"knn": {}},
    }


def _error(config: dict) -> str:
    with pytest.raises(ConfigError) as info:
        validate_config(config, SCHEMA)
    return str(info.value)


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


def test_unknown_dataset_names_key_and_allowed_values(config) -> None:
    config["datasets"] = {"cifar11": {}}
    message = _error(config)
    assert "'datasets'" in message
    assert "'cifar11'" in message
    assert DATASETS in message


def test_unknown_dataset_beside_a_known_one_is_named(config) -> None:
    config["datasets"] = {"digits": {}, "cifar11": {}}
    message = _error(config)
    assert "'cifar11'" in message and DATASETS in message


def test_unknown_method_names_key_and_allowed_values(config) -> None:
    config["methods"] = ["raw", "simclr"]
    message = _error(config)
    assert "'methods[1]'" in message
    assert "'simclr'" in message
    assert "raw, resnet18_random" in message


def test_unknown_detector_names_key_and_allowed_values(config) -> None:
    config["detectors"] = {"lof": {}}
    message = _error(config)
    assert "'detectors'" in message
    assert "'lof'" in message
    assert DETECTORS in message


@pytest.mark.parametrize(
    ("value", "bound"),
    [(1.0, "outside the allowed range [0, 1)"), (-0.1, "outside the allowed range [0, 1)")],
)
def test_contamination_out_of_range_names_key_and_bound(config, value, bound) -> None:
    config["splits"] = {"contamination": [0.0, value]}
    message = _error(config)
    assert "'splits.contamination[1]'" in message
    assert str(value) in message
    assert bound in message


def test_unknown_top_level_key_lists_allowed_keys(config) -> None:
    config["bogus"] = 1
    message = _error(config)
    assert "'<top level>'" in message
    assert "'bogus' was unexpected" in message
    assert (
        "allowed keys: data, datasets, deploy, detect, detectors, embed, experiment, explain, "
        "methods, mvtec, plugins, seeds, spaces, splits, studies, study, tracking, train, "
        "variants" in message
    )


def test_unknown_dataset_setting_lists_allowed_keys(config) -> None:
    config["datasets"] = {"digits": {"clases": ["0"]}}
    message = _error(config)
    assert "'datasets.digits'" in message
    assert "'clases' was unexpected" in message
    assert "classes, max_test_per_class, max_train_per_class, options" in message


def test_missing_required_key_is_named(config) -> None:
    del config["seeds"]
    assert "'seeds' is a required property" in _error(config)


@pytest.mark.parametrize("classes", ["0", 3, []])
def test_classes_not_a_list_names_the_key(config, classes) -> None:
    config["datasets"] = {"digits": {"classes": classes}}
    message = _error(config)
    assert "'datasets.digits.classes'" in message
    assert repr(classes) in message


def test_classes_not_a_list_names_the_allowed_forms(config) -> None:
    config["datasets"] = {"digits": {"classes": "0"}}
    message = _error(config)
    assert "'all'" in message or '"all"' in message
    assert "list" in message


def test_detector_params_not_a_mapping_are_rejected(config) -> None:
    config["detectors"] = {"knn": [1]}
    message = _error(config)
    assert "'detectors.knn'" in message
    assert "'object', 'null'" in message


def test_every_schema_problem_is_reported_in_one_error(config) -> None:
    """Three mistakes take one run to see, not three: one line per problem, each with its key."""
    config["bogus"] = 1
    config["splits"] = {"contamination": [0.0, 1.0]}
    config["detectors"] = {"knn": {}, "lof": {}}
    message = _error(config)
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
    message = _error(config)
    assert message.startswith("3 problems in the config:\n")
    assert "'embed.imagenet_weights'" in message
    assert "'train.fuse'" in message and "float16" in message
    assert "'detectors.knn'" in message and "n_neighbours" in message


def test_one_problem_is_reported_as_before(config) -> None:
    config["bogus"] = 1
    message = _error(config)
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


def test_resnet50_imagenet_without_weights_names_the_key(config) -> None:
    config["methods"] = ["raw", "resnet50_imagenet"]
    message = _error(config)
    assert "'embed.imagenet_weights'" in message and "resnet50_imagenet" in message
    assert "resnet50-0676ba61.pth" in message


def test_resnet50_imagenet_with_a_missing_weights_file_names_the_path(config, tmp_path) -> None:
    config["methods"] = ["resnet50_imagenet"]
    config["embed"] = {"imagenet_weights": str(tmp_path / "nowhere.pth")}
    message = _error(config)
    assert "'embed.imagenet_weights'" in message and str(tmp_path / "nowhere.pth") in message


def test_imagenet_weights_are_not_needed_without_the_method(config) -> None:
    assert validate_config(config, SCHEMA)["embed"]["imagenet_weights"] is None


def test_imagenet_size_below_32_names_key_and_bound(config) -> None:
    config["embed"] = {"imagenet_size": 16}
    message = _error(config)
    assert "'embed.imagenet_size'" in message and "[32, inf)" in message


def test_schema_ids_match_the_library_registries() -> None:
    from pipeline_lib.config.validate import load_schema
    from pipeline_lib.data import DATASETS as DATA_REGISTRY
    from pipeline_lib.detection.detectors import DETECTORS as DETECTOR_REGISTRY
    from pipeline_lib.models.representation import TRAINED_METHODS

    schema = load_schema(SCHEMA)["properties"]
    assert set(schema["datasets"]["propertyNames"]["enum"]) == set(DATA_REGISTRY)
    assert set(schema["detectors"]["propertyNames"]["enum"]) == set(DETECTOR_REGISTRY)
    trained = schema["variants"]["additionalProperties"]["properties"]["method"]["enum"]
    assert set(trained) == set(TRAINED_METHODS)


@pytest.mark.parametrize(
    ("key", "value", "method", "suggestion"),
    [
        ("denoising_target", "patch_normalized", "denoising", "denoising_patchnorm"),
        ("denoising_views", False, "denoising", "denoising_no_views"),
        ("noise_std", 0.4, "denoising", "denoising_noise"),
        ("denoising_decoder", "spatial", "denoising", "denoising_spatial"),
        ("view_jitter", "torchvision", "denoising", "denoising_tv_jitter"),
        ("exclude_bn_from_decay", True, "rotnet", "rotnet_bn_no_decay"),
        ("da_batching", "per_image", "contrastive_da", "contrastive_da_per_image"),
        ("view_jitter", "torchvision", "contrastive", "contrastive_tv_jitter"),
        ("loss_form", "same_view", "contrastive", "contrastive_loss"),
        ("epoch_order", "permutation", "denoising", "denoising_permutation"),
        ("init", "torch", "rotation", "rotation_torch_init"),
    ],
)
def test_paper_rows_must_run_the_paper_recipe(config, key, value, method, suggestion) -> None:
    config["methods"] = [method]
    config["train"] = {key: value}
    message = _error(config)
    assert f"train.{key}" in message and f"row {method!r}" in message
    assert suggestion in message and "docs/protocol.md" in message
    # The same setting in a named variant is fine: the row carries the variant's name.
    config["variants"] = {suggestion: {"method": method, "train": {key: value}}}
    config["methods"] = [suggestion]
    config["train"] = {}
    assert validate_config(config, SCHEMA)["variants"][suggestion]["train"] == {key: value}


def test_denoising_readings_reach_training_under_their_variant_names(config) -> None:
    from pipeline_lib.config.grids import variant_training
    from pipeline_lib.paper.protocol import protocol_differences
    from pipeline_lib.registry import training_arguments

    config["variants"] = {
        "denoising_no_views": {"method": "denoising", "train": {"denoising_views": False}},
        "denoising_noise04": {"method": "denoising", "train": {"noise_std": 0.4}},
        "denoising_spatial": {"method": "denoising", "train": {"denoising_decoder": "spatial"}},
    }
    config["methods"] = ["denoising", *config["variants"]]
    filled = validate_config(config, SCHEMA)

    def arguments(name: str) -> dict:
        return training_arguments(
            "denoising", variant_training(name, filled["train"], filled["variants"])
        )

    recipe = arguments("denoising")
    assert recipe["denoising_views"] is True and recipe["view_jitter"] == "released"
    assert (recipe["noise_std"], recipe["denoising_decoder"]) == (0.1, "pooled")
    # without views the view settings are not arguments of the run (nor of its job params)
    assert arguments("denoising_no_views")["denoising_views"] is False
    assert "view_jitter" not in arguments("denoising_no_views")
    assert arguments("denoising_noise04")["noise_std"] == 0.4
    assert arguments("denoising_spatial")["denoising_decoder"] == "spatial"
    differences = protocol_differences(filled)
    assert "non-paper variant denoising_spatial (denoising: denoising_decoder=spatial)" in (
        differences
    )
    assert "non-paper variant denoising_noise04 (denoising: noise_std=0.4)" in differences
    assert not any("variant denoising " in d or "training:" in d for d in differences)


@pytest.mark.parametrize("where", ["train", "variant"])
def test_the_former_paper_loss_form_names_its_new_name(config, where) -> None:
    if where == "train":
        config["methods"] = ["contrastive"]
        config["train"] = {"loss_form": "paper"}
        key = "train.loss_form"
    else:
        config["methods"] = ["contrastive_old"]
        config["variants"] = {
            "contrastive_old": {"method": "contrastive", "train": {"loss_form": "paper"}}
        }
        key = "variants.contrastive_old.train.loss_form"
    message = _error(config)
    assert f"config key '{key}': 'paper' was renamed 'same_view'" in message
    assert "drop the key (default 'released')" in message
    assert "loss_form: same_view in a named variant" in message


def test_schema_states_the_recipe_switches_with_the_registry_defaults() -> None:
    import yaml

    from pipeline_lib.models.init import INITS
    from pipeline_lib.registry import PAPER_RECIPE
    from pipeline_lib.ssl.order import EPOCH_ORDERS
    from pipeline_lib.ssl.tasks.contrastive import LOSS_FORMS

    schema = yaml.safe_load(SCHEMA.read_text())["properties"]
    train = schema["train"]["properties"]
    assert {key: train[key]["default"] for key in PAPER_RECIPE} == PAPER_RECIPE
    for key, values in (("loss_form", LOSS_FORMS), ("epoch_order", EPOCH_ORDERS), ("init", INITS)):
        assert tuple(train[key]["enum"]) == values, key
        assert values[0] == PAPER_RECIPE[key], key  # the library's default is the recipe
    overridable = schema["variants"]["additionalProperties"]["properties"]["train"]
    assert set(PAPER_RECIPE) <= set(overridable["propertyNames"]["enum"])


def test_a_switch_the_method_ignores_keeps_its_row_faithful(config) -> None:
    config["methods"] = ["rotnet", "resnet18_random"]
    config["train"] = {"da_batching": "per_image", "denoising_target": "patch_normalized"}
    assert validate_config(config, SCHEMA)["train"]["da_batching"] == "per_image"


def test_paper_config_runs_the_paper_recipe_under_paper_names() -> None:
    from pipeline_lib.registry import PAPER_RECIPE, TRAINED_METHODS, recipe_deviations

    paper = validate_config(yaml.safe_load((ROOT / "config" / "paper.yaml").read_text()), SCHEMA)
    assert {key: paper["train"][key] for key in PAPER_RECIPE} == PAPER_RECIPE
    deviating = [
        name
        for name, variant in paper["variants"].items()
        if recipe_deviations(variant["method"], variant.get("train", {}))
    ]
    assert deviating and not set(deviating) & set(TRAINED_METHODS)  # e.g. the DA sets


def test_celeba_all_means_the_inlier_classes_of_the_registry(config) -> None:
    from pipeline_lib.data import DATASETS

    config["datasets"] = {"celeba": {"classes": "all"}}
    filled = validate_config(config, SCHEMA)
    expected = list(DATASETS["celeba"].inliers)
    assert expected == ["no_eyeglasses"]
    assert resolve_classes("celeba", "all", DATASETS["celeba"].class_names) == expected
    assert filled["datasets"]["celeba"]["classes"] == "all"


def test_celeba_eyeglasses_as_inlier_names_the_class_and_the_reason(config) -> None:
    config["datasets"] = {"celeba": {"classes": ["no_eyeglasses", "eyeglasses"]}}
    message = _error(config)
    assert "'datasets.celeba.classes'" in message
    assert "class 'eyeglasses' cannot be an inlier" in message
    assert "no training images" in message
    assert "allowed inlier classes: no_eyeglasses" in message


def test_celeba_contamination_is_refused_with_the_reason(config) -> None:
    config["datasets"] = {"celeba": {"classes": "all"}}
    config["splits"] = {"contamination": [0, 0.05]}
    message = _error(config)
    assert "'splits.contamination': 0.05" in message
    assert "'celeba'" in message and "no outliers" in message
    config["splits"] = {"contamination": [0]}
    assert validate_config(config, SCHEMA)["splits"]["contamination"] == [0.0]


@pytest.mark.parametrize(
    ("settings", "clean", "fragment"),
    [
        ({"classes": ["8"], "max_train_per_class": 50}, 51, "max_train_per_class keeps 50"),
        ({"classes": "all"}, 117, "class '8' of 'digits'"),
    ],
)
def test_clean_inliers_beyond_a_class_training_images_fail(
    config, settings: dict, clean: int, fragment: str
) -> None:
    from pipeline_lib.data import DATASETS, load_dataset

    config["datasets"] = {"digits": settings}
    config["splits"] = {"clean_inliers": [10, clean]}
    message = _error(config)
    assert f"'splits.clean_inliers': {clean}" in message and fragment in message
    # The registry's count is the real one: the smallest class of the split has exactly it.
    data = load_dataset("digits")
    counts = {name: int((data.train_labels == k).sum()) for k, name in enumerate(DIGITS)}
    assert counts == dict(DATASETS["digits"].train_per_class)
    config["splits"] = {"clean_inliers": [clean - 1]}
    validate_config(config, SCHEMA)


def test_study_file_with_an_impossible_setting_fails_at_validation(config, tmp_path) -> None:
    study = {
        "study": {"kind": "contamination"},
        "datasets": {"celeba": {"classes": "all"}},
        "methods": ["raw"],
        "seeds": [0],
        "detectors": {"knn": {}},
        "splits": {"contamination": [0.1]},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    config["studies"] = [str(path)]
    message = _error(config)
    assert str(path) in message and "'splits.contamination': 0.1" in message


def test_validating_a_config_leaves_torch_unimported() -> None:
    # The Snakefile validates the config at parse time: importing torch there would cost
    # every snakemake invocation (a dry run, each cluster job) several seconds.
    import subprocess
    import sys

    code = (
        "import sys, yaml\n"
        "from pipeline_lib.config.validate import validate_config\n"
        f"validate_config(yaml.safe_load(open({str(ROOT / 'config' / 'paper.yaml')!r})), "
        f"{str(SCHEMA)!r})\n"
        "print(sorted(m for m in ('torch', 'torchvision') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


OCSVM_PARAMETERS = (
    "nu, gamma, gamma_scale, normalize, tol, cache_size, max_iter, chunk_size, dtype, device"
)


def test_misspelt_detector_parameter_names_key_and_allowed_parameters(config) -> None:
    config["detectors"] = {"ocsvm": {"gama": 1}}
    assert _error(config) == (
        "config key 'detectors.ocsvm': unknown parameter 'gama' (did you mean 'gamma'?); "
        f"allowed: {OCSVM_PARAMETERS}"
    )


def test_parameter_of_another_detector_is_unknown(config) -> None:
    config["detectors"] = {"knn": {}, "gde": {"gamma_scale": 2.0}}
    message = _error(config)
    assert "'detectors.gde': unknown parameter 'gamma_scale'" in message
    assert message.endswith("allowed: normalize, reg_covar, random_state")


def test_misspelt_mvtec_detector_parameter_names_the_mvtec_key() -> None:
    config = {"methods": ["rotnet"], "seeds": [0], "mvtec": {"detectors": {"kde": {"chunk": 64}}}}
    message = _error(config)
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
    message = _error(config)
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
    assert _error(config) == (
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
        assert "config key 'train.fuse'" in _error(copy.deepcopy(config)), bad
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
    assert "config key 'train.epochs'" in _error(config)


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
    assert "train.fuse" in _error(config) and "float16" in _error(config)
    config["train"] = {"fuse": 1, "amp": "float16"}  # one model per job: as before
    validate_config(config, SCHEMA)


def test_train_step_mode_is_an_execution_setting(config) -> None:
    """auto, eager, graph or compiled: no default written, no effect on sweep ids or the
    training settings."""
    from pipeline_lib.config.grids import variant_training

    base = validate_config(config, SCHEMA)
    assert "step_mode" not in base["train"]
    for bad in ("inductor", 1, True):
        config["train"] = {"step_mode": bad}
        assert "config key 'train.step_mode'" in _error(copy.deepcopy(config)), bad
    for mode in ("auto", "eager", "graph", "compiled"):
        chosen = validate_config({**config, "train": {"step_mode": mode}}, SCHEMA)
        assert chosen["train"]["step_mode"] == mode
        assert sweep_id(chosen) == sweep_id(base)
        assert variant_training("rotnet", chosen["train"], {}) == variant_training(
            "rotnet", base["train"], {}
        )


def test_train_draws_is_an_execution_setting(config) -> None:
    """host or device: no default written, no effect on sweep ids or the training settings."""
    from pipeline_lib.config.grids import variant_training

    base = validate_config(config, SCHEMA)
    assert "draws" not in base["train"]
    for bad in ("gpu", 1, None):
        config["train"] = {"draws": bad}
        assert "config key 'train.draws'" in _error(copy.deepcopy(config)), bad
    for where in ("host", "device"):
        chosen = validate_config({**config, "train": {"draws": where}}, SCHEMA)
        assert chosen["train"]["draws"] == where
        assert sweep_id(chosen) == sweep_id(base)
        assert variant_training("denoising", chosen["train"], {}) == variant_training(
            "denoising", base["train"], {}
        )


def test_train_eval_every_is_an_execution_setting(config) -> None:
    """No default written, no effect on sweep ids or the training settings; fused jobs
    refuse it (the fused trainer has no evaluation hook)."""
    from pipeline_lib.config.grids import variant_training

    base = validate_config(config, SCHEMA)
    assert "eval_every" not in base["train"]
    for bad in (-1, 1.5, "often"):
        config["train"] = {"eval_every": bad}
        assert "config key 'train.eval_every'" in _error(copy.deepcopy(config)), bad
    for every in (None, 0, 256):
        chosen = validate_config({**config, "train": {"eval_every": every}}, SCHEMA)
        assert chosen["train"]["eval_every"] == every
        assert sweep_id(chosen) == sweep_id(base)
        assert variant_training("rotnet", chosen["train"], {}) == variant_training(
            "rotnet", base["train"], {}
        )
    config["train"] = {"eval_every": 4, "fuse": 10}
    message = _error(copy.deepcopy(config))
    assert "config key 'train.eval_every': 4" in message and "train.fuse 10" in message
    for fuse in (1, 10):  # off, or one model per job: fine
        validate_config(
            {**config, "train": {"eval_every": 4 if fuse == 1 else 0, "fuse": fuse}}, SCHEMA
        )


def test_train_step_mode_graph_refuses_float16(config) -> None:
    config["train"] = {"step_mode": "graph", "amp": "float16"}
    assert "train.step_mode" in _error(config) and "float16" in _error(config)
    config["train"] = {"step_mode": "compiled", "amp": "float16"}
    assert "train.step_mode': compiled" in _error(config) and "float16" in _error(config)
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
