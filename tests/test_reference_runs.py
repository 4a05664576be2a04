"""benchmarks/reference_runs.py: the record of the six reference runs and its comparison.

The weights' hashes hold on the machine that wrote them (another CPU sums in another order),
so they are compared by whoever reruns the script there, not here. What travels is checked:
the record names the six runs with well-formed hashes, a checkpoint's fingerprint (settings,
data digest, network shape: no computed float) is the recorded one on any machine, one
machine trains a run to the same weights twice, and a difference is named by its run.
"""

from __future__ import annotations

import copy
import json
import re

import pytest

from tests.benchmark_scripts import load_benchmark

reference_runs = load_benchmark("reference_runs.py")
RECORD = json.loads(reference_runs.RECORD.read_text())
HEX64 = re.compile(r"[0-9a-f]{64}")


def test_the_record_holds_every_run_with_one_entry_per_model() -> None:
    assert list(RECORD["runs"]) == list(reference_runs.RUNS)
    assert {run.method for run in reference_runs.RUNS.values()} == {
        "rotation",
        "rotnet",
        "denoising",
        "contrastive",
        "contrastive_da",
    }
    assert sum(run.fused for run in reference_runs.RUNS.values()) == 2
    for name, models in RECORD["runs"].items():
        run = reference_runs.RUNS[name]
        assert len(models) == len(run.seeds)
        for model, seed in zip(models, run.seeds, strict=True):
            assert HEX64.fullmatch(model["weights_sha256"])
            assert model["fingerprint_sha256"] == reference_runs.fingerprint_sha256(
                model["fingerprint"]
            )
            assert (model["fingerprint"]["method"], model["fingerprint"]["seed"]) == (
                run.method,
                seed,
            )


def test_a_difference_names_its_run_model_and_the_fingerprint_keys_that_moved() -> None:
    computed = copy.deepcopy(RECORD["runs"])
    assert reference_runs.differences(RECORD["runs"], computed) == []
    computed["fused_contrastive"][1]["weights_sha256"] = "0" * 64
    computed["denoising"][0]["fingerprint"]["noise_std"] = 0.2
    computed["denoising"][0]["fingerprint_sha256"] = reference_runs.fingerprint_sha256(
        computed["denoising"][0]["fingerprint"]
    )
    del computed["rotnet"]
    assert reference_runs.differences(RECORD["runs"], computed) == [
        "rotnet: missing from this run",
        "denoising model 0: fingerprint_sha256 differs (fingerprint keys changed: ['noise_std'])",
        "fused_contrastive model 1: weights_sha256 differs",
    ]


@pytest.mark.slow
def test_rotnet_trains_to_the_same_weights_twice_with_the_recorded_fingerprint() -> None:
    first, second = (reference_runs.fingerprints(reference_runs.RUNS["rotnet"]) for _ in "12")
    assert first == second
    assert first[0]["fingerprint"] == RECORD["runs"]["rotnet"][0]["fingerprint"]
