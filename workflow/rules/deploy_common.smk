"""Helpers of deploy.smk: the deployed cell, its input files and its outputs.

Two kinds of cell: one of the main table (``deploy.dataset`` a data set of ``datasets``)
and an MVTec category (``deploy.dataset: mvtec``, ``deploy.inlier`` the category, method
and detector from ``mvtec.methods`` / ``mvtec.detectors``), packaged with its anomaly maps.
"""


class _CellWildcards(dict):
    """The deployed cell as wildcards: get_features reads attributes and formats with **."""

    __getattr__ = dict.__getitem__


DEPLOY = config.get("deploy")
DEPLOY_MVTEC = bool(DEPLOY) and DEPLOY["dataset"] == "mvtec"
DEPLOY_DIR = f"deploy/{DEPLOY['registered_name']}" if DEPLOY else None


def _deploy_exit(key, value, allowed):
    sys.exit(
        f"Invalid config: deploy.{key} {value!r} is not in the sweep "
        f"({', '.join(map(str, allowed)) or 'none'})"
    )


if DEPLOY and not DEPLOY_MVTEC:
    _DEPLOY_DATASET = DEPLOY["dataset"]
    _DEPLOY_INLIER = DEPLOY["inlier"] or GRID_CLASSES[MAIN.name][_DEPLOY_DATASET][0]
    if _DEPLOY_INLIER not in GRID_CLASSES[MAIN.name][_DEPLOY_DATASET]:
        sys.exit(
            f"Invalid config: deploy.inlier {_DEPLOY_INLIER!r} is not a class of the sweep's "
            f"{_DEPLOY_DATASET} ({', '.join(GRID_CLASSES[MAIN.name][_DEPLOY_DATASET])})"
        )
    DEPLOY_CELL = dict(
        dataset=_DEPLOY_DATASET,
        inlier=_DEPLOY_INLIER,
        seed=str(DEPLOY["seed"] if DEPLOY["seed"] is not None else MAIN.seeds[0]),
        contamination=f"{MAIN.contamination[0]:g}",
        best=DEPLOY["best"],
        method=DEPLOY["method"],
        detector=DEPLOY["detector"],
    )
    # With best, every method of the main table is a candidate: all their files are inputs.
    _DEPLOY_METHODS = MAIN.methods if DEPLOY["best"] else [DEPLOY["method"]]
    _DEPLOY_SPLIT = SPLIT.format(**DEPLOY_CELL)

    def _deploy_files():
        files = {}
        for method in _DEPLOY_METHODS:
            wildcards = _CellWildcards(DEPLOY_CELL, method=method)
            files[method] = {
                "dataset": f"{DEPLOY_CELL['dataset']}/dataset.npz",
                "split": os.path.join(_DEPLOY_SPLIT, "split.npz"),
                "features": get_features(wildcards),
                "model": (
                    os.path.join(_DEPLOY_SPLIT, method, "model.pt")
                    if method in TRAINED
                    else None
                ),
            }
        return files

    DEPLOY_FILES = _deploy_files()
    DEPLOY_RESULTS = "summary/results.csv"
    DEPLOY_DETECTORS = DETECTOR_PARAMS
    DEPLOY_PATCHES = None

if DEPLOY_MVTEC:
    # The config check (pipeline_lib.config.validate) has checked method, detector and seed; the
    # categories are known here only (mvtec.categories "all" reads the folders).
    _DEPLOY_INLIER = str(DEPLOY["inlier"] or MVTEC_CATEGORIES[0])
    if _DEPLOY_INLIER not in MVTEC_CATEGORIES:
        _deploy_exit("inlier", _DEPLOY_INLIER, MVTEC_CATEGORIES)
    _DEPLOY_SEED = str(DEPLOY["seed"] if DEPLOY["seed"] is not None else MVTEC_SEEDS[0])
    if _DEPLOY_SEED not in MVTEC_SEEDS:
        _deploy_exit("seed", DEPLOY["seed"], MVTEC_SEEDS)
    DEPLOY_CELL = dict(
        dataset="mvtec",
        inlier=_DEPLOY_INLIER,
        seed=_DEPLOY_SEED,
        contamination="0",
        best=DEPLOY["best"],
        method=DEPLOY["method"],
        detector=DEPLOY["detector"],
    )
    DEPLOY_FILES = {
        method: {
            "category": os.path.join(
                MVTEC_CATEGORY.format(category=_DEPLOY_INLIER), "category.npz"
            ),
            "model": (
                os.path.join(
                    MVTEC_MODEL.format(
                        category=_DEPLOY_INLIER, seed=_DEPLOY_SEED, method=method
                    ),
                    "model.pt",
                )
                if is_trained(method)
                else None
            ),
        }
        for method in (MVTEC_METHODS if DEPLOY["best"] else [DEPLOY["method"]])
    }
    DEPLOY_RESULTS = f"{MVTEC_SUMMARY}/results.csv"
    DEPLOY_DETECTORS = MVTEC["detectors"]
    DEPLOY_PATCHES = dict(
        patch_size=MVTEC["patches"]["size"],
        stride=MVTEC["patches"]["stride"],
        sigma=MVTEC["localize"]["sigma"],
        normalize=MVTEC["localize"]["normalize"],
        max_fit_patches=MVTEC["embed"]["max_fit_patches"],
        batch_size=MVTEC["embed"]["batch_size"],
    )


def deploy_outputs():
    return [f"{DEPLOY_DIR}/deployed.json"] if DEPLOY else []
