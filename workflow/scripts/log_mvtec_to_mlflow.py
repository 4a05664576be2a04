"""Log every MVTec job (a child run each), its training curves and tables to MLflow."""

from pathlib import Path

import pandas as pd

from pipeline_lib.runtime.io import save_json
from pipeline_lib.runtime.logs import job_logging
from pipeline_lib.tracking.mlflow_store import (
    code_version,
    default_tracking_uri,
    log_sweep,
    read_histories,
)

with job_logging(snakemake.log[0]):
    store_dir = Path(snakemake.output[0]).parent
    results = pd.read_csv(snakemake.input.results, dtype={"category": str, "method": str})
    records = [
        {key: value for key, value in record.items() if not pd.isna(value)}
        for record in results.to_dict("records")
    ]
    histories = read_histories(snakemake.input.histories)
    summary = log_sweep(
        records,
        uri=default_tracking_uri(store_dir),
        experiment=snakemake.params.experiment,
        sweep=snakemake.params.sweep,
        artifacts=[*snakemake.input.tables, *snakemake.input.plots, snakemake.input.results],
        artifact_dir=store_dir / "artifacts",
        lock_path=store_dir / "writer.lock",
        tags={"git_commit": code_version(Path(snakemake.scriptdir)), "benchmark": "mvtec"},
        timeout_s=snakemake.params.timeout_s,
        histories=histories,
    )
    save_json(snakemake.output[0], summary)
