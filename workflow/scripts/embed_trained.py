"""Embed a trained representation's fit images and the test split (and rotation scores)."""

import numpy as np

from pipeline_lib.data.split import load_split
from pipeline_lib.models.checkpoints import load_trained_representation
from pipeline_lib.models.embed import embed_split
from pipeline_lib.registry import ROTATION_METHODS
from pipeline_lib.runtime.devices import gpus_requested, job_device, set_threads
from pipeline_lib.runtime.io import load_image_dataset, save_npz
from pipeline_lib.runtime.logs import job_logging, show_progress
from pipeline_lib.ssl.rotation import rotation_scores

with (
    job_logging(snakemake.log[0]),
    job_device(gpus_requested(snakemake.resources)) as device,
):
    set_threads(snakemake.threads)
    model = load_trained_representation(snakemake.input.model, map_location=device)
    dataset = load_image_dataset(snakemake.input.dataset)
    split = load_split(snakemake.input.split)
    fit_index = np.concatenate([split.train_index, *split.clean_index.values()])
    features = embed_split(
        model,
        dataset,
        fit_index,
        batch_size=snakemake.params.batch_size,
        device=device,
        progress=show_progress(),
    )
    if snakemake.params.method in ROTATION_METHODS:  # the base method of a variant
        scores = rotation_scores(
            model, dataset.test_images, device=device, batch_size=snakemake.params.batch_size
        )
        features.update({f"{name}_test": values for name, values in scores.items()})
    save_npz(snakemake.output[0], features)
