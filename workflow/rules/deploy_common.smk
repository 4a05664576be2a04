"""Helpers of deploy.smk: the deployed cell, its input files and its outputs."""


class _CellWildcards(dict):
    """The deployed cell as wildcards: get_features reads attributes and formats with **."""

    __getattr__ = dict.__getitem__


DEPLOY = config.get("deploy")


if DEPLOY:
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
                "dataset": f"results/{DEPLOY_CELL['dataset']}/dataset.npz",
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


def deploy_outputs():
    return (
        [f"results/deploy/{DEPLOY['registered_name']}/deployed.json"] if DEPLOY else []
    )
