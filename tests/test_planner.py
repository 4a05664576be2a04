"""The cost planner (``pipeline_lib.planning``): the DAG's jobs, their costs, and a real plan."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from pathlib import Path

import pytest
import yaml

from pipeline_lib.planning.costs import plan_costs
from pipeline_lib.planning.defaults import DEFAULT_JOB_SECONDS
from pipeline_lib.planning.jobs import Job, PlanError, snakemake_jobs
from pipeline_lib.planning.planner import main, plan_config, without_studies
from pipeline_lib.planning.report import format_plan
from pipeline_lib.planning.sizes import dataset_size
from pipeline_lib.planning.training import training_spec
from pipeline_lib.registry import METHOD_SPECS
from tests.planner_cases import DEFAULT_IMAGES_PER_S, REPO, TINY, small_plan


def test_snakemake_jobs_reads_every_job_of_the_dag_with_its_wildcards_and_outputs(
    tmp_path: Path,
) -> None:
    config = yaml.safe_load(TINY.read_text())
    cwd = Path.cwd()
    jobs, stats = snakemake_jobs([TINY], workdir=tmp_path)
    assert Path.cwd() == cwd  # the API changed into the workdir and back
    counted: dict[str, int] = {}
    for job in jobs:
        counted[job.rule] = counted.get(job.rule, 0) + 1
    assert counted == stats
    # The grid of tests/configs/tiny.yaml: one split per (class, contamination, seed), one
    # detector job per (split, method, fit set), as tests/workflow/test_dry_run.py counts.
    classes = config["datasets"]["digits"]["classes"]
    splits = len(classes) * len(config["splits"]["contamination"]) * len(config["seeds"])
    fitsets = 1 + len(config["splits"]["clean_inliers"])
    assert stats["prepare_split"] == splits
    assert stats["score_detectors"] == splits * len(config["methods"]) * fitsets
    assert stats["all"] == 1
    detector = next(job for job in jobs if job.rule == "score_detectors")
    w = detector.wildcards
    assert set(w) == {"dataset", "inlier", "contamination", "seed", "method", "fitset"}
    assert w["dataset"] == "digits" and w["inlier"] in map(str, classes)
    folder = (
        f"{w['dataset']}/{w['inlier']}/contam{w['contamination']}/seed{w['seed']}/"
        f"{w['method']}/{w['fitset']}/"
    )
    assert detector.outputs and all(path.startswith(folder) for path in detector.outputs)
    # Topological order: a split's job comes before every detector job.
    rules = [job.rule for job in jobs]
    assert rules.index("prepare_split") < rules.index("score_detectors") < rules.index("all")
    # The same config gives the same jobs in the same order (the plan's text is stable).
    assert snakemake_jobs([TINY], workdir=tmp_path)[0] == jobs


def test_snakemake_jobs_names_the_config_snakemake_refused(tmp_path: Path) -> None:
    config = yaml.safe_load(TINY.read_text())
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**config, "datasets": {"celeba": {"classes": ["eyeglasses"]}}}))
    with pytest.raises(PlanError, match=r"snakemake could not plan .*bad\.yaml.*eyeglasses"):
        snakemake_jobs([bad], workdir=tmp_path)


def test_the_plans_job_counts_are_snakemakes_own_for_the_tiny_config() -> None:
    """Snakemake's own count: the DAG's job stats, what ``snakemake -n`` prints."""
    result = plan_config(TINY, device="cpu", measure=False)
    assert {rule: cost.jobs for rule, cost in result.costs.items()} == result.stats
    assert "score_detectors" in result.stats and "all" in result.stats


def test_training_hours_follow_epochs_images_and_rates() -> None:
    jobs = small_plan()
    config = {"datasets": {"cifar10": {}, "catvsdog": {}}, "train": {"epochs": 10}}
    costs = plan_costs(jobs, config, device="cpu")
    rotnet = 10 * (5000 // 64 * 64) / DEFAULT_IMAGES_PER_S["cpu"]["rotnet"]
    # 64x64 Cat-vs-Dog images: 4x the work; batch 32 for the contrastive methods; contrastive
    # DA (expanded batching, the default) trains 4 instances per image: itself and 3 rotations.
    instances = 10000 * 4 // 32 * 32
    contrastive_da = 10 * instances * 4 / DEFAULT_IMAGES_PER_S["cpu"]["contrastive_da"]
    assert costs["train_representation"].jobs == 2
    assert costs["train_representation"].hours == pytest.approx((rotnet + contrastive_da) / 3600)
    assert costs["prepare_split"].hours == pytest.approx(
        DEFAULT_JOB_SECONDS["prepare_split"] / 3600
    )
    assert "rate default (cpu)" in costs["train_representation"].sources
    plan = format_plan("x", costs, device="cpu").splitlines()
    total = next(line for line in plan if line.startswith("total:"))
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
    jobs = small_plan()
    config = {"datasets": {"cifar10": {}, "catvsdog": {}}, "train": {"epochs": 10}}
    # A method without a CUDA rate of its own (as a new method's row) is unmeasured there.
    unmeasured = dataclasses.replace(METHOD_SPECS["rotnet"], rates={"cpu": 5.8})
    monkeypatch.setitem(METHOD_SPECS, "rotnet", unmeasured)
    unknown = plan_costs(jobs, config, device="cuda")
    assert unknown["train_representation"].hours is None
    assert "unknown" in format_plan("x", unknown, device="cuda")
    given = plan_costs(
        jobs, config, device="cuda", images_per_s={"rotnet": 1000.0, "contrastive_da": 500.0}
    )
    # Cat-vs-Dog: 40,000 DA instances an epoch (4 per image), each at 4x the 32x32 cost.
    expected = (10 * 4992 / 1000.0 + 10 * 40000 * 4 / 500.0) / 3600
    assert given["train_representation"].hours == pytest.approx(expected)
    # Cat-vs-Dog (64x64): the given 32x32 rate scaled by pixels, and the source says so.
    assert given["train_representation"].sources == {
        "rate given",
        "rate given, 64 px extrapolated from 32 px (rate x 0.25)",
        "disk estimated",
    }


def test_measurements_of_an_earlier_run_replace_the_defaults(tmp_path: Path) -> None:
    folder = tmp_path / "cifar10/cat/contam0/seed0/rotnet"
    folder.mkdir(parents=True)
    history = [{"epoch": 1, "images_per_s": 1.0}] + [
        {"epoch": k, "images_per_s": 100.0} for k in (2, 3, 4)
    ]
    record = {"method": "rotnet", "history": history, "device": "cpu", "width": 64}
    (folder / "train_history.json").write_text(json.dumps(record))
    (folder / "model.pt").write_bytes(b"x" * 1000)
    (folder / "train_history.json").touch()
    bench = tmp_path / "benchmarks/prepare_split/cifar10/cat"
    bench.mkdir(parents=True)
    (bench / "seed0.tsv").write_text("s\th:m:s\tmax_rss\n36.0\t0:00:36\t10\n")
    # Snakemake's own records in the experiment's folder are no run's measurements.
    hidden = tmp_path / ".snakemake/shadow/cifar10/cat/contam0/seed0/rotnet"
    hidden.mkdir(parents=True)
    slow = [{"epoch": k, "images_per_s": 1.0} for k in (1, 2, 3, 4)]
    (hidden / "train_history.json").write_text(json.dumps({**record, "history": slow}))
    jobs = [
        Job(
            "train_representation",
            {"dataset": "cifar10", "method": "rotnet"},
            (
                "cifar10/cat/contam0/seed0/rotnet/model.pt",
                "cifar10/cat/contam0/seed0/rotnet/train_history.json",
            ),
        ),
        Job("prepare_split", {"dataset": "cifar10"}, ("x/split.npz",)),
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


def test_contrastive_da_is_costed_in_the_instances_its_batching_trains() -> None:
    """Rates count instances: expanded DA trains 1 + |distributions| per image, per_image 1."""
    rate = DEFAULT_IMAGES_PER_S["cpu"]["contrastive_da"]
    job = Job("train_representation", {"dataset": "cifar10", "method": "contrastive_da"}, ())

    def hours(**train) -> float:
        config = {"datasets": {"cifar10": {}}, "train": {"epochs": 3, **train}}
        return plan_costs([job], config, device="cpu")["train_representation"].hours

    assert hours() == pytest.approx(3 * (5000 * 4 // 32 * 32) / rate / 3600)
    assert hours(distributions=["rot90"]) == pytest.approx(3 * (5000 * 2 // 32 * 32) / rate / 3600)
    assert hours(da_batching="per_image") == pytest.approx(3 * (5000 // 32 * 32) / rate / 3600)
    config = {"train": {}, "variants": {"hflip": {"method": "contrastive_da", "train": {}}}}
    assert training_spec("hflip", config).instances_per_image == 4
    assert training_spec("rotnet", config).instances_per_image == 1


def test_plan_costs_each_variant_of_the_longer_gpu_config_at_its_own_epochs() -> None:
    """config/experiments/cifar10_gpu_longer.yaml trains at 60 and 50 epochs, not the global 20."""
    costs = plan_config(
        REPO / "config/experiments/cifar10_gpu_longer.yaml", device="cuda", measure=False
    ).costs
    training = costs["train_representation"]
    epochs = {name: part.spec.epochs for name, part in training.by_method.items()}
    assert epochs == {
        "denoising_e60": 60,
        "denoising_no_views_e60": 60,
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
    captured = capsys.readouterr()
    printed = captured.out
    # The DAG's build is said on stderr (it is silent and takes half a minute for the paper).
    assert captured.err.startswith(f"droc-plan: building the DAG of {config_path} ...\n")
    assert re.search(
        rf"droc-plan: {re.escape(str(config_path))} planned in \d+\.\d s", captured.err
    )
    rows = itertools.takewhile(lambda line: not line.startswith("total"), printed.splitlines()[2:])
    counts = {line.split()[0]: int(line.split()[1].replace(",", "")) for line in rows}
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
    """train.fuse: a train_fused job of models 'cat@0+dog@0' is two trainings (an upper bound)."""
    config = {"train": {"epochs": 2, "fuse": 2}, "datasets": {"cifar10": {}}}
    alone = Job("train_representation", {"dataset": "cifar10", "method": "rotnet"}, ())
    group = {"dataset": "cifar10", "method": "rotnet", "group": "cat@0+dog@0"}
    costs = plan_costs([Job("train_fused", group, ())], config, device="cpu")
    single = plan_costs([alone], config, device="cpu")["train_representation"].hours
    assert costs["train_fused"].hours == pytest.approx(2 * single)
    assert costs["train_fused"].by_method["rotnet"].jobs == 2
    assert "fused = sum of separate runs" in costs["train_fused"].sources
    # A fused model's rate (its share of the group's time) is not a separate job's rate.
    folder = tmp_path / "cifar10/cat/contam0/seed0/rotnet"
    folder.mkdir(parents=True)
    history = [{"epoch": k, "images_per_s": 100.0} for k in (1, 2)]
    record = {"method": "rotnet", "history": history, "device": "cpu", "width": 64}
    (folder / "train_history.json").write_text(json.dumps({**record, "fused": ["cat", "dog"]}))
    measured = plan_costs([alone], config, device="cpu", workdir=tmp_path)
    assert "rate measured" not in measured["train_representation"].sources


def test_without_studies_keeps_the_main_table(tmp_path: Path) -> None:
    copy = without_studies(REPO / "config/paper.yaml", tmp_path)
    assert copy is not None
    raw = yaml.safe_load(copy.read_text())
    assert (
        raw["studies"] == []
        and raw["methods"] == yaml.safe_load((REPO / "config/paper.yaml").read_text())["methods"]
    )
    assert without_studies(copy, tmp_path) is None


def _prepare_split_seconds(experiment: Path, seconds: float) -> None:
    """A benchmark file of one prepare_split job, as an earlier run of ``experiment`` left it."""
    bench = experiment / "benchmarks/prepare_split/digits/0/contam0"
    bench.mkdir(parents=True)
    (bench / "seed0.tsv").write_text(f"s\th:m:s\tmax_rss\n{seconds}\t0:00:00\t10\n")


def test_the_plan_measures_the_runs_of_its_own_experiment_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another config's timings in the same checkout are not this config's measurements."""
    monkeypatch.chdir(tmp_path)
    _prepare_split_seconds(tmp_path / "results/someone-else", 3600.0)
    argv = ["--configfile", str(TINY), "--device", "cpu"]

    def prepare_split_row() -> str:
        assert main(argv) == 0
        printed = capsys.readouterr().out
        return next(line for line in printed.splitlines() if line.startswith("prepare_split "))

    assert prepare_split_row().split()[2] == "0.0"  # 8 jobs at the 5 s default
    # The tiny config's experiment is droc-tiny: its folder's timings are measured.
    _prepare_split_seconds(tmp_path / "results/droc-tiny", 3600.0)
    assert prepare_split_row().split()[2] == "8.0"  # 8 jobs at the measured hour each


def test_a_gpu_plan_says_when_the_torch_jobs_would_get_no_gpu(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The rules declare gpu=0: as configured, the GPU-hours of the plan would be CPU-hours."""
    argv = ["--configfile", str(TINY), "--device", "cuda", "--no-measured"]
    assert main(argv) == 0
    note = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    # The tiny config's one torch rule: each frozen representation embeds once per seed.
    config = yaml.safe_load(TINY.read_text())
    embeddings = len(config["methods"]) * len(config["seeds"])
    assert note == [
        f"note: as configured, embed_frozen_dataset ({embeddings} jobs) ask for no GPU "
        "(their rules declare gpu=0): a `snakemake --resources gpu=N` runs them on the CPU, "
        "not on cuda as costed above. Run with --profile profiles/gpu (and plan with it), or "
        "give them a GPU with --set-resources RULE:gpu=1."
    ]
    # Planned with the profile the run uses, they get one: nothing to say.
    assert main([*argv, "--profile", str(REPO / "profiles/gpu")]) == 0
    assert "note:" not in capsys.readouterr().out
    # A CPU plan costs them on the CPU anyway.
    assert main([*argv[:3], "cpu", "--no-measured"]) == 0
    assert "note:" not in capsys.readouterr().out
