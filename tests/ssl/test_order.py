"""The epoch order: the released input pipeline's shuffle buffer over a frozen order."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import pipeline_lib.ssl.run as run_module
from pipeline_lib.ssl.order import SHUFFLE_BUFFER, EpochOrder, shuffle_buffer_order
from tests.ssl.tiny_runs import keyword_prepare, keyword_train


def _positions(emitted: torch.Tensor, frozen: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """For each element: its frozen position and its position in the epoch."""
    where = {int(value): i for i, value in enumerate(frozen)}
    frozen_position = np.array([where[int(value)] for value in emitted])
    return frozen_position, np.arange(len(emitted))


def test_the_buffer_emits_a_permutation_of_its_input() -> None:
    order = torch.randperm(5000, generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(1)
    for _ in range(3):
        emitted = shuffle_buffer_order(order, buffer_size=SHUFFLE_BUFFER, generator=generator)
        assert emitted.dtype == torch.int64 and emitted.shape == (5000,)
        assert torch.equal(emitted.sort().values, torch.arange(5000))
        assert not torch.equal(emitted, order)


def test_an_element_moves_earlier_by_at_most_buffer_minus_one_places() -> None:
    """At output step t the buffer holds frozen positions <= t + B - 1 (it is topped up
    after every emission), so an element emitted at t sat at frozen position <= t + B - 1:
    it moves earlier by at most B - 1. The bound is reached (an element chosen the step it
    enters the buffer); later moves are unbounded (one can wait in the buffer to the end)."""
    n, buffer = 60, 7
    frozen = torch.randperm(n, generator=torch.Generator().manual_seed(2))
    generator = torch.Generator().manual_seed(3)
    earliest, latest = 0, 0
    for _ in range(400):
        emitted = shuffle_buffer_order(frozen, buffer_size=buffer, generator=generator)
        source, position = _positions(emitted, frozen)
        displacement = position - source
        assert displacement.min() >= -(buffer - 1)
        # Equivalently: the first k outputs come from the first k + B - 1 frozen positions.
        assert all(source[: k + 1].max() <= k + buffer - 1 for k in range(n))
        earliest = min(earliest, int(displacement.min()))
        latest = max(latest, int(displacement.max()))
    assert earliest == -(buffer - 1)
    assert latest > 3 * buffer


def test_size_one_keeps_the_order_and_a_full_buffer_is_a_uniform_permutation() -> None:
    order = torch.tensor([3, 0, 2, 1])
    generator = torch.Generator().manual_seed(4)
    assert torch.equal(shuffle_buffer_order(order, buffer_size=1, generator=generator), order)
    # Buffer >= n: every step chooses uniformly among all that is left. All 24 orders of
    # 4 elements, each about 1/24 of 4,800 epochs: chi-square with 23 degrees of freedom,
    # bounded by 60 (p < 1e-4 for a uniform draw; a skewed shuffle lands far above).
    for buffer in (4, 1000):
        counts = dict.fromkeys(itertools.permutations([3, 0, 2, 1]), 0)
        for _ in range(4800):
            emitted = shuffle_buffer_order(order, buffer_size=buffer, generator=generator)
            counts[tuple(emitted.tolist())] += 1
        expected = 4800 / 24
        chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
        assert min(counts.values()) > 0 and chi2 < 60, (buffer, chi2)
    # A buffer smaller than the set is not uniform: with B = 2 the last frozen element can
    # never come first.
    firsts = {
        int(shuffle_buffer_order(order, buffer_size=2, generator=generator)[0]) for _ in range(200)
    }
    assert firsts == {3, 0}


def test_the_buffer_draws_exactly_n_numbers_and_rejects_bad_sizes() -> None:
    generator = torch.Generator().manual_seed(5)
    shuffle_buffer_order(torch.arange(50), buffer_size=10, generator=generator)
    twin = torch.Generator().manual_seed(5)
    torch.randint(0, 2**62, (50,), generator=twin, dtype=torch.int64)
    assert torch.equal(generator.get_state(), twin.get_state())
    with pytest.raises(ValueError, match="buffer_size must be >= 1, got 0"):
        shuffle_buffer_order(torch.arange(5), buffer_size=0, generator=generator)
    with pytest.raises(ValueError, match="unknown epoch_order 'sorted'"):
        EpochOrder.build("sorted", 5, seed=0)


def test_the_frozen_order_is_drawn_once_per_seed() -> None:
    first, again = (
        EpochOrder.build("released", 300, seed=7),
        EpochOrder.build("released", 300, seed=7),
    )
    other = EpochOrder.build("released", 300, seed=8)
    assert torch.equal(first.frozen, again.frozen) and not torch.equal(first.frozen, other.frozen)
    assert torch.equal(first.frozen.sort().values, torch.arange(300))
    assert EpochOrder.build("permutation", 300, seed=7).frozen is None


def _epoch_orders(run, state, epochs: int) -> list[torch.Tensor]:
    return [run.order.draw(state.shuffle_generator) for _ in range(epochs)]


def test_the_run_orders_each_epoch_from_its_frozen_order(digits64) -> None:
    """The trainer's default: 5,000 instances as the paper's one CIFAR-10 class, B = 1,000."""
    images = np.repeat(digits64, 79, axis=0)[:5000]
    run, state = keyword_prepare("rotnet", images, seed=0, epochs=4, batch_size=64, width=4)
    assert run.order.kind == "released" and run.order.buffer_size == SHUFFLE_BUFFER == 1000
    frozen = run.order.frozen.clone()
    orders = _epoch_orders(run, state, 4)
    assert torch.equal(run.order.frozen, frozen)  # the same frozen order every epoch
    for order in orders:
        assert torch.equal(order.sort().values, torch.arange(5000))  # a permutation
        source, position = _positions(order, frozen)
        assert source[0] < 1000  # the first draw comes from the first 1,000 frozen elements
        assert (position - source).min() >= -999
    assert len({tuple(order[:50].tolist()) for order in orders}) == 4  # reshuffled each epoch
    # Same seed, same orders; another seed, another frozen order.
    run_again, state_again = keyword_prepare(
        "rotnet", images, seed=0, epochs=4, batch_size=64, width=4
    )
    assert all(
        torch.equal(a, b)
        for a, b in zip(orders, _epoch_orders(run_again, state_again, 4), strict=True)
    )
    run_other, _ = keyword_prepare("rotnet", images, seed=1, epochs=4, batch_size=64, width=4)
    assert not torch.equal(run_other.order.frozen, frozen)


def test_the_permutation_variant_is_the_former_fresh_permutation(digits64) -> None:
    run, state = keyword_prepare(
        "rotnet", digits64, seed=0, epochs=2, batch_size=16, width=4, epoch_order="permutation"
    )
    twin = torch.Generator().manual_seed(run_module.stream_seed(0, 1))
    for order in _epoch_orders(run, state, 2):
        assert torch.equal(order, torch.randperm(64, generator=twin))


@pytest.mark.parametrize("epoch_order", ["released", "permutation"])
def test_training_steps_through_the_drawn_order_dropping_the_remainder(
    digits64, step_batches, epoch_order
) -> None:
    """Each step's batch is the next window of the epoch's order; the last partial batch is
    dropped (released ``drop_remainder=True``): 60 images, batch 16 -> 3 steps of 16."""
    images = digits64[:60]
    batches = step_batches
    options = {"seed": 3, "epochs": 2, "batch_size": 16, "width": 4, "epoch_order": epoch_order}
    _, history = keyword_train("rotnet", images, **options)
    run, state = keyword_prepare("rotnet", images, **options)
    data = run.data.images
    expected = [
        data[order[i * 16 : (i + 1) * 16]]
        for order in _epoch_orders(run, state, 2)
        for i in range(3)
    ]
    assert [record["steps"] for record in history] == [3, 3]
    assert len(batches) == len(expected) == 6
    assert all(torch.equal(a, b) for a, b in zip(batches, expected, strict=True))


def test_contrastive_da_orders_the_expanded_set(digits64) -> None:
    """Released data/cifar.py expands first ([images, rot90, rot180, rot270]), then
    data_util.py shuffles that whole set once and buffers it each epoch: one order over the
    4n instances, not per source image."""
    run, state = keyword_prepare(
        "contrastive_da", digits64[:16], seed=0, epochs=1, batch_size=8, width=4
    )
    assert run.order.n == len(run.data.images) == 64
    assert torch.equal(run.order.frozen.sort().values, torch.arange(64))
    order = run.order.draw(state.shuffle_generator)
    assert torch.equal(order.sort().values, torch.arange(64))
