"""benchmarks/bench_detectors_cpu.py on tiny shapes: same scores, ratio of the medians, CSV."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _script():
    path = REPO / "benchmarks" / "bench_detectors_cpu.py"
    spec = importlib.util.spec_from_file_location("bench_detectors_cpu", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


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
    script.main(argv)  # a second run appends below the same header
    with out.open() as handle:
        written = list(csv.DictReader(handle))
    assert len(written) == 4 and set(written[0]) == set(script.FIELDS)
