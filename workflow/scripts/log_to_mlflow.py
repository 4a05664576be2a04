"""The MLflow writer of both benchmarks: a child run per job result, a training run per model,
a parent run per sweep with its tables and plots (and, for the image benchmarks, per study).

The rule names its benchmark (``params.benchmark``), which decides how its tidy table is
read: ``images`` (with the studies of ``input.studies``) or ``mvtec_ad``; ``params.tags`` go
on every run. :func:`pipeline_lib.tracking.loggers.log_benchmark` logs both.
"""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pathlib import Path

from pipeline_lib.mvtec.tables import mvtec_result_records
from pipeline_lib.results.study_frames import study_records
from pipeline_lib.results.tidy_table import load_results_csv
from pipeline_lib.runtime.io import save_json
from pipeline_lib.runtime.logs import job_logging
from pipeline_lib.tracking.loggers import log_benchmark

with job_logging(snakemake.log[0]):
    studies = None
    if snakemake.params.benchmark == "mvtec_ad":
        records = mvtec_result_records(snakemake.input.results)
    else:
        records = load_results_csv(snakemake.input.results).to_dict("records")
        studies = {}
        for manifest in snakemake.input.studies:
            folder, name = Path(manifest).parent, Path(manifest).stem
            files = [*sorted(folder.glob(f"{name}.*")), *sorted(folder.glob("figures/*.png"))]
            studies[name] = (study_records(folder / "results.csv"), files)
    summary = log_benchmark(
        records,
        store_dir=Path(snakemake.output[0]).parent,
        experiment=snakemake.params.experiment,
        sweep=snakemake.params.sweep,
        timeout_s=snakemake.params.timeout_s,
        code_dir=Path(snakemake.scriptdir),
        history_paths=snakemake.input.histories,
        artifacts=[*snakemake.input.tables, *snakemake.input.plots, snakemake.input.results],
        tags=snakemake.params.tags,
        studies=studies,
    )
    save_json(snakemake.output[0], summary)
