"""Where a training step's random numbers come from: the CPU generator directly, static
buffers, or a generator on the step's device.

Every random number of a step is a ``U[0, 1)`` or standard normal draw from the run's
augmentation :class:`torch.Generator` (:mod:`pipeline_lib.ssl.augment`). With
``train.draws: host`` (the default) that generator is on the CPU and the step functions take
either the generator (the eager path: :class:`GeneratorDraws` wraps it) or a
:class:`StaticDraws`, which splits a step into two phases:

1. the *host phase* (:meth:`StaticDraws.draw`) draws every number of the step from the same
   generator, in the same order and with the same shapes as the eager step, into one flat
   (pinned, on CUDA) staging buffer and copies it to one flat buffer on the device;
2. the *device phase* is the step function itself, whose ``rand`` / ``randn`` calls return
   views of that device buffer. It has static shapes and never reads a number on the host,
   so it can be captured once as a CUDA graph and replayed.

Because the numbers and their order are the eager step's, the generator advances exactly as
in eager training: a checkpoint (which saves its state) resumes either path identically, and
the two paths differ only in kernel rounding. The shapes of a step's draws (its *plan*) are
recorded during the first device phase, which draws on demand.

With ``train.draws: device`` the generator lives on the step's GPU (:class:`DeviceDraws`): the
numbers are drawn by kernels inside the device phase, captured with the graph (the generator
is registered with it, so each replay advances its Philox offset), and the host phase has
nothing to draw or copy. Why: a denoising model step at 64 px draws 786,432 normals, about
2.4 ms of one host core, so K side-by-side models on one host could wait on it. The numbers
are another generator's (Philox, not the CPU's Mersenne Twister), so a run is not bit for bit
the host-drawn run of its seed: an execution setting that may become a default only after a
paired AUC check. Eager and captured steps draw the same numbers (the same kernels at the
same offsets), and a checkpoint saves the generator's state, so a resume repeats the run. On
the CPU the step's device is the host, and ``device`` draws are the ``host`` ones.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Protocol

import torch

from pipeline_lib.registry import DRAW_SOURCES

__all__ = [
    "Draws",
    "DeviceDraws",
    "GeneratorDraws",
    "StaticDraws",
    "as_draws",
    "augment_generator_on",
    "device_constant",
]


class Draws(Protocol):
    """The random numbers of one step (``static``: never look at them on the host)."""

    static: bool

    def rand(self, *shape: int) -> torch.Tensor: ...

    def randn(self, *shape: int) -> torch.Tensor: ...


class GeneratorDraws:
    """Today's eager draws: fresh CPU tensors from ``generator`` (moved by the caller)."""

    static = False

    def __init__(self, generator: torch.Generator) -> None:
        self.generator = generator

    def rand(self, *shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=self.generator)

    def randn(self, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=self.generator)


class DeviceDraws:
    """Draws made by kernels on the device from a generator there (``train.draws: device``).

    The same calls in eager and captured steps: no plan, no host phase. ``static`` as for
    :class:`StaticDraws`: the numbers stay on the device, so a step must not read them on
    the host (that would synchronise it, and cannot be captured).
    """

    static = True
    recorded = True  # no plan to record

    def __init__(self, generator: torch.Generator) -> None:
        if generator.device.type == "cpu":
            raise ValueError("DeviceDraws needs a generator on an accelerator; got a CPU one")
        self.generator = generator

    def rand(self, *shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=self.generator, device=self.generator.device)

    def randn(self, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=self.generator, device=self.generator.device)

    def register(self, graph: torch.cuda.CUDAGraph) -> None:
        """Let ``graph`` advance the generator at each replay (before its capture)."""
        graph.register_generator_state(self.generator)

    def freeze(self) -> None:
        """Nothing to lay out (see :meth:`StaticDraws.freeze`)."""

    def draw(self) -> None:
        """Nothing to draw on the host (see :meth:`StaticDraws.draw`)."""

    def rewind(self) -> None:
        """Nothing to rewind: each device phase draws anew (see :meth:`StaticDraws.rewind`)."""


def augment_generator_on(seed: int, device: torch.device, draws: str) -> torch.Generator:
    """The run's augmentation generator: on the CPU (``host``) or the step's device.

    Raises
    ------
    ValueError
        On a ``draws`` other than ``host`` or ``device``.
    """
    if draws not in DRAW_SOURCES:
        raise ValueError(f"unknown draws {draws!r}; allowed: {', '.join(DRAW_SOURCES)}")
    where = torch.device(device) if draws == "device" else torch.device("cpu")
    return torch.Generator(device=where).manual_seed(seed)


def as_draws(source: torch.Generator | Draws) -> Draws:
    """A :class:`Draws` for a step function's ``generator`` argument (a generator is wrapped:
    a CPU one in :class:`GeneratorDraws`, one on a device in :class:`DeviceDraws`)."""
    if isinstance(source, torch.Generator):
        if source.device.type == "cpu":
            return GeneratorDraws(source)
        return DeviceDraws(source)
    return source


@functools.lru_cache(maxsize=64)
def _cached_constant(
    values: tuple[float, ...], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype, device=device)


def device_constant(
    values: Sequence[float], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """A small constant tensor made once per device, so a captured step copies no host data.

    Treat the result as read-only: it is shared by every caller.
    """
    return _cached_constant(tuple(values), dtype, torch.device(device))


_KINDS = ("rand", "randn")


class StaticDraws:
    """Two-phase draws of one step into static device buffers (see the module docstring).

    Parameters
    ----------
    generator : torch.Generator
        The run's CPU augmentation generator.
    device : torch.device
        Where the step runs; on CUDA the staging buffers are pinned and double-buffered so
        the host can draw the next step while the device still copies the last one.
    """

    static = True

    def __init__(self, generator: torch.Generator, device: torch.device) -> None:
        self.generator = generator
        self.device = torch.device(device)
        self.plan: list[tuple[str, tuple[int, ...], int]] | None = None  # kind, shape, offset
        self._recording: list[tuple[str, tuple[int, ...], torch.Tensor]] = []
        self._cursor = 0
        self._size = 0
        self._device_buffer: torch.Tensor | None = None
        self._staging: list[torch.Tensor] = []
        self._copied: list[torch.cuda.Event | None] = []
        self._turn = 0
        self._filled: int | None = None  # the staging buffer fill() drew into, until upload()

    @property
    def recorded(self) -> bool:
        """Whether the plan is known (after the first device phase and :meth:`freeze`)."""
        return self.plan is not None

    def _next(self, kind: str, shape: tuple[int, ...]) -> torch.Tensor:
        if self.plan is None:  # first step: draw now, remember the shape
            drawn = getattr(torch, kind)(*shape, generator=self.generator).to(self.device)
            self._recording.append((kind, shape, drawn))
            return drawn
        if self._cursor >= len(self.plan) or self.plan[self._cursor][:2] != (kind, shape):
            raise RuntimeError(
                f"step drew {kind}{shape} at draw {self._cursor}, not its recorded plan "
                f"{self.plan[self._cursor][:2] if self._cursor < len(self.plan) else 'end'}"
            )
        _, _, offset = self.plan[self._cursor]
        self._cursor += 1
        assert self._device_buffer is not None  # noqa: S101 - type narrowing
        numel = _numel(shape)
        return self._device_buffer[offset : offset + numel].view(shape)

    def rand(self, *shape: int) -> torch.Tensor:
        return self._next("rand", tuple(shape))

    def randn(self, *shape: int) -> torch.Tensor:
        return self._next("randn", tuple(shape))

    def freeze(self) -> None:
        """End the recording step: lay out the buffers for the plan it drew."""
        if self.plan is not None:
            return
        plan, offset = [], 0
        for kind, shape, _ in self._recording:
            plan.append((kind, shape, offset))
            offset += _numel(shape)
        self.plan, self._size = plan, offset
        self._recording = []
        total = self._size
        self._device_buffer = torch.zeros(total, device=self.device)
        pinned = self.device.type == "cuda"
        self._staging = [torch.zeros(total, pin_memory=pinned) for _ in range(2 if pinned else 1)]
        self._copied = [None] * len(self._staging)

    @property
    def filled(self) -> bool:
        """Whether the next step's numbers are drawn and wait in a staging buffer."""
        return self._filled is not None

    def fill(self) -> None:
        """Draw the next step's numbers into a staging buffer: host work only.

        Safe on a worker thread (:class:`~pipeline_lib.ssl.fused.ConcurrentGroup` draws one
        member's next step while the others' steps launch) as long as the calls of one
        instance stay in order: fill, then :meth:`upload`, then the next fill. Waits only for
        the copy made two steps ago, so the host may run ahead of the device.
        """
        if self.plan is None or self._device_buffer is None:
            raise RuntimeError("call freeze() first")
        if self._filled is not None:
            raise RuntimeError("upload() the numbers already filled first")
        turn = self._turn % len(self._staging)
        self._turn += 1
        event = self._copied[turn]
        if event is not None:
            event.synchronize()  # the device has read this staging buffer
        staging = self._staging[turn]
        for kind, shape, offset in self.plan:
            numbers = getattr(torch, kind)(*shape, generator=self.generator)
            staging[offset : offset + numbers.numel()].copy_(numbers.view(-1))
        self._filled = turn

    def upload(self) -> None:
        """Copy the filled numbers to the device buffer, on the current stream (no wait)."""
        if self._filled is None or self._device_buffer is None:
            raise RuntimeError("fill() first")
        turn, self._filled = self._filled, None
        self._device_buffer.copy_(self._staging[turn], non_blocking=self.device.type == "cuda")
        if self.device.type == "cuda":
            event = torch.cuda.Event()
            event.record()
            self._copied[turn] = event
        self._cursor = 0

    def draw(self) -> None:
        """Host phase: the step's numbers to the device buffer (:meth:`fill` unless done
        ahead, then :meth:`upload`)."""
        if self._filled is None:
            self.fill()
        self.upload()

    def rewind(self) -> None:
        """Start a device phase over the numbers last drawn (capture, then replay)."""
        self._cursor = 0

    def register(self, graph: torch.cuda.CUDAGraph) -> None:
        """Nothing for ``graph`` to advance: the numbers come in through the buffer."""


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count
