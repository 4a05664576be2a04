"""The released training steps against ours, from the ``steps_<method>`` traces.

Four steps of rotation prediction, RotNet, contrastive and contrastive DA from the same
weights on the same views, the rate moving after step 2: the loss with its weight decay over
every weight, each step's rate, every gradient with weight decay, every update and the
BatchNorm moving statistics. float64 on both sides (trace_steps.py says why); each tolerance
is derived where it is defined, in compare_steps.py.
"""

from __future__ import annotations

import functools

import pytest

from tests.reference.harness import failures, reference_module
from tests.reference.traces import load_trace
from tests.threads import one_torch_thread

METHODS = ("rotation", "rotnet", "contrastive", "contrastive_da")


@functools.cache
def _differences(method: str) -> tuple:
    compare_steps = reference_module("compare_steps")
    with one_torch_thread():
        return tuple(compare_steps.compare(*load_trace(f"steps_{method}")))


def _select(method: str, *words: str) -> list:
    chosen = [d for d in _differences(method) if all(word in d.quantity for word in words)]
    assert chosen, f"no compared quantity of {method} has {words}"
    return chosen


@pytest.mark.parametrize(
    "quantity",
    [
        pytest.param(": weights", id="both-sides-use-the-same-generated-weights"),
        pytest.param("loss of each step", id="loss-with-weight-decay-over-every-weight"),
        pytest.param("rate of each step", id="rate-of-each-step"),
        pytest.param("gradients with weight decay", id="gradients-with-weight-decay"),
        pytest.param("moving statistics", id="batchnorm-moving-statistics"),
    ],
)
@pytest.mark.parametrize("method", METHODS)
def test_compared_quantity_matches(method, quantity) -> None:
    assert failures(_select(method, quantity)) == []


@pytest.mark.parametrize("method", METHODS)
def test_updates_match_across_the_rate_change(method) -> None:
    chosen = _select(method, "update of step")
    assert any("the rate moved" in d.quantity for d in chosen)  # the trace crosses a change
    assert failures(chosen) == []
