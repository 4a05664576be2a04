"""Train one self-supervised representation on the split's training set (resumable)."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pathlib import Path

from pipeline_lib.data.split import load_split
from pipeline_lib.runtime.devices import gpus_requested, job_device, set_threads
from pipeline_lib.runtime.io import load_image_dataset
from pipeline_lib.runtime.logs import job_logging, show_progress
from pipeline_lib.ssl.jobs import save_trained, train_on_split
from pipeline_lib.ssl.settings import Execution

with job_logging(snakemake.log[0]):
    set_threads(snakemake.threads)
    method = snakemake.params.method  # the base method of a variant
    dataset = load_image_dataset(snakemake.input.dataset)
    split = load_split(snakemake.input.split)
    # Execution settings and eval_every's detectors (the sweep's own): a param Snakemake
    # does not record, so changing them re-runs no finished job (each epoch's history
    # records what ran; the curves are a diagnostic of this job).
    execution = snakemake.params.execution.value
    eval_every = execution["eval_every"]
    # Beside the outputs but not one of them: Snakemake keeps it when a job dies, so the
    # restarted job resumes from it.
    checkpoint = Path(snakemake.output.model).with_name("checkpoint.pt")
    # A GPU job holds a slot on the least-loaded visible GPU while it trains (GPU packing).
    with job_device(gpus_requested(snakemake.resources)) as device:
        evaluate = None
        if eval_every:
            from pipeline_lib.detection.epoch_eval import epoch_evaluator

            evaluate = epoch_evaluator(
                dataset,
                split,
                method=method,
                seed=int(snakemake.wildcards.seed),
                device=device,
                **execution["evaluation"],
            )
        model, history, arguments = train_on_split(
            method,
            dataset.train_images,
            split,
            training=snakemake.params.training,
            train_size=snakemake.params.train_size,  # data-efficiency variants: a subset
            seed=int(snakemake.wildcards.seed),
            width=snakemake.params.width,
            execution=Execution.from_config(execution, device=device),
            checkpoint_path=checkpoint,
            progress=show_progress(),
            evaluate=evaluate,
            eval_every=eval_every,
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
    if any("eval" in record for record in history):
        from pipeline_lib.detection.epoch_eval import EVAL_CURVE_FILE
        from pipeline_lib.paper.plots import plot_eval_curves, save_figure

        wildcards = snakemake.wildcards
        title = f"{wildcards.inlier} {wildcards.method} seed {wildcards.seed}"
        save_figure(
            plot_eval_curves(history, title=title),
            Path(snakemake.output.history).with_name(EVAL_CURVE_FILE),
        )
    checkpoint.unlink(missing_ok=True)
