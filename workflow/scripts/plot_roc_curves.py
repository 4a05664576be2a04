"""ROC curves of one class and seed, one curve per representation and detector."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pipeline_lib.config.keys import ResultKey
from pipeline_lib.paper.plots import plot_roc_curves, roc_title, save_figure
from pipeline_lib.results.roc import roc_curve_from_scores
from pipeline_lib.runtime.io import load_npz
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    curves = [roc_curve_from_scores(load_npz(path), path) for path in snakemake.input]
    # every curve is of one class, seed and contamination: the title says which
    title = roc_title(ResultKey.from_path(snakemake.input[0]))
    save_figure(plot_roc_curves(curves, title=title), snakemake.output[0])
