"""Train one self-supervised representation on the split's training set (resumable)."""

from pathlib import Path

from pipeline_lib.data.split import load_split
from pipeline_lib.runtime.devices import gpus_requested, job_device, set_threads
from pipeline_lib.runtime.io import load_image_dataset
from pipeline_lib.runtime.logs import job_logging, show_progress
from pipeline_lib.ssl.jobs import save_trained, train_on_split

with job_logging(snakemake.log[0]):
    set_threads(snakemake.threads)
    method = snakemake.params.method  # the base method of a variant
    images = load_image_dataset(snakemake.input.dataset).train_images
    # Beside the outputs but not one of them: Snakemake keeps it when a job dies, so the
    # restarted job resumes from it.
    checkpoint = Path(snakemake.output.model).with_name("checkpoint.pt")
    # A GPU job holds a slot on the least-loaded visible GPU while it trains (GPU packing).
    with job_device(gpus_requested(snakemake.resources)) as device:
        model, history, arguments = train_on_split(
            method,
            images,
            load_split(snakemake.input.split),
            training=snakemake.params.training,
            train_size=snakemake.params.train_size,  # data-efficiency variants: a subset
            seed=int(snakemake.wildcards.seed),
            device=device,
            width=snakemake.params.width,
            checkpoint_path=checkpoint,
            progress=show_progress(),
            # An execution setting, read from the config rather than a param: changing it
            # re-runs no finished job (each epoch's history records what ran).
            step_mode=snakemake.config["train"].get("step_mode", "auto"),
        )
    save_trained(
        snakemake.output.model,
        snakemake.output.history,
        model,
        history,
        method=method,
        arguments=arguments,
        device=device,
        width=snakemake.params.width,
    )
    checkpoint.unlink(missing_ok=True)
