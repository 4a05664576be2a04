"""Our epoch order against the released input pipeline's (benchmarks/reference/trace_order.py).

The two draw from different generators, so the orders are compared by distribution: each
two-sample test's p-value must clear Holm's procedure over the family at family-wise
alpha = 0.01 (``distribution.py``); the bounds (earliest move, first draw) exactly.
"""

from __future__ import annotations

import pytest

from tests.reference.compare import load_compare
from tests.reference.traces import load_trace


@pytest.fixture(scope="module")
def records() -> list:
    arrays, meta = load_trace("order_epochs")
    return load_compare("order").compare(arrays, meta)


def test_the_epoch_order_is_the_released_buffer_shuffle_over_a_frozen_order(records) -> None:
    failing = [r.record() for r in records if not r.within]
    assert not failing, failing
    assert {r.quantity for r in records} >= {
        "move from the frozen position in an epoch (places)",
        "move between consecutive epochs (places)",
        "frozen position of each epoch's first draw",
    }
