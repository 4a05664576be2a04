"""The released learning-rate schedule against ours, from the ``schedule`` trace: the rate
every step of four short runs applies (tolerance derived in compare_schedule.py)."""

from __future__ import annotations

from tests.reference.harness import failures, reference_module
from tests.reference.traces import load_trace
from tests.threads import one_torch_thread


def test_rate_of_every_step_matches_the_released_optimiser() -> None:
    compare_schedule = reference_module("compare_schedule")
    with one_torch_thread():
        differences = compare_schedule.compare(*load_trace("schedule"))
    assert len(differences) == 4
    assert failures(differences) == []
