"""Embed a trained representation's fit images and the test split (and rotation scores)."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pipeline_lib.data.split import load_split
from pipeline_lib.models.checkpoints import load_trained_representation
from pipeline_lib.runtime.io import load_image_dataset, save_npz
from pipeline_lib.runtime.logs import show_progress
from pipeline_lib.runtime.torch_jobs import torch_job
from pipeline_lib.ssl.jobs import embed_trained

with torch_job(snakemake) as device:
    features = embed_trained(
        load_trained_representation(snakemake.input.model, map_location=device),
        load_image_dataset(snakemake.input.dataset),
        load_split(snakemake.input.split),
        method=snakemake.params.method,  # the base method of a variant
        batch_size=snakemake.params.batch_size,
        device=device,
        progress=show_progress(),
    )
    save_npz(snakemake.output[0], features)
