"""Config validation, wildcard constraints and target/param helpers. No rules here."""

import atexit
import os
import re
import sys
import weakref
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
from pipeline_lib.config.gpus import GPU_RULES, gpu_warning, visible_cuda_devices
from pipeline_lib.data import DataError, resolve_data_root
from pipeline_lib.data.presence import missing_data
from pipeline_lib.config.fusing import FUSED_GROUP
from pipeline_lib.config.fusing import fused_groups as group_fused_models
from pipeline_lib.config.fusing import group_name as fused_group_name
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
from pipeline_lib.tracking.mlflow_store import default_tracking_uri, redact_uri
from pipeline_lib.runtime import warm_jobs
from pipeline_lib.registry import (
    TRAINED_METHODS,
    fuse_setting,
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


# Outputs of the rules that read a data set's raw files: while one of them is missing, the
# raw files must be there (add the output of any new rule that reads them).
RAW_DATA_OUTPUTS = [
    "{dataset}/dataset.npz",
    "{dataset}/data_provenance.json",
]


def _missing_image_data():
    """Why data sets the run reads are not where their readers look (none: an empty list).

    A data set whose RAW_DATA_OUTPUTS all exist needs its files no more.
    """
    root = resolve_data_root(config["data"]["root"])
    return [
        reason
        for name, settings in DATASET_SETTINGS.items()
        if not all(
            os.path.exists(output.format(dataset=name)) for output in RAW_DATA_OUTPUTS
        )
        for reason in [
            missing_data(
                name,
                root=root,
                download=config["data"]["download"],
                **settings.get("options", {}),
            )
        ]
        if reason
    ]


def _missing_data_note(missing):
    return (
        "Warning: data not found; a dry run plans anyway, a real run stops before its "
        "first job:\n  " + "\n  ".join(missing)
    )


def warn_missing_data(missing):
    """Parse-time note (dry runs too) on missing data; the main Snakemake process only.

    A dry run prints it again after its job list, which would scroll it away
    (_notes_after_dry_run).
    """
    if not workflow.is_main_process:
        return
    if missing:
        print(_missing_data_note(missing), file=sys.stderr)
    atexit.register(_notes_after_dry_run, weakref.ref(workflow), missing)


def _notes_after_dry_run(workflow_ref, missing):
    """At the end of a dry run (the process exits): the missing data and unused GPUs.

    Snakemake has no hook after a dry run; this runs at the exit of the process that parsed
    the workflow, and says nothing unless that process ran a dry run (not a real run, whose
    onstart hook says the same before its jobs, nor a plan built through the API).
    """
    workflow = workflow_ref()
    if workflow is None or not workflow.dryrun or workflow.dag is None:
        return
    # The dry run has marked its jobs done: the DAG's jobs are those it listed (and any done
    # before, which still name the rules of this config).
    notes = [gpu_note(workflow, workflow.dag.jobs)]
    notes += [_missing_data_note(missing)] if missing else []
    for note in filter(None, notes):
        print(note, file=sys.stderr, flush=True)


def _resource_int(resource):
    """A resource's integer value (a Snakemake Resource, a number or None); 0 otherwise."""
    value = getattr(resource, "value", resource)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def gpu_note(workflow, jobs):
    """The warning of pipeline_lib.config.gpus for ``jobs`` of this run, or None."""
    rule_gpus = {
        job.rule.name: _resource_int(job.rule.resources.get("gpu"))
        for job in jobs
        if job.rule.name in GPU_RULES
    }
    local = workflow.local_exec and not workflow.remote_exec
    return gpu_warning(
        rule_gpus,
        declared=_resource_int(workflow.global_resources.get("gpu")) or None,
        cuda_devices=visible_cuda_devices() if local else 0,
    )


def check_before_jobs(missing):
    """The onstart hook: real runs only, after the plan is made, before any job starts.

    Raises WorkflowError (Snakemake prints it and exits with 1) when data is missing, and
    warns when a SQLite tracking store is used while jobs run on other hosts, or when the
    run has GPUs but its training and embedding jobs ask for none.
    """
    from snakemake.exceptions import WorkflowError

    note = gpu_note(workflow, workflow.dag.needrun_jobs())
    if note:
        print(note, file=sys.stderr)
    if config["tracking"]["enabled"] and not workflow.local_exec:
        uri = default_tracking_uri("mlflow")
        if uri.startswith("sqlite:"):
            print(
                f"Warning: MLflow tracking writes the SQLite file {redact_uri(uri)} while "
                "jobs run on a cluster. Its writers are local rules (this host, one at a "
                "time), but SQLite's locks do not hold on a network file system and other "
                "hosts cannot read it safely: set MLFLOW_TRACKING_URI to a tracking server "
                "(docs/cluster.md, 'MLflow on a cluster'), or tracking.enabled: false.",
                file=sys.stderr,
            )
    if missing:
        raise WorkflowError(
            "data not found, nothing was run:\n  " + "\n  ".join(missing)
        )


# The run's warm-worker server (pipeline_lib/runtime/warm_jobs.py), while one runs.
WARM_SERVER = []


def start_warm_workers():
    """The onstart hook's second half: the jobs this host runs fork from one warm process.

    That is every job of a local run, and the aggregation rules (localrules) of a cluster
    run. Not where jobs run in their own software environment (--sdm conda or apptainer) or
    where DROC_WARM_JOBS=0. The server takes jobs of this Snakemake process only: a cluster
    job that inherits the socket's address is refused and runs in its own process.
    """
    if workflow.deployment_settings.deployment_method:
        return
    scripts = [
        Path(job.rule.basedir.join(job.rule.script).get_path_or_uri(secret_free=True))
        for job in workflow.dag.needrun_jobs()
        if job.rule.script and (workflow.local_exec or job.is_local)
    ]
    WARM_SERVER.append(warm_jobs.start_server(scripts, Path(".snakemake") / "log"))


def stop_warm_workers():
    """The onsuccess and onerror hooks: the run is over, so is its server."""
    while WARM_SERVER:
        warm_jobs.stop_server(WARM_SERVER.pop())


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


# --- Fused training (train.fuse, train.smk): the trained models of one data set,
# contamination and method, over its classes and seeds, are trained K at a time by one
# train_fused job each (pipeline_lib.config.fusing says how they are grouped and named); fuse 1
# (the default) keeps one train_representation job per model.
FUSE = fuse_setting(config["train"])
FUSED = TRAINED if FUSE > 1 else []
_FUSED_GROUPS = {}


def fused_groups():
    """(data set, contamination, method) -> its groups, each a list of (class, seed).

    Every trained model a grid or the explanation figure reads, grouped FUSE at a time
    (pipeline_lib.config.fusing.fused_groups). Memoised; called only from input and param
    functions (after every include), so explain_common.smk is read.
    """
    if _FUSED_GROUPS or not FUSED:
        return _FUSED_GROUPS
    models = {
        (name, inlier, contamination_text(contamination), str(seed), method)
        for grid in GRIDS
        for name, classes in GRID_CLASSES[grid.name].items()
        for inlier in classes
        for contamination in grid.contamination
        for seed in grid.seeds
        for method in grid.methods
        if method in FUSED
    }
    if EXPLAIN:
        dataset, inlier, _ = _explain_target()
        models |= {
            (dataset, inlier, CONTAMINATIONS[0], SEEDS[0], method)
            for method in EXPLAIN["methods"]
            if method in FUSED
        }
    members = {}
    for dataset, inlier, contamination, seed, method in models:
        members.setdefault((dataset, contamination, method), set()).add((inlier, seed))
    for key, pairs in members.items():
        _FUSED_GROUPS[key] = group_fused_models(pairs, FUSE, classes=CLASSES[key[0]])
    return _FUSED_GROUPS


def _fused_key(wildcards):
    return (wildcards.dataset, wildcards.contamination, wildcards.method)


def fused_members(wildcards):
    """The (class, seed) members of the fused group {group}, in training order."""
    for group in fused_groups().get(_fused_key(wildcards), []):
        if fused_group_name(group) == wildcards.group:
            return group
    raise ValueError(
        f"{FUSED_GROUP.format(**wildcards)} is not a fused group of this config"
    )


def fused_group_splits(wildcards):
    return [
        os.path.join(
            SPLIT.format(**dict(wildcards.items(), inlier=inlier, seed=seed)),
            "split.npz",
        )
        for inlier, seed in fused_members(wildcards)
    ]


def fused_outcome(wildcards):
    """outcome.json of the fused group that trains model SPLIT/{method}."""
    member = (wildcards.inlier, wildcards.seed)
    for group in fused_groups().get(_fused_key(wildcards), []):
        if member in group:
            folder = FUSED_GROUP.format(
                **dict(wildcards.items(), group=fused_group_name(group))
            )
            return os.path.join(folder, "outcome.json")
    raise ValueError(
        f"{SPLIT.format(**wildcards)}/{wildcards.method} is in no fused group of this config"
    )


# --- Studies (studies.smk): every grid gets a table, figures and a place on the summary page.

# The main grid is a study too (kind main), so the summary ranks its deviations with the rest.
STUDIES = list(GRIDS)
STUDY_BY_NAME = {grid.name: grid for grid in STUDIES}
G_METHODS = _union(
    [m for m in grid.methods if m in TRAINED] for grid in GRIDS if "g" in grid.spaces
)
UNIFORMITY_GRIDS = [grid for grid in STUDIES if grid.kind == "uniformity"]
STUDY = "studies/{study}"


def study_results(wildcards):
    return [path for _, path in grid_results(STUDY_BY_NAME[wildcards.study])]


def _model_folders(grid):
    """SPLIT/{method} of every trained model the grid's results come from."""
    return list(
        dict.fromkeys(
            ResultKey.from_wildcards(key).model_folder()
            for key, _ in grid_results(grid)
            if key["method"] in TRAINED
        )
    )


def uniformity_files(grid):
    """uniformity.json of every trained model of a uniformity study (model folder -> file)."""
    if grid.kind != "uniformity":
        return {}
    return {
        folder: os.path.join(folder, "uniformity.json")
        for folder in _model_folders(grid)
    }


def study_keys(wildcards):
    """The grid's result keys, in the order of study_results."""
    return [key for key, _ in grid_results(STUDY_BY_NAME[wildcards.study])]


def study_outputs():
    return [f"studies/{grid.name}/{grid.name}.json" for grid in STUDIES]


def summary_page():
    return ["summary/index.html"] if MAIN else []


def get_final_output():
    """The default target's inputs: image benchmarks, MVTec AD, explanations, deployment.

    Called by the Snakefile after every include, so the helpers of mvtec_common.smk,
    explain_common.smk and deploy_common.smk are defined by then.
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
