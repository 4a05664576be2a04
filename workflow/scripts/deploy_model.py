"""Package the configured cell (main table or MVTec category) and register it in MLflow."""

from pathlib import Path

from pipeline_lib.deploy.step import deploy_cell
from pipeline_lib.report.tracking import default_tracking_uri, ensure_experiment
from pipeline_lib.runtime.devices import set_threads
from pipeline_lib.runtime.io import save_json
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    set_threads(snakemake.threads)
    params = snakemake.params
    tracking = None
    if params.tracking:
        store_dir = Path("results/mlflow")
        uri = default_tracking_uri(store_dir)
        store = ensure_experiment(
            uri, params.experiment, artifact_dir=store_dir / "artifacts", timeout_s=params.timeout_s
        )
        if store["status"] == "ready":
            tracking = {
                "tracking_uri": uri,
                "experiment_id": store["experiment_id"],
                "lock_path": store_dir / "writer.lock",
            }
    record = deploy_cell(
        snakemake.output.package,
        cell=params.cell,
        results_csv=snakemake.input.results,
        files=params.files,
        detector_params=params.detectors,
        width=params.width,
        max_fit=params.max_fit,
        target_fpr=params.target_fpr,
        registered_name=params.registered_name,
        tracking=tracking,
        patches=params.patches,
    )
    save_json(snakemake.output.record, record)
