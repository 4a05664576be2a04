"""Per-job overheads and embedding rates in rate tables, and what the planner makes of them.

A training job costs more than its steps at the steady rate: the first epoch compiles and
captures, every epoch ends with a host sync, and checkpoints are written. The H200's full
RotNet cell spent 30 of its 774 s there. The rate tables carry these costs per setting
(``capture_s``, ``epoch_end_s``, ``checkpoint_s``) with the network's embedding rate
(``embed_images_per_s``), and the planner adds them to each job.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipeline_lib.config.fusing import group_name
from pipeline_lib.planning.costs import plan_costs
from pipeline_lib.planning.defaults import DEFAULT_CHECKPOINT_EVERY, DEFAULT_JOB_SECONDS
from pipeline_lib.planning.jobs import Job
from pipeline_lib.planning.rates import (
    COLUMNS,
    OVERHEAD_COLUMNS,
    Overheads,
    Rate,
    RateTableError,
    read_rates,
)
from pipeline_lib.planning.timing import RateLog, Spread, capture_seconds, median_seconds

REPO = Path(__file__).resolve().parents[1]
CAPTURE = Overheads(capture_s=20.0, epoch_end_s=0.004, checkpoint_s=0.25)
FUSED = Overheads(capture_s=45.0, epoch_end_s=0.03, checkpoint_s=2.5)


def _log(path: Path | None, image_size: int = 32) -> RateLog:
    log = RateLog(
        path, device="NVIDIA H200", kind="cuda", width=64, amp="bfloat16", steps=200,
        image_size=image_size,
    )  # fmt: skip
    log.common["date"] = "2026-11-29T00:00:00Z"
    return log


def test_overheads_round_trip_and_older_tables_read_without_them(tmp_path: Path) -> None:
    path = tmp_path / "h200.csv"
    log = _log(path)
    log.add(
        "rotnet", "compiled", 1, Spread(8000.0, 7900.0, 8100.0, 3),
        overheads=CAPTURE, embed_images_per_s=40000.0,
    )  # fmt: skip
    log.add("rotnet", "compiled", 4, Spread(20000.0, 19000.0, 21000.0, 3))  # not measured
    assert path.read_text().splitlines()[0].split(",")[-4:] == list(OVERHEAD_COLUMNS)
    alone, fused = read_rates([path])
    assert (alone.overheads, alone.embed_images_per_s) == (CAPTURE, 40000.0)
    assert (fused.overheads, fused.embed_images_per_s) == (None, None)
    # The committed 64 px table predates the columns: its rows have no overheads.
    committed = read_rates([REPO / "benchmarks/rates/h200-64px.csv"])
    assert committed and {(r.overheads, r.embed_images_per_s) for r in committed} == {(None, None)}


def test_a_row_with_part_of_its_overheads_or_a_negative_one_is_refused(tmp_path: Path) -> None:
    values = {c: "1" for c in COLUMNS} | {"device": "d", "kind": "cuda", "method": "rotnet"}
    values |= {"step_mode": "graph", "amp": "none", "date": "2026-11-29", "command": "x"}
    bad = tmp_path / "bad.csv"

    def write(**changes: str) -> None:
        row = values | changes
        bad.write_text(",".join(COLUMNS) + "\n" + ",".join(row[c] for c in COLUMNS) + "\n")

    write(checkpoint_s="")
    with pytest.raises(RateTableError, match=r"line 2, columns \['checkpoint_s'\]: empty where"):
        read_rates([bad])
    write(capture_s="-0.5")
    with pytest.raises(RateTableError, match=r"column capture_s: '-0.5' must be non-negative"):
        read_rates([bad])
    write(embed_images_per_s="0")
    with pytest.raises(RateTableError, match=r"column embed_images_per_s: '0' must be positive"):
        read_rates([bad])
    write(capture_s="0")  # a capture that cost nothing beyond a steady epoch is a measurement
    (row,) = read_rates([bad])
    assert row.overheads == Overheads(0.0, 1.0, 1.0)
    header = [c for c in COLUMNS if c != "embed_images_per_s"]
    bad.write_text(",".join(header) + "\n")
    with pytest.raises(RateTableError, match=r"missing columns \['embed_images_per_s'\]"):
        read_rates([bad])


def test_capture_and_overhead_timing_on_a_fake_clock() -> None:
    now = [0.0]
    durations = iter([0.5, 0.25, 2.0])

    def call() -> None:
        now[0] += next(durations)

    assert median_seconds(call, repeats=3, clock=lambda: now[0]) == 0.5
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        median_seconds(call, repeats=0)
    # A steady epoch of 1,000 instances at 500/s takes 2 s: a 23 s first epoch spent 21 more.
    steady = Spread(500.0, 450.0, 550.0, 3)
    assert capture_seconds(23.0, steady, 1000) == 21.0
    assert capture_seconds(1.5, steady, 1000) == 0.0  # noise, not a negative cost


def test_job_overheads_count_every_checkpoint_the_trainer_writes() -> None:
    # checkpoint_due: every 16 epochs and after the last: 16, 32, 33.
    assert CAPTURE.job_seconds(33, 16) == pytest.approx(20.0 + 33 * 0.004 + 3 * 0.25)
    assert CAPTURE.job_seconds(32, 16) == pytest.approx(20.0 + 32 * 0.004 + 2 * 0.25)
    assert CAPTURE.times(3) == Overheads(60.0, 0.012, 0.75)
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    train = schema["properties"]["train"]["properties"]
    assert train["checkpoint_every"]["default"] == DEFAULT_CHECKPOINT_EVERY


def _rate(step_mode: str, fuse: int, per_model: float, **extra: object) -> Rate:
    return Rate(
        "NVIDIA H200", "cuda", 64, "rotnet", step_mode, fuse, per_model, "bfloat16", 200,
        "2026-11-29T00:00:00Z", "x", **extra,  # type: ignore[arg-type]
    )  # fmt: skip


CIFAR = {"dataset": "cifar10", "contamination": "0", "seed": "0", "method": "rotnet"}
#: RotNet on CIFAR-10, 33 epochs: 5,000 // 64 * 64 images an epoch.
IMAGES = 33 * (5000 // 64 * 64)


def test_measured_overheads_are_costed_per_job() -> None:
    rates = [
        _rate("graph", 1, 8000.0, overheads=CAPTURE),
        _rate("graph", 4, 5000.0, overheads=FUSED),
        _rate("eager", 1, 2000.0, overheads=CAPTURE),
    ]
    config = {"train": {"epochs": 33, "checkpoint_every": 16}, "datasets": {"cifar10": {}}}
    alone = Job("train_representation", {**CIFAR, "inlier": "cat"}, ())
    cost = plan_costs([alone], config, device="cuda", rates=rates)["train_representation"]
    assert cost.hours * 3600 == pytest.approx(IMAGES / 8000.0 + CAPTURE.job_seconds(33, 16))
    assert "overheads measured" in cost.sources
    assert (
        "overheads measured at graph, fuse 1: capture 20.0 s, epoch end 4.0 ms, "
        "checkpoint 0.25 s" in cost.by_method["rotnet"].sources
    )
    # A fused group of 4 pays its setting's overheads once.
    members = [(inlier, 0) for inlier in ("cat", "dog", "deer", "frog")]
    group = {**CIFAR, "group": group_name(members)}
    fused = {**config, "train": {**config["train"], "fuse": 4}}
    jobs = [Job("train_fused", group, ())]
    cost = plan_costs(jobs, fused, device="cuda", rates=rates)["train_fused"]
    # Four models at 5,000 images/s each, side by side.
    assert cost.hours * 3600 == pytest.approx(IMAGES / 5000.0 + FUSED.job_seconds(33, 16))
    # Eager without a fuse-4 row: four separate runs, four runs' overheads.
    eager = {**config, "train": {**config["train"], "fuse": 4, "step_mode": "eager"}}
    cost = plan_costs(jobs, eager, device="cuda", rates=rates)["train_fused"]
    expected = 4 * IMAGES / 2000.0 + CAPTURE.times(4).job_seconds(33, 16)
    assert cost.hours * 3600 == pytest.approx(expected)
    # Rows without overheads: left out, and said so.
    bare = [_rate("graph", 1, 8000.0)]
    cost = plan_costs([alone], config, device="cuda", rates=bare)["train_representation"]
    assert cost.hours * 3600 == pytest.approx(IMAGES / 8000.0)
    assert "overheads not measured (left out)" in cost.sources


def test_embedding_jobs_are_costed_from_a_measured_embedding_rate() -> None:
    rates = [_rate("graph", 1, 8000.0, embed_images_per_s=5000.0)]
    config = {"train": {"epochs": 2}, "datasets": {"cifar10": {}, "catvsdog": {}}}
    rotnet = Job("embed_trained", {**CIFAR, "inlier": "cat"}, ())
    contrastive = Job("embed_trained", {**CIFAR, "inlier": "cat", "method": "contrastive"}, ())
    cost = plan_costs([rotnet, contrastive], config, device="cuda", rates=rates)["embed_trained"]
    # RotNet: 5,000 training images, the 10,000 test images and their 4 rotations' scores.
    expected = (5000 + 10000 + 4 * 10000) / 5000.0 + (5000 + 10000) / 5000.0
    assert cost.hours * 3600 == pytest.approx(expected)
    assert cost.sources == {
        "embedding 5,000 images/s measured NVIDIA H200 2026-11-29, 32 px as measured",
        "disk estimated",
    }
    # Cat-vs-Dog's 64x64 images at the 32 px rate scaled by pixels; said so.
    dogs = Job("embed_trained", {**CIFAR, "dataset": "catvsdog", "inlier": "cat"}, ())
    cost = plan_costs([dogs], config, device="cuda", rates=rates)["embed_trained"]
    assert cost.hours * 3600 == pytest.approx((10000 + 5000 + 4 * 5000) / 1250.0)
    assert any("64 px extrapolated from 32 px" in source for source in cost.sources)
    # No embedding rate in the table: the default, and said so.
    bare = [_rate("graph", 1, 8000.0)]
    cost = plan_costs([rotnet], config, device="cuda", rates=bare)["embed_trained"]
    assert cost.hours * 3600 == DEFAULT_JOB_SECONDS["embed_trained"]
    assert "time default" in cost.sources
    assert any(source.startswith("no cuda embedding rate") for source in cost.sources)
