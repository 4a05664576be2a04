"""Config validation, wildcard constraints and target/param helpers. No rules here."""

import os
import re
import sys
from pathlib import Path

from pipeline_lib.config import (
    ConfigError,
    export_data_settings,
    resolve_classes,
    sweep_id,
    validate_config,
)
from pipeline_lib.data import DataError, dataset_class_names
from pipeline_lib.representations import FROZEN_METHODS, TRAINED_METHODS
from pipeline_lib.steps import ROTATION_DETECTORS, ROTATION_METHODS

try:
    _validated = validate_config(config, Path(workflow.basedir) / "workflow/schemas/config.schema.yaml")
    CLASSES = {
        name: resolve_classes(
            name,
            settings["classes"],
            dataset_class_names(name, root=_validated["data"]["root"], **settings["options"]),
        )
        for name, settings in _validated["datasets"].items()
    }
except (ConfigError, DataError) as error:
    sys.exit(f"Invalid config: {error}")
config.clear()
config.update(_validated)

# Environment-like settings travel as environment variables, not params, so moving the
# data, the ImageNet weights file or the tracking store never re-runs finished jobs.
# (validate_config has already stopped a resnet50_imagenet sweep without its weights file.)
export_data_settings(
    root=config["data"]["root"],
    download=config["data"]["download"],
    imagenet_weights=config["embed"]["imagenet_weights"],
)

SWEEP = sweep_id(config)
METHODS = config["methods"]
SEEDS = [str(seed) for seed in config["seeds"]]
DETECTORS = list(config["detectors"])
# RotNet and rotation prediction are also scored by their own rotation classifier.
SCORED_ROTATION = [m for m in METHODS if m in ROTATION_METHODS] if config["detect"]["rotation_classifier"] else []
CONTAMINATIONS = [f"{ratio:g}" for ratio in config["splits"]["contamination"]]
FITSETS = ["train"] + [f"clean{n}" for n in config["splits"]["clean_inliers"]]
ALL_CLASSES = sorted({name for names in CLASSES.values() for name in names})


def _one_of(values):
    return "|".join(re.escape(str(value)) for value in sorted(values, key=len, reverse=True))


wildcard_constraints:
    dataset=_one_of(CLASSES),
    inlier=_one_of(ALL_CLASSES),
    method=_one_of(METHODS),
    seed=_one_of(SEEDS),
    contamination=_one_of(CONTAMINATIONS),
    fitset=_one_of(FITSETS),
    detector=_one_of(DETECTORS + list(ROTATION_DETECTORS)),


SPLIT = "results/{dataset}/{inlier}/contam{contamination}/seed{seed}"
RESULT = os.path.join(SPLIT, "{method}", "{fitset}", "{detector}")


def detection_results(dataset=None):
    """Every job result of the sweep, optionally of one data set."""
    return [
        os.path.join(
            RESULT.format(
                dataset=name,
            inlier=inlier,
            contamination=contamination,
            seed=seed,
            method=method,
            fitset=fitset,
                detector=detector,
            ),
            "result.json",
        )
        for name in ([dataset] if dataset else CLASSES)
        for inlier in CLASSES[name]
        for contamination in CONTAMINATIONS
        for seed in SEEDS
        for method, fitset, detector in _method_detectors()
    ]


def _method_detectors():
    """(method, fit set, detector) of every result: feature detectors on every fit set,
    rotation classifiers (which fit nothing) once per rotation model."""
    combos = [(m, f, d) for m in METHODS for f in FITSETS for d in DETECTORS]
    combos += [(m, "train", d) for m in SCORED_ROTATION for d in ROTATION_DETECTORS]
    return combos


def get_features(wildcards):
    """Frozen representations embed the whole data set once per seed; classes share it."""
    if wildcards.method in FROZEN_METHODS:
        return f"results/{wildcards.dataset}/_frozen/{wildcards.method}/seed{wildcards.seed}/features.npz"
    return os.path.join(SPLIT.format(**wildcards), wildcards.method, "features.npz")


def get_imagenet_size(wildcards):
    """Input side of resnet50_imagenet; None for the other frozen methods, so changing it
    never re-runs their jobs."""
    return config["embed"]["imagenet_size"] if wildcards.method == "resnet50_imagenet" else None


def get_dataset_settings(wildcards):
    """Reader options and subsampling of a data set (not its class list: that is per job)."""
    settings = config["datasets"][wildcards.dataset]
    return {key: value for key, value in settings.items() if key != "classes"}


def get_detector_params(wildcards):
    return config["detectors"][wildcards.detector]


def summary_outputs():
    tables = ["results/summary/main_table.csv"] + [
        f"results/summary/per_class/{dataset}.csv" for dataset in CLASSES
    ]
    plots = [f"results/summary/plots/per_class_{dataset}.png" for dataset in CLASSES] + [
        f"results/summary/plots/roc_{dataset}.png" for dataset in CLASSES
    ]
    return tables + plots


def roc_score_files(dataset):
    """Scores drawn as ROC curves: the first class, contamination and seed of the sweep."""
    first = dict(
        dataset=dataset,
        inlier=CLASSES[dataset][0],
        contamination=CONTAMINATIONS[0],
        seed=SEEDS[0],
        fitset="train",
    )
    return [
        os.path.join(RESULT.format(**first, method=method, detector=detector), "scores.npz")
        for method in METHODS
        for detector in DETECTORS
    ]


def training_histories():
    """Per-epoch loss / learning-rate records of every trained model of the sweep."""
    return [
        os.path.join(
            SPLIT.format(dataset=name, inlier=inlier, contamination=contamination, seed=seed),
            method,
            "train_history.json",
        )
        for name in CLASSES
        for inlier in CLASSES[name]
        for contamination in CONTAMINATIONS
        for seed in SEEDS
        for method in METHODS
        if method in TRAINED_METHODS
    ]


def get_final_output():
    outputs = ["results/summary/results.csv", *summary_outputs()]
    if config["tracking"]["enabled"]:
        outputs.append("results/mlflow/logged.json")
    return outputs
