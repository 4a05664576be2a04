"""The cost planner (``pipeline_lib.dag.planner``): dry-run parsing, costs, and a real plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pipeline_lib.dag.planner import (
    DEFAULT_IMAGES_PER_S,
    DEFAULT_JOB_SECONDS,
    Job,
    PlanError,
    dataset_size,
    format_plan,
    main,
    parse_dry_run,
    plan,
    plan_costs,
    training_spec,
)

REPO = Path(__file__).resolve().parents[1]

#: The shape of Snakemake 9's dry-run output: a stats table, the job listing (group members
#: indented), the table again.
DRY_RUN = """\
Job stats:
job                     count
--------------------  -------
prepare_split               1
train_representation        2
all                         1
total                       4

[Thu Nov 26 00:00:00 2026]
rule train_representation:
    input: results/cifar10/dataset.npz, results/cifar10/cat/contam0/seed0/split.npz
    output: results/cifar10/cat/seed0/rotnet/model.pt, results/cifar10/cat/seed0/rotnet/history.json
    jobid: 2
    wildcards: dataset=cifar10, inlier=cat, contamination=0, seed=0, method=rotnet
    resources: tmpdir=/tmp, mem_mb=12000
[Thu Nov 26 00:00:00 2026] Group job light_split (jobs in lexicogr. order):

    [Thu Nov 26 00:00:00 2026]
    rule prepare_split:
        input: results/cifar10/dataset.npz
        output: results/cifar10/cat/contam0/seed0/split.npz
        jobid: 1
        wildcards: dataset=cifar10, inlier=cat, contamination=0, seed=0
[Thu Nov 26 00:00:00 2026]
rule train_representation:
    output: results/catvsdog/cat/contam0/seed0/contrastive_da/model.pt
    wildcards: dataset=catvsdog, inlier=cat, contamination=0, seed=0, method=contrastive_da
[Thu Nov 26 00:00:00 2026]
localrule all:
    input: results/summary/results.csv
    jobid: 0
Job stats:
job                     count
--------------------  -------
prepare_split               1
train_representation        2
all                         1
total                       4
"""


def test_parse_dry_run_reads_jobs_wildcards_and_outputs() -> None:
    jobs, stats = parse_dry_run(DRY_RUN)
    assert stats == {"prepare_split": 1, "train_representation": 2, "all": 1}
    assert [job.rule for job in jobs] == [
        "train_representation",
        "prepare_split",
        "train_representation",
        "all",
    ]
    assert jobs[0].wildcards["method"] == "rotnet" and jobs[0].wildcards["dataset"] == "cifar10"
    assert jobs[0].outputs[0] == "results/cifar10/cat/seed0/rotnet/model.pt"
    assert len(jobs[0].outputs) == 2
    assert jobs[1].wildcards == {
        "dataset": "cifar10",
        "inlier": "cat",
        "contamination": "0",
        "seed": "0",
    }


def test_parse_dry_run_refuses_a_listing_that_disagrees_with_its_stats() -> None:
    with pytest.raises(PlanError, match="disagrees"):
        parse_dry_run(
            DRY_RUN.replace("prepare_split               1", "prepare_split               3")
        )


def test_training_hours_follow_epochs_images_and_rates() -> None:
    jobs, _ = parse_dry_run(DRY_RUN)
    config = {"datasets": {"cifar10": {}, "catvsdog": {}}, "train": {"epochs": 10}}
    costs = plan_costs(jobs, config, device="cpu")
    rotnet = 10 * (5000 // 64 * 64) / DEFAULT_IMAGES_PER_S["cpu"]["rotnet"]
    # 64x64 Cat-vs-Dog images: 4x the work; batch 32 for the contrastive methods.
    contrastive_da = 10 * (10000 // 32 * 32) * 4 / DEFAULT_IMAGES_PER_S["cpu"]["contrastive_da"]
    assert costs["train_representation"].jobs == 2
    assert costs["train_representation"].hours == pytest.approx((rotnet + contrastive_da) / 3600)
    assert costs["prepare_split"].hours == pytest.approx(
        DEFAULT_JOB_SECONDS["prepare_split"] / 3600
    )
    assert "rate default (cpu)" in costs["train_representation"].sources
    total = format_plan("x", costs, device="cpu").splitlines()[-1]
    torch_hours = costs["train_representation"].hours
    other_hours = costs["prepare_split"].hours + costs["all"].hours
    assert f"{torch_hours:,.1f} cpu-hours on the torch rules" in total
    assert f"{other_hours:,.1f} CPU-hours on the others" in total
    assert costs["all"].disk_bytes == 0  # no outputs
    # Model files: ResNet-18 width 64 with its head, float32.
    assert 40e6 < costs["train_representation"].disk_bytes / 2 < 70e6


def test_gpu_plan_without_a_rate_says_unknown_and_a_given_rate_fills_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    jobs, _ = parse_dry_run(DRY_RUN)
    config = {"datasets": {"cifar10": {}, "catvsdog": {}}, "train": {"epochs": 10}}
    monkeypatch.setitem(DEFAULT_IMAGES_PER_S["cuda"], "rotnet", None)
    unknown = plan_costs(jobs, config, device="cuda")
    assert unknown["train_representation"].hours is None
    assert "unknown" in format_plan("x", unknown, device="cuda")
    given = plan_costs(
        jobs, config, device="cuda", images_per_s={"rotnet": 1000.0, "contrastive_da": 500.0}
    )
    expected = (10 * 4992 / 1000.0 + 10 * 9984 * 4 / 500.0) / 3600
    assert given["train_representation"].hours == pytest.approx(expected)
    assert given["train_representation"].sources == {"rate given", "disk estimated"}


def test_measurements_of_an_earlier_run_replace_the_defaults(tmp_path: Path) -> None:
    folder = tmp_path / "results/cifar10/cat/contam0/seed0/rotnet"
    folder.mkdir(parents=True)
    history = [{"epoch": 1, "images_per_s": 1.0}] + [
        {"epoch": k, "images_per_s": 100.0} for k in (2, 3, 4)
    ]
    record = {"method": "rotnet", "history": history, "device": "cpu", "width": 64}
    (folder / "train_history.json").write_text(json.dumps(record))
    (folder / "model.pt").write_bytes(b"x" * 1000)
    (folder / "train_history.json").touch()
    bench = tmp_path / "results/benchmarks/prepare_split/cifar10/cat"
    bench.mkdir(parents=True)
    (bench / "seed0.tsv").write_text("s\th:m:s\tmax_rss\n36.0\t0:00:36\t10\n")
    jobs = [
        Job(
            "train_representation",
            {"dataset": "cifar10", "method": "rotnet"},
            (
                "results/cifar10/cat/contam0/seed0/rotnet/model.pt",
                "results/cifar10/cat/contam0/seed0/rotnet/train_history.json",
            ),
        ),
        Job("prepare_split", {"dataset": "cifar10"}, ("results/x/split.npz",)),
    ]
    costs = plan_costs(jobs, {"train": {"epochs": 2}}, device="cpu", workdir=tmp_path)
    # The first epoch (warm-up) is left out: 100 images/s.
    assert costs["train_representation"].hours == pytest.approx(2 * 4992 / 100.0 / 3600)
    assert costs["prepare_split"].hours == pytest.approx(36.0 / 3600)
    size = 1000 + (folder / "train_history.json").stat().st_size
    assert costs["train_representation"].disk_bytes == size
    assert "rate measured" in costs["train_representation"].sources
    assert "time measured" in costs["prepare_split"].sources
    # A GPU plan does not reuse CPU measurements: the default GPU rate applies.
    gpu = plan_costs(jobs, {"train": {"epochs": 2}}, device="cuda", workdir=tmp_path)
    assert "rate measured" not in gpu["train_representation"].sources


def test_training_spec_reads_a_variant_through_the_grid_functions() -> None:
    config = {
        "train": {"epochs": 20},
        "variants": {
            "fast": {"method": "contrastive_da", "train": {"epochs": 5, "batch_size": 16}},
            "small": {"method": "rotnet", "train_size": 100},
        },
    }
    fast = training_spec("fast", config)
    assert fast is not None
    assert (fast.base, fast.epochs, fast.batch_size, fast.train_size) == (
        "contrastive_da",
        5,
        16,
        None,
    )
    small = training_spec("small", config)
    assert small is not None
    assert (small.base, small.epochs, small.batch_size, small.train_size) == ("rotnet", 20, 64, 100)
    assert training_spec("resnet18_random", config) is None
    # A variant learning from 100 images costs 100 // 64 * 64 images an epoch, not 4,992.
    job = Job("train_representation", {"dataset": "cifar10", "method": "small"}, ())
    costs = plan_costs([job], {**config, "datasets": {"cifar10": {}}}, device="cpu")
    expected = 20 * 64 / DEFAULT_IMAGES_PER_S["cpu"]["rotnet"] / 3600
    assert costs["train_representation"].hours == pytest.approx(expected)


def test_plan_costs_each_variant_of_the_longer_gpu_config_at_its_own_epochs() -> None:
    """config/cifar10_gpu_longer.yaml trains at 60 and 50 epochs, not the global 20."""
    _, costs = plan(REPO / "config/cifar10_gpu_longer.yaml", device="cuda", measure=False)
    training = costs["train_representation"]
    epochs = {name: part.spec.epochs for name, part in training.by_method.items()}
    assert epochs == {
        "denoising_e60": 60,
        "denoising_views_e60": 60,
        "contrastive_e50": 50,
        "contrastive_head2_e50": 50,
    }
    assert {name: part.jobs for name, part in training.by_method.items()} == dict.fromkeys(
        epochs, 2
    )
    rates = DEFAULT_IMAGES_PER_S["cuda"]
    denoising = 60 * (5000 // 64 * 64) / rates["denoising"]
    contrastive = 50 * (5000 // 32 * 32) / rates["contrastive"]
    expected = 2 * 2 * (denoising + contrastive) / 3600
    assert training.hours == pytest.approx(expected)
    assert training.by_method["contrastive_e50"].hours == pytest.approx(2 * contrastive / 3600)


def test_dataset_size() -> None:
    size, known = dataset_size({"datasets": {"cifar10": {"max_train_per_class": 60}}}, "cifar10")
    assert known and size.train_per_class == 60 and size.side == 32
    options = {"datasets": {"catvsdog": {"options": {"n_train_per_class": 500}}}}
    assert dataset_size(options, "catvsdog")[0].train_per_class == 500
    assert dataset_size({}, "image_folder")[1] is False
    assert dataset_size({}, "cifar10_rotated") == dataset_size({}, "cifar10")


def test_plan_of_the_tiny_config_matches_its_grid(capsys: pytest.CaptureFixture[str]) -> None:
    config_path = REPO / "tests/configs/tiny.yaml"
    config = yaml.safe_load(config_path.read_text())
    assert main(["--configfile", str(config_path), "--device", "cpu", "--no-measured"]) == 0
    printed = capsys.readouterr().out
    counts = {
        line.split()[0]: int(line.split()[1].replace(",", ""))
        for line in printed.splitlines()[2:]
        if line and not line.startswith("total")
    }
    splits = (
        len(config["datasets"]["digits"]["classes"])
        * len(config["splits"]["contamination"])
        * len(config["seeds"])
    )
    assert counts["prepare_split"] == splits
    # One detector job per (split, method, fit set), as tests/workflow/test_dry_run.py counts.
    fitsets = 1 + len(config["splits"]["clean_inliers"])
    assert counts["score_detectors"] == splits * len(config["methods"]) * fitsets
    assert counts["embed_frozen_dataset"] == len(config["methods"]) * len(config["seeds"])
    assert counts["prepare_dataset"] == 1 and "train_representation" not in counts
    assert "total:" in printed and "CPU-hours" in printed


def test_cli_rejects_a_bad_rate(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--configfile", "x.yaml", "--images-per-s", "simclr=3"])
    assert "METHOD=RATE" in capsys.readouterr().err


def test_a_fused_job_costs_its_models_separate_trainings(tmp_path: Path) -> None:
    """train.fuse: a train_fused job of classes 'cat+dog' is two trainings (an upper bound)."""
    config = {"train": {"epochs": 2, "fuse": 2}, "datasets": {"cifar10": {}}}
    alone = Job("train_representation", {"dataset": "cifar10", "method": "rotnet"}, ())
    group = {"dataset": "cifar10", "method": "rotnet", "group": "cat+dog"}
    costs = plan_costs([Job("train_fused", group, ())], config, device="cpu")
    single = plan_costs([alone], config, device="cpu")["train_representation"].hours
    assert costs["train_fused"].hours == pytest.approx(2 * single)
    assert costs["train_fused"].by_method["rotnet"].jobs == 2
    assert "fused = sum of separate runs" in costs["train_fused"].sources
    # A fused model's rate (its share of the group's time) is not a separate job's rate.
    folder = tmp_path / "results/cifar10/cat/contam0/seed0/rotnet"
    folder.mkdir(parents=True)
    history = [{"epoch": k, "images_per_s": 100.0} for k in (1, 2)]
    record = {"method": "rotnet", "history": history, "device": "cpu", "width": 64}
    (folder / "train_history.json").write_text(json.dumps({**record, "fused": ["cat", "dog"]}))
    measured = plan_costs([alone], config, device="cpu", workdir=tmp_path)
    assert "rate measured" not in measured["train_representation"].sources
