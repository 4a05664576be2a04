"""Self-supervised representation training: one plain epoch loop for every proxy task.

:func:`train_representation` checks the recipe (:class:`~pipeline_lib.ssl.settings.
TrainSettings`), prepares the run (:mod:`pipeline_lib.ssl.run`) and steps through its epochs
with the loop API (:mod:`pipeline_lib.ssl.loop`) that the fused trainer
(:mod:`pipeline_lib.ssl.fused`) shares; this module adds the epoch loop itself, the
per-epoch evaluation and the keyword helper :func:`prepare_keyword_run` for the tests and
benchmarks.

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

import dataclasses
import inspect
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from pipeline_lib.models.proxy import ProxyModel
from pipeline_lib.registry import (
    DA_BATCHINGS,
    DEFAULT_DISTRIBUTIONS,
    DENOISING_DECODERS,
    DENOISING_PATCH,
    DENOISING_TARGETS,
    DRAW_SOURCES,
    EPOCH_ORDERS,
    INITS,
    LOSS_FORMS,
    LR_SCHEDULES,
    MOMENTUM_FORMS,
    PAPER_RECIPE,
    VIEW_FLIPS,
    VIEW_JITTERS,
)
from pipeline_lib.ssl.augment import ViewAugment
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
from pipeline_lib.ssl.settings import TrainSettings

__all__ = [
    "RECIPE_KEYWORDS",
    "TrainingDivergedError",
    "prepare_keyword_run",
    "record_epoch",
    "train_representation",
]

log = logging.getLogger(__name__)

#: The keywords of :func:`train_representation` that make up its :class:`TrainSettings`.
RECIPE_KEYWORDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(TrainSettings))

#: Keywords of :func:`train_representation` that are execution settings: not the recipe.
EXECUTION_KEYWORDS: tuple[str, ...] = ("augment", "device", "step_mode", "draws")


def prepare_keyword_run(
    method: str, images_uint8: np.ndarray | torch.Tensor, *, seed: int, **options: Any
) -> tuple[Run, TrainingState]:
    """A run prepared as :func:`train_representation` prepares it from the same keywords.

    For the tests and benchmarks that drive the epochs themselves; the defaults of
    :class:`TrainSettings` fill what ``options`` leaves out, ``step_mode`` defaults to
    ``"auto"`` as there.
    """
    execution = {name: options.pop(name) for name in EXECUTION_KEYWORDS if name in options}
    execution.setdefault("step_mode", "auto")
    settings = TrainSettings(method=method, **options)
    return prepare_run(settings, images_uint8, seed=seed, **execution)


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


def _check_no_recipe_keywords(
    method: str, settings: TrainSettings, given: Mapping[str, Any]
) -> None:
    """Raise ValueError if ``settings`` comes with another method or a recipe keyword too."""
    if method != settings.method:
        raise ValueError(f"method {method!r} differs from the settings' {settings.method!r}")
    defaults = inspect.signature(train_representation).parameters
    given_too = sorted(
        name
        for name in RECIPE_KEYWORDS
        if name != "method" and given[name] is not defaults[name].default
    )
    if given_too:
        raise ValueError(
            f"pass the recipe either as settings or as keywords, not both: {given_too}"
        )


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


def _recipe(given: Mapping[str, Any]) -> TrainSettings:
    """The recipe of :func:`train_representation`'s arguments ``given`` (its ``locals()``)."""
    if given["eval_every"] < 0:
        raise ValueError(f"eval_every must be >= 0 (0 = never), got {given['eval_every']}")
    settings = given["settings"]
    if settings is None:
        if given["epochs"] is None or given["batch_size"] is None:
            raise TypeError("train_representation needs epochs and batch_size (or settings)")
        return TrainSettings(**{name: given[name] for name in RECIPE_KEYWORDS})
    _check_no_recipe_keywords(given["method"], settings, given)
    return settings


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
    method: str,
    images_uint8: np.ndarray | torch.Tensor,
    *,
    seed: int,
    epochs: int | None = None,
    batch_size: int | None = None,
    lr: float = 0.01,
    momentum: float = 0.9,
    momentum_form: str = MOMENTUM_FORMS[0],
    weight_decay: float = 3e-4,
    exclude_bn_from_decay: bool = False,
    head_depth: int | None = None,
    head_hidden: int = 512,
    proj_dim: int = 128,
    temperature: float = 0.2,
    loss_form: str = LOSS_FORMS[0],
    distributions: Sequence[str] = DEFAULT_DISTRIBUTIONS,
    da_batching: str = DA_BATCHINGS[0],
    view_flip: str = VIEW_FLIPS[0],
    view_jitter: str = VIEW_JITTERS[0],
    view_blur: bool = False,
    lr_schedule: str = LR_SCHEDULES[0],
    epoch_order: str = EPOCH_ORDERS[0],
    init: str = INITS[0],
    noise_std: float = PAPER_RECIPE["noise_std"],
    denoising_views: bool = True,
    denoising_target: str = DENOISING_TARGETS[0],
    denoising_patch: int = DENOISING_PATCH,
    denoising_decoder: str = DENOISING_DECODERS[0],
    width: int = 64,
    stem_width: int | None = None,
    augment: ViewAugment | None = None,
    amp: str | None = "bfloat16",
    device: torch.device | str = "cpu",
    step_mode: str = "auto",
    draws: str = DRAW_SOURCES[0],
    checkpoint_path: str | os.PathLike | None = None,
    checkpoint_every: int = 1,
    progress: bool = False,
    log_every: int = 10,
    callback: Callable[[dict[str, float]], None] | None = None,
    evaluate: Callable[[ProxyModel], Mapping[str, float]] | None = None,
    eval_every: int = 0,
    settings: TrainSettings | None = None,
) -> tuple[ProxyModel, list[dict[str, float]]]:
    """Train a representation with a self-supervised proxy task.

    Parameters
    ----------
    method : str
        One of :data:`~pipeline_lib.models.representation.TRAINED_METHODS`.
    images_uint8 : ndarray or Tensor of shape (n, h, w, 3), uint8
        The training images (square), moved once to ``device`` as one uint8 tensor.
    seed : int
        Seeds the initialisation, the batch order and the augmentations (independent streams).
    epochs, batch_size, lr, ..., width, stem_width, amp
        The recipe: the fields of :class:`~pipeline_lib.ssl.settings.TrainSettings`, with
        the same defaults (its docstring describes each); ``settings`` gives them at once.
    settings : TrainSettings or None, default=None
        The recipe as one value instead of its keywords (``method`` must be its method).
    augment : ViewAugment or None, default=None
        View augmentation; ``None`` builds one from ``view_flip``, ``view_jitter`` and
        ``view_blur``; ``denoising`` uses it only with ``denoising_views``.
    device : torch.device or str, default="cpu"
    step_mode : {"auto", "eager", "graph", "compiled"}, default="auto"
    draws : {"host", "device"}, default="host"
    checkpoint_path : str or PathLike or None, default=None
        How a step runs, where its random numbers are drawn (:mod:`pipeline_lib.ssl.draws`),
        and a resumable checkpoint (module docstring).
    checkpoint_every, log_every : int, default=1, 10
        Epochs between checkpoints and INFO log lines (last epoch: both; first: logged).
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
        In inference mode, on ``device``: ``f`` is the pooled backbone feature, ``g`` the
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
    settings = _recipe(locals())
    run, state = prepare_run(
        settings,
        images_uint8,
        seed=seed,
        device=device,
        step_mode=step_mode,
        augment=augment,
        draws=draws,
    )
    state = resume(run, state, checkpoint_path)
    _train_epochs(run, state, settings, checkpoint_path, progress, callback, evaluate, eval_every)
    return release_network(state.model).eval(), state.history
