"""Our epoch order (pipeline_lib/ssl/order.py) against the released loader's (trace_order.py).

The released order comes from TF's shuffle ops, ours from the run's torch generators, so the
orders are compared by distribution. Ours is drawn the way a training run draws it:
:func:`~pipeline_lib.ssl.run.prepare_run` builds the run's ``order`` and shuffle generator
from the recipe's defaults and the seed, and each epoch calls ``order.draw``.

Compared, on every ``id_stride``-th instance id as in the trace:

- how far an instance moves from its frozen (cached) position in an epoch;
- how far it moves between two consecutive epochs (needs no frozen order, so it also tells a
  uniform permutation per epoch from the buffer);
- the frozen position of each epoch's first draw (the buffer's first fill: below 1,000);
- over all instances, the earliest move, bounded by the buffer (``1 - buffer`` places).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from distribution import as_differences, continuous
from parity import Difference
from trace_io import read_trace

from pipeline_lib.ssl.run import prepare_run
from pipeline_lib.ssl.settings import TrainSettings

FAMILY = "order"
#: Our seeds x epochs: as many epochs (60) as the released trace's 20 seeds x 3.
OUR_SEEDS = tuple(range(1, 11))
OUR_EPOCHS = 6


def our_epochs(
    n: int, batch_size: int, seed: int, epochs: int
) -> tuple[np.ndarray | None, np.ndarray]:
    """A run's frozen order (None when it has none) and its first ``epochs`` epoch orders,
    each cut to the instances its steps use (the last partial batch dropped)."""
    settings = TrainSettings(method="contrastive", epochs=epochs, batch_size=batch_size, width=16)
    run, state = prepare_run(settings, np.zeros((n, 8, 8, 3), np.uint8), seed=seed)
    used = run.data.steps_per_epoch * run.data.per_step
    orders = [run.order.draw(state.shuffle_generator)[:used].numpy() for _ in range(epochs)]
    frozen = None if run.order.frozen is None else run.order.frozen.numpy()
    return frozen, np.stack(orders)


def _positions(order: np.ndarray, n: int) -> np.ndarray:
    positions = np.full(n, -1, dtype=np.int64)
    positions[order] = np.arange(len(order))
    return positions


def _moves(
    frozen_position: np.ndarray, epoch_position: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Moves from the frozen position and between consecutive epochs, dropped ones left out.

    ``frozen_position``: (seeds, ids); ``epoch_position``: (seeds, epochs, ids), -1 = dropped.
    """
    frozen_moves, epoch_moves = [], []
    for frozen, epochs in zip(frozen_position, epoch_position, strict=True):
        for epoch in epochs:
            kept = epoch >= 0
            frozen_moves.append(epoch[kept] - frozen[kept])
        for earlier, later in zip(epochs[:-1], epochs[1:], strict=True):
            kept = (earlier >= 0) & (later >= 0)
            epoch_moves.append(later[kept] - earlier[kept])
    return np.concatenate(frozen_moves), np.concatenate(epoch_moves)


def compare(trace: dict[str, np.ndarray], meta: dict[str, Any]) -> list[Difference]:
    n, buffer = int(meta["n_instances"]), int(meta["shuffle_buffer"])
    sampled = trace["sampled_ids"].astype(np.int64)
    ours_frozen, ours_epochs, first_draws, earliest = [], [], [], 0
    steps = None
    for seed in OUR_SEEDS:
        frozen, orders = our_epochs(n, int(meta["batch_size"]), seed, OUR_EPOCHS)
        steps = orders.shape[1] // int(meta["batch_size"])
        if frozen is None:  # a uniform permutation each epoch: no cached order to move from
            return [_no_frozen_order(meta)]
        frozen_position = _positions(frozen, n)
        for order in orders:
            moves = np.arange(len(order)) - frozen_position[order]
            earliest = min(earliest, int(moves.min()))
            first_draws.append(frozen_position[order[0]])
        ours_frozen.append(frozen_position[sampled])
        ours_epochs.append(np.stack([_positions(order, n)[sampled] for order in orders]))
    released_moves = _moves(
        trace["frozen_position"].astype(np.int64), trace["epoch_position"].astype(np.int64)
    )
    our_moves = _moves(np.stack(ours_frozen), np.stack(ours_epochs))
    released_first = trace["first_draw_frozen_position"].ravel().astype(np.int64)
    tests = [
        continuous(
            "move from the frozen position in an epoch (places)", released_moves[0], our_moves[0]
        ),
        continuous("move between consecutive epochs (places)", released_moves[1], our_moves[1]),
        continuous(
            "frozen position of each epoch's first draw", released_first, np.array(first_draws)
        ),
    ]
    released_earliest = int(trace["displacement_extremes"][..., 0].min())
    return [
        *as_differences(FAMILY, tests),
        Difference(
            FAMILY,
            "steps per epoch",
            abs(steps - int(meta["steps_per_epoch"])),
            0.0,
            "steps",
            f"{n} instances in batches of {meta['batch_size']}, the last partial one dropped",
        ),
        Difference(
            FAMILY,
            "earliest move of any instance (places before its frozen position)",
            abs(earliest - released_earliest),
            0.0,
            f"places; released {released_earliest}, ours {earliest}",
            f"a {buffer} buffer lets an element out at most {buffer - 1} places early, and "
            "over 60 epochs of 5,000 instances both reach that bound",
        ),
        Difference(
            FAMILY,
            "latest frozen position of an epoch's first draw",
            float(max(max(first_draws), released_first.max())),
            float(buffer - 1),
            f"frozen position; released at most {released_first.max()}, ours {max(first_draws)}",
            f"the first draw is one of the buffer's first fill: frozen positions 0..{buffer - 1}",
        ),
    ]


def _no_frozen_order(meta: dict[str, Any]) -> Difference:
    return Difference(
        FAMILY,
        "a frozen order under the buffer shuffle",
        float("inf"),
        0.0,
        "present",
        f"the released loader caches one full shuffle and re-runs a {meta['shuffle_buffer']} "
        "buffer shuffle over it each epoch; our run has no frozen order",
    )


def differences(folder: Path) -> list[Difference]:
    """:func:`compare` on the ``order_epochs`` trace in ``folder``."""
    return compare(*read_trace(folder, "order_epochs"))
