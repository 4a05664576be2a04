"""Trace the released input pipeline's epoch order: which training instance each step sees.

The released ``CIFAR.load_dataset`` (``data/cifar.py``) builds the training loader through
``BasicImageProcess.input_fn`` (``data/data_util.py``): a shuffle with a buffer as large as
the set, ``.cache()``, a shuffle with a 1,000 buffer re-run every epoch, the augmentation
``map``, ``batch(drop_remainder=True)`` and ``repeat()``. This trace runs exactly that on a
set of ``N_INSTANCES`` one-pixel images whose instance ids (the loader's third column) come
back with every batch, for ``SEEDS`` seeds (``BaseTrain.set_random_seed``, as a training run
seeds before it builds its loader) and ``EPOCHS`` epochs each.

The two implementations draw from different generators, so ``compare_order.py`` compares the
orders by distribution, not element by element.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from trace_io import released_meta, write_trace

#: A CIFAR-10 class's training set: 5,000 instances, five times the shuffle buffer.
N_INSTANCES = 5000
BATCH_SIZE = 32
EPOCHS = 3
SEEDS = tuple(range(1, 21))  # the released code seeds only when seed > 0
#: The released per-epoch shuffle buffer (``data_util.py``: ``shuffle_buffer=1000``).
SHUFFLE_BUFFER = 1000
#: Every ID_STRIDE-th instance id is kept: 200 per epoch, far apart in id, so nearly
#: independent draws for the two-sample tests.
ID_STRIDE = 25


def released_train_loader(
    released: Any,
    images: np.ndarray,
    *,
    aug_list: list[str],
    batch_size: int,
    distaug_type: Any,
    seed: int,
) -> tuple[Any, int]:
    """The released training loader of ``images`` (uint8 NHWC) and its steps per epoch.

    A ``CIFAROOD`` whose arrays are set directly (its constructor reads pickles), then the
    released ``load_dataset`` as ``BaseTrain.get_dataloader`` calls it (``--num_batch=0``).
    Every image has label 0 and its index as instance id.
    """
    cifar = released.module("data.cifar")
    train = released.module("util.train")
    train.BaseTrain.set_random_seed(SimpleNamespace(seed=seed))
    loader = object.__new__(cifar.CIFAROOD)
    n = len(images)
    labels = np.zeros((n, 1), dtype=np.uint8)
    loader.trainval_data = [images, labels, np.arange(n)[:, None]]
    loader.test_data = [images[:2], labels[:2], np.arange(2)[:, None]]
    loader.dataset, loader.category, loader.input_shape = "cifar10ood", 0, tuple(images.shape[1:])
    (dataset, steps), _, _ = loader.load_dataset(
        aug_list=aug_list, batch_size=batch_size, num_batch_per_epoch=0, distaug_type=distaug_type
    )
    return dataset, int(steps)


def epoch_ids(dataset: Any, steps: int, epochs: int) -> np.ndarray:
    """``(epochs, steps * batch)`` instance ids in the order the steps saw them."""
    iterator = iter(dataset)
    rows = []
    for _ in range(epochs):
        batches = [np.asarray(next(iterator)[-1]).reshape(-1) for _ in range(steps)]
        rows.append(np.concatenate(batches))
    return np.stack(rows)


def released_frozen_order(released: Any, n: int, seed: int) -> np.ndarray:
    """The order the released loader caches: its first stage rebuilt under the same seed.

    ``set_random_seed`` resets TF's op-seed counter, and the full-buffer shuffle of
    ``make_dataset`` is the first seeded op ``load_dataset`` creates, so rebuilding that
    stage after seeding again draws the same permutation. ``trace`` checks that this is the
    cached order: no element of any traced epoch may come out more than
    ``SHUFFLE_BUFFER - 1`` places before its position here.
    """
    data_util = released.module("data.data_util")
    train = released.module("util.train")
    train.BaseTrain.set_random_seed(SimpleNamespace(seed=seed))
    images = np.zeros((n, 1, 1, 3), dtype=np.uint8)
    data = (images, np.zeros((n, 1), dtype=np.uint8), np.arange(n)[:, None])
    stage = data_util.BasicImageProcess(data=data, input_shape=(1, 1, 3)).make_dataset(True)
    return np.array([int(element[2][0]) for element in stage])


def trace(released: Any, out: Path) -> list[Path]:
    images = np.zeros((N_INSTANCES, 1, 1, 3), dtype=np.uint8)
    sampled = np.arange(0, N_INSTANCES, ID_STRIDE)
    frozen_positions, epoch_positions, first_frozen, extremes = [], [], [], []
    steps = 0
    for seed in SEEDS:
        # 'x+hflip': the one-pixel images cannot be cropped; the order does not depend on
        # which augmentation the map applies.
        dataset, steps = released_train_loader(
            released, images, aug_list=["x+hflip"], batch_size=BATCH_SIZE, distaug_type=1, seed=seed
        )
        orders = epoch_ids(dataset, steps, EPOCHS)
        frozen = np.empty(N_INSTANCES, dtype=np.int64)
        frozen[released_frozen_order(released, N_INSTANCES, seed)] = np.arange(N_INSTANCES)
        positions = np.full((EPOCHS, N_INSTANCES), -1, dtype=np.int64)  # -1: dropped
        for epoch, order in enumerate(orders):
            positions[epoch, order] = np.arange(len(order))
            displacement = np.arange(len(order)) - frozen[order]
            if displacement.min() < -(SHUFFLE_BUFFER - 1):
                raise RuntimeError(
                    f"seed {seed}, epoch {epoch}: an element came out "
                    f"{-displacement.min()} places early, more than a {SHUFFLE_BUFFER} "
                    "buffer allows: the rebuilt first stage is not the cached order"
                )
            extremes.append((displacement.min(), displacement.max()))
            first_frozen.append(frozen[order[0]])
        frozen_positions.append(frozen[sampled])
        epoch_positions.append(positions[:, sampled])
    arrays = {
        "sampled_ids": sampled.astype(np.int16),
        "frozen_position": np.stack(frozen_positions).astype(np.int16),
        "epoch_position": np.stack(epoch_positions).astype(np.int16),
        "first_draw_frozen_position": np.array(first_frozen, np.int16).reshape(len(SEEDS), EPOCHS),
        "displacement_extremes": np.array(extremes, np.int16).reshape(len(SEEDS), EPOCHS, 2),
    }
    meta = released_meta(
        released,
        family="order",
        what=(
            "the released training loader's epoch orders: per seed, the frozen (cached) "
            "position and each epoch's position (-1: dropped with the last partial batch) of "
            "every ID_STRIDE-th instance id; per seed and epoch the frozen position of the "
            "first draw and the smallest and largest displacement (epoch position - frozen "
            "position) over all instances"
        ),
        seeds=list(SEEDS),
        n_instances=N_INSTANCES,
        id_stride=ID_STRIDE,
        batch_size=BATCH_SIZE,
        steps_per_epoch=steps,
        epochs=EPOCHS,
        shuffle_buffer=SHUFFLE_BUFFER,
        aug_list="x+hflip",
        distaug_type=1,
    )
    return [write_trace(out, "order_epochs", arrays, meta)]
