"""Torch on one thread, for tests whose tiny networks only contend for the shared cores."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Torch on one thread inside the block, then the thread count it found.

    The networks of the tests are tiny: one thread avoids OpenMP's spin-waiting, which makes
    them many times slower on a busy 2-core machine than on an idle one.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
