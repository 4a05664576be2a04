"""Train the K models of one fused group (train.fuse) as one computation; see train.smk.

Writes each model's model.pt and train_history.json (the files train_representation.py
writes) under the group's folder (one folder per member, ``<class>@<seed>``), and
outcome.json, the job's one declared output, naming per member whether it trained or
diverged (with the error). A diverged model does not fail
the job: Snakemake would delete the outputs of a failed job, and with them the other models'
work. unpack_fused_model then fails for that model alone, quoting the error.
"""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pathlib import Path

from pipeline_lib.config.fusing import member_name
from pipeline_lib.data.split import load_split
from pipeline_lib.runtime.devices import gpus_requested, job_device, set_threads
from pipeline_lib.runtime.io import load_image_dataset, save_json
from pipeline_lib.runtime.logs import job_logging
from pipeline_lib.ssl.jobs import save_trained, train_on_splits_fused
from pipeline_lib.ssl.settings import Execution
from pipeline_lib.ssl.train import TrainingDivergedError

with job_logging(snakemake.log[0]):
    set_threads(snakemake.threads)
    method = snakemake.params.method  # the base method of a variant
    members = [(inlier, int(seed)) for inlier, seed in snakemake.params.members]
    splits = list(snakemake.input.splits)
    if len(splits) != len(members):
        raise ValueError(f"{len(splits)} split files for {len(members)} fused models: {members}")
    images = load_image_dataset(snakemake.input.dataset).train_images
    # Each model checkpoints where its separate job would (SPLIT/{method}/checkpoint.pt), so a
    # killed group resumes, and a separate job can resume a fused checkpoint and back.
    checkpoints = [
        Path(split).parent / snakemake.wildcards.method / "checkpoint.pt" for split in splits
    ]
    with job_device(gpus_requested(snakemake.resources)) as device:
        results, arguments = train_on_splits_fused(
            method,
            images,
            [load_split(split) for split in splits],
            training=snakemake.params.training,
            train_size=snakemake.params.train_size,
            seeds=[seed for _, seed in members],
            width=snakemake.params.width,
            # A param Snakemake does not record, as in train_representation.py: changing the
            # step mode or the draws re-runs no finished job.
            execution=Execution.from_config(snakemake.params.execution.value, device=device),
            checkpoint_paths=checkpoints,
        )
    folder = Path(snakemake.output.outcome).parent
    outcome = {}
    names = [member_name(inlier, seed) for inlier, seed in members]
    for name, result, checkpoint in zip(names, results, checkpoints, strict=True):
        if isinstance(result, TrainingDivergedError):
            outcome[name] = {"status": "diverged", "error": str(result)}
            continue
        model, history = result
        save_trained(
            folder / name / "model.pt",
            folder / name / "train_history.json",
            model,
            history,
            method=method,
            arguments=arguments,
            device=device,
            width=snakemake.params.width,
            fused=names,  # its rates are shares of a fused group's time
        )
        checkpoint.unlink(missing_ok=True)
        outcome[name] = {"status": "trained"}
    save_json(snakemake.output.outcome, {"method": snakemake.wildcards.method, "models": outcome})
