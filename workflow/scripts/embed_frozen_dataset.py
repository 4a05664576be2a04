"""Embed a whole data set with a frozen representation (shared by every inlier class)."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pipeline_lib.models.embed import embed_frozen
from pipeline_lib.runtime.io import load_image_dataset, save_npz
from pipeline_lib.runtime.logs import show_progress
from pipeline_lib.runtime.torch_jobs import torch_job

with torch_job(snakemake) as device:
    # imagenet_size is None for every method but resnet50_imagenet; the weights path comes
    # as $DROC_IMAGENET_WEIGHTS (exported by common.smk).
    features = embed_frozen(
        snakemake.wildcards.method,
        load_image_dataset(snakemake.input.dataset),
        seed=int(snakemake.wildcards.seed),
        width=snakemake.params.width,
        batch_size=snakemake.params.batch_size,
        device=device,
        imagenet_size=snakemake.params.imagenet_size,
        progress=show_progress(),
    )
    save_npz(snakemake.output[0], features)
