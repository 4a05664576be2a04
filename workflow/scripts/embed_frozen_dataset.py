"""Embed a whole data set with a frozen representation (shared by every inlier class)."""

from pipeline_lib.models.embed import embed_dataset
from pipeline_lib.models.representation import build_representation, imagenet_weights_from_env
from pipeline_lib.runtime.devices import select_device, set_threads
from pipeline_lib.runtime.io import load_image_dataset, save_npz
from pipeline_lib.runtime.logs import job_logging, show_progress

with job_logging(snakemake.log[0]):
    set_threads(snakemake.threads)
    # The ImageNet weights path is environment-like ($DROC_IMAGENET_WEIGHTS, exported by
    # common.smk); imagenet_size is None for every method but resnet50_imagenet.
    imagenet = {"imagenet_weights": imagenet_weights_from_env()}
    if snakemake.params.imagenet_size is not None:
        imagenet["imagenet_size"] = snakemake.params.imagenet_size
    model = build_representation(
        snakemake.wildcards.method,
        seed=int(snakemake.wildcards.seed),
        width=snakemake.params.width,
        **imagenet,
    )
    features = embed_dataset(
        model,
        load_image_dataset(snakemake.input.dataset),
        batch_size=snakemake.params.batch_size,
        device=select_device(int(snakemake.resources.get("gpu", 0))),
        progress=show_progress(),
    )
    save_npz(snakemake.output[0], features)
