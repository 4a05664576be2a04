"""Fused training: K models of one method and data set trained together in one job.

At the paper's sizes (ResNet-18 on 32x32 images, 32-64 images a step) one training run
leaves a large GPU mostly idle. The K runs of a sweep that share a method and a data set
(other inlier classes, other seeds) are trained here side by side as one network
(:mod:`pipeline_lib.models.stacked`: grouped convolutions, per-network BatchNorm channels,
batched Linear layers), each with its own data, batch order, augmentation stream, BatchNorm
statistics, optimiser state, checkpoint and divergence check, exactly as
:func:`~pipeline_lib.ssl.train.train_representation` would train it alone:

* each run is prepared by the same code as a separate run (arguments, data, seeds, initial
  weights, fingerprint) and resumes from its own checkpoint, in the separate run's format;
* every step draws each model's batch and views from that model's own generators, in the
  separate run's order, so the fused run consumes the same random numbers;
* the loss is the *sum* of the K losses and nothing else couples the models (no gradient
  clipping, no loss scaling), so each model's gradient is that of its own loss, and SGD with
  momentum and weight decay is element-wise: the stacked optimiser is K separate ones;
* after every epoch the weights, BatchNorm statistics, momentum buffers and schedule are
  copied back out into K ordinary models (exact copies) that are checked, checkpointed and
  returned as ordinary :class:`~pipeline_lib.models.proxy.ProxyModel` objects.

The stacked layers add their products in another order than the separate layers, so on the
CPU a fused model matches its separate twin to float32 rounding, not bit for bit (the tests
state the tolerance); a killed fused run resumes bit-identically to an uninterrupted one.

Steps run as the runs' ``step_mode`` says (:mod:`pipeline_lib.ssl.stepper`), and the mode
decides how a group computes:

* ``eager``: the stacked network above, one eager loop for the K models;
* ``graph`` (CUDA): *side by side*
  (:class:`~pipeline_lib.ssl.fused_groups.ConcurrentGroup`). On an H200 (2026-11-27) the
  stacked step captured as one graph trained 0.73-1.05x the images of one captured run:
  the grouped convolutions cost K separate ones. So each model keeps its own model and the
  separate run's captured :class:`~pipeline_lib.ssl.stepper.StaticStep`, and the group
  replays the K graphs step by step on K CUDA streams of one process, whose kernels can
  overlap (processes sharing a GPU take turns). Each model then runs exactly its separate
  run's kernels: bit for bit its separate run (each graph captured on its own stream, so
  with its own cuBLAS workspace: sharing one, the graphs raced), and no NaN can cross.
  Measured on the H200: K = 4-10 side by side trained 1.3-2.5x the images of one captured
  run (``benchmarks/bench_streams.py``, ``bench_train.py --fuse 4 10``; benchmarks/rates/README.md).
* ``two_phase`` (tests only, the CPU): the stacked network through one ``StaticStep`` of K
  members, uncaptured, which equals the stacked eager loop bit for bit.

A group is rebuilt, and so captures again, whenever its membership changes.

A diverged member must not take the others with it. In a stacked group finite numbers
never cross between members, but a NaN can: on an H200 (2026-11-27) cuDNN's grouped
convolution gave NaN in every member's channels once one member's weight held a NaN (a
plain ``0 * NaN``, as if the groups were computed as one masked convolution), so every
member's loss of that epoch was NaN. A stacked group therefore keeps its members' states
as they were at the start of each epoch; a member whose epoch diverged is rolled back and
retrains that epoch alone. The one that diverges
alone stops with its :class:`~pipeline_lib.ssl.train.TrainingDivergedError`; the others go
on and form a new group (a separate epoch matches a fused one to rounding, as above).
"""

from __future__ import annotations

import copy
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from pipeline_lib.models.proxy import ProxyModel
from pipeline_lib.registry import CAPTURED_STEP_MODES
from pipeline_lib.ssl.compiling import release_network
from pipeline_lib.ssl.fused_groups import MAX_SIDE_BY_SIDE, ConcurrentGroup, StackedGroup
from pipeline_lib.ssl.loop import (
    TrainingDivergedError,
    checkpoint_due,
    divergence,
    resume,
    static_step,
    train_epoch,
    write_checkpoint,
)
from pipeline_lib.ssl.run import Run, TrainingState, prepare_run
from pipeline_lib.ssl.settings import DEFAULT_EXECUTION, Execution, TrainSettings
from pipeline_lib.ssl.stepper import StaticStep
from pipeline_lib.ssl.train import record_epoch

__all__ = ["FusedResult", "train_representations_fused"]

log = logging.getLogger(__name__)

#: One model's outcome: its trained model and history, or the error that stopped it.
FusedResult = tuple[ProxyModel, list[dict[str, float]]] | TrainingDivergedError


def _runs_side_by_side(step_mode: str, members: int) -> bool:
    """Whether a group of ``members`` runs in ``step_mode`` replays its members side by side."""
    return step_mode in CAPTURED_STEP_MODES and members <= MAX_SIDE_BY_SIDE


def _group(
    members: list[int], runs: Sequence[Run], states: Sequence[TrainingState]
) -> StackedGroup | ConcurrentGroup:
    """The members' group: side by side on CUDA streams when captured, else stacked.

    Measured on an H200 (benchmarks/rates/README.md): under graph capture the stacked group trained
    0.73-1.05x the images of one captured run, so captured members keep their own steps;
    eager, stacking paid (1.2-3.4x at K = 10), since it launches K models' work at once.
    A captured group of more than :data:`MAX_SIDE_BY_SIDE` members stacks (captured as one
    graph): slower, but no two members share a workspace.
    """
    if _runs_side_by_side(runs[members[0]].step_mode, len(members)):
        return ConcurrentGroup(members, runs, states)
    return StackedGroup(members, runs, states)


def _shape_groups(runs: Sequence[Run]) -> list[list[int]]:
    """Runs that can step together: same image side, batch and steps per epoch."""
    groups: dict[tuple[int, int, int], list[int]] = {}
    for index, run in enumerate(runs):
        key = (run.data.side, run.data.per_step, run.data.steps_per_epoch)
        groups.setdefault(key, []).append(index)
    return list(groups.values())


def _epoch_start(state: TrainingState) -> dict[str, Any]:
    """A deep copy of what an epoch changes in a member (fused runs never use the scaler)."""
    return copy.deepcopy(
        {
            "model": state.model.state_dict(),
            "optimizer": state.optimizer.state_dict(),
            "scheduler": state.scheduler.state_dict(),
            "shuffle": state.shuffle_generator.get_state(),
            "augment": state.augment_generator.get_state(),
        }
    )


def _roll_back(state: TrainingState, start: dict[str, Any]) -> None:
    """Put ``state`` back where :func:`_epoch_start` found it (weights copied in place)."""
    state.model.load_state_dict(start["model"])
    state.optimizer.load_state_dict(start["optimizer"])
    state.scheduler.load_state_dict(start["scheduler"])
    state.shuffle_generator.set_state(start["shuffle"])
    state.augment_generator.set_state(start["augment"])


def _retrain_alone(
    index: int, run: Run, state: TrainingState, start: dict[str, Any], epoch: int
) -> tuple[torch.Tensor, float, str]:
    """Epoch ``epoch`` of member ``index`` again, alone from its start: losses, seconds, mode."""
    log.warning(
        "fused model %d: epoch %d/%d diverged in its group; retraining that epoch alone to "
        "tell a diverging model from one a NaN of another reached",
        index,
        epoch + 1,
        run.epochs,
    )
    _roll_back(state, start)
    started = time.perf_counter()
    step = static_step(run, state)
    losses = train_epoch(run, state, step)
    return losses, time.perf_counter() - started, "eager" if step is None else step.mode


def _train_group(
    indices: list[int],
    runs: Sequence[Run],
    states: Sequence[TrainingState],
    paths: Sequence[str | os.PathLike | None],
    *,
    checkpoint_every: int,
    log_every: int,
    callback: Callable[[int, dict[str, float]], None] | None,
) -> dict[int, TrainingDivergedError]:
    """Train runs ``indices`` to their last epoch; the errors of those that diverged.

    Each epoch trains the runs that have completed exactly that many epochs (after a resume
    a run that is ahead waits for the others); one run alone takes the separate trainer's
    own epoch (with its own static step unless ``eager``). Whenever the members change, the
    group (or the lone run's static step) is built anew from the states: a captured graph
    holds the addresses of the tensors it was captured with. A member whose group epoch
    diverged retrains that epoch alone from its start (:func:`_retrain_alone`, see the module
    docstring) and only stops if it diverges alone too. All checkpoints of an epoch are
    written before any callback is called.
    """
    failed: dict[int, TrainingDivergedError] = {}
    group: StackedGroup | ConcurrentGroup | None = None
    lone_step: StaticStep | None = None
    previous: list[int] = []
    first_epoch = min(states[i].epoch for i in indices)
    for epoch in range(first_epoch, runs[indices[0]].epochs):
        members = [i for i in indices if i not in failed and states[i].epoch == epoch]
        if not members:
            continue
        if members != previous:
            group, lone_step, previous = None, None, members
            if len(members) > 1:
                group = _group(members, runs, states)
                log.info(
                    "training %d %s models fused from epoch %d (%s)",
                    len(members),
                    runs[members[0]].method,
                    epoch + 1,
                    "stacked" if group.shares_kernels else "side by side on streams",
                )
            else:
                lone_step = static_step(runs[members[0]], states[members[0]])
        started = time.perf_counter()
        starts: dict[int, dict[str, Any]] = {}
        if group is None:
            losses = train_epoch(runs[members[0]], states[members[0]], lone_step)[None]
            mode = "eager" if lone_step is None else lone_step.mode
        else:
            if group.shares_kernels:
                starts = {index: _epoch_start(states[index]) for index in members}
            with runs[members[0]].precision():  # as train_epoch: the members share amp
                losses = group.train_epoch()
            group.unload()
            mode = group.mode
        seconds = time.perf_counter() - started  # the members' shared epoch
        done: list[tuple[int, dict[str, float]]] = []
        for column, index in enumerate(members):
            run, state = runs[index], states[index]
            member_losses, member_seconds, member_mode = losses[column], seconds, mode
            error = divergence(run, member_losses, state.model, epoch)
            if error is not None and starts:
                previous = []  # the group's stacked tensors are stale now: build it anew
                member_losses, member_seconds, member_mode = _retrain_alone(
                    index, run, state, starts[index], epoch
                )
                error = divergence(run, member_losses, state.model, epoch)
            if error is not None:
                log.error("fused model %d stopped, the others go on: %s", index, error)
                failed[index] = error
                continue
            record = record_epoch(
                run,
                state,
                epoch,
                member_losses,
                member_seconds,
                member_mode,
                first=epoch == first_epoch,
                log_every=log_every,
            )
            if paths[index] is not None and checkpoint_due(run, state.epoch, checkpoint_every):
                write_checkpoint(run, state, paths[index])
            done.append((index, record))
        if callback is not None:
            for index, record in done:
                callback(index, dict(record))
    return failed


def train_representations_fused(
    settings: TrainSettings,
    images_per_model: Sequence[np.ndarray | torch.Tensor],
    *,
    seeds: Sequence[int],
    execution: Execution = DEFAULT_EXECUTION,
    checkpoint_paths: Sequence[str | os.PathLike | None] | None = None,
    callback: Callable[[int, dict[str, float]], None] | None = None,
) -> list[FusedResult]:
    """Train K representations of one recipe together (stacked, or side by side when captured).

    Model ``k`` is trained as ``train_representation(settings, images_per_model[k],
    seed=seeds[k], execution=execution, checkpoint_path=checkpoint_paths[k])`` would train
    it: to float32 rounding when stacked (eager), with its own kernels when captured (see
    the module docstring).

    Parameters
    ----------
    settings : TrainSettings
        The recipe every model trains with (``amp="float16"`` is refused: its loss scaling
        would couple the models).
    images_per_model : sequence of ndarray or Tensor of shape (n_k, h, w, 3), uint8
        Each model's training images. Models step together when they share the image side,
        the batch and the steps per epoch; models that do not are trained in separate
        fused groups, one group after the other.
    seeds : sequence of int
        One per model.
    execution : Execution, default=DEFAULT_EXECUTION
        Shared by the models, as for :func:`train_representation`: ``auto`` is ``graph`` on
        CUDA and ``eager`` elsewhere, ``graph`` off CUDA is an error; under ``graph`` each
        model's own step is captured once and the models replay side by side on CUDA
        streams (see the module docstring), and each history record's ``step_mode`` says
        what ran its epoch.
    checkpoint_paths : sequence of (str or PathLike or None), or None, default=None
        One resumable checkpoint per model, in :func:`train_representation`'s format (a
        separate run can resume a fused run's checkpoint and the other way round).
    callback : callable or None, default=None
        Called as ``callback(k, record)`` with model ``k``'s epoch record, after all
        checkpoints of that epoch are written (an exception stops training, as a kill would).

    Returns
    -------
    list of (ProxyModel, list of dict) or TrainingDivergedError
        Per model, in order: the model (in inference mode) and its history, as returned by
        :func:`train_representation` (``images_per_s`` is the model's images over the fused
        group's time), or the :class:`TrainingDivergedError` that stopped it. A diverged model
        leaves the group at the end of the epoch; the others train on.

    Raises
    ------
    ValueError
        On a bad argument, ``amp="float16"``, a method that cannot train fused
        (:attr:`~pipeline_lib.registry.MethodSpec.fusable`), or if ``seeds`` /
        ``checkpoint_paths`` do not match the models.
    """
    count = len(images_per_model)
    paths = [None] * count if checkpoint_paths is None else list(checkpoint_paths)
    if count < 1 or len(seeds) != count or len(paths) != count:
        raise ValueError(
            f"need one seed and one checkpoint path per model: {count} models, "
            f"{len(seeds)} seeds, {len(paths)} checkpoint paths"
        )
    if not settings.spec.fusable:
        raise ValueError(f"{settings.method} cannot train fused: train its models one by one")
    if settings.amp == "float16":
        # One GradScaler would skip every model's step when one model's gradients overflow.
        raise ValueError("fused training supports amp='bfloat16' or None, not 'float16'")
    runs: list[Run] = []
    states: list[TrainingState] = []
    for images, seed, path in zip(images_per_model, seeds, paths, strict=True):
        run, state = prepare_run(settings, images, seed=seed, execution=execution)
        runs.append(run)
        states.append(resume(run, state, path))
    failed: dict[int, TrainingDivergedError] = {}
    for indices in _shape_groups(runs):
        failed |= _train_group(
            indices,
            runs,
            states,
            paths,
            checkpoint_every=settings.checkpoint_every,
            log_every=settings.log_every,
            callback=callback,
        )
    return [
        failed[index] if index in failed else (release_network(state.model).eval(), state.history)
        for index, state in enumerate(states)
    ]
