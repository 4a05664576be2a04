"""The single MLflow writer: a child run per job result and a parent run per sweep and study."""

from pathlib import Path

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

with job_logging(snakemake.log[0]):
    store_dir = Path(snakemake.output[0]).parent
    records = load_results_csv(snakemake.input.results).to_dict("records")
    histories = read_histories(snakemake.input.histories)
    # train.eval_every's figure, written beside a history by its training job.
    figures = {
        key: [Path(key) / EVAL_CURVE_FILE]
        for key in histories
        if (Path(key) / EVAL_CURVE_FILE).exists()
    }
    summary = log_sweep(
        records,
        uri=default_tracking_uri(store_dir),
        experiment=snakemake.params.experiment,
        sweep=snakemake.params.sweep,
        artifacts=[*snakemake.input.tables, *snakemake.input.plots, snakemake.input.results],
        artifact_dir=store_dir / "artifacts",
        lock_path=store_dir / "writer.lock",
        tags={"git_commit": code_version(Path(snakemake.scriptdir))},
        timeout_s=snakemake.params.timeout_s,
        histories=histories,
        history_artifacts=figures,
    )
    # A parent run per study with its own children, tables and figures.
    summary["studies"] = {}
    for manifest in snakemake.input.studies:
        folder, name = Path(manifest).parent, Path(manifest).stem
        summary["studies"][name] = log_sweep(
            study_records(folder / "results.csv"),
            uri=default_tracking_uri(store_dir),
            experiment=snakemake.params.experiment,
            sweep=f"{snakemake.params.sweep}-{name}",
            artifacts=[*sorted(folder.glob(f"{name}.*")), *sorted(folder.glob("figures/*.png"))],
            artifact_dir=store_dir / "artifacts",
            lock_path=store_dir / "writer.lock",
            tags={"git_commit": code_version(Path(snakemake.scriptdir)), "study": name},
            timeout_s=snakemake.params.timeout_s,
        )
    save_json(snakemake.output[0], summary)
