"""benchmarks/bench_train.py: rates are medians of repeated timed epochs, written with their
range and image size (a CPU smoke run of the harness; the GPU numbers come from device runs)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from pipeline_lib.planning.rates import read_rates
from pipeline_lib.registry import TRAINED_METHODS
from tests.benchmark_scripts import load_benchmark


def _bench_train():
    return load_benchmark("bench_train.py")


def test_one_run_measures_all_five_methods_with_three_repeats_by_default() -> None:
    args = _bench_train().parse_args([])
    assert args.methods == list(TRAINED_METHODS) and len(TRAINED_METHODS) == 5
    assert (args.repeats, args.image_size, args.steps) == (3, 32, 5)  # CPU default steps
    with pytest.raises(SystemExit):
        _bench_train().parse_args(["--repeats", "0"])
    with pytest.raises(SystemExit):
        _bench_train().parse_args(["--image-size", "48"])


def test_measure_is_the_median_of_the_timed_epochs_after_the_warm_ones(monkeypatch) -> None:
    """A fake trainer's scripted epochs: the warm-up call and warm epochs are not timed."""
    bench = _bench_train()
    rates = [5.0, 400.0, 100.0, 300.0, 200.0]  # epoch 0 is the capture
    calls = []

    def fake_train(settings, images, *, seed, execution):
        calls.append((len(images), settings.epochs, execution.step_mode))
        history = [
            {"images_per_s": rate, "seconds": 64 / rate, "steps": 1, "step_mode": "graph"}
            for rate in rates[: settings.epochs]
        ]
        return None, history

    monkeypatch.setattr(bench, "train_representation", fake_train)
    spec = bench.RunSpec(width=4, steps=3, device="cpu", amp=None, step_mode="graph")
    measured = bench.measure("rotnet", spec, warm_epochs=1, repeats=4)
    timed = rates[1:]
    assert calls == [(64, 1, "graph"), (3 * 64, 5, "graph")]  # one-step warm-up, then the run
    assert measured.spread.median == statistics.median(timed) == 250.0
    assert (measured.spread.low, measured.spread.high, measured.spread.repeats) == (100, 400, 4)
    assert measured.seconds == statistics.median(64 / rate for rate in timed)
    assert measured.step_mode == "graph"


def test_a_cpu_run_writes_median_range_repeats_and_image_size(tmp_path: Path, capsys) -> None:
    bench = _bench_train()
    table = tmp_path / "rates.csv"
    argv = ["--width", "4", "--steps", "1", "--repeats", "2", "--image-size", "64"]
    rows = bench.main([*argv, "--methods", "denoising", "--rates-out", str(table)])
    (row,) = read_rates([table])
    assert row.command == rows[0].command and row.command.endswith(
        f"bench_train.py {' '.join(argv)} --methods denoising --rates-out {table}"
    )
    assert (row.method, row.kind, row.step_mode, row.fuse) == ("denoising", "cpu", "eager", 1)
    assert (row.image_size, row.repeats, row.steps, row.width) == (64, 2, 1, 4)
    assert row.images_per_s_min <= row.images_per_s_per_model <= row.images_per_s_max
    # Two repeats: the median is their mean (each written to 5 significant digits).
    assert row.images_per_s_per_model == pytest.approx(
        (row.images_per_s_min + row.images_per_s_max) / 2, rel=1e-4
    )
    out = capsys.readouterr().out
    assert "64x64, median of 2 timed epochs of 1 steps" in out
