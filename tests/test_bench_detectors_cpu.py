"""benchmarks/bench_detectors_cpu.py on tiny shapes: exact scores, ratio of the medians, CSV."""

from __future__ import annotations

import csv
from pathlib import Path

from tests.benchmark_scripts import load_benchmark

REPO = Path(__file__).resolve().parents[1]


def _script():
    return load_benchmark("bench_detectors_cpu.py")


def test_both_detectors_score_alike_and_the_ratio_is_of_the_medians(tmp_path: Path) -> None:
    script = _script()
    out = tmp_path / "rows.csv"
    argv = ["--n-fit", "120", "--n-test", "200", "--dim", "16", "--repeats", "3", "--out", str(out)]
    rows = script.main(argv)
    assert [row["detector"] for row in rows] == ["kde", "ocsvm"]
    for row in rows:
        assert row["threads"] == 1 and row["repeats"] == 3
        assert row["ours_min_s"] <= row["ours_median_s"] <= row["ours_max_s"]
        assert row["speedup"] == row["sklearn_median_s"] / row["ours_median_s"]
        assert row["max_relative_difference"] < 1e-10
        assert row["check_rows"] == 200
    script.main(argv)  # a second run appends below the same header
    with out.open() as handle:
        written = list(csv.DictReader(handle))
    assert len(written) == 4 and set(written[0]) == set(script.FIELDS)
