"""The single MLflow writer of a benchmark: a child run per job result and a parent run per
sweep (and per study). Rules log_to_mlflow (image benchmarks) and log_mvtec_to_mlflow
(MVTec AD) run it in turn with their own inputs and params (``benchmark``: None or
``mvtec``)."""

from pathlib import Path

import pandas as pd

from pipeline_lib.detection.epoch_eval import EVAL_CURVE_FILE
from pipeline_lib.results.study_frames import study_records
from pipeline_lib.results.tidy_table import load_results_csv
from pipeline_lib.runtime.io import save_json
from pipeline_lib.runtime.logs import job_logging
from pipeline_lib.tracking.mlflow_store import (
    code_version,
    default_tracking_uri,
    log_sweep,
    read_histories,
)


def job_records(path, benchmark):
    """The job results to log: the tidy table, or MVTec's (its missing values left out)."""
    if benchmark is None:
        return load_results_csv(path).to_dict("records")
    results = pd.read_csv(path, dtype={"category": str, "method": str})
    return [
        {key: value for key, value in record.items() if not pd.isna(value)}
        for record in results.to_dict("records")
    ]


with job_logging(snakemake.log[0]):
    store_dir = Path(snakemake.output[0]).parent
    params = snakemake.params
    tags = {"git_commit": code_version(Path(snakemake.scriptdir))}
    # MVTec's parent and job runs are tagged with it; the image benchmarks' are not.
    benchmark_tag = {"benchmark": params.benchmark} if params.benchmark else {}
    store = dict(
        uri=default_tracking_uri(store_dir),
        experiment=params.experiment,
        artifact_dir=store_dir / "artifacts",
        lock_path=store_dir / "writer.lock",
        timeout_s=params.timeout_s,
    )
    histories = read_histories(snakemake.input.histories)
    # train.eval_every's figure, written beside a history by its training job.
    figures = {
        key: [Path(key) / EVAL_CURVE_FILE]
        for key in histories
        if (Path(key) / EVAL_CURVE_FILE).exists()
    }
    summary = log_sweep(
        job_records(snakemake.input.results, params.benchmark),
        sweep=params.sweep,
        artifacts=[*snakemake.input.tables, *snakemake.input.plots, snakemake.input.results],
        tags=tags | benchmark_tag,
        histories=histories,
        history_artifacts=figures,
        **store,
    )
    # Image benchmarks: a parent run per study with its own children, tables and figures.
    if "studies" in snakemake.input.keys():
        summary["studies"] = {}
        for manifest in snakemake.input.studies:
            folder, name = Path(manifest).parent, Path(manifest).stem
            summary["studies"][name] = log_sweep(
                study_records(folder / "results.csv"),
                sweep=f"{params.sweep}-{name}",
                artifacts=[
                    *sorted(folder.glob(f"{name}.*")),
                    *sorted(folder.glob("figures/*.png")),
                ],
                tags=tags | {"study": name},
                **store,
            )
    save_json(snakemake.output[0], summary)
