"""Embed a category's training patches (the detector's fit set) and every test patch densely."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pipeline_lib.data.mvtec import category_from_arrays
from pipeline_lib.models.checkpoints import load_trained_representation
from pipeline_lib.models.representation import build_representation, imagenet_weights_from_env
from pipeline_lib.mvtec.patches import PatchOptions, embed_category_patches
from pipeline_lib.runtime.io import load_npz, save_npz
from pipeline_lib.runtime.logs import show_progress
from pipeline_lib.runtime.torch_jobs import torch_job

with torch_job(snakemake) as device:
    method, seed = snakemake.wildcards.method, int(snakemake.wildcards.seed)
    if snakemake.input.model:
        model = load_trained_representation(snakemake.input.model, map_location=device)
    else:
        model = build_representation(
            method,
            seed=seed,
            width=snakemake.params.width,
            imagenet_weights=imagenet_weights_from_env(),
            imagenet_size=snakemake.params.imagenet_size,
        )
    category = category_from_arrays(load_npz(snakemake.input.category))
    features = embed_category_patches(
        model,
        category.train_images,
        category.test_images,
        options=PatchOptions(
            patch_size=snakemake.params.patch_size,
            stride=snakemake.params.stride,
            batch_size=snakemake.params.batch_size,
            device=device,
            progress=show_progress(),
        ),
        max_fit_patches=snakemake.params.max_fit_patches,
        seed=seed,
        rotation=snakemake.params.rotation,
    )
    save_npz(snakemake.output[0], features)
