"""The epochs of a prepared run: steps, divergence checks, records, log lines, checkpoints.

The public loop API shared by the single loop (:func:`pipeline_lib.ssl.train.
train_representation`), the fused loop (:mod:`pipeline_lib.ssl.fused`) and the benchmarks,
so each trains, checks, records and checkpoints an epoch exactly as the others do. A run and
its state come from :func:`pipeline_lib.ssl.run.prepare_run`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pipeline_lib.models.checkpoints import load_checkpoint, save_checkpoint
from pipeline_lib.registry import CAPTURED_STEP_MODES
from pipeline_lib.ssl.compiling import compile_network
from pipeline_lib.ssl.run import Run, TrainingState
from pipeline_lib.ssl.stepper import StaticStep, one_member

__all__ = [
    "TrainingDivergedError",
    "checkpoint_due",
    "divergence",
    "epoch_record",
    "log_epoch",
    "resume",
    "run_static_step",
    "static_step",
    "train_epoch",
    "write_checkpoint",
]

log = logging.getLogger(__name__)


class TrainingDivergedError(RuntimeError):
    """The proxy loss or the weights became NaN or infinite.

    The message names the epoch (and, for a loss, the step) and suggests a lower lr.
    """


def _all_finite(model: nn.Module) -> bool:
    """Whether every floating-point parameter and buffer is finite (one host sync)."""
    tensors = [t for t in model.state_dict().values() if t.is_floating_point()]
    return bool(torch.stack([torch.isfinite(t).all() for t in tensors]).all())


def resume(
    run: Run, state: TrainingState, checkpoint_path: str | os.PathLike | None
) -> TrainingState:
    """``state`` advanced to the checkpoint's epoch, or a fresh state if it cannot be resumed.

    A missing path or file is no resume; a file that fails to load or was written for other
    arguments or data is logged as a warning naming it (never fatal).
    """
    if checkpoint_path is None or not Path(checkpoint_path).exists():
        return state
    try:
        saved = load_checkpoint(checkpoint_path)
        if saved["fingerprint"] != run.fingerprint:
            changed = sorted(
                key
                for key in set(run.fingerprint) | set(saved["fingerprint"])
                if run.fingerprint.get(key) != saved["fingerprint"].get(key)
            )
            raise ValueError(f"written for other arguments or data (differs in {changed})")
        state.model.load_state_dict(saved["model"])
        state.optimizer.load_state_dict(saved["optimizer"])
        state.scheduler.load_state_dict(saved["scheduler"])
        if run.use_scaler and saved.get("scaler"):
            state.scaler.load_state_dict(saved["scaler"])
        state.shuffle_generator.set_state(saved["rng"]["shuffle"])
        _restore_augment_generator(state.augment_generator, saved["rng"], run.method)
        torch.random.set_rng_state(saved["rng"]["torch"])
        if run.on_cuda and saved["rng"].get("cuda") is not None:
            torch.cuda.set_rng_state_all(saved["rng"]["cuda"])
        state.history = list(saved["history"])
        state.epoch = int(saved["epoch"])
        log.info(
            "resuming %s from %s after epoch %d/%d",
            run.method,
            checkpoint_path,
            state.epoch,
            run.epochs,
        )
        return state
    except Exception as error:  # a damaged file raises many types; never fatal
        log.warning(
            "could not resume from checkpoint %s (%s: %s); training from scratch",
            checkpoint_path,
            type(error).__name__,
            error,
        )
        # Loading may have changed the model or optimiser half-way: rebuild everything.
        return run.new_state()


def _restore_augment_generator(
    generator: torch.Generator, saved_rng: dict[str, Any], method: str
) -> None:
    """Restore the augmentation generator, unless the checkpoint drew elsewhere.

    A checkpoint written under the other ``train.draws`` (a CPU generator's state for a
    device generator, or back) cannot be loaded into this one: the run goes on from the
    weights with its generator as seeded (the run's augmentation seed), which a second
    resume of the same checkpoint repeats. Checkpoints from before the setting drew on the
    host.
    """
    saved_device = saved_rng.get("augment_device", "cpu")
    if saved_device == generator.device.type:
        generator.set_state(saved_rng["augment"])
        return
    log.info(
        "%s: the checkpoint drew its random numbers on %s, this run draws them on %s "
        "(train.draws); its generator starts from the run's augmentation seed",
        method,
        saved_device,
        generator.device.type,
    )


def run_static_step(
    run: Run,
    state: TrainingState,
    *,
    capture: bool,
    update: str = "fused",
    device_lr: bool | None = None,
) -> StaticStep:
    """The two-phase step of one run on ``state``: what ``graph`` training steps through.

    One constructor for the trainer, the tests and benchmarks/bench_compile.py, so they all
    time and check the step that training runs. ``capture=False`` never captures (the CPU);
    ``update`` and ``device_lr`` as for :class:`~pipeline_lib.ssl.stepper.StaticStep`.
    A ``compiled`` run's network is compiled here (in place, before its first step).
    """
    compiled = run.step_mode == "compiled"
    if compiled:
        compile_network(state.model)
    return StaticStep(
        model=state.model,
        optimizer=state.optimizer,
        step=one_member(run.step),
        images=[run.data.images],
        per_step=run.data.per_step,
        generators=[state.augment_generator],
        autocast=run.autocast,
        capture=capture,
        compiled=compiled,
        update=update,
        device_lr=device_lr,
    )


def static_step(run: Run, state: TrainingState) -> StaticStep | None:
    """The two-phase step of a ``graph`` or ``compiled`` run (built after any resume), None
    for ``eager``: what every loop steps through.

    ``two_phase`` (tests only) is the same step never captured, which runs on the CPU.
    """
    if run.step_mode == "eager":
        return None
    return run_static_step(run, state, capture=run.step_mode in CAPTURED_STEP_MODES)


def train_epoch(
    run: Run, state: TrainingState, static_step: StaticStep | None = None
) -> torch.Tensor:
    """One pass in the run's epoch order; the steps' losses (on the device, no sync).

    Public so that the fused loop's lone members and the benchmarks time the very epoch
    that training runs.

    With ``static_step`` every step runs through it (the same random numbers, drawn in the
    same order, so the generators end where the eager loop leaves them). The steps run in
    the run's precision block (:meth:`Run.precision`): a graph captured in an epoch keeps
    the kernels chosen there.
    """
    with run.precision():
        return _epoch_steps(run, state, static_step)


def _epoch_steps(run: Run, state: TrainingState, static_step: StaticStep | None) -> torch.Tensor:
    """:func:`train_epoch`'s steps."""
    data, model = run.data, state.model
    model.train()
    order = run.order.draw(state.shuffle_generator).to(run.device)
    losses = torch.zeros(data.steps_per_epoch, device=run.device)
    if static_step is not None:
        for index in range(data.steps_per_epoch):
            loss = static_step(order[index * data.per_step : (index + 1) * data.per_step])
            state.scheduler.step()
            losses[index] = loss  # a copy: a replayed step's loss tensor is reused
        return losses
    for index in range(data.steps_per_epoch):
        batch = data.images[order[index * data.per_step : (index + 1) * data.per_step]]
        with run.autocast():
            loss = run.step(model, batch, generator=state.augment_generator)
        state.optimizer.zero_grad(set_to_none=True)
        state.scaler.scale(loss).backward()
        state.scaler.step(state.optimizer)
        state.scaler.update()
        state.scheduler.step()
        losses[index] = loss.detach()
    return losses


def divergence(
    run: Run, losses: torch.Tensor, model: nn.Module, epoch: int
) -> TrainingDivergedError | None:
    """The error to raise if epoch ``epoch`` (0-based) left a non-finite loss or weight.

    Returned, not raised: the fused loop stops only the member that diverged.
    """
    finite = torch.isfinite(losses)
    steps, epochs = run.data.steps_per_epoch, run.epochs
    if not bool(finite.all()):  # one host sync per epoch
        bad = int((~finite).nonzero()[0, 0])
        return TrainingDivergedError(
            f"{run.method} loss is {losses[bad].item()} at epoch {epoch + 1}/{epochs}, step "
            f"{bad + 1}/{steps} (global step {epoch * steps + bad + 1}); "
            f"training diverged: lower the learning rate (lr={run.lr})"
        )
    if not _all_finite(model):
        return TrainingDivergedError(
            f"{run.method} weights became NaN or infinite during epoch {epoch + 1}/{epochs} "
            f"(losses were finite, last {losses[-1].item():.4g}); training diverged: "
            f"lower the learning rate (lr={run.lr})"
        )
    return None


def epoch_record(
    run: Run, epoch: int, losses: torch.Tensor, seconds: float, step_mode: str = "eager"
) -> dict[str, Any]:
    """The history record of epoch ``epoch`` (0-based); ``step_mode``: what ran its steps,
    ``autocast``: the autocast dtype its steps ran under (None: float32; autocast runs on
    CUDA only), read back by the tables' training line
    (:func:`pipeline_lib.paper.protocol.training_notes`).

    One definition, so separate and fused runs write the same history.
    """
    steps = run.data.steps_per_epoch
    return {
        "epoch": epoch + 1,
        "loss": float(losses.mean()),
        "lr": run.lr * run.cosine((epoch + 1) * steps - 1),
        "images_per_s": steps * run.data.per_step / seconds,
        "seconds": seconds,
        "steps": steps,
        "step_mode": step_mode,
        "autocast": run.amp if run.on_cuda else None,
    }


def log_epoch(run: Run, record: dict[str, float], *, first: bool, log_every: int) -> None:
    """An INFO line for the first, every ``log_every``-th and the last epoch (every loop)."""
    epoch = int(record["epoch"])
    if first or epoch % log_every == 0 or epoch == run.epochs:
        log.info(
            "%s epoch %d/%d: loss %.4f, lr %.3g, %.0f images/s",
            run.method,
            epoch,
            run.epochs,
            record["loss"],
            record["lr"],
            record["images_per_s"],
        )


def write_checkpoint(run: Run, state: TrainingState, checkpoint_path: str | os.PathLike) -> None:
    """Save ``state`` after its ``state.epoch``-th epoch (atomically).

    One format for both loops: a separate run resumes a fused run's checkpoint and back.
    """
    save_checkpoint(
        checkpoint_path,
        {
            "fingerprint": run.fingerprint,
            "epoch": state.epoch,
            "model": state.model.state_dict(),
            "optimizer": state.optimizer.state_dict(),
            "scheduler": state.scheduler.state_dict(),
            "scaler": state.scaler.state_dict() if run.use_scaler else None,
            "history": state.history,
            "rng": {
                "torch": torch.random.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if run.on_cuda else None,
                "shuffle": state.shuffle_generator.get_state(),
                "augment": state.augment_generator.get_state(),
                "augment_device": state.augment_generator.device.type,
            },
        },
    )


def checkpoint_due(run: Run, epochs_done: int, checkpoint_every: int) -> bool:
    """Every ``checkpoint_every`` epochs, and always after the last (evaluation falls on the
    same epochs with ``eval_every``)."""
    return epochs_done % checkpoint_every == 0 or epochs_done == run.epochs
