"""Gather every job's result.json into one tidy CSV."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pipeline_lib.results.tidy_table import load_result_records, save_results_csv
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    save_results_csv(load_result_records(snakemake.input), snakemake.output[0])
