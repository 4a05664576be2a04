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
* ``graph`` (CUDA): *side by side* (:class:`ConcurrentGroup`). On an H200 (2026-11-27) the
  stacked step captured as one graph trained 0.73-1.05x the images of one captured run:
  the grouped convolutions cost K separate ones. So each model keeps its own model and the
  separate run's captured :class:`~pipeline_lib.ssl.stepper.StaticStep`, and the group
  replays the K graphs step by step on K CUDA streams of one process, whose kernels can
  overlap (processes sharing a GPU take turns). Each model then runs exactly its separate
  run's kernels: bit for bit its separate run (each graph captured on its own stream, so
  with its own cuBLAS workspace: sharing one, the graphs raced), and no NaN can cross.
  Measured on the H200: K = 4-10 side by side trained 1.3-2.5x the images of one captured
  run (``benchmarks/bench_streams.py``, ``bench_train.py --fuse 4 10``; CHANGELOG.md).
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

import contextlib
import copy
import dataclasses
import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
from torch import nn

from pipeline_lib.models.proxy import ProxyModel, rotation_logits
from pipeline_lib.models.stacked import (
    stack_inputs,
    stack_models,
    stack_tensors,
    unload_stacked,
    unstack_outputs,
    unstack_tensor,
)
from pipeline_lib.registry import CAPTURED_STEP_MODES
from pipeline_lib.ssl.augment import rotation_views
from pipeline_lib.ssl.compiling import release_network
from pipeline_lib.ssl.contrastive import contrastive_inputs, contrastive_outputs_loss
from pipeline_lib.ssl.denoising import (
    decode,
    denoising_inputs,
    denoising_target,
    reconstruction_loss,
)
from pipeline_lib.ssl.draws import Draws
from pipeline_lib.ssl.loop import (
    TrainingDivergedError,
    checkpoint_due,
    divergence,
    epoch_record,
    log_epoch,
    resume,
    run_static_step,
    static_step,
    train_epoch,
    write_checkpoint,
)
from pipeline_lib.ssl.rotation import rotation_loss
from pipeline_lib.ssl.run import Run, TrainingState, prepare_run
from pipeline_lib.ssl.settings import TrainSettings
from pipeline_lib.ssl.stepper import StaticStep
from pipeline_lib.ssl.train import EXECUTION_KEYWORDS, RECIPE_KEYWORDS

__all__ = ["FusedResult", "train_representations_fused"]

log = logging.getLogger(__name__)

#: One model's outcome: its trained model and history, or the error that stopped it.
FusedResult = tuple[ProxyModel, list[dict[str, float]]] | TrainingDivergedError

#: Recipe keywords that fused training takes as its own arguments (per call, not per model).
_PER_CALL = ("method", "checkpoint_every", "log_every")


@dataclasses.dataclass(frozen=True)
class _Task:
    """A proxy task in the three parts its step function composes (see ``_step_function``)."""

    #: ``(uint8 batch, generator or draws) -> (network input, what the loss needs besides it)``
    inputs: Callable[[torch.Tensor, torch.Generator | Draws], tuple[torch.Tensor, Any]]
    #: ``(network, input) -> output``; the network may be a stacked one.
    forward: Callable[[nn.Module, torch.Tensor], torch.Tensor]
    #: ``(one model's output, what inputs returned besides the input) -> scalar loss``
    loss: Callable[[torch.Tensor, Any], torch.Tensor]


def _contrastive_forward(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model.head(model.backbone(x))


def _task(method: str, options: dict[str, Any]) -> _Task:
    """The task of ``method`` with a run's step options (the same as its step function's)."""
    augment = options["augment"]
    if method in ("rotnet", "rotation"):
        return _Task(
            inputs=lambda batch, generator: rotation_views(batch, augment, generator),
            forward=rotation_logits,
            loss=rotation_loss,
        )
    if method in ("contrastive", "contrastive_da"):
        make_views = functools.partial(
            contrastive_inputs, augment=augment, distributions=options["distributions"]
        )
        loss = functools.partial(
            contrastive_outputs_loss,
            temperature=options["temperature"],
            form=options["loss_form"],
        )
        return _Task(
            inputs=lambda batch, generator: (make_views(batch, generator=generator), None),
            forward=_contrastive_forward,
            loss=lambda z, _: loss(z),
        )
    corrupt = functools.partial(denoising_inputs, noise_std=options["noise_std"], augment=augment)
    target = functools.partial(
        denoising_target, target=options["denoising_target"], patch=options["denoising_patch"]
    )
    return _Task(
        inputs=lambda batch, generator: corrupt(batch, generator=generator),
        forward=decode,
        loss=lambda reconstruction, clean: reconstruction_loss(reconstruction, target(clean)),
    )


class _Group:
    """The models that train an epoch together (members: their indices among the runs)."""

    def __init__(
        self, members: list[int], runs: Sequence[Run], states: Sequence[TrainingState]
    ) -> None:
        self.members = members
        self.runs = [runs[i] for i in members]
        self.states = [states[i] for i in members]


class _FusedGroup(_Group):
    """The stacked model, optimiser and schedule of the models that train an epoch together.

    Built from the members' states (exact copies); :meth:`unload` copies everything back.
    With the runs' ``step_mode`` other than ``eager`` its steps run through one
    :class:`~pipeline_lib.ssl.stepper.StaticStep` of the members, made with the group (so a
    new group captures anew).
    """

    #: Members share every kernel: on CUDA one member's NaN can reach the others.
    shares_kernels = True

    def __init__(
        self, members: list[int], runs: Sequence[Run], states: Sequence[TrainingState]
    ) -> None:
        super().__init__(members, runs, states)
        # Per member: each run has its own view augmentation (its jitter order is seeded).
        self.tasks = [_task(run.method, run.step_options) for run in self.runs]
        self.model = stack_models([state.model for state in self.states])
        if self.runs[0].on_cuda:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.parameters = dict(self.model.named_parameters())
        self.member_parameters = [dict(s.model.named_parameters()) for s in self.states]
        names = {id(p): name for name, p in self.member_parameters[0].items()}
        first = self.states[0]
        self.optimizer = torch.optim.SGD(
            [
                {
                    **{key: value for key, value in group.items() if key != "params"},
                    "params": [self.parameters[names[id(p)]] for p in group["params"]],
                }
                for group in first.optimizer.param_groups
            ]
        )
        for name, parameter in self.parameters.items():
            buffers = [
                state.optimizer.state.get(own[name], {}).get("momentum_buffer")
                for state, own in zip(self.states, self.member_parameters, strict=True)
            ]
            if all(buffer is not None for buffer in buffers):
                self.optimizer.state[parameter]["momentum_buffer"] = stack_tensors(buffers)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self.runs[0].cosine)
        self.scheduler.load_state_dict(first.scheduler.state_dict())
        for stacked, own in zip(
            self.optimizer.param_groups, first.optimizer.param_groups, strict=True
        ):
            stacked["lr"], stacked["initial_lr"] = own["lr"], own["initial_lr"]
        run = self.runs[0]
        self.static_step: StaticStep | None = None
        if run.step_mode != "eager":
            self.static_step = StaticStep(
                model=self.model,
                optimizer=self.optimizer,
                step=self._losses,
                images=[r.data.images for r in self.runs],
                per_step=run.data.per_step,
                generators=[state.augment_generator for state in self.states],
                autocast=run.autocast,
                # The stacked network is not compiled: a compiled group stacks as "graph".
                capture=run.step_mode in CAPTURED_STEP_MODES,
            )

    @property
    def mode(self) -> str:
        """What ran the steps (the history's ``step_mode``): ``eager`` or the static step's."""
        return "eager" if self.static_step is None else self.static_step.mode

    def train_epoch(self) -> torch.Tensor:
        """One epoch of every member; the losses ``(members, steps)`` (on the device)."""
        run = self.runs[0]
        data = [r.data for r in self.runs]
        steps, per_step = data[0].steps_per_epoch, data[0].per_step
        self.model.train()
        orders = [
            r.order.draw(s.shuffle_generator).to(run.device)
            for r, s in zip(self.runs, self.states, strict=True)
        ]
        losses = torch.zeros(len(self.members), steps, device=run.device)
        generators = [state.augment_generator for state in self.states]
        for index in range(steps):
            window = slice(index * per_step, (index + 1) * per_step)
            if self.static_step is not None:
                step_losses = self.static_step(*[order[window] for order in orders])
                self.scheduler.step()
                losses[:, index] = step_losses  # a copy: a replayed step's losses are reused
                continue
            batches = [d.images[order[window]] for d, order in zip(data, orders, strict=True)]
            with run.autocast():
                step_losses = self._losses(self.model, batches, generators)
            self.optimizer.zero_grad(set_to_none=True)
            step_losses.sum().backward()
            self.optimizer.step()
            self.scheduler.step()
            losses[:, index] = step_losses.detach()
        return losses

    def _losses(
        self,
        model: nn.Module,
        batches: Sequence[torch.Tensor],
        sources: Sequence[torch.Generator | Draws],
    ) -> torch.Tensor:
        """The members' losses ``(K,)``; member ``k`` draws from ``sources[k]`` only."""
        prepared = [
            task.inputs(batch, source)
            for task, batch, source in zip(self.tasks, batches, sources, strict=True)
        ]
        output = self.tasks[0].forward(model, stack_inputs([x for x, _ in prepared]))
        outputs = unstack_outputs(output, len(self.members))
        return torch.stack(
            [
                task.loss(out, extra)
                for task, out, (_, extra) in zip(self.tasks, outputs, prepared, strict=True)
            ]
        )

    @torch.no_grad()
    def unload(self) -> None:
        """Copy weights, buffers, momentum and schedule back into the members' states."""
        k = len(self.members)
        unload_stacked(self.model, [state.model for state in self.states])
        for name, parameter in self.parameters.items():
            for key, value in self.optimizer.state.get(parameter, {}).items():
                parts = unstack_tensor(value, k) if torch.is_tensor(value) else [value] * k
                for state, own, part in zip(
                    self.states, self.member_parameters, parts, strict=True
                ):
                    state.optimizer.state[own[name]][key] = (
                        part.clone() if torch.is_tensor(part) else part
                    )
        schedule = self.scheduler.state_dict()
        for state in self.states:
            state.scheduler.load_state_dict(schedule)
            for own, stacked in zip(
                state.optimizer.param_groups, self.optimizer.param_groups, strict=True
            ):
                own["lr"], own["initial_lr"] = stacked["lr"], stacked["initial_lr"]


class ConcurrentGroup(_Group):
    """The members' own captured steps, replayed side by side on one CUDA stream each.

    Each member keeps its model, optimiser and :class:`~pipeline_lib.ssl.stepper.StaticStep`
    (the separate run's, captured once), so its epoch runs exactly the separate run's
    kernels on the same numbers: nothing is stacked, nothing can leak between members, and
    on the CPU (tests only, no streams) the members step one after the other. Why: the
    stacked network's grouped convolutions made a captured fused step as slow as K captured
    steps on an H200 (module docstring); kernels of one process on different streams can
    run at the same time.
    """

    #: Members compute apart: a diverged member's epoch is its own (no retrain needed).
    shares_kernels = False
    #: Draw each member's next step's numbers on a worker thread (see :meth:`train_epoch`);
    #: off only to measure what it buys (benchmarks/bench_streams.py --draw-ahead off).
    draw_ahead = True

    def __init__(
        self, members: list[int], runs: Sequence[Run], states: Sequence[TrainingState]
    ) -> None:
        super().__init__(members, runs, states)
        self.steps = [
            run_static_step(run, state, capture=run.step_mode in CAPTURED_STEP_MODES)
            for run, state in zip(self.runs, self.states, strict=True)
        ]
        device = self.runs[0].device
        self.streams = [
            torch.cuda.Stream(device) if device.type == "cuda" else None for _ in members
        ]

    @property
    def mode(self) -> str:
        """What ran the steps: ``uncaptured`` if any member's capture failed, else theirs."""
        modes = {step.mode for step in self.steps}
        return "uncaptured" if "uncaptured" in modes else modes.pop()

    def train_epoch(self) -> torch.Tensor:
        """One epoch of every member; the losses ``(members, steps)`` (on the device).

        Each member's next step's random numbers are drawn on a worker thread while the
        other members' steps launch (:meth:`StaticDraws.fill`): one host thread drawing them
        all bound denoising's fused jobs (196,608 normal numbers per model step). Each
        member's draws stay in its generator's order, and none is drawn ahead across the
        epoch's end, where a checkpoint saves the generator.
        """
        run = self.runs[0]
        steps, per_step = run.data.steps_per_epoch, run.data.per_step
        main = torch.cuda.current_stream(run.device) if run.on_cuda else None
        orders = []
        for member_run, state in zip(self.runs, self.states, strict=True):
            state.model.train()
            orders.append(member_run.order.draw(state.shuffle_generator).to(run.device))
        losses = torch.zeros(len(self.members), steps, device=run.device)
        for stream in self.streams:
            if stream is not None:
                stream.wait_stream(main)  # the orders and losses were made on the main stream
        workers = max(1, min(len(self.members), torch.get_num_threads()))
        ahead: list[Future[None] | None] = [None] * len(self.members)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            try:
                for index in range(steps):
                    window = slice(index * per_step, (index + 1) * per_step)
                    for k, (state, step, stream) in enumerate(
                        zip(self.states, self.steps, self.streams, strict=True)
                    ):
                        drawing, ahead[k] = ahead[k], None
                        if drawing is not None:
                            drawing.result()  # this step's numbers wait in a staging buffer
                        stream_context = (
                            torch.cuda.stream(stream)
                            if stream is not None
                            else contextlib.nullcontext()
                        )
                        with stream_context:
                            loss = step(orders[k][window])
                            state.scheduler.step()
                            losses[k, index] = loss  # a copy: a replayed step's loss is reused
                        if self.draw_ahead and index + 1 < steps and step.recorded:
                            ahead[k] = pool.submit(step.draws[0].fill)
            finally:
                for drawing in ahead:  # an error left draws in flight: let them finish
                    if drawing is not None:
                        drawing.exception()
        for stream in self.streams:
            if stream is not None:
                main.wait_stream(stream)
        return losses

    def unload(self) -> None:
        """Nothing to copy back: the members trained their own states."""


#: The most members a captured group runs side by side. Each member's graph must keep a
#: cuBLAS workspace of its own, i.e. be captured on a stream of its own (StaticStep), and
#: torch hands out streams round-robin from a pool of 32 per device and priority: a 33rd
#: member would share the first one's stream, and so its workspace, and race with it.
MAX_SIDE_BY_SIDE = 32


def _runs_side_by_side(step_mode: str, members: int) -> bool:
    """Whether a group of ``members`` runs in ``step_mode`` replays its members side by side."""
    return step_mode in CAPTURED_STEP_MODES and members <= MAX_SIDE_BY_SIDE


def _group(
    members: list[int], runs: Sequence[Run], states: Sequence[TrainingState]
) -> _FusedGroup | ConcurrentGroup:
    """The members' group: side by side on CUDA streams when captured, else stacked.

    Measured on an H200 (CHANGELOG.md): under graph capture the stacked group trained
    0.73-1.05x the images of one captured run, so captured members keep their own steps;
    eager, stacking paid (1.2-3.4x at K = 10), since it launches K models' work at once.
    A captured group of more than :data:`MAX_SIDE_BY_SIDE` members stacks (captured as one
    graph): slower, but no two members share a workspace.
    """
    if _runs_side_by_side(runs[members[0]].step_mode, len(members)):
        return ConcurrentGroup(members, runs, states)
    return _FusedGroup(members, runs, states)


def _shared_settings(
    method: str, given: dict[str, Any], *, checkpoint_every: int, log_every: int
) -> tuple[TrainSettings, dict[str, Any]]:
    """The models' shared recipe and execution keywords (``device``, ``step_mode``, ``augment``).

    Raises
    ------
    TypeError
        On a keyword :func:`train_representation` does not share here (``seed``,
        ``checkpoint_path``, ``evaluate``, ...), or a missing ``epochs`` / ``batch_size``.
    ValueError
        On a bad setting, or ``amp="float16"``.
    """
    recipe = [name for name in RECIPE_KEYWORDS if name not in _PER_CALL]
    unknown = sorted(set(given) - set(recipe) - set(EXECUTION_KEYWORDS))
    if unknown:
        raise TypeError(f"unexpected arguments for fused training: {unknown}")
    missing = sorted({"epochs", "batch_size"} - set(given))
    if missing:
        raise TypeError(f"missing arguments for fused training: {missing}")
    settings = TrainSettings(
        method=method,
        checkpoint_every=checkpoint_every,
        log_every=log_every,
        **{name: value for name, value in given.items() if name in recipe},
    )
    if settings.amp == "float16":
        # One GradScaler would skip every model's step when one model's gradients overflow.
        raise ValueError("fused training supports amp='bfloat16' or None, not 'float16'")
    execution = {"step_mode": "auto"}
    execution |= {name: value for name, value in given.items() if name in EXECUTION_KEYWORDS}
    return settings, execution


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
    group: _FusedGroup | ConcurrentGroup | None = None
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
            record = epoch_record(run, epoch, member_losses, member_seconds, member_mode)
            state.history.append(record)
            state.epoch = epoch + 1
            log_epoch(run, record, first=epoch == first_epoch, log_every=log_every)
            if paths[index] is not None and checkpoint_due(run, state.epoch, checkpoint_every):
                write_checkpoint(run, state, paths[index])
            done.append((index, record))
        if callback is not None:
            for index, record in done:
                callback(index, dict(record))
    return failed


def train_representations_fused(
    method: str,
    images_per_model: Sequence[np.ndarray | torch.Tensor],
    *,
    seeds: Sequence[int],
    checkpoint_paths: Sequence[str | os.PathLike | None] | None = None,
    checkpoint_every: int = 1,
    log_every: int = 10,
    callback: Callable[[int, dict[str, float]], None] | None = None,
    **options: Any,
) -> list[FusedResult]:
    """Train K representations of one method together (stacked, or side by side when captured).

    Model ``k`` is trained as ``train_representation(method, images_per_model[k],
    seed=seeds[k], checkpoint_path=checkpoint_paths[k], **options)`` would train it: to
    float32 rounding when stacked (eager), with its own kernels when captured (see the
    module docstring).

    Parameters
    ----------
    method : str
        One of the trained methods; shared by all models.
    images_per_model : sequence of ndarray or Tensor of shape (n_k, h, w, 3), uint8
        Each model's training images. Models step together when they share the image side,
        the batch and the steps per epoch; models that do not are trained in separate
        fused groups, one group after the other.
    seeds : sequence of int
        One per model.
    checkpoint_paths : sequence of (str or PathLike or None), or None, default=None
        One resumable checkpoint per model, in :func:`train_representation`'s format (a
        separate run can resume a fused run's checkpoint and the other way round).
    checkpoint_every, log_every : int, default=1, 10
        As in :func:`train_representation`.
    callback : callable or None, default=None
        Called as ``callback(k, record)`` with model ``k``'s epoch record, after all
        checkpoints of that epoch are written (an exception stops training, as a kill would).
    **options
        Every other keyword argument of :func:`train_representation` (``epochs`` and
        ``batch_size`` are required; ``amp="float16"`` is refused: its loss scaling would
        couple the models). ``seed``, ``checkpoint_path``, ``callback`` and ``progress``
        are not accepted. ``step_mode`` (default ``"auto"``) is resolved as there: ``auto``
        is ``graph`` on CUDA and ``eager`` elsewhere, ``graph`` off CUDA is an error; under
        ``graph`` each model's own step is captured once and the models replay side by
        side on CUDA streams (see the module docstring), and each history record's
        ``step_mode`` says what ran its epoch.

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
        On a bad argument, or if ``seeds`` / ``checkpoint_paths`` do not match the models.
    TypeError
        On an unknown or missing keyword argument.
    """
    count = len(images_per_model)
    paths = [None] * count if checkpoint_paths is None else list(checkpoint_paths)
    if count < 1 or len(seeds) != count or len(paths) != count:
        raise ValueError(
            f"need one seed and one checkpoint path per model: {count} models, "
            f"{len(seeds)} seeds, {len(paths)} checkpoint paths"
        )
    settings, execution = _shared_settings(
        method, options, checkpoint_every=checkpoint_every, log_every=log_every
    )
    runs: list[Run] = []
    states: list[TrainingState] = []
    for images, seed, path in zip(images_per_model, seeds, paths, strict=True):
        run, state = prepare_run(settings, images, seed=seed, **execution)
        runs.append(run)
        states.append(resume(run, state, path))
    failed: dict[int, TrainingDivergedError] = {}
    for indices in _shape_groups(runs):
        failed |= _train_group(
            indices,
            runs,
            states,
            paths,
            checkpoint_every=checkpoint_every,
            log_every=log_every,
            callback=callback,
        )
    return [
        failed[index] if index in failed else (release_network(state.model).eval(), state.history)
        for index, state in enumerate(states)
    ]
