"""Our learning-rate schedule against the ``schedule`` trace (trace_schedule.py).

Our side is the trainer's: :func:`pipeline_lib.ssl.run.prepare_run` with the run's
epochs, steps an epoch (from the number of images) and rate, ``lr_schedule`` ``per_epoch``
for the released ``--sched_freq=epoch`` (the recipe's default) and ``per_step`` for
``--sched_freq=step``. The rate of a step is its optimiser group's rate when the step runs;
the loop's order (optimiser step, then schedule step) advances it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from parity import Difference
from trace_io import read_trace

from pipeline_lib.ssl.run import prepare_run
from pipeline_lib.ssl.settings import Execution, TrainSettings

FAMILY = "schedule"

#: The released rate is float32: the cosine of a float32 angle (off by 2^-24 of up to pi, so
#: its cosine by up to pi 2^-24), times the float32 base rate, so a few float32 ulps of the
#: base rate. Ours is float64. Relative to the base rate, since the rate itself goes to 0.
RATE_TOLERANCE = 4 * np.pi * 2.0**-24


def our_rates(num_batch: int, num_epoch: int, lr: float, sched_freq: str) -> np.ndarray:
    """The rate of each step of our trainer's run (module docstring)."""
    per_step = 2
    images = np.zeros((per_step * num_batch, 8, 8, 3), np.uint8)
    settings = TrainSettings(
        "rotnet",
        epochs=num_epoch,
        batch_size=per_step,
        lr=lr,
        lr_schedule={"epoch": "per_epoch", "step": "per_step"}[sched_freq],
        width=1,
        amp=None,
    )
    run, state = prepare_run(settings, images, seed=1, execution=Execution(step_mode="eager"))
    if run.data.steps_per_epoch != num_batch:
        raise ValueError(f"{run.data.steps_per_epoch} steps an epoch, the trace has {num_batch}")
    rates = []
    for _ in range(num_epoch * num_batch):
        rates.append(float(state.optimizer.param_groups[0]["lr"]))
        state.optimizer.step()  # no gradients: moves nothing, as the loop's order requires
        state.scheduler.step()
    return np.array(rates)


def compare(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> list[Difference]:
    """The rate of every step of every traced run, ours against the released optimiser's."""
    found = []
    for index, run in enumerate(meta["runs"]):
        released = arrays[f"run{index}/rates"]
        ours = our_rates(
            run["num_batch"], run["num_epoch"], run["learning_rate"], run["sched_freq"]
        )
        largest = float(np.max(np.abs(ours - released)) / run["learning_rate"])
        found.append(
            Difference(
                FAMILY,
                f"rate of each step: {run['num_epoch']} epochs of {run['num_batch']} steps, "
                f"lr {run['learning_rate']:g}, --sched_freq={run['sched_freq']}",
                largest,
                RATE_TOLERANCE,
                "relative to the base rate",
                "a float32 cosine against a float64 one",
            )
        )
    return found


def differences(folder: Path) -> list[Difference]:
    """:func:`compare` on the ``schedule`` trace in ``folder``."""
    return compare(*read_trace(folder, FAMILY))
