"""Train one self-supervised representation on random patches of a category's train images."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pathlib import Path

from pipeline_lib.data.mvtec import category_from_arrays
from pipeline_lib.models.checkpoints import save_representation
from pipeline_lib.mvtec.patches import train_on_patches
from pipeline_lib.runtime.devices import device_name
from pipeline_lib.runtime.io import load_npz, save_json
from pipeline_lib.runtime.logs import show_progress
from pipeline_lib.runtime.torch_jobs import torch_job
from pipeline_lib.ssl.settings import Execution, TrainSettings

with torch_job(snakemake) as device:
    method = snakemake.wildcards.method
    category = category_from_arrays(load_npz(snakemake.input[0]))
    arguments = dict(snakemake.params.training)
    # Beside the outputs but not one of them, so a restarted job resumes from it.
    checkpoint = Path(snakemake.output.model).with_name("checkpoint.pt")
    model, history = train_on_patches(
        TrainSettings(method=method, width=snakemake.params.width, **arguments),
        category.train_images,
        per_image=snakemake.params.per_image,
        patch_size=snakemake.params.patch_size,
        seed=int(snakemake.wildcards.seed),
        execution=Execution(device=device),
        checkpoint_path=checkpoint,
        progress=show_progress(),
    )
    provenance = {
        **arguments,
        "patch_size": snakemake.params.patch_size,
        "per_image": snakemake.params.per_image,
    }
    # The device as the image benchmarks' histories record it: the tables' training line.
    save_json(
        snakemake.output.history,
        {
            "method": method,
            "arguments": provenance,
            "history": history,
            "device": device.type,
            "device_name": device_name(device),
        },
    )
    save_representation(snakemake.output.model, model, method=method, config_dict=provenance)
    checkpoint.unlink(missing_ok=True)
