"""benchmarks/bench_streams.py: K runs stepped side by side train what each trains alone.

The benchmark drives the trainer's own side-by-side group (pipeline_lib.ssl.fused.
ConcurrentGroup), so this also checks that group's bookkeeping from outside the trainer.

On the CPU the runs step one after the other (no streams), so run 0 of K = 2 must end with
the weights of the same seed's run alone, bit for bit: a generator, optimiser or static
buffer shared between runs, or a step skipped or doubled by the interleaving, would show.
On CUDA the same check guards against the streams racing (gpu_session.sh prints it).
"""

from __future__ import annotations

from tests.benchmark_scripts import load_benchmark


def _bench_streams():
    return load_benchmark("bench_streams.py")


def test_run_zero_of_two_interleaved_runs_is_the_run_alone(capsys) -> None:
    bench = _bench_streams()
    argv = ["--device", "cpu", "--width", "4", "--steps", "2", "--repeats", "2"]
    argv += ["--streams", "1", "2"]
    results = bench.main([*argv, "--methods", "rotnet", "contrastive_da"])
    for method, by_k in results.items():
        alone, two = by_k[1], by_k[2]
        moved = [(alone["weights"][n] != alone["initial"][n]).any() for n in alone["initial"]]
        assert any(moved), method  # trained at all
        assert all(
            (two["weights"][name] == alone["weights"][name]).all() for name in alone["weights"]
        ), method
        assert two["gap"] == 0.0 and two["mode"] == "two_phase"
        # The rate is the median of the two timed epochs, within their range.
        spread = two["spread"]
        assert spread.repeats == 2 and spread.low <= spread.median <= spread.high
        assert two["images_per_s"] == spread.median == (spread.low + spread.high) / 2
        # What the planner adds per job, by the trainer's own epoch-end and checkpoint code.
        for result in (alone, two):
            costs = result["overheads"]
            assert costs.capture_s >= 0 and costs.epoch_end_s > 0 and costs.checkpoint_s > 0
        # The embedding rate is the network's: measured once, alone.
        assert alone["embed_images_per_s"] > 0 and two["embed_images_per_s"] is None
    assert "rotnet            2" in capsys.readouterr().out
