"""Deployment: package one cell and register it in the MLflow model registry.

Runs when the config has a `deploy` section (README "Use a trained detector"). The job reads
the finished results (for `best` and the recorded AUC) and the cell's inputs: for a cell of
the main table its split, features and trained model; for an MVTec category
(`deploy.dataset: mvtec`, `deploy.inlier` the category) its category.npz and trained patch
model (the dense patch features are temporary, so the job embeds the training patches
again). It writes results/deploy/<registered_name>/package (representation, detector,
threshold, TorchScript and ONNX graphs; MVTec: with the anomaly map) and deployed.json. With
tracking on it runs after log_to_mlflow (MVTec: log_mvtec_to_mlflow) and takes the same
writer lock: one MLflow writer at a time.
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
            # The single MLflow writer has finished: this job writes alone (writer lock too).
            logged=[DEPLOY_LOGGED] if config["tracking"]["enabled"] else [],
        output:
            package=directory(f"results/deploy/{DEPLOY['registered_name']}/package"),
            record=f"results/deploy/{DEPLOY['registered_name']}/deployed.json",
        log:
            f"results/logs/deploy_model/{DEPLOY['registered_name']}.log",
        benchmark:
            f"results/benchmarks/deploy_model/{DEPLOY['registered_name']}.tsv"
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
            registered_name=DEPLOY["registered_name"],
            experiment=config["experiment"],
            tracking=config["tracking"]["enabled"],
            timeout_s=config["tracking"]["timeout_s"],
        script:
            "../scripts/deploy_model.py"
