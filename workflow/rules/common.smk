"""Config validation, the config's lists and the target/param helpers. No rules here.

The helpers of a topic live beside its rules (train_common.smk, studies_common.smk,
mvtec_common.smk, ...); the checks and hooks of a run in run_checks.smk.
"""

import os
import re
import sys
from pathlib import Path

from pipeline_lib.config.validate import (
    ConfigError,
    export_data_settings,
    grid_classes,
    merge_detectors,
    sweep_id,
    validate_config,
)
from pipeline_lib.config.keys import (
    RESULT,
    RESULT_G,
    SPLIT,
    ResultKey,
    contamination_text,
)
from pipeline_lib.config.experiment import anchor_paths, claim_folder, run_folder
from pipeline_lib.config.job_params import training_execution
from pipeline_lib.data import DataError, resolve_data_root
from pipeline_lib.config.grids import (
    GridError,
    base_method,
    merge_datasets,
    study_grids,
    variant_train_size,
    variant_training,
)
from pipeline_lib.paper.protocol import (
    mvtec_protocol_notes,
    protocol_breaks,
    protocol_notes,
)
from pipeline_lib.registry import (
    TRAINED_METHODS,
    is_trained,
    detector_job_params,
    method_ids,
    method_spec,
    plugin_note,
)

try:
    _validated = validate_config(
        config, Path(workflow.basedir) / "workflow/schemas/config.schema.yaml"
    )
    # Per grid (main table, each study): data set -> inlier classes. Read where Snakemake
    # started (an image folder's classes are its subfolders), before the move below.
    GRID_CLASSES = grid_classes(
        study_grids(_validated, _validated["studies"]), _validated["data"]["root"]
    )
    # The run's working directory: results/<experiment>/ (pipeline_lib.config.experiment),
    # unless --directory chose one (then None, as in a job step already there). The
    # Snakefile moves there after this file.
    EXPERIMENT_FOLDER = run_folder(
        _validated["experiment"],
        directory_given=workflow.overwrite_workdir is not None,
        main_process=workflow.is_main_process,
    )
    # Environment-like settings travel as environment variables, not params, so moving the
    # data, the ImageNet weights file or the tracking store never re-runs finished jobs.
    # Made absolute here, where Snakemake started: the data root too when the run moves
    # (its default ./data is this folder's). validate_config has already stopped a
    # resnet50_imagenet sweep without its weights file.
    _data_root = _validated["data"]["root"]
    export_data_settings(
        root=(
            str(resolve_data_root(_data_root).resolve())
            if EXPERIMENT_FOLDER is not None
            else _data_root
        ),
        download=_validated["data"]["download"],
        imagenet_weights=_validated["embed"]["imagenet_weights"],
        plugins=_validated.get("plugins", []),
    )
    if workflow.is_main_process and plugin_note():
        print(plugin_note(), file=sys.stderr)
    if EXPERIMENT_FOLDER is not None:
        # Paths the jobs (and the MVTec helpers) read in the experiment's folder.
        _validated = anchor_paths(_validated, EXPERIMENT_FOLDER)
        if workflow.is_main_process:
            claim_folder(EXPERIMENT_FOLDER, _validated["experiment"], CONFIGFILES)
    GRIDS = study_grids(_validated, _validated["studies"])
    DATASET_SETTINGS = merge_datasets(GRIDS)
except (ConfigError, DataError, GridError) as error:
    sys.exit(f"Invalid config: {error}")
config.clear()
config.update(_validated)


def _union(lists):
    """Items of several lists, first occurrence order."""
    return list(dict.fromkeys(item for items in lists for item in items))


SWEEP = sweep_id(config)
VARIANTS = config["variants"]
MAIN = (
    GRIDS[0] if GRIDS else None
)  # the top-level grid: the main table (None: MVTec only)
# Data set -> every class any grid runs (the main grid's first, so tables keep their order).
CLASSES = {
    name: _union(classes.get(name, []) for classes in GRID_CLASSES.values())
    for name in _union(GRID_CLASSES[grid.name] for grid in GRIDS)
}
METHODS = _union(grid.methods for grid in GRIDS)
BASE = {name: base_method(name, VARIANTS) for name in METHODS}
TRAINED = [name for name in METHODS if is_trained(BASE[name])]
FROZEN = list(method_ids(trained=False))
SEEDS = [str(seed) for seed in _union(grid.seeds for grid in GRIDS)]
# The top level's, then the studies' (validation rejects a detector given two parameter sets).
DETECTOR_PARAMS = detector_job_params(merge_detectors(config))
DETECTORS = list(DETECTOR_PARAMS)
# RotNet and rotation prediction are also scored by their own rotation classifier, with the
# scores of detect.rotation_detectors (pipeline_lib.registry.ROTATION_DETECTORS).
ROTATION_DETECTORS = config["detect"]["rotation_detectors"]
ROTATION_MODELS = [m for m in TRAINED if method_spec(BASE[m]).rotation_classifier]
SCORED_ROTATION = ROTATION_MODELS if config["detect"]["rotation_classifier"] else []
CONTAMINATIONS = [
    contamination_text(ratio) for ratio in _union(grid.contamination for grid in GRIDS)
]
FITSETS = _union(grid.fitsets for grid in GRIDS)
CLEAN_INLIERS = sorted(_union(grid.clean_inliers for grid in GRIDS))
ALL_CLASSES = sorted({name for names in CLASSES.values() for name in names})
# Data sets of the main table (studies may read more, e.g. cifar10_rotated).
MAIN_DATASETS = list(GRID_CLASSES[MAIN.name]) if MAIN else []


def _one_of(values):
    return "|".join(
        re.escape(str(value)) for value in sorted(values, key=len, reverse=True)
    )


# SPLIT, RESULT and RESULT_G (the result layout) come from pipeline_lib.config.keys.


_GRID_RESULTS = {}


def grid_results(grid, dataset=None):
    """(key, result.json path) of every result a grid needs, optionally of one data set.

    The key is ResultKey.wildcards() (path text, with the space), the path its path().

    Feature detectors run on every fit set and requested space (f, or g under .../g/);
    rotation classifiers (which fit nothing) once per rotation model. Memoised: input and
    param functions of every study job ask for the same lists.
    """
    memo = _GRID_RESULTS.get((grid.name, dataset))
    if memo is not None:
        return memo
    rows = _GRID_RESULTS[(grid.name, dataset)] = []
    for name, classes in GRID_CLASSES[grid.name].items():
        if dataset is not None and name != dataset:
            continue
        for inlier in classes:
            for contamination in grid.contamination:
                for seed in grid.seeds:
                    for method in grid.methods:
                        combos = [
                            (fitset, detector, space)
                            for fitset in grid.fitsets
                            for detector in grid.detectors
                            for space in grid.spaces
                            if space == "f" or method in TRAINED
                        ]
                        if method in SCORED_ROTATION:
                            combos += [
                                ("train", d, "rotation_classifier")
                                for d in ROTATION_DETECTORS
                            ]
                        for fitset, detector, space in combos:
                            key = ResultKey(
                                name,
                                inlier,
                                contamination,
                                seed,
                                method,
                                fitset,
                                detector,
                                space,
                            )
                            rows.append((key.wildcards(), key.path()))
    return rows


def detection_results(dataset=None):
    """Every result of the main table, optionally of one data set."""
    return [path for _, path in grid_results(MAIN, dataset)] if MAIN else []


def get_features(wildcards):
    """Frozen representations embed the whole data set once per seed; classes share it."""
    if wildcards.method in FROZEN:
        return f"{wildcards.dataset}/_frozen/{wildcards.method}/seed{wildcards.seed}/features.npz"
    return os.path.join(SPLIT.format(**wildcards), wildcards.method, "features.npz")


def get_training(wildcards):
    """The train settings of a method or variant (global ones with the variant's overrides)."""
    return variant_training(wildcards.method, config["train"], VARIANTS)


def get_base_method(wildcards):
    return BASE[wildcards.method]


# How training jobs execute: a param Snakemake does not record (config.job_params).
TRAINING_EXECUTION = training_execution(config)


def get_train_size(wildcards):
    return variant_train_size(wildcards.method, VARIANTS)


def get_imagenet_size(wildcards):
    """Input side of resnet50_imagenet; None for the other frozen methods, so changing it
    never re-runs their jobs."""
    return (
        config["embed"]["imagenet_size"]
        if wildcards.method == "resnet50_imagenet"
        else None
    )


def get_dataset_settings(wildcards):
    """Reader options and subsampling of a data set (not its class list: that is per job)."""
    return DATASET_SETTINGS[wildcards.dataset]


def get_dataset_options(wildcards):
    """Reader options of a data set (what record_data_provenance reads it with)."""
    return DATASET_SETTINGS[wildcards.dataset].get("options", {})


def data_provenance_files(datasets):
    """The provenance record of each data set (record_data_provenance), for table jobs."""
    return [f"{dataset}/data_provenance.json" for dataset in datasets]


def study_provenance(wildcards):
    """Provenance records of the data sets a study's grid reads."""
    return data_provenance_files(GRID_CLASSES[wildcards.study])


def summary_outputs():
    tables = ["summary/main_table.csv"] + [
        f"summary/per_class/{dataset}.csv" for dataset in MAIN_DATASETS
    ]
    plots = [f"summary/plots/per_class_{dataset}.png" for dataset in MAIN_DATASETS] + [
        f"summary/plots/roc_{dataset}.png" for dataset in MAIN_DATASETS
    ]
    return tables + plots + RANK_PLOT


# Ranks across data sets need 3 data sets or more (pipeline_lib.paper.paired's
# MIN_RANK_DATASETS; not imported here, which would load scipy at parse time).
RANK_PLOT_FILE = "summary/plots/main_table_ranks.png"
RANK_PLOT = [RANK_PLOT_FILE] if len(MAIN_DATASETS) >= 3 else []


def roc_score_files(dataset):
    """Scores drawn as ROC curves: the first class, contamination and seed of the sweep."""
    first = dict(
        dataset=dataset,
        inlier=GRID_CLASSES[MAIN.name][dataset][0],
        contamination=MAIN.contamination[0],
        seed=MAIN.seeds[0],
        fitset="train",
    )
    return [
        ResultKey(**first, method=method, detector=detector).path("scores.npz")
        for method in MAIN.methods
        for detector in MAIN.detectors
    ]


def training_histories(grids=None):
    """Per-epoch loss / learning-rate records of every trained model of ``grids`` (default:
    every grid); they also say on what device and in which precision each model trained.
    """
    paths = [
        os.path.join(
            SPLIT.format(
                dataset=name,
                inlier=inlier,
                contamination=contamination_text(contamination),
                seed=seed,
            ),
            method,
            "train_history.json",
        )
        for grid in (GRIDS if grids is None else grids)
        for name, classes in GRID_CLASSES[grid.name].items()
        for inlier in classes
        for contamination in grid.contamination
        for seed in grid.seeds
        for method in grid.methods
        if method in TRAINED
    ]
    return list(dict.fromkeys(paths))


def summary_page():
    return ["summary/index.html"] if MAIN else []


def get_final_output():
    """The default target's inputs: image benchmarks, MVTec AD, explanations, deployment.

    Called by the Snakefile after every include, so the helpers of studies_common.smk,
    mvtec_common.smk, explain_common.smk and deploy_common.smk are defined by then.
    """
    outputs = []
    if CLASSES:  # a config without `datasets` runs MVTec alone
        outputs += ["summary/results.csv", *summary_outputs(), *study_outputs()]
        outputs += [*summary_page(), "summary/provenance.json"]
        outputs += image_tracking_log()
    return outputs + mvtec_outputs() + explanation_outputs() + deploy_outputs()


# MLflow writers run one at a time, as local rules (a SQLite store is a file on the host
# that runs Snakemake): init_tracking, then log_to_mlflow, then log_mvtec_to_mlflow (it
# waits for the image logger's output), then register_model (it waits for both).


def image_tracking_log():
    """The image benchmarks' logger output, when that logger runs."""
    return ["mlflow/logged.json"] if CLASSES and config["tracking"]["enabled"] else []


def tracking_loggers():
    """Every logger's output: the last MLflow writer (register_model) waits for them all."""
    mvtec = ["mlflow/mvtec_logged.json"] if MVTEC else []
    return image_tracking_log() + (mvtec if config["tracking"]["enabled"] else [])
