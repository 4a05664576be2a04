"""Image sizes and where each of a plan's rates came from (the plan's numbered legend)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline_lib.planning.best_setting import setting_costs
from pipeline_lib.planning.costs import plan_costs
from pipeline_lib.planning.jobs import Job
from pipeline_lib.planning.planner import main
from pipeline_lib.planning.rates import read_rates
from pipeline_lib.planning.report import SourceNotes, format_plan, format_settings
from pipeline_lib.planning.sizes import DATASET_SIZES
from pipeline_lib.planning.timing import Spread
from tests.planner_cases import REPO, h200_rate_log, rate_row, small_plan, write_table


def test_dataset_sides_are_the_readers_image_sizes() -> None:
    """The planner's 64x64 data sets are the readers' (a 64 px rate row applies to them)."""
    from pipeline_lib.data.catvsdog import CATVSDOG_SIZE
    from pipeline_lib.data.celeba import CELEBA_SIZE

    assert DATASET_SIZES["catvsdog"].side == CATVSDOG_SIZE == 64
    assert DATASET_SIZES["celeba"].side == CELEBA_SIZE == 64
    assert {name for name, size in DATASET_SIZES.items() if size.side != 32} == {
        "catvsdog",
        "celeba",
    }


def test_the_plan_says_per_method_and_setting_whether_a_rate_is_measured_or_extrapolated(
    tmp_path: Path,
) -> None:
    """RotNet has a 64 px graph row (a median of repeats), contrastive DA only a legacy
    32 px one: Cat-vs-Dog costs the first as measured and the second scaled by pixels."""
    path = tmp_path / "h200.csv"
    for side, rows in ((32, [("rotnet", 8000.0), ("contrastive_da", 6000.0)]), (64, [])):
        log = h200_rate_log(path, side)
        for method, rate in rows:
            log.add(method, "graph", 1, Spread(rate, 0.9 * rate, 1.1 * rate, 3))
        if side == 64:
            log.add("rotnet", "graph", 1, Spread(2500.0, 2400.0, 2600.0, 3))
    legacy = write_table(tmp_path / "old.csv", rate_row("contrastive_da", "eager", 1, 900.0))
    table = read_rates([path])
    config = {"datasets": {"cifar10": {}, "catvsdog": {}}, "train": {"epochs": 10}}
    jobs = small_plan()  # RotNet on CIFAR-10, contrastive DA on Cat-vs-Dog
    cat = {"dataset": "catvsdog", "inlier": "cat", "contamination": "0", "seed": "0"}
    jobs.append(Job("train_representation", {**cat, "method": "rotnet"}, ()))
    costs = plan_costs(jobs, config, device="cuda", rates=table)
    rotnet, da = (costs["train_representation"].by_method[m] for m in ("rotnet", "contrastive_da"))
    rotnet_expected = (10 * 4992 / 8000.0 + 10 * (10000 // 64 * 64) / 2500.0) / 3600
    da_expected = 10 * 40000 / (6000.0 / 4) / 3600
    assert rotnet.hours == pytest.approx(rotnet_expected)
    assert da.hours == pytest.approx(da_expected)
    day = table[0].date[:10]
    assert rotnet.sources == {
        f"graph, fuse 1, measured NVIDIA H200 {day}, 32 px as measured, "
        "median of 3 repeats (7,200-8,800/s per model)",
        f"graph, fuse 1, measured NVIDIA H200 {day}, 64 px as measured, "
        "median of 3 repeats (2,400-2,600/s per model)",
        "overheads not measured (left out)",
    }
    assert da.sources == {
        f"graph, fuse 1, measured NVIDIA H200 {day}, 64 px extrapolated from 32 px "
        "(rate x 0.25), median of 3 repeats (1,350-1,650/s per model)",
        "overheads not measured (left out)",
    }
    plan = format_plan("x.yaml", costs, device="cuda")
    assert "64 px extrapolated from 32 px (rate x 0.25)" in plan
    # Every measured setting, one line per method; a legacy table's rows are single samples.
    both = [*table, *read_rates([legacy])]
    settings = setting_costs(jobs, config, device="cuda", rates=both)
    text = format_settings(
        "x.yaml", plan_costs(jobs, config, device="cuda", rates=both), settings, device="cuda"
    )
    assert rates_at(text, "eager, fuse 1", "contrastive_da") == {
        "eager, fuse 1, measured NVIDIA H200 2026-11-27, 64 px extrapolated from 32 px "
        "(rate x 0.25), single sample",
        "overheads not measured (left out)",
    }
    eager_rotnet = " | ".join(rates_at(text, "eager, fuse 1", "rotnet"))
    assert "no rate-table row for rotnet at width 64 with eager, fuse 1" in eager_rotnet
    assert "rate default (cuda), 64 px extrapolated from 32 px (rate x 0.25)" in eager_rotnet


def legend(text: str) -> dict[str, str]:
    """The ``[n] source`` lines below a plan: number -> source."""
    return dict(re.findall(r"^  \[(\d+)\] (.*)$", text, flags=re.MULTILINE))


def rates_at(text: str, setting: str, method: str) -> set[str]:
    """The sources a plan's ``rates at <setting>`` line cites for ``method``."""
    line = next(row for row in text.splitlines() if row.startswith(f"  rates at {setting}: "))
    match = re.search(rf"(?:: |, ){method} ((?:\[\d+\] ?)+)", line)
    assert match, (method, line)
    sources = legend(text)
    return {sources[number] for number in re.findall(r"\[(\d+)\]", match.group(1))}


def test_sources_are_numbered_once_and_every_citation_is_in_the_legend(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Many rows share a source: the tables cite ``[n]``, one legend below says each once."""
    notes = SourceNotes()
    assert notes.cite({"b", "a"}) == "[1] [2]"  # new sources: the next numbers, by name
    assert notes.cite({"c", "b"}) == "[2] [3]"  # a known source keeps its number
    assert notes.legend().splitlines() == ["sources:", "  [1] a", "  [2] b", "  [3] c"]
    assert SourceNotes().legend() == ""
    # The command: the plan, the config's settings and its main table's (it has studies)
    # cite one legend. The toy trains width 8, which the H200 table never measured.
    argv = ["--configfile", str(REPO / "tests/configs/studies_toy.yaml"), "--device", "cuda"]
    assert main([*argv, "--rates", str(REPO / "benchmarks/rates/h200.csv")]) == 0
    printed = capsys.readouterr().out
    sources = legend(printed)
    cited = set(re.findall(r"\[(\d+)\]", printed.split("\nsources:\n")[0]))
    assert cited == set(sources) == {str(n) for n in range(1, len(sources) + 1)}
    assert printed.count("\nsources:\n") == 1 and len(set(sources.values())) == len(sources)
    assert printed.count("  rates at eager, fuse 1: ") == 2  # the config's and its main table's
    assert rates_at(printed, "eager, fuse 1", "contrastive_da") == {
        "no rate-table row for contrastive_da at width 8 (measured: 64)",
        "overheads not measured (left out)",
        "rate default (cuda)",
    }
