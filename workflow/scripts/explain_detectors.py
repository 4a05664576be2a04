"""Integrated gradients and GradCAM of each representation's KDE score (and RotNet's own
classifier) for chosen test images; the figure in the paper's arrangement."""

import json
import logging
from pathlib import Path

import numpy as np

from pipeline_lib.data.split import load_split
from pipeline_lib.detection.explain import explain_images
from pipeline_lib.detection.runner import limit_fit_index, rows_for
from pipeline_lib.models.checkpoints import load_trained_representation
from pipeline_lib.models.representation import build_representation, imagenet_weights_from_env
from pipeline_lib.mvtec.heatmaps import plot_explanations
from pipeline_lib.registry import detector_settings
from pipeline_lib.report.plots import save_figure
from pipeline_lib.report.published import display_name
from pipeline_lib.runtime.devices import select_device, set_threads
from pipeline_lib.runtime.io import load_image_dataset, load_npz, save_npz
from pipeline_lib.runtime.logs import job_logging

log = logging.getLogger("explain_detectors")

with job_logging(snakemake.log[0]):
    set_threads(snakemake.threads)
    params = snakemake.params
    device = select_device(int(snakemake.resources.get("gpu", 0)))
    dataset = load_image_dataset(snakemake.input.dataset)
    split = load_split(snakemake.input.split)
    feature_files = json.loads(params.features)
    model_files = {Path(path).parent.name: path for path in snakemake.input.models}
    fit_index = limit_fit_index(split.train_index, max_fit=params.max_fit, seed=params.seed)
    models, fit_features = {}, {}
    for method in params.methods:
        features = load_npz(feature_files[method])
        fit_features[method] = rows_for(fit_index, features["train_index"], features["f_train"])
        if method in model_files:
            models[method] = load_trained_representation(model_files[method], map_location=device)
        else:
            models[method] = build_representation(
                method,
                seed=params.seed,
                width=params.width,
                imagenet_weights=imagenet_weights_from_env(),
                imagenet_size=params.imagenet_size,
            )
    if params.test_index:
        test_index = np.asarray(params.test_index, dtype=np.int64)
    else:
        outliers = split.test_index[split.test_is_outlier == 1]
        draw = np.random.default_rng(params.seed).choice(
            len(outliers), size=min(params.n_images, len(outliers)), replace=False
        )
        test_index = np.sort(outliers[draw])
    kde = detector_settings("kde", params.detector_params)  # registry defaults filled
    baseline = None
    if params.baseline == "mean":
        baseline = dataset.train_images[split.train_index].mean(axis=0) / 255.0
    heatmaps, diagnostics = explain_images(
        models,
        fit_features,
        dataset.test_images[test_index],
        rotation_methods=params.rotation,
        labels={m: display_name("method", m) for m in params.methods},
        baseline=baseline,
        ig_steps=params.ig_steps,
        gamma=kde["gamma"],
        gamma_scale=kde["gamma_scale"],
        device=device,
    )
    # The sanity check of integrated gradients: attributions add up to the score change.
    for column, gaps in diagnostics["completeness_gap"].items():
        change = diagnostics["score"][column] - diagnostics["baseline_score"][column]
        relative = float(np.max(np.abs(gaps) / np.maximum(np.abs(change), 1e-12)))
        log.log(
            logging.WARNING if relative > 0.1 else logging.INFO,
            "%s: sum(IG) - (F(x) - F(baseline)) = %s, %.1f%% of the score change%s",
            column,
            np.round(gaps, 5).tolist(),
            100 * relative,
            " (more ig_steps, or a baseline along whose path the score changes smoothly)"
            if relative > 0.1
            else "",
        )
    labels = [f"test {i} ({dataset.class_names[dataset.test_labels[i]]})" for i in test_index]
    figure = plot_explanations(
        dataset.test_images[test_index],
        heatmaps,
        row_labels=labels,
        title=f"Explanations of anomaly scores: {Path(snakemake.output.figure).parent.name}, "
        f"inlier class {Path(snakemake.output.figure).stem}",
    )
    save_figure(figure, snakemake.output.figure)
    save_npz(
        snakemake.output.maps,
        {
            "test_index": test_index,
            "columns": np.array(list(heatmaps)),
            "heatmaps": np.stack(list(heatmaps.values()), axis=1),
            "ig_columns": np.array(list(diagnostics["score"])),
            "scores": np.stack(list(diagnostics["score"].values())),
            "baseline_scores": np.stack(list(diagnostics["baseline_score"].values())),
            "completeness_gaps": np.stack(list(diagnostics["completeness_gap"].values())),
        },
    )
