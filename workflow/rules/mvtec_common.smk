"""MVTec AD and explanation helpers: config, targets and params. No rules (mvtec.smk)."""

import json

from pipeline_lib.data import resolve_data_root
from pipeline_lib.data.mvtec import (
    category_group,
    export_category_paths,
    resolve_category_paths,
)
from pipeline_lib.registry import method_training, training_arguments

MVTEC = config.get("mvtec")
# The top-level seeds: SEEDS (common.smk) holds those of the image benchmarks' grids only.
MVTEC_SEEDS = [str(seed) for seed in config["seeds"]]
MVTEC_CATEGORIES = []
MVTEC_METHODS = []
MVTEC_DETECTORS = []
MVTEC_SCORED_ROTATION = []
if MVTEC:
    try:
        _mvtec_root = (
            MVTEC["root"] or resolve_data_root(config["data"]["root"]) / "mvtec_ad"
        )
        _mvtec_paths = resolve_category_paths(
            _mvtec_root, MVTEC["categories"], MVTEC["paths"]
        )
    except DataError as error:
        sys.exit(f"Invalid config: {error}")
    # Like the data root: an environment variable, so moving the data re-runs nothing.
    export_category_paths(_mvtec_paths)
    # As MISSING_DATA (run_checks.smk): a category not read yet must have its train/good/.
    MISSING_DATA += [
        f"MVTec category {name}: {Path(path).absolute()}/train/good/ not found; expected "
        f"{{train/good,test/<defect>,ground_truth/<defect>}}/ there (the MVTec AD download "
        "unpacked under mvtec.root), or set mvtec.root / mvtec.paths in the config"
        for name, path in _mvtec_paths.items()
        if not os.path.exists(f"mvtec/{name}/category.npz")
        and not (Path(path) / "train" / "good").is_dir()
    ]
    MVTEC_CATEGORIES = list(_mvtec_paths)
    MVTEC_METHODS = MVTEC["methods"]
    MVTEC_DETECTORS = list(MVTEC["detectors"])
    MVTEC_SCORED_ROTATION = (
        [m for m in MVTEC_METHODS if method_spec(m).rotation_classifier]
        if config["detect"]["rotation_classifier"]
        else []
    )

MVTEC_CATEGORY = "mvtec/{category}"
MVTEC_MODEL = "mvtec/{category}/seed{seed}/{method}"
MVTEC_RESULT = "mvtec/{category}/seed{seed}/{method}/{detector}"
MVTEC_SUMMARY = "summary/mvtec"
MVTEC_METRICS = ["image_auroc", "pixel_auroc", "aupro"]
MVTEC_TABLE_SUFFIXES = [".csv", ".md", ".tex", ".html"]


def mvtec_results():
    """result.json of every MVTec job: patch detectors, and RotNet's own classifier."""
    combos = [(m, d) for m in MVTEC_METHODS for d in MVTEC_DETECTORS]
    combos += [(m, "rotation_classifier") for m in MVTEC_SCORED_ROTATION]
    return [
        os.path.join(
            MVTEC_RESULT.format(
                category=category, seed=seed, method=method, detector=detector
            ),
            "result.json",
        )
        for category in MVTEC_CATEGORIES
        for seed in MVTEC_SEEDS
        for method, detector in combos
    ]


def mvtec_table_outputs():
    stems = [f"{MVTEC_SUMMARY}/summary"] + [
        f"{MVTEC_SUMMARY}/per_category_{metric}" for metric in MVTEC_METRICS
    ]
    return [stem + suffix for stem in stems for suffix in MVTEC_TABLE_SUFFIXES]


def mvtec_heatmap_outputs():
    return [f"{MVTEC_SUMMARY}/heatmaps/{category}.png" for category in MVTEC_CATEGORIES]


def mvtec_histories():
    return [
        os.path.join(
            MVTEC_MODEL.format(category=c, seed=s, method=m), "train_history.json"
        )
        for c in MVTEC_CATEGORIES
        for s in MVTEC_SEEDS
        for m in MVTEC_METHODS
        if is_trained(m)
    ]


def mvtec_outputs():
    if not MVTEC:
        return []
    outputs = [
        f"{MVTEC_SUMMARY}/results.csv",
        *mvtec_table_outputs(),
        *mvtec_heatmap_outputs(),
    ]
    if config["tracking"]["enabled"]:
        outputs.append("mlflow/mvtec_logged.json")
    return outputs


def get_patch_model(wildcards):
    """Trained methods read their model; frozen ones are rebuilt from the seed."""
    if is_trained(wildcards.method):
        return os.path.join(MVTEC_MODEL.format(**wildcards), "model.pt")
    return []


def get_patch_training(wildcards):
    """The top-level train keys with mvtec.train's overrides (null = keep)."""
    overrides = {k: v for k, v in MVTEC["train"].items() if v is not None}
    return training_arguments(
        wildcards.method,
        method_training(wildcards.method, config["train"], overrides),
    )


def get_patch_rotation(wildcards):
    """Whether the embedding also computes RotNet's per-patch rotation score."""
    return wildcards.method in MVTEC_SCORED_ROTATION


def get_category_group(wildcards):
    return category_group(wildcards.category, MVTEC["groups"])


def get_heatmap_scores(wildcards):
    """Score maps drawn in a category's figure: first seed, first detector, every method."""
    return [
        os.path.join(
            MVTEC_RESULT.format(
                category=wildcards.category,
                seed=MVTEC_SEEDS[0],
                method=method,
                detector=MVTEC_DETECTORS[0],
            ),
            "score_maps.npz",
        )
        for method in MVTEC_METHODS
    ]
