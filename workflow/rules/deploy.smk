"""Deployment: package one cell and register it in the MLflow model registry.

Runs when the config has a `deploy` section (docs/deploy.md).
deploy_model reads the finished results (for `best` and the recorded AUC) and the cell's
inputs: for a cell of the main table its split, features and trained model; for an MVTec
category (`deploy.dataset: mvtec`, `deploy.inlier` the category) its category.npz and
trained patch model (the dense patch features are temporary, so the job embeds the training
patches again). It writes deploy/<registered_name>/package (representation,
detector, threshold, TorchScript and ONNX graphs; MVTec: with the anomaly map), packaged.json
and input_example.json, and touches no MLflow store: it may run on a compute node.
register_model, a local rule, logs the package folder to MLflow and registers it, then
writes deployed.json. With tracking on it runs after every logger (tracking_loggers(),
common.smk) and takes their writer lock: one MLflow writer at a time, on the host that holds
a SQLite store.
"""


include: "deploy_common.smk"


if DEPLOY:

    rule deploy_model:
        input:
            results=DEPLOY_RESULTS,
            cells=[
                path
                for paths in DEPLOY_FILES.values()
                for path in paths.values()
                if path
            ],
        output:
            package=directory(f"{DEPLOY_DIR}/package"),
            record=f"{DEPLOY_DIR}/packaged.json",
            example=f"{DEPLOY_DIR}/input_example.json",
        log:
            f"logs/deploy_model/{DEPLOY['registered_name']}.log",
        benchmark:
            f"benchmarks/deploy_model/{DEPLOY['registered_name']}.tsv"
        conda:
            "../../environment.yml"
        threads: 2
        resources:
            mem_mb=8000,
            runtime=60,
        params:
            cell=DEPLOY_CELL,
            files=DEPLOY_FILES,
            detectors=DEPLOY_DETECTORS,
            patches=DEPLOY_PATCHES,
            width=config["embed"]["width"],
            max_fit=config["detect"]["max_fit"],
            target_fpr=DEPLOY["target_fpr"],
        script:
            "../scripts/deploy_model.py"

    rule register_model:
        input:
            package=rules.deploy_model.output.package,
            record=rules.deploy_model.output.record,
            example=rules.deploy_model.output.example,
            # Every logger has finished: this job writes alone (their writer lock too).
            logged=tracking_loggers(),
        output:
            f"{DEPLOY_DIR}/deployed.json",
        log:
            f"logs/register_model/{DEPLOY['registered_name']}.log",
        # A SQLite store is written on the host that holds it, one writer at a time.
        localrule: True
        conda:
            "../../environment.yml"
        threads: 1
        resources:
            mem_mb=4000,
            runtime=30,
        params:
            registered_name=DEPLOY["registered_name"],
            target_fpr=DEPLOY["target_fpr"],
            best=DEPLOY["best"],
            experiment=config["experiment"],
            tracking=config["tracking"]["enabled"],
            timeout_s=config["tracking"]["timeout_s"],
        script:
            "../scripts/register_model.py"
