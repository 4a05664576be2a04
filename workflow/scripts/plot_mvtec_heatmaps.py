"""Localisation figure of one category: input, mask and every representation's heat map."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pipeline_lib.data.mvtec import category_from_arrays
from pipeline_lib.mvtec.heatmaps import plot_localization
from pipeline_lib.mvtec.localize import localization_panels
from pipeline_lib.paper.plots import save_figure
from pipeline_lib.runtime.io import load_npz
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    category = category_from_arrays(load_npz(snakemake.input.category))
    panels = localization_panels(
        category,
        {
            m: load_npz(p)["score_maps"]
            for m, p in zip(snakemake.params.methods, snakemake.input.scores, strict=True)
        },
        n_images=snakemake.params.n_images,
        patch_size=snakemake.params.patch_size,
        stride=snakemake.params.stride,
        sigma=snakemake.params.sigma,
        normalize=snakemake.params.normalize,
    )
    figure = plot_localization(
        **panels, title=f"{category.name}: {snakemake.params.detector} anomaly maps"
    )
    save_figure(figure, snakemake.output[0])
