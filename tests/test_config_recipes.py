"""Config validation of methods and data sets: paper recipes, variants, ImageNet weights, CelebA."""

from __future__ import annotations

import pytest
import yaml

from pipeline_lib.config.validate import resolve_classes, validate_config
from tests.config_cases import DIGITS, ROOT, SCHEMA, config_error, minimal_config

#: The smallest valid config (a fresh copy per test).
config = pytest.fixture(minimal_config, name="config")


def test_resnet50_imagenet_without_weights_names_the_key(config) -> None:
    config["methods"] = ["raw", "resnet50_imagenet"]
    message = config_error(config)
    assert "'embed.imagenet_weights'" in message and "resnet50_imagenet" in message
    assert "resnet50-0676ba61.pth" in message


def test_resnet50_imagenet_with_a_missing_weights_file_names_the_path(config, tmp_path) -> None:
    config["methods"] = ["resnet50_imagenet"]
    config["embed"] = {"imagenet_weights": str(tmp_path / "nowhere.pth")}
    message = config_error(config)
    assert "'embed.imagenet_weights'" in message and str(tmp_path / "nowhere.pth") in message


def test_imagenet_weights_are_not_needed_without_the_method(config) -> None:
    assert validate_config(config, SCHEMA)["embed"]["imagenet_weights"] is None


def test_imagenet_size_below_32_names_key_and_bound(config) -> None:
    config["embed"] = {"imagenet_size": 16}
    message = config_error(config)
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
    message = config_error(config)
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
    message = config_error(config)
    assert f"config key '{key}': 'paper' was renamed 'same_view'" in message
    assert "drop the key (default 'released')" in message
    assert "loss_form: same_view in a named variant" in message


def test_schema_states_the_recipe_switches_with_the_registry_defaults() -> None:
    import yaml

    from pipeline_lib.models.init import INITS
    from pipeline_lib.registry import DENOISING_PATCH, PAPER_RECIPE
    from pipeline_lib.ssl.order import EPOCH_ORDERS
    from pipeline_lib.ssl.tasks.contrastive import LOSS_FORMS

    schema = yaml.safe_load(SCHEMA.read_text())["properties"]
    train = schema["train"]["properties"]
    assert {key: train[key]["default"] for key in PAPER_RECIPE} == PAPER_RECIPE
    assert train["denoising_patch"]["default"] == DENOISING_PATCH
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
    message = config_error(config)
    assert "'datasets.celeba.classes'" in message
    assert "class 'eyeglasses' cannot be an inlier" in message
    assert "no training images" in message
    assert "allowed inlier classes: no_eyeglasses" in message


def test_celeba_contamination_is_refused_with_the_reason(config) -> None:
    config["datasets"] = {"celeba": {"classes": "all"}}
    config["splits"] = {"contamination": [0, 0.05]}
    message = config_error(config)
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
    message = config_error(config)
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
    message = config_error(config)
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
