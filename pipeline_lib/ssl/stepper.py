"""A training step in two phases, whose device phase can be captured once as a CUDA graph.

The eager step (:func:`pipeline_lib.ssl.loop.train_epoch`) launches a few hundred small
kernels per step and reads its random numbers as fresh host tensors, so on a GPU a batch of
32 images is bound by the launches. :class:`StaticStep` runs the same step as

* a *host phase*: the batch's indices and every random number of the step (drawn from the
  run's CPU generator in the eager order, :class:`~pipeline_lib.ssl.draws.StaticDraws`) are
  copied into static device buffers, and the learning rates into a device tensor;
* a *device phase*: gather the batch, build the views, forward, loss, backward and SGD, all
  from those buffers, with static shapes and no host synchronisation.

With ``capture=True`` (CUDA) the device phase runs uncaptured for its first steps after each
start (the draws' plan is recorded, SGD's momentum buffers and cuDNN's workspaces come to
exist), on a side stream as CUDA graphs require, then is captured once and replayed. Every
start runs the same kernels, captured or not, so a resumed run repeats an uninterrupted one.

On CUDA the optimiser is SGD's fused kernel reading the learning rate from a device tensor
(a float would be baked into the graph); elsewhere it is ``optimizer.step()``, so the
two-phase step on the CPU gives the eager step's numbers bit for bit (tested). The parameter
groups keep their float rates, which LambdaLR sets on the host as before; each step copies
them into that tensor with ``fill_`` (a kernel, no sync). A tensor rate inside the groups
would also work with LambdaLR (it ``fill_``s it) but would enter the optimiser's state and
checkpoints, which then would no longer be the same for the eager and graph paths.

One step may serve K *members* (:mod:`pipeline_lib.ssl.fused`: K runs stacked in one
model): each member has its own training instances, index buffer and
:class:`~pipeline_lib.ssl.draws.StaticDraws` over its own generator (so each draws its
numbers in its own eager order), the step returns the K losses and backward runs on their
sum, as the fused eager loop does. A single run is the one-member case
(:func:`one_member`), whose scalar loss is backpropagated as is, so its step is unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.optim.sgd import sgd as functional_sgd

from pipeline_lib.registry import CAPTURED_STEP_MODES, STEP_MODES
from pipeline_lib.ssl.compiling import check_compiler
from pipeline_lib.ssl.draws import DeviceDraws, Draws, StaticDraws

__all__ = [
    "STEP_MODES",
    "MembersStep",
    "StaticStep",
    "one_member",
    "resolve_step_mode",
]

log = logging.getLogger(__name__)

#: Uncaptured device phases after a start before the capture (the first records the plan).
WARMUP_STEPS = 3

#: ``step(model, batches, draws) -> loss``: the K members' uint8 batches and draws in, a
#: scalar loss (one run) or the members' losses ``(K,)`` out.
MembersStep = Callable[[nn.Module, Sequence[torch.Tensor], Sequence[Draws]], torch.Tensor]

#: ``phase(cache_enabled) -> loss``: a step's device phase (:meth:`StaticStep.wrap_device_phase`).
DevicePhase = Callable[[bool], torch.Tensor]

#: How a step with the rate on the device runs SGD (:class:`StaticStep`'s ``update``).
SGD_UPDATES: tuple[str, ...] = ("fused", "foreach")

#: SGD's settings besides the rate, which only the schedule changes.
_SGD_OPTIONS: tuple[str, ...] = ("weight_decay", "momentum", "dampening", "nesterov", "maximize")


def _one_member_step(
    step: Callable[..., torch.Tensor],
    model: nn.Module,
    batches: Sequence[torch.Tensor],
    draws: Sequence[Draws],
) -> torch.Tensor:
    (batch,), (member_draws,) = batches, draws
    return step(model, batch, generator=member_draws)


def one_member(step: Callable[..., torch.Tensor]) -> MembersStep:
    """A single run's ``step(model, batch, generator=...)`` as a one-member :data:`MembersStep`."""
    return functools.partial(_one_member_step, step)


def resolve_step_mode(step_mode: str, device: torch.device, *, float16_scaler: bool) -> str:
    """The path a run takes: ``"eager"``, ``"graph"`` or ``"compiled"``.

    ``auto`` is ``graph`` on CUDA and ``eager`` elsewhere; float16 autocast needs the
    GradScaler, which reads its overflow flag on the host every step, so it stays eager.
    ``compiled`` is opt-in: its rounding is not the eager step's (see
    :mod:`pipeline_lib.ssl.compiling`).

    Raises
    ------
    ValueError
        On an unknown mode, or ``graph`` / ``compiled`` where it cannot run (not CUDA,
        float16 amp, or for ``compiled`` no Triton or C compiler).
    """
    if step_mode not in STEP_MODES:
        raise ValueError(f"unknown step_mode {step_mode!r}; allowed: {', '.join(STEP_MODES)}")
    if step_mode == "eager":
        return "eager"
    if device.type != "cuda":
        if step_mode in CAPTURED_STEP_MODES:
            raise ValueError(
                f"step_mode={step_mode!r} needs a CUDA device, got {device.type!r}; use "
                "'auto' (graph on CUDA, eager elsewhere) or 'eager'"
            )
        return "eager"
    if float16_scaler:
        if step_mode in CAPTURED_STEP_MODES:
            raise ValueError(
                f"step_mode={step_mode!r} cannot run with amp='float16' (the GradScaler syncs "
                "the host every step); use amp='bfloat16' or step_mode 'auto' / 'eager'"
            )
        log.info("amp float16 needs the GradScaler, which syncs the host: eager training steps")
        return "eager"
    if step_mode == "compiled":
        check_compiler(device)
        return "compiled"
    return "graph"


def _step_draws(generator: torch.Generator, device: torch.device) -> StaticDraws | DeviceDraws:
    """A member's draws: from its generator on the step's device (``train.draws: device``),
    or from its CPU generator through static buffers."""
    if generator.device.type != "cpu":
        if generator.device.type != torch.device(device).type:
            raise ValueError(
                f"the augmentation generator is on {generator.device}, the step on {device}"
            )
        return DeviceDraws(generator)
    return StaticDraws(generator, device)


class StaticStep:
    """The two-phase training step of one run or of K stacked members (see the module docstring).

    Parameters
    ----------
    model : nn.Module
        The run's model, or the members' stacked model.
    optimizer : torch.optim.SGD
        Its parameter groups (weight decay per group) and momentum buffers are used as is.
    step : MembersStep
        ``step(model, batches, draws) -> loss``: :func:`one_member` of one of the trainer's
        step functions, or the fused trainer's step of K members returning ``(K,)`` losses.
    images : sequence of Tensor
        Each member's uint8 training instances, on the device.
    per_step : int
        Instances per step and member (static).
    generators : sequence of torch.Generator
        Each member's augmentation generator (advanced exactly as by the eager step): on the
        CPU, drawn in the host phase; on the device (``train.draws: device``), drawn by the
        device phase's kernels and, captured, by each replay.
    autocast : callable
        ``autocast(cache_enabled) -> context manager`` of the run's amp setting.
    capture : bool
        Capture and replay a CUDA graph (CUDA only); False runs every device phase uncaptured.
    compiled : bool, default=False
        The model's modules are compiled (:func:`~pipeline_lib.ssl.compiling.compile_network`):
        only names the mode in the history.
    update : {"fused", "foreach"}, default="fused"
        How SGD runs with the rate in a device tensor: SGD's fused kernel (training), or
        foreach ops with the group settings read once, which dynamo can trace into a
        compiled device phase (benchmarks/bench_compile.py; equal up to rounding).
    device_lr : bool or None, default=None
        Read the rate from a device tensor that the host phase fills (no host sync inside
        the step); None: on CUDA only, where capture needs it.

    Raises
    ------
    ValueError
        If ``capture`` is set off CUDA, ``images`` and ``generators`` differ in length, or
        ``update`` is unknown or ``foreach`` without ``device_lr``.
    """

    def __init__(
        self,
        *,
        model: nn.Module,
        optimizer: torch.optim.SGD,
        step: MembersStep,
        images: Sequence[torch.Tensor],
        per_step: int,
        generators: Sequence[torch.Generator],
        autocast: Callable[[bool], contextlib.AbstractContextManager[Any]],
        capture: bool,
        compiled: bool = False,
        update: str = "fused",
        device_lr: bool | None = None,
    ) -> None:
        if not images or len(images) != len(generators):
            raise ValueError(
                f"need one generator per member's images: {len(images)} image tensors, "
                f"{len(generators)} generators"
            )
        device = images[0].device
        if capture and device.type != "cuda":
            raise ValueError(f"graph capture needs a CUDA device, got {device.type!r}")
        self.model, self.optimizer, self.step = model, optimizer, step
        self.images, self.autocast = list(images), autocast
        self.capture, self.compiled = capture, compiled
        self.draws: list[StaticDraws | DeviceDraws] = [
            _step_draws(generator, device) for generator in generators
        ]
        self.indices = [torch.zeros(per_step, dtype=torch.long, device=device) for _ in self.images]
        self.device_lr = device.type == "cuda" if device_lr is None else device_lr
        if update not in SGD_UPDATES or (update == "foreach" and not self.device_lr):
            raise ValueError(
                f"update must be one of {', '.join(SGD_UPDATES)} ('foreach' needs device_lr), "
                f"got {update!r} with device_lr={self.device_lr}"
            )
        self.update = update
        # The foreach update's groups: SGD's settings besides the rate, read once (dynamo
        # would guard on the float rate of a group and recompile when it changes).
        self._sgd_groups = [
            (list(group["params"]), {key: group[key] for key in _SGD_OPTIONS})
            for group in optimizer.param_groups
        ]
        self._phase: DevicePhase = self._device_phase
        self.lr = torch.zeros(len(optimizer.param_groups), device=device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.graph_loss: torch.Tensor | None = None
        self.uncaptured = 0  # device phases run uncaptured since this start
        self.failure: str | None = None  # why capture failed (then every step is uncaptured)
        self._side = torch.cuda.Stream(device) if device.type == "cuda" else None

    @property
    def mode(self) -> str:
        """The history's ``step_mode``: ``graph`` or ``compiled``, ``uncaptured`` (capture
        failed) or ``two_phase``.

        ``graph`` includes the uncaptured steps after each start: they run the same kernels.
        """
        if self.failure is not None:
            return "uncaptured"
        if not self.capture:
            return "two_phase"
        return "compiled" if self.compiled else "graph"

    def __call__(self, *batch_indices: torch.Tensor) -> torch.Tensor:
        """Run one step on each member's instances ``batch_indices[k]`` (device); the loss.

        The loss is on the device: a scalar (one run) or the members' ``(K,)``. In graph mode
        it is a static tensor that the next step overwrites: copy it.
        """
        if len(batch_indices) != len(self.indices):
            raise ValueError(
                f"need one batch index per member: {len(self.indices)} members, "
                f"{len(batch_indices)} indices"
            )
        for index, batch_index in zip(self.indices, batch_indices, strict=True):
            index.copy_(batch_index, non_blocking=True)
        if self.device_lr:
            for slot, group in enumerate(self.optimizer.param_groups):
                self.lr[slot].fill_(group["lr"])  # a kernel with the value, no host sync
            # LambdaLR warns unless optimizer.step() ran; the device phase is that step, by
            # another route (set here, on the host: a compiled phase may not set attributes).
            self.optimizer._opt_called = True  # type: ignore[attr-defined]
        if not self.recorded:
            loss = self._uncaptured()  # draws on demand and records the plans
            for draws in self.draws:
                draws.freeze()
            return loss
        for draws in self.draws:  # each member's numbers from its own generator
            draws.draw()
        if self.capture and self.graph is None and self.uncaptured >= WARMUP_STEPS:
            self._try_capture()
        if self.graph is not None:
            self.graph.replay()
            assert self.graph_loss is not None  # noqa: S101 - set with the graph
            return self.graph_loss
        return self._uncaptured()

    @property
    def recorded(self) -> bool:
        """Whether every member's draw plan is known (after the first step)."""
        return all(draws.recorded for draws in self.draws)

    def wrap_device_phase(self, wrapper: Callable[[DevicePhase], DevicePhase]) -> None:
        """Run every later device phase through ``wrapper(phase)`` (uncaptured or captured).

        The hook of benchmarks/bench_compile.py, which compiles the phase with
        ``torch.compile``; the wrapped phase must keep its contract (static shapes, no host
        sync, the loss out).
        """
        self._phase = wrapper(self._phase)

    def _device_phase(self, cache_enabled: bool) -> torch.Tensor:
        """Gather, views, forward, loss, backward and update: static shapes, no host sync."""
        for draws in self.draws:
            draws.rewind()
        batches = [images[index] for images, index in zip(self.images, self.indices, strict=True)]
        with self.autocast(cache_enabled):
            loss = self.step(self.model, batches, self.draws)
        self.optimizer.zero_grad(set_to_none=True)
        # K members: the gradient of the sum is each member's own (nothing couples them).
        (loss if loss.ndim == 0 else loss.sum()).backward()
        self._update()
        return loss.detach()

    def _update(self) -> None:
        """SGD: ``optimizer.step()`` with float rates, or the fused kernel reading ``self.lr``."""
        if not self.device_lr:
            self.optimizer.step()
            return
        if self.update == "foreach":
            self._foreach_update()
            return
        for slot, group in enumerate(self.optimizer.param_groups):
            options = {key: group[key] for key in _SGD_OPTIONS}
            self._functional_sgd(group["params"], slot, options, fused=True)

    def _foreach_update(self) -> None:
        """SGD as foreach ops reading ``self.lr``: the update dynamo traces into its graph."""
        with torch.no_grad():
            for slot, (group_params, options) in enumerate(self._sgd_groups):
                self._functional_sgd(group_params, slot, options, foreach=True)

    def _functional_sgd(
        self,
        group_params: Sequence[torch.Tensor],
        slot: int,
        options: dict[str, Any],
        **kernel: bool,
    ) -> None:
        """SGD of one parameter group at rate ``self.lr[slot]``; keeps its momentum buffers.

        ``options`` are the group's settings besides the rate (:data:`_SGD_OPTIONS`),
        ``kernel`` picks the implementation (``fused=True`` or ``foreach=True``).
        """
        params = [p for p in group_params if p.grad is not None]
        state = [self.optimizer.state[p] for p in params]
        buffers = [entry.get("momentum_buffer") for entry in state]
        functional_sgd(
            params, [p.grad for p in params], buffers, **kernel, lr=self.lr[slot], **options
        )
        if options["momentum"] != 0:
            for entry, buffer in zip(state, buffers, strict=True):
                entry["momentum_buffer"] = buffer

    def _uncaptured(self) -> torch.Tensor:
        """The device phase run directly (on a side stream on CUDA, as capture requires)."""
        self.uncaptured += 1
        side = self._side
        if side is None:
            return self._phase(cache_enabled=True)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            loss = self._phase(cache_enabled=False)
        torch.cuda.current_stream().wait_stream(side)
        return loss

    def _try_capture(self) -> None:
        """Capture the device phase once; on any error warn and stay uncaptured."""
        graph = torch.cuda.CUDAGraph()
        try:
            self.optimizer.zero_grad(set_to_none=True)
            # A capture stream of its own: cuBLAS keeps one workspace per stream, and the
            # graph keeps the workspace of the stream it was captured on. On torch's shared
            # default capture stream every graph got the same one, so side-by-side members
            # (fused.ConcurrentGroup) raced on it: on an H200 run 0 of four contrastive DA
            # runs replayed side by side ended 0.15 (of the distance moved) from the run
            # alone, while the same graphs replayed on one stream, or the members uncaptured
            # on four streams, matched it bit for bit.
            for draws in self.draws:
                draws.register(graph)  # device draws: each replay advances their generator
            with torch.cuda.graph(graph, stream=torch.cuda.Stream(self.images[0].device)):
                loss = self._phase(cache_enabled=False)
        except Exception as error:  # capture support varies by op and driver: never fatal
            self.failure = f"{type(error).__name__}: {error}"
            self.capture = False
            log.warning(
                "CUDA graph capture of the training step failed (%s); training on with "
                "uncaptured steps (step_mode 'uncaptured' in the history)",
                self.failure,
            )
            return
        self.graph, self.graph_loss = graph, loss
