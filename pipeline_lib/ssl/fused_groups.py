"""The groups that train an epoch of K fused models: stacked, or side by side on streams.

:class:`StackedGroup` trains its members as one stacked network
(:mod:`pipeline_lib.models.stacked`) with one optimiser and schedule, copied in from the
members' states and back out after the epoch; :class:`ConcurrentGroup` replays each member's
own captured step on a CUDA stream of its own. :mod:`pipeline_lib.ssl.fused` says which
group a set of runs forms, and why (measurements, NaN containment).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import torch
from torch import nn

from pipeline_lib.models.stacked import (
    stack_inputs,
    stack_models,
    stack_tensors,
    unload_stacked,
    unstack_outputs,
    unstack_tensor,
)
from pipeline_lib.registry import CAPTURED_STEP_MODES
from pipeline_lib.ssl.draws import Draws, StaticDraws
from pipeline_lib.ssl.loop import run_static_step
from pipeline_lib.ssl.run import Run, TrainingState
from pipeline_lib.ssl.schedule import MOMENTUM_LR, MomentumFormLR
from pipeline_lib.ssl.stepper import StaticStep

__all__ = ["MAX_SIDE_BY_SIDE", "ConcurrentGroup", "StackedGroup"]


class _Group:
    """The models that train an epoch together (members: their indices among the runs)."""

    def __init__(
        self, members: list[int], runs: Sequence[Run], states: Sequence[TrainingState]
    ) -> None:
        self.members = members
        self.runs = [runs[i] for i in members]
        self.states = [states[i] for i in members]


class StackedGroup(_Group):
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
        # Per member: each run's step has its own view augmentation (its seeded jitter order).
        self.member_steps = [run.step for run in self.runs]
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
        self.scheduler = MomentumFormLR(
            self.optimizer, self.runs[0].cosine, momentum_form=self.runs[0].momentum_form
        )
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
            step.inputs(batch, source)
            for step, batch, source in zip(self.member_steps, batches, sources, strict=True)
        ]
        output = self.member_steps[0].forward(model, stack_inputs([x for x, _ in prepared]))
        outputs = unstack_outputs(output, len(self.members))
        return torch.stack(
            [
                step.loss(out, extra)
                for step, out, (_, extra) in zip(self.member_steps, outputs, prepared, strict=True)
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
                if MOMENTUM_LR in stacked:  # the rate the momentum buffers are scaled for
                    own[MOMENTUM_LR] = stacked[MOMENTUM_LR]


class ConcurrentGroup(_Group):
    """The members' own captured steps, replayed side by side on one CUDA stream each.

    Each member keeps its model, optimiser and :class:`~pipeline_lib.ssl.stepper.StaticStep`
    (the separate run's, captured once), so its epoch runs exactly the separate run's
    kernels on the same numbers: nothing is stacked, nothing can leak between members, and
    on the CPU (tests only, no streams) the members step one after the other. Why: the
    stacked network's grouped convolutions made a captured fused step as slow as K captured
    steps on an H200 (:mod:`pipeline_lib.ssl.fused`); kernels of one process on different
    streams can run at the same time.
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
                        member_draws = step.draws[0]  # device draws have no host phase
                        if (
                            self.draw_ahead
                            and isinstance(member_draws, StaticDraws)
                            and index + 1 < steps
                            and step.recorded
                        ):
                            ahead[k] = pool.submit(member_draws.fill)
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
