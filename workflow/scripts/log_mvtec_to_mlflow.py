"""MVTec AD's MLflow writer: a child run per job result, its training curves and tables."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pathlib import Path

import pandas as pd

from pipeline_lib.runtime.io import save_json
from pipeline_lib.runtime.logs import job_logging
from pipeline_lib.tracking.loggers import log_benchmark

with job_logging(snakemake.log[0]):
    results = pd.read_csv(snakemake.input.results, dtype={"category": str, "method": str})
    summary = log_benchmark(
        [  # missing values (no masks: no pixel metrics) are left out, not logged as NaN
            {key: value for key, value in record.items() if not pd.isna(value)}
            for record in results.to_dict("records")
        ],
        store_dir=Path(snakemake.output[0]).parent,
        experiment=snakemake.params.experiment,
        sweep=snakemake.params.sweep,
        timeout_s=snakemake.params.timeout_s,
        code_dir=Path(snakemake.scriptdir),
        history_paths=snakemake.input.histories,
        artifacts=[*snakemake.input.tables, *snakemake.input.plots, snakemake.input.results],
        tags={"benchmark": "mvtec"},
    )
    save_json(snakemake.output[0], summary)
