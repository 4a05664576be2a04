"""Log the packaged cell as an MLflow pyfunc model and register it (tracking on)."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pathlib import Path

import pandas as pd

from pipeline_lib.deploy.workflow_step import register_package
from pipeline_lib.runtime.io import load_json, save_json
from pipeline_lib.runtime.logs import job_logging
from pipeline_lib.tracking.mlflow_store import default_tracking_uri, ensure_experiment

with job_logging(snakemake.log[0]):
    params = snakemake.params
    record = load_json(snakemake.input.record)
    if not params.tracking:
        record["registry"] = {"status": "skipped: tracking disabled"}
    else:
        store_dir = Path("mlflow")  # init_tracking's store, in the working directory
        uri = default_tracking_uri(store_dir)
        store = ensure_experiment(
            uri, params.experiment, artifact_dir=store_dir / "artifacts", timeout_s=params.timeout_s
        )
        if store["status"] != "ready":
            record["registry"] = {**store, "status": f"skipped: tracking {store['status']}"}
        else:
            record = register_package(
                snakemake.input.package,
                record,
                example=pd.DataFrame(load_json(snakemake.input.example)),
                registered_name=params.registered_name,
                target_fpr=params.target_fpr,
                best=params.best,
                tracking={
                    "tracking_uri": uri,
                    "experiment_id": store["experiment_id"],
                    "lock_path": store_dir / "writer.lock",
                },
            )
    save_json(snakemake.output[0], record)
