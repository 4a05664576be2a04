"""Self-supervised representation training: one plain epoch loop for every proxy task.

:func:`train_representation` takes the recipe as one value (:class:`~pipeline_lib.ssl.
settings.TrainSettings`) and how it executes as another (:class:`~pipeline_lib.ssl.settings.
Execution`), prepares the run (:mod:`pipeline_lib.ssl.run`) and steps through its epochs
with the loop API (:mod:`pipeline_lib.ssl.loop`) that the fused trainer
(:mod:`pipeline_lib.ssl.fused`) shares; this module adds the epoch loop itself and the
per-epoch evaluation.

Execution settings (not part of the recipe, nor of a checkpoint's fingerprint):

* ``step_mode``: ``graph`` captures the whole step (views, forward, loss, backward, SGD)
  once as a CUDA graph and replays it (:mod:`pipeline_lib.ssl.stepper`), with the same
  random numbers as ``eager``, so the two differ only in kernel rounding; ``auto`` is
  ``graph`` on CUDA (``eager`` with ``amp="float16"``) and ``eager`` elsewhere. If the
  capture fails, training goes on uncaptured with a warning. Each history record's
  ``step_mode`` says what ran: ``eager``, ``graph``, ``compiled`` or ``uncaptured``.
  ``compiled`` (CUDA, opt-in) is ``graph`` with the network compiled by inductor inside the
  captured step (:mod:`pipeline_lib.ssl.compiling`): faster, reproducible, but with its own
  rounding. A checkpoint resumes under any mode (it holds the same state); the
  uninterrupted result is repeated exactly when both runs use the same mode.
* ``checkpoint_path``: if the file exists and was written for the same arguments and data,
  training resumes after its last epoch (on the CPU the result is bit-identical to an
  uninterrupted run). A file that cannot be loaded, or that was written for other
  arguments, is logged as a warning naming it, and training starts from scratch (and
  overwrites it). The file is left in place at the end (a re-run with the same arguments
  returns at once); delete it once the representation is saved if it is not wanted.
* ``evaluate``: ``evaluate(model) -> {name: value}``, run every ``eval_every`` epochs and
  after the last one; its result becomes the epoch record's ``eval`` (before the checkpoint
  and ``callback``). It gets an uncompiled copy of the model in inference mode, under a
  forked RNG, so training is the same with or without it. The workflow passes
  :func:`pipeline_lib.detection.epoch_eval.epoch_evaluator` (test-split AUCs, a
  diagnostic). An exception there is logged as a warning and recorded as the record's
  ``eval_error``; training goes on (a diagnostic must not cost the run).

A history has one record per epoch: ``epoch`` (1-based), ``loss`` (mean over the epoch's
steps), ``lr`` (of the epoch's last step), ``images_per_s`` (training instances per second of
training, excluding checkpointing and evaluation), ``seconds``, ``steps``, ``step_mode``, and
``eval`` (or ``eval_error``) and ``eval_seconds`` on the epochs ``evaluate`` ran.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from pipeline_lib.models.proxy import ProxyModel
from pipeline_lib.ssl.compiling import eager_copy, release_network
from pipeline_lib.ssl.loop import (
    TrainingDivergedError,
    checkpoint_due,
    divergence,
    epoch_record,
    log_epoch,
    resume,
    static_step,
    train_epoch,
    write_checkpoint,
)
from pipeline_lib.ssl.run import Run, TrainingState, prepare_run
from pipeline_lib.ssl.settings import DEFAULT_EXECUTION, Execution, TrainSettings

__all__ = ["TrainingDivergedError", "record_epoch", "train_representation"]

log = logging.getLogger(__name__)


def _evaluate(
    run: Run,
    state: TrainingState,
    evaluate: Callable[[ProxyModel], Mapping[str, float]],
    record: dict[str, Any],
) -> None:
    """Add ``evaluate``'s result to ``record`` (``eval``), leaving training as it was.

    ``evaluate`` gets an inference-mode copy of the model
    (:func:`~pipeline_lib.ssl.compiling.eager_copy`), so BatchNorm statistics, compiled
    modules and captured graphs of the trained model are untouched, and runs under a forked
    RNG, so the global streams stay where training left them: the weights come out the same
    with or without evaluation. An exception becomes ``eval_error`` and a warning.
    """
    started = time.perf_counter()
    devices = []
    if run.on_cuda:
        devices = [torch.cuda.current_device() if run.device.index is None else run.device.index]
    try:
        with torch.random.fork_rng(devices=devices):
            scores = evaluate(eager_copy(state.model).eval())
        record["eval"] = {name: float(value) for name, value in scores.items()}
        log.info("%s epoch %d: test split %s", run.method, state.epoch, record["eval"])
    except Exception as error:  # noqa: BLE001 - a diagnostic must not end the training
        record["eval_error"] = f"{type(error).__name__}: {error}"
        log.warning("%s epoch %d: evaluation failed (%s)", run.method, state.epoch, error)
    record["eval_seconds"] = time.perf_counter() - started


def record_epoch(
    run: Run,
    state: TrainingState,
    epoch: int,
    losses: torch.Tensor,
    seconds: float,
    mode: str,
    *,
    first: bool,
    log_every: int,
) -> dict[str, Any]:
    """Add epoch ``epoch``'s history record to ``state``, count the epoch done and log it."""
    record = epoch_record(run, epoch, losses, seconds, mode)
    state.history.append(record)
    state.epoch = epoch + 1
    log_epoch(run, record, first=first, log_every=log_every)
    return record


def _train_epochs(
    run: Run,
    state: TrainingState,
    settings: TrainSettings,
    checkpoint_path: str | os.PathLike | None,
    progress: bool,
    callback: Callable[[dict[str, float]], None] | None,
    evaluate: Callable[[ProxyModel], Mapping[str, float]] | None,
    eval_every: int,
) -> None:
    """Train ``state`` from its epoch to the last, as :func:`train_representation` says."""
    step = static_step(run, state)
    start_epoch = state.epoch
    epochs_bar = tqdm(
        range(start_epoch, settings.epochs),
        desc=f"train {run.method}",
        unit="epoch",
        disable=not progress,
        initial=start_epoch,
        total=settings.epochs,
    )
    for epoch in epochs_bar:
        started = time.perf_counter()
        losses = train_epoch(run, state, step)
        error = divergence(run, losses, state.model, epoch)
        if error is not None:
            raise error
        mode = "eager" if step is None else step.mode
        seconds = time.perf_counter() - started
        record = record_epoch(
            run,
            state,
            epoch,
            losses,
            seconds,
            mode,
            first=epoch == start_epoch,
            log_every=settings.log_every,
        )
        epochs_bar.set_postfix(loss=f"{record['loss']:.4f}")
        # Evaluation falls when a checkpoint with checkpoint_every = eval_every would.
        if evaluate is not None and eval_every and checkpoint_due(run, state.epoch, eval_every):
            _evaluate(run, state, evaluate, record)
        due = checkpoint_due(run, state.epoch, settings.checkpoint_every)
        if checkpoint_path is not None and due:
            write_checkpoint(run, state, checkpoint_path)
        if callback is not None:
            callback(dict(record))


def train_representation(
    settings: TrainSettings,
    images_uint8: np.ndarray | torch.Tensor,
    *,
    seed: int,
    execution: Execution = DEFAULT_EXECUTION,
    checkpoint_path: str | os.PathLike | None = None,
    progress: bool = False,
    callback: Callable[[dict[str, float]], None] | None = None,
    evaluate: Callable[[ProxyModel], Mapping[str, float]] | None = None,
    eval_every: int = 0,
) -> tuple[ProxyModel, list[dict[str, float]]]:
    """Train a representation with a self-supervised proxy task.

    Parameters
    ----------
    settings : TrainSettings
        The recipe: method, budget, optimiser, heads, the task's settings, views
        (:class:`~pipeline_lib.ssl.settings.TrainSettings`), the same for the single, fused
        and MVTec trainers.
    images_uint8 : ndarray or Tensor of shape (n, h, w, 3), uint8
        The training images (square), moved once to the device as one uint8 tensor.
    seed : int
        Seeds the initialisation, the batch order and the augmentations (independent streams).
    execution : Execution, default=DEFAULT_EXECUTION
        How the steps run: device, step mode, where random numbers are drawn, and
        optionally the view augmentation (:class:`~pipeline_lib.ssl.settings.Execution`).
    checkpoint_path : str or PathLike or None, default=None
        A resumable checkpoint (module docstring).
    progress : bool, default=False
        tqdm bar over epochs.
    callback : callable or None, default=None
        Called with each epoch's history record after its checkpoint is written (an
        exception raised there stops training, as a kill would).
    evaluate, eval_every : callable or None, int, default=None, 0
        A diagnostic ``evaluate(model) -> {name: value}`` run every ``eval_every`` epochs
        (0 = never: not called; module docstring).

    Returns
    -------
    model : ProxyModel
        In inference mode, on the device: ``f`` is the pooled backbone feature, ``g`` the
        contrastive projection or the rotation MLP's output (``f`` for ``rotnet``; none for
        ``denoising``); the rotation classifier / decoder is ``model.proxy``.
    history : list of dict
        One record per epoch (module docstring).

    Raises
    ------
    ValueError
        On a bad argument (the message names it).
    TrainingDivergedError
        If a loss or a weight is NaN or infinite (checked every epoch, before its checkpoint).
    """
    if eval_every < 0:
        raise ValueError(f"eval_every must be >= 0 (0 = never), got {eval_every}")
    run, state = prepare_run(settings, images_uint8, seed=seed, execution=execution)
    state = resume(run, state, checkpoint_path)
    _train_epochs(run, state, settings, checkpoint_path, progress, callback, evaluate, eval_every)
    return release_network(state.model).eval(), state.history
