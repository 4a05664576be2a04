"""Create the MLflow store and experiment once, before anything logs to it."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pathlib import Path

from pipeline_lib.runtime.io import save_json
from pipeline_lib.runtime.logs import job_logging
from pipeline_lib.tracking.mlflow_store import default_tracking_uri, ensure_experiment

with job_logging(snakemake.log[0]):
    store_dir = Path(snakemake.output[0]).parent
    store_dir.mkdir(parents=True, exist_ok=True)
    status = ensure_experiment(
        default_tracking_uri(store_dir),
        snakemake.params.experiment,
        artifact_dir=store_dir / "artifacts",
        timeout_s=snakemake.params.timeout_s,
    )
    save_json(snakemake.output[0], status)
