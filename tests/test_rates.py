"""Rate tables (``pipeline_lib.planning.rates``): medians of repeats, their CSV, legacy tables."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from pipeline_lib.planning.rate_choice import choose_rate
from pipeline_lib.planning.rates import COLUMNS, LEGACY_COLUMNS, RateTableError, read_rates
from pipeline_lib.planning.timing import RateLog, Spread, time_repeats
from tests.planner_cases import h200_rate_log

REPO = Path(__file__).resolve().parents[1]


class FakeClock:
    """A timer that advances by scripted durations, one per timed call."""

    def __init__(self, durations: list[float]) -> None:
        self.durations = list(durations)
        self.now = 0.0
        self.calls = 0

    def __call__(self) -> float:
        return self.now

    def run(self) -> None:
        """The timed call: takes the next scripted duration."""
        self.now += self.durations[self.calls]
        self.calls += 1


def test_time_repeats_is_the_median_and_range_of_the_timed_calls() -> None:
    # Dyadic durations on a clock from 0: every difference and rate is exact in binary.
    durations = [2.0, 0.5, 4.0, 1.0, 1.25]
    clock = FakeClock(durations)
    synced: list[float] = []
    spread = time_repeats(
        clock.run,
        repeats=len(durations),
        instances=200,
        clock=clock,
        sync=lambda: synced.append(clock.now),
    )
    rates = [200 / seconds for seconds in durations]  # 100, 400, 50, 200, 160
    assert clock.calls == len(durations)
    assert spread == Spread(statistics.median(rates), min(rates), max(rates), len(durations))
    assert (spread.median, spread.low, spread.high) == (160.0, 50.0, 400.0)
    # Synced before the clock starts and before it stops: twice per call.
    assert len(synced) == 2 * len(durations)


def test_time_repeats_refuses_no_repeats_and_a_clock_that_did_not_move() -> None:
    with pytest.raises(ValueError, match="repeats must be >= 1, got 0"):
        time_repeats(lambda: None, repeats=0, instances=1)
    with pytest.raises(ValueError, match="took 0.0 s on the clock"):
        time_repeats(lambda: None, repeats=1, instances=1, clock=lambda: 5.0)
    clock = FakeClock([1.0, 4.0])  # an even count: the mean of the middle two
    spread = time_repeats(clock.run, repeats=2, instances=8, clock=clock)
    assert (spread.median, spread.low, spread.high, spread.repeats) == (5.0, 2.0, 8.0, 2)


def test_spread_of_samples_and_per_model_scaling() -> None:
    spread = Spread.of([3.0, 1.0, 2.0])
    assert spread == Spread(2.0, 1.0, 3.0, 3)
    assert spread.scaled(1 / 4) == Spread(0.5, 0.25, 0.75, 3)
    with pytest.raises(ValueError, match="no timed samples"):
        Spread.of([])
    with pytest.raises(ValueError, match=r"positive and finite, got \[0.0\]"):
        Spread.of([1.0, 0.0])


def test_rate_log_rows_round_trip_through_the_csv(tmp_path: Path) -> None:
    """A group's total becomes per-model median and range; every column reads back."""
    path = tmp_path / "rates.csv"
    log = RateLog(
        path, device="NVIDIA H200", kind="cuda", width=64, amp="bfloat16", steps=200, image_size=64
    )
    log.add("rotnet", "compiled", 4, Spread(4000.0, 3600.0, 4400.0, 3))
    log.add("denoising", "graph", 1, Spread(9000.0, 9000.0, 9000.0, 1))
    log.add("rotation", "two_phase", 1, Spread(1.0, 1.0, 1.0, 3))  # uncaptured: not a row
    assert path.read_text().splitlines()[0] == ",".join(COLUMNS)
    read = read_rates([path])
    assert [(r.method, r.step_mode, r.fuse) for r in read] == [
        ("rotnet", "compiled", 4),
        ("denoising", "graph", 1),
    ]
    rotnet = read[0]
    assert (rotnet.images_per_s_per_model, rotnet.images_per_s_min, rotnet.images_per_s_max) == (
        1000.0,
        900.0,
        1100.0,
    )
    assert (rotnet.image_size, rotnet.repeats, rotnet.steps, rotnet.width) == (64, 3, 200, 64)
    assert not rotnet.single_sample and read[1].single_sample
    assert [r.command for r in read] == [r.command for r in log.rows]
    # Read rows equal the logged ones but for where they were read from.
    assert [r.__class__(**{**r.__dict__, "where": ""}) for r in read] == log.rows


def test_a_legacy_table_reads_as_32_px_single_samples_and_takes_no_new_rows(
    tmp_path: Path,
) -> None:
    legacy = tmp_path / "old.csv"
    legacy.write_text(
        ",".join(LEGACY_COLUMNS)
        + "\nNVIDIA H200,cuda,64,rotnet,graph,1,11297,bfloat16,20,2026-11-27T03:10:54Z,x\n"
    )
    (row,) = read_rates([legacy])
    assert (row.image_size, row.repeats, row.single_sample) == (32, 1, True)
    assert row.images_per_s_min == row.images_per_s_max == row.images_per_s_per_model == 11297
    # New rows under an old header would not line up: refused, naming the file.
    log = RateLog(legacy, device="NVIDIA H200", kind="cuda", width=64, amp="bfloat16", steps=200)
    with pytest.raises(RateTableError, match=r"old\.csv, line 1: the header .* new table"):
        log.add("rotnet", "graph", 1, Spread(1.0, 1.0, 1.0, 3))
    # The committed H200 table is such a table: every row a 32 px single sample.
    committed = read_rates([REPO / "benchmarks/rates/h200.csv"])
    assert {(r.image_size, r.repeats) for r in committed} == {(32, 1)}


def test_a_table_with_part_of_the_new_columns_or_a_median_outside_its_range_is_refused(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(",".join([*LEGACY_COLUMNS, "image_size"]) + "\n")
    with pytest.raises(
        RateTableError,
        match=r"line 1: missing columns \['repeats', 'images_per_s_min', 'images_per_s_max'\]",
    ):
        read_rates([bad])
    values = {c: "1" for c in COLUMNS} | {"device": "d", "kind": "cuda", "method": "rotnet"}
    values |= {"step_mode": "eager", "amp": "none", "date": "2026-11-27", "command": "x"}
    values |= {"images_per_s_per_model": "10", "images_per_s_min": "11", "images_per_s_max": "12"}
    bad.write_text(",".join(COLUMNS) + "\n" + ",".join(values[c] for c in COLUMNS) + "\n")
    with pytest.raises(RateTableError, match=r"bad\.csv, line 2, columns images_per_s_min"):
        read_rates([bad])
    values |= {"images_per_s_min": "9", "image_size": "0"}
    bad.write_text(",".join(COLUMNS) + "\n" + ",".join(values[c] for c in COLUMNS) + "\n")
    with pytest.raises(RateTableError, match=r"line 2, column image_size: '0' must be positive"):
        read_rates([bad])


def test_a_64_px_job_takes_a_64_px_row_else_the_32_px_row_scaled_by_pixels(
    tmp_path: Path,
) -> None:
    path = tmp_path / "h200.csv"
    small = h200_rate_log(path, 32)
    small.add("rotnet", "graph", 1, Spread(8000.0, 7600.0, 8400.0, 3))
    small.add("rotnet", "graph", 4, Spread(12000.0, 12000.0, 12000.0, 1))
    h200_rate_log(path, 64).add("rotnet", "graph", 1, Spread(2400.0, 2300.0, 2500.0, 3))
    rates = read_rates([path])

    def choose(fuse: int, image_size: int):
        options = {"kind": "cuda", "width": 64, "method": "rotnet", "step_mode": "graph"}
        return choose_rate(rates, **options, fuse=fuse, image_size=image_size)

    measured, why = choose(1, 64)
    assert measured is not None and not measured.extrapolated
    assert measured.images_per_s_per_model == 2400.0  # not 8,000 / 4 = 2,000
    assert why == (
        "graph, fuse 1, measured NVIDIA H200 2026-11-28, 64 px as measured, "
        "median of 3 repeats (2,300-2,500/s per model)"
    )
    scaled, why = choose(4, 64)
    assert scaled is not None and scaled.extrapolated and scaled.single_sample
    assert scaled.images_per_s_per_model == 12000.0 / 4 / 4  # per model, x (32 / 64)^2
    assert scaled.device_images_per_s == 12000.0 / 4
    assert why.endswith("64 px extrapolated from 32 px (rate x 0.25), single sample")
    # A 32 px job keeps its own row, though a 64 px row of the setting exists.
    alone, why = choose(1, 32)
    assert alone is not None and alone.images_per_s_per_model == 8000.0
    assert "32 px as measured, median of 3 repeats (7,600-8,400/s per model)" in why
    # The latest day's rows of a setting: their median, their whole range, their calls.
    again = h200_rate_log(path, 32)
    again.add("rotnet", "graph", 1, Spread(9000.0, 8800.0, 9100.0, 3))
    again.add("rotnet", "graph", 1, Spread(8500.0, 8200.0, 8700.0, 3))
    rates = read_rates([path])
    several, why = choose(1, 32)
    assert several is not None and several.images_per_s_per_model == 8500.0
    assert (several.rows, several.repeats, several.low, several.high) == (3, 9, 7600.0, 9100.0)
    assert why.endswith("median of 3 rows, 9 timed calls (7,600-9,100/s per model)")


def test_a_32_px_job_never_takes_a_64_px_row_scaled_up(tmp_path: Path) -> None:
    # Small images fill a GPU less: scaling a 64 px rate by 4 would understate the hours.
    path = tmp_path / "h200.csv"
    h200_rate_log(path, 32).add("rotnet", "compiled", 4, Spread(5000.0, 4900.0, 5100.0, 3))
    h200_rate_log(path, 64).add("rotnet", "compiled", 5, Spread(2000.0, 1980.0, 2020.0, 3))
    rates = read_rates([path])
    options = {"kind": "cuda", "width": 64, "method": "rotnet", "step_mode": "compiled"}

    only_larger, why = choose_rate(rates, **options, fuse=5, image_size=32)
    assert only_larger is None
    assert why == (
        "no rate-table row for rotnet at width 64 with compiled, fuse 5 at 32 px or below "
        "(measured: 64 px; smaller images fill a GPU less, so a larger size's rate is not "
        "scaled down)"
    )
    # Any fuse: the 32 px row of fuse 4, though fuse 5 scaled up would look faster.
    best, _ = choose_rate(rates, **options, image_size=32)
    assert best is not None and best.setting.fuse == 4 and not best.extrapolated
    assert best.device_images_per_s == 5000.0  # the four models together
    # A 64 px job still takes its own row.
    at_64, _ = choose_rate(rates, **options, image_size=64)
    assert at_64 is not None and at_64.setting.fuse == 5 and not at_64.extrapolated
