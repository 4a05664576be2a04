"""Ranks of the main table's rows across data sets (3 or more), as a mean-rank dot plot."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pipeline_lib.paper.plots import write_rank_plot
from pipeline_lib.results.tidy_table import load_results_csv
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    if write_rank_plot(load_results_csv(snakemake.input[0]), snakemake.output[0]) is None:
        raise ValueError(f"{snakemake.input[0]}: ranks across data sets need 3 data sets or more")
