"""Deployment: package one cell of the main table and register it in the MLflow registry.

Runs when the config has a `deploy` section (README "Use a trained detector"). The job reads
the finished results (for `best` and the recorded AUC), the cell's split, features and
trained model, and writes results/deploy/<registered_name>/package (representation,
detector, threshold, TorchScript and ONNX graphs) and deployed.json. With tracking on it
runs after log_to_mlflow and takes the same writer lock: one MLflow writer at a time.
"""


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
                "model": os.path.join(_DEPLOY_SPLIT, method, "model.pt") if method in TRAINED else None,
            }
        return files

    DEPLOY_FILES = _deploy_files()

    rule deploy_model:
        input:
            results="results/summary/results.csv",
            cells=[path for paths in DEPLOY_FILES.values() for path in paths.values() if path],
            # The single MLflow writer has finished: this job writes alone (writer lock too).
            logged=["results/mlflow/logged.json"] if config["tracking"]["enabled"] else [],
        output:
            package=directory(f"results/deploy/{DEPLOY['registered_name']}/package"),
            record=f"results/deploy/{DEPLOY['registered_name']}/deployed.json",
        log:
            f"results/logs/deploy_model/{DEPLOY['registered_name']}.log",
        benchmark:
            f"results/benchmarks/deploy_model/{DEPLOY['registered_name']}.tsv"
        params:
            cell=DEPLOY_CELL,
            files=DEPLOY_FILES,
            detectors=DETECTOR_PARAMS,
            width=config["embed"]["width"],
            max_fit=config["detect"]["max_fit"],
            target_fpr=DEPLOY["target_fpr"],
            registered_name=DEPLOY["registered_name"],
            experiment=config["experiment"],
            tracking=config["tracking"]["enabled"],
            timeout_s=config["tracking"]["timeout_s"],
        threads: 2
        resources:
            mem_mb=8000,
            runtime=60,
        conda:
            "../../environment.yml"
        script:
            "../scripts/deploy_model.py"


def deploy_outputs():
    return [f"results/deploy/{DEPLOY['registered_name']}/deployed.json"] if DEPLOY else []


_before_deploy_final_output = get_final_output


def get_final_output():
    return _before_deploy_final_output() + deploy_outputs()
