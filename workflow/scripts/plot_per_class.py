"""Per-class AUC bars for one data set, with the paper's numbers overlaid."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pipeline_lib.paper.plots import plot_per_class_auc, save_figure
from pipeline_lib.paper.published import load_published
from pipeline_lib.results.tidy_table import load_results_csv
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    figure = plot_per_class_auc(
        load_results_csv(snakemake.input[0]), snakemake.wildcards.dataset, load_published()
    )
    save_figure(figure, snakemake.output[0])
