"""Integrated gradients and GradCAM of each representation's KDE score (and RotNet's own
classifier) for chosen test images; the figure in the paper's arrangement."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

import json
from pathlib import Path

from pipeline_lib.data.split import load_split
from pipeline_lib.explain import explain_split
from pipeline_lib.mvtec.heatmaps import plot_explanations
from pipeline_lib.paper.plots import save_figure
from pipeline_lib.paper.published import display_name
from pipeline_lib.runtime.io import load_image_dataset, load_npz, save_npz
from pipeline_lib.runtime.torch_jobs import torch_job

with torch_job(snakemake) as device:
    params = snakemake.params
    feature_files = json.loads(params.features)
    explanation = explain_split(
        load_image_dataset(snakemake.input.dataset),
        load_split(snakemake.input.split),
        {method: load_npz(feature_files[method]) for method in params.methods},
        {Path(path).parent.name: path for path in snakemake.input.models},
        methods=params.methods,
        rotation_methods=params.rotation,
        labels={m: display_name("method", m) for m in params.methods},
        test_index=params.test_index,
        n_images=params.n_images,
        seed=params.seed,
        max_fit=params.max_fit,
        width=params.width,
        imagenet_size=params.imagenet_size,
        baseline=params.baseline,
        ig_steps=params.ig_steps,
        detector_params=params.detector_params,  # the kde detector's gamma / gamma_scale
        device=device,
    )
    figure = plot_explanations(
        explanation.images,
        explanation.heatmaps,
        row_labels=explanation.row_labels,
        title=f"Explanations of anomaly scores: {Path(snakemake.output.figure).parent.name}, "
        f"inlier class {Path(snakemake.output.figure).stem}",
    )
    save_figure(figure, snakemake.output.figure)
    save_npz(snakemake.output.maps, explanation.arrays())
