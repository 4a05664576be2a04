"""The order in which one epoch visits the training instances.

The released input pipeline (``data/data_util.py``, ``input_fn`` and ``make_dataset``)
shuffles the training set once with a buffer as large as the set, *before* ``.cache()``, so
the cached order is drawn once and then frozen for the run. Every epoch then re-runs
``shuffle(buffer_size=1000, reshuffle_each_iteration=True)`` over that frozen order and
batches it with ``drop_remainder=True``. ``tf.data``'s shuffle fills a buffer with the first
``buffer_size`` elements, then repeatedly emits a uniformly chosen element of the buffer and
puts the next input element in its place; once the input is exhausted it drains what is
left the same way. Within an epoch an element can therefore move earlier than its frozen
position by at most ``buffer_size - 1`` places (at output step ``t`` the buffer holds frozen
positions up to ``t + buffer_size - 1``), but later by any amount: it is not a permutation
drawn uniformly, unless the buffer holds the whole set.

``released`` emulates that with the run's seeded CPU generators: the frozen order is a
permutation drawn once from a stream of the run's seed, and each epoch's buffer choices are
drawn from the run's shuffle generator (checkpointed, so a resumed run repeats the
uninterrupted one). ``permutation`` (a variant, not the released order) draws a fresh
uniform permutation from the shuffle generator every epoch.

TF (``shuffle_dataset_op.cc``) chooses ``Random() % fill`` with a 32-bit Philox number (a
modulo bias below 2.4e-7 at a fill of 1,000); this module takes 62-bit integers modulo the
fill (bias below 2^-52). The numbers themselves differ from TF's (another generator, and the
released code does not seed its shuffles).
"""

from __future__ import annotations

import dataclasses

import torch

from pipeline_lib.registry import EPOCH_ORDERS

__all__ = ["EPOCH_ORDERS", "SHUFFLE_BUFFER", "EpochOrder", "shuffle_buffer_order"]

#: The released code's per-epoch shuffle buffer (``data_util.py``: ``shuffle_buffer=1000``).
SHUFFLE_BUFFER = 1000

#: Random integers are drawn below this bound and reduced modulo the buffer's fill.
_RANDOM_BOUND = 2**62


def shuffle_buffer_order(
    order: torch.Tensor, *, buffer_size: int, generator: torch.Generator
) -> torch.Tensor:
    """``order`` passed through a ``tf.data`` shuffle buffer of ``buffer_size`` elements.

    Parameters
    ----------
    order : Tensor of shape (n,), int64
        The input sequence (the frozen order of the run).
    buffer_size : int
        Elements the buffer holds (1 returns ``order`` unchanged; ``>= n`` gives a uniform
        permutation of it).
    generator : torch.Generator
        CPU generator of the choices: exactly ``n`` integers are drawn from it.

    Returns
    -------
    Tensor of shape (n,), int64
        The emitted sequence: a permutation of ``order``.

    Raises
    ------
    ValueError
        If ``buffer_size < 1`` or ``order`` is not one-dimensional.
    """
    if buffer_size < 1:
        raise ValueError(f"buffer_size must be >= 1, got {buffer_size}")
    if order.ndim != 1:
        raise ValueError(f"order must be one-dimensional, got shape {tuple(order.shape)}")
    n = len(order)
    if n == 0:
        return order.clone()
    # Before output step t the buffer holds min(buffer_size, n - t) elements (it is topped up
    # from the input after every emission while input is left), so every choice's range is
    # known in advance and one draw covers the epoch.
    draws = torch.randint(0, _RANDOM_BOUND, (n,), generator=generator, dtype=torch.int64)
    fill = torch.clamp(n - torch.arange(n, dtype=torch.int64), max=buffer_size)
    slots = (draws % fill).tolist()
    values = order.tolist()
    buffer = values[:buffer_size]
    upcoming = len(buffer)
    out = []
    for slot in slots:
        out.append(buffer[slot])
        if upcoming < n:  # the next input element takes the emitted one's place
            buffer[slot] = values[upcoming]
            upcoming += 1
        else:  # draining: the last slot fills the hole
            buffer[slot] = buffer[-1]
            buffer.pop()
    return torch.tensor(out, dtype=torch.int64)


@dataclasses.dataclass(frozen=True)
class EpochOrder:
    """How a run orders its ``n`` training instances each epoch (see the module docstring).

    Parameters
    ----------
    kind : {"released", "permutation"}
    n : int
        Training instances (contrastive DA's expanded copies included).
    frozen : Tensor of shape (n,), int64, or None
        ``released``: the order drawn once for the run; None for ``permutation``.
    buffer_size : int, default=SHUFFLE_BUFFER
    """

    kind: str
    n: int
    frozen: torch.Tensor | None
    buffer_size: int = SHUFFLE_BUFFER

    @classmethod
    def build(
        cls, kind: str, n: int, *, seed: int, buffer_size: int = SHUFFLE_BUFFER
    ) -> EpochOrder:
        """The epoch order of a run; ``seed`` seeds the frozen order (``released`` only).

        Raises
        ------
        ValueError
            On an unknown ``kind``.
        """
        if kind not in EPOCH_ORDERS:
            raise ValueError(f"unknown epoch_order {kind!r}; allowed: {', '.join(EPOCH_ORDERS)}")
        if kind == "permutation":
            return cls(kind, n, None, buffer_size)
        frozen = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
        return cls(kind, n, frozen, buffer_size)

    def draw(self, generator: torch.Generator) -> torch.Tensor:
        """The next epoch's instance indices (int64, on the CPU), drawn from ``generator``."""
        if self.frozen is None:
            return torch.randperm(self.n, generator=generator)
        return shuffle_buffer_order(self.frozen, buffer_size=self.buffer_size, generator=generator)
