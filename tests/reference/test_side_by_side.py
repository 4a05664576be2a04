"""The side-by-side runs against the released code: the committed CSV, the statistics of
benchmarks/reference/parity_report.py, and the parity section of docs/reproduction.md it
writes. No TensorFlow, no training: the CSV is read as committed."""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "reference"))

import parity_report  # noqa: E402
import side_by_side_runs as side_by_side  # noqa: E402

from pipeline_lib.paper.reproduction import (  # noqa: E402
    PARITY_END,
    PARITY_START,
    build_page,
    parity_section,
    read_inputs,
    replace_parity_section,
)

PAGE = REPO / "docs" / "reproduction.md"
REGENERATE = (
    "docs/reproduction.md's parity section is out of date: run "
    "PYTHONPATH=$PWD .venv/bin/python benchmarks/reference/parity_report.py"
)


def test_the_page_shows_the_side_by_side_table_of_the_committed_csv() -> None:
    section = parity_section(PAGE.read_text())
    assert section is not None, REGENERATE
    part = "\n".join(parity_report.side_by_side_part(parity_report.read_results()))
    assert part in section, REGENERATE


def test_the_page_section_is_what_the_report_computes() -> None:
    """The whole section, the traces' comparisons included (each family's compare runs)."""
    expected = parity_report.build_section(
        parity_report.read_results(), parity_report.trace_differences()
    )
    assert parity_section(PAGE.read_text()) == expected, REGENERATE


def test_the_committed_csv_holds_whole_runs_of_the_recorded_setting() -> None:
    rows = parity_report.read_results()  # refuses another budget or training set
    runs: dict[tuple[str, str, int], list[str]] = {}
    for row in rows:
        assert int(row["n_test"]) == 10000, row
        runs.setdefault((row["impl"], row["method"], int(row["seed"])), []).append(row["detector"])
    assert runs, "benchmarks/reference/side_by_side.csv holds no run"
    for (impl, method, seed), detectors in runs.items():
        assert seed >= 1  # the released code seeds nothing for seed 0
        assert sorted(detectors) == sorted(side_by_side.detectors_of(method, impl)), (
            impl,
            method,
            seed,
        )


def _welch_by_hand(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """Welch's interval from its textbook formula (Welch 1947, Satterthwaite's dof)."""
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = stats.t.ppf(0.975, dof) * math.sqrt(va + vb)
    difference = float(np.mean(a) - np.mean(b))
    return difference, difference - half, difference + half


def test_the_interval_is_welchs_and_the_verdict_is_tost_at_one_point() -> None:
    released = [90.1, 90.6, 89.8, 90.3, 90.0]
    close = [x + 0.3 for x in [90.0, 90.4, 90.2, 89.9, 90.3]]
    cell = parity_report.compare("rotnet", "kde", close, released)
    difference, low, high = _welch_by_hand(close, released)
    # Both come from the same float64 sums of five numbers near 90: equal to a few ulps.
    assert cell.difference == pytest.approx(difference, abs=1e-12)
    assert (cell.low, cell.high) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
    assert cell.verdict == "equivalent" and cell.p_equivalence < parity_report.ALPHA
    # Three points apart with the same spread: the 90 % interval is beyond the margin.
    far = parity_report.compare("rotnet", "kde", [x + 3 for x in released], released)
    assert far.verdict == "outside the margin"
    # A spread of several points over three seeds settles nothing.
    wide = parity_report.compare("rotnet", "kde", [86.0, 90.0, 94.0], [88.0, 92.0, 90.5])
    assert wide.verdict == "inconclusive"
    # TOST at 5 % each side is the 90 % interval inside the margin.
    interval = stats.ttest_ind(close, released, equal_var=False).confidence_interval(0.90)
    assert -1 < interval.low and interval.high < 1
    with pytest.raises(ValueError, match="two on each side"):
        parity_report.compare("rotnet", "kde", [90.0], released)


def test_constant_samples_give_the_exact_difference() -> None:
    cell = parity_report.compare("rotnet", "kde", [91.0, 91.0], [90.5, 90.5])
    assert (cell.difference, cell.low, cell.high) == (0.5, 0.5, 0.5)
    assert cell.verdict == "equivalent"
    assert parity_report.compare("rotnet", "kde", [92.0, 92.0], [90.5, 90.5]).verdict == (
        "outside the margin"
    )


def _result(impl: str, seed: int, kde: float) -> side_by_side.RunResult:
    return side_by_side.RunResult(
        impl=impl,
        method="contrastive_da",
        seed=seed,
        auroc={"kde": kde, "ocsvm": kde - 1},
        n_train=side_by_side.TRAIN_IMAGES,
        n_test=10000,
        steps=3750,
        train_seconds=10.0,
        eval_seconds=2.0,
        code="test",
    )


def test_finished_runs_are_kept_and_never_rewritten(tmp_path: Path) -> None:
    csv_path = tmp_path / "runs.csv"
    side_by_side.append_run(csv_path, _result("ours", 2, 90.0))
    side_by_side.append_run(csv_path, _result("released", 1, 89.5))
    rows = side_by_side.read_rows(csv_path)
    assert side_by_side.finished_runs(rows, epochs=side_by_side.EPOCHS) == {
        ("ours", "contrastive_da", 2),
        ("released", "contrastive_da", 1),
    }
    assert [float(r["auroc"]) for r in rows if r["detector"] == "kde"] == [90.0, 89.5]
    with pytest.raises(RuntimeError, match="never rewritten"):
        side_by_side.append_run(csv_path, _result("ours", 2, 50.0))
    assert side_by_side.read_rows(csv_path) == rows
    # Rows of another budget are refused rather than mixed into one table.
    with pytest.raises(SystemExit, match="pass another --csv"):
        side_by_side.finished_runs(rows, epochs=2)


def test_regenerating_the_page_keeps_the_parity_section() -> None:
    runs, pending, jpeg = read_inputs(REPO)
    section = f"{PARITY_START}\n## Parity with the released code\n\ntable\n{PARITY_END}\n"
    bare = build_page(runs, pending, jpeg)
    assert parity_section(bare) is None
    page = build_page(runs, pending, jpeg, parity=section)
    assert parity_section(page) == section and page.startswith(bare.rstrip("\n"))
    newer = section.replace("table", "another table")
    assert parity_section(replace_parity_section(page, newer)) == newer
    with pytest.raises(ValueError, match="markers are broken"):
        parity_section(page.replace(PARITY_START, ""))


def test_the_section_reads_each_cell_from_the_rows() -> None:
    rows = []
    for impl, base in (("released", 90.0), ("ours", 90.2)):
        for seed, jitter in enumerate([0.0, 0.3, -0.2], start=1):
            rows += _result(impl, seed, base + jitter).rows()
    section = parity_report.build_section(rows, [])
    released = statistics.fmean([90.0, 90.3, 89.8])
    ours = statistics.fmean([90.2, 90.5, 90.0])
    assert f"| {ours - released:+.2f} |" in section
    assert "| Contrastive (DA) | KDE on f | 90.03 +- 0.25 (3) | 90.23 +- 0.25 (3) |" in section
    assert section.startswith(PARITY_START) and section.endswith(PARITY_END + "\n")


def test_cells_short_of_runs_show_what_they_lack_and_no_interval() -> None:
    one_each = _result("released", 1, 80.0).rows() + _result("ours", 1, 81.5).rows()
    (kde, ocsvm) = parity_report.comparisons(one_each)
    assert kde.verdict.startswith("too few seeds") and math.isnan(kde.low)
    assert kde.difference == pytest.approx(1.5)
    section = parity_report.build_section(one_each, [])
    assert "| Contrastive (DA) | KDE on f | 80.00 (1) | 81.50 (1) | +1.50 | - | - |" in section
    only_released = parity_report.comparisons(_result("released", 1, 80.0).rows())
    assert [cell.verdict for cell in only_released] == ["ours not run yet"] * 2
    assert all(math.isnan(cell.difference) for cell in only_released)
    assert "contrastive_da kde; contrastive_da ocsvm" in parity_report.build_section(
        _result("ours", 2, 80.0).rows(), []
    )


def test_cells_whose_interval_leaves_out_zero_are_named() -> None:
    rows = []
    for seed, jitter in enumerate([0.0, 0.4, -0.3, 0.2], start=1):
        rows += _result("released", seed, 80.0 + jitter).rows()
        rows += _result("ours", seed, 81.5 - jitter).rows()
    shown = [cell for cell in parity_report.comparisons(rows) if cell.excludes_zero]
    assert [cell.detector for cell in shown] == ["kde", "ocsvm"]
    assert all(cell.low > 0 for cell in shown)
    section = parity_report.build_section(rows, [])
    assert "leaves out 0" in section and "2 cells" in section
    level = [row for row in rows if row["impl"] == "released"]
    level += [{**row, "impl": "ours"} for row in level]
    assert not any(cell.excludes_zero for cell in parity_report.comparisons(level))
    assert "leaves out 0" not in parity_report.build_section(level, [])


def test_cells_at_the_seed_cap_are_named_as_standing_not_as_taking_more_runs() -> None:
    spread = [0.0, 3.0, -2.5, 1.5, -3.0, 2.0, -1.0, 2.5, -2.0, 0.5]

    def rows(seeds: int) -> list[dict[str, str]]:
        out = []
        for seed, jitter in enumerate(spread[:seeds], start=1):
            out += _result("released", seed, 80.0 + jitter).rows()
            out += _result("ours", seed, 80.0 - jitter).rows()
        return out

    capped = parity_report.comparisons(rows(parity_report.MAX_SEEDS))
    assert all(cell.at_cap and cell.verdict == "inconclusive" for cell in capped)
    section = parity_report.build_section(rows(parity_report.MAX_SEEDS), [])
    assert "at the cap of 10 seeds a side without a verdict" in section
    assert "contrastive_da kde; contrastive_da ocsvm" in section
    assert "take more runs" not in section and "beyond 10 seeds a side" not in section
    short = rows(parity_report.MAX_SEEDS - 1)
    assert "at the cap" not in parity_report.build_section(short, [])
    assert not any(cell.at_cap for cell in parity_report.comparisons(short))


def _tost_power(n: int, sd: float, draws: int = 4000) -> float:
    """The share of simulated equal-mean pairs of n seeds a side that TOST calls equivalent."""
    rng = np.random.default_rng(7)
    ours = rng.normal(0.0, sd, size=(draws, n))
    released = rng.normal(0.0, sd, size=(draws, n))
    margin = parity_report.MARGIN
    p_lower = stats.ttest_ind(
        ours + margin, released, axis=1, equal_var=False, alternative="greater"
    ).pvalue
    p_upper = stats.ttest_ind(
        ours - margin, released, axis=1, equal_var=False, alternative="less"
    ).pvalue
    return float(np.mean(np.maximum(p_lower, p_upper) < parity_report.ALPHA))


@pytest.mark.parametrize("sd", [0.4, 1.0, 2.0])
def test_the_planned_seeds_give_the_planned_power(sd: float) -> None:
    n = parity_report.seeds_for_equivalence(sd)
    assert n is not None and n >= 2
    # The plan is the smallest n that reaches the power: it does, and a third fewer do not.
    assert _tost_power(n, sd) >= parity_report.POWER - 0.03, (sd, n)
    assert _tost_power(max(2, (2 * n) // 3), sd) < parity_report.POWER, (sd, n)


def test_a_spread_beyond_reach_plans_no_number_and_the_page_says_so() -> None:
    assert parity_report.seeds_for_equivalence(50.0) is None
    cell = parity_report.compare("rotnet", "kde", [10.0, 90.0], [20.0, 80.0])
    assert cell.seeds_needed is None
    table = "\n".join(parity_report._side_by_side_table([cell]))
    assert f"> {parity_report.PLAN_LIMIT}" in table
    assert math.isclose(
        parity_report.pooled_sd([1.0, 3.0], [2.0, 6.0]), statistics.fmean([2.0, 8.0]) ** 0.5
    )


def test_every_row_of_the_side_by_side_tables_has_its_header_s_columns() -> None:
    """A score's name with a '|' (p(0 | x)) must not split its cell."""
    lines = parity_report.side_by_side_part(parity_report.read_results())
    tables: list[list[str]] = [[]]
    for line in lines:
        if line.startswith("|"):
            tables[-1].append(line)
        elif tables[-1]:
            tables.append([])
    tables = [table for table in tables if table]
    assert len(tables) >= 2, lines

    def columns(row: str) -> int:
        return len(row.replace("\\|", "").strip().strip("|").split("|"))

    for table in tables:
        assert {columns(row) for row in table} == {columns(table[0])}, table
