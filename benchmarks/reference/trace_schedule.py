"""Trace the released learning-rate schedule: the rate of every step of a few short runs.

The released trainer builds its schedule in ``config()`` (``util/train.py``):
``CustomLearningRateSchedule(step_per_epoch=num_batch, max_step=num_epoch * num_batch)``
(``step_per_epoch=1`` with ``--sched_freq=step``), whose rate is the cosine at
``floor(it / step_per_epoch) * step_per_epoch`` (``util/scheduler.py``), ``it`` being the
optimiser's iteration count before the step. For each run of :data:`RUNS` the trace records,
at every step, the rate the released optimiser (the legacy Keras SGD of the harness, built
by the released ``get_optimizer``) applies: it is measured, not read from the schedule, by a
step of a variable set to 0 with gradient 1 and no momentum, which leaves ``-rate`` in it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from trace_io import released_meta, write_trace

#: (``--num_batch``, ``--num_epoch``, ``--learning_rate``, ``--sched_freq``) of each run.
RUNS: tuple[tuple[int, int, float, str], ...] = (
    (3, 5, 0.01, "epoch"),  # the scripts' rate and frequency
    (1, 6, 0.3, "epoch"),  # one step an epoch: the rate moves every step
    (7, 4, 0.01, "epoch"),
    (4, 3, 0.01, "step"),  # --sched_freq=step, this project's lr_schedule: per_step
)


def _applied_rates(
    released: Any, num_batch: int, num_epoch: int, lr: float, freq: str
) -> np.ndarray:
    """The rate each step of the run applies, as measured on a variable (module docstring)."""
    tf = released.tf
    trainer = released.module("util.train").BaseTrain
    scheduler, _ = trainer.get_scheduler(
        sched_type="cos",
        step_per_epoch=1 if freq == "step" else num_batch,
        max_step=num_epoch * num_batch,
        learning_rate=lr,
        step_size=1,
        gamma=0.995,
        min_rate=0.0,
        level=7,
    )
    optimizer, _ = trainer.get_optimizer(
        scheduler=scheduler, optim_type="sgd", learning_rate=lr, momentum=0.0, nesterov=False
    )
    variable = tf.Variable(0.0)
    rates = []
    for _ in range(num_epoch * num_batch):
        variable.assign(0.0)
        optimizer.apply_gradients([(tf.constant(1.0), variable)])
        rates.append(-float(variable.numpy()))
    return np.array(rates)


def trace(released: Any, out: Path) -> list[Path]:
    """Write the ``schedule`` trace under ``out``; return its path."""
    arrays = {f"run{index}/rates": _applied_rates(released, *run) for index, run in enumerate(RUNS)}
    meta = released_meta(
        released,
        family="schedule",
        runs=[
            {"num_batch": b, "num_epoch": e, "learning_rate": lr, "sched_freq": freq}
            for b, e, lr, freq in RUNS
        ],
        sched_type="cos",
        sched_min_rate=0.0,
    )
    return [write_trace(out, "schedule", arrays, meta)]
