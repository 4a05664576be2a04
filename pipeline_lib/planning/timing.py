"""Timing training rates for the rate tables: medians of repeated timed calls, and the log
that appends them (``benchmarks/bench_train.py`` and ``bench_streams.py``).

The table's columns and reader are :mod:`pipeline_lib.planning.rates`.
"""

from __future__ import annotations

import math
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pipeline_lib.planning.rates import (
    LEGACY_IMAGE_SIZE,
    STEP_MODES,
    Overheads,
    Rate,
    append_rates,
)


@dataclass(frozen=True)
class Spread:
    """The median of repeated timed measurements of one rate, and their range.

    A rate is the median of several timed calls, not one: a single call can land on a clock
    ramp, another process's burst or a garbage collection, and the range says how far one
    call could be from the next.
    """

    median: float
    low: float
    high: float
    repeats: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Spread:
        """The median, minimum and maximum of ``samples`` (one rate per timed call).

        Raises
        ------
        ValueError
            If ``samples`` is empty or holds a value that is not positive and finite.
        """
        values = [float(value) for value in samples]
        if not values:
            raise ValueError("no timed samples: a rate needs at least one timed call")
        bad = [value for value in values if not (value > 0 and math.isfinite(value))]
        if bad:
            raise ValueError(f"timed rates must be positive and finite, got {bad}")
        return cls(float(statistics.median(values)), min(values), max(values), len(values))

    def scaled(self, factor: float) -> Spread:
        """The same measurement in other units (a group's total x 1 / fuse: per model)."""
        return Spread(self.median * factor, self.low * factor, self.high * factor, self.repeats)


def _timed_call(
    call: Callable[[], object], clock: Callable[[], float], sync: Callable[[], object]
) -> float:
    """Seconds of one call on ``clock``, with ``sync`` before the start and the stop."""
    sync()
    started = clock()
    call()
    sync()
    return clock() - started


def time_repeats(
    call: Callable[[], object],
    *,
    repeats: int,
    instances: int,
    clock: Callable[[], float] = time.perf_counter,
    sync: Callable[[], object] = lambda: None,
) -> Spread:
    """Instances per second of ``repeats`` timed calls of ``call``, each training ``instances``.

    ``sync`` runs before the clock starts and before it stops (``torch.cuda.synchronize`` on
    a GPU, whose calls return before their work is done); ``clock`` can be a fake timer.

    Raises
    ------
    ValueError
        If ``repeats`` < 1, or a call took no time on ``clock``.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    samples = []
    for _ in range(repeats):
        seconds = _timed_call(call, clock, sync)
        if not seconds > 0:
            raise ValueError(f"a timed call took {seconds} s on the clock: no rate")
        samples.append(instances / seconds)
    return Spread.of(samples)


def median_seconds(
    call: Callable[[], object],
    *,
    repeats: int,
    clock: Callable[[], float] = time.perf_counter,
    sync: Callable[[], object] = lambda: None,
) -> float:
    """The median wall seconds of ``repeats`` calls of ``call`` (synced as
    :func:`time_repeats`): an overhead's time, which trains no instances.

    Raises
    ------
    ValueError
        If ``repeats`` < 1 or the clock ran backwards.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    samples = []
    for _ in range(repeats):
        seconds = _timed_call(call, clock, sync)
        if seconds < 0:
            raise ValueError(f"a timed call took {seconds} s on the clock")
        samples.append(seconds)
    return float(statistics.median(samples))


def capture_seconds(first_epoch_s: float, steady: Spread, instances: int) -> float:
    """What the first epoch (warm-up steps, compilation, capture) took beyond a steady
    epoch of the same ``instances`` at the ``steady`` rate; never below 0 (timing noise)."""
    return max(0.0, first_epoch_s - instances / steady.median)


class RateLog:
    """The rates one benchmark run measures, appended to ``path`` (if given) as they come.

    Each row is appended as soon as it is measured, so a benchmark that a time limit kills
    (benchmarks/gpu_session.sh) keeps the rates it had measured. Shared by bench_train.py
    and bench_streams.py, so both write the same columns the same way.
    """

    def __init__(
        self,
        path: str | os.PathLike | None,
        *,
        device: str,
        kind: str,
        width: int,
        amp: str,
        steps: int,
        image_size: int = LEGACY_IMAGE_SIZE,
        command: Sequence[str] | None = None,
    ) -> None:
        """``command``: the script and its arguments (default: the process's ``sys.argv``),
        for a benchmark called as a function."""
        self.path = path
        words = sys.argv if command is None else list(command)
        self.common = {
            "device": device,
            "kind": kind,
            "width": width,
            "amp": amp,
            "steps": steps,
            "image_size": image_size,
            "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": shlex.join(["python", *words]),
        }
        self.rows: list[Rate] = []

    def add(
        self,
        method: str,
        step_mode: str,
        fuse: int,
        total: Spread,
        *,
        overheads: Overheads | None = None,
        embed_images_per_s: float | None = None,
    ) -> None:
        """Record ``fuse`` models' total rate (median and range) per model (total / fuse),
        with the setting's overheads and the network's embedding rate where measured.

        A run whose capture failed (``uncaptured``) measured neither mode cleanly: skipped.
        """
        if step_mode not in STEP_MODES:
            print(f"rates: {method} ran {step_mode!r}; not written to the rate table")
            return
        per_model = total.scaled(1 / fuse)
        row = Rate(
            method=method,
            step_mode=step_mode,
            fuse=fuse,
            images_per_s_per_model=per_model.median,
            images_per_s_min=per_model.low,
            images_per_s_max=per_model.high,
            repeats=per_model.repeats,
            overheads=overheads,
            embed_images_per_s=embed_images_per_s,
            **self.common,  # type: ignore[arg-type]
        )
        self.rows.append(row)
        if self.path is not None:
            append_rates(self.path, [row])

    def report(self) -> None:
        """Say where the rows went."""
        if self.path is not None:
            print(f"rates: {len(self.rows)} rows appended to {self.path}")
