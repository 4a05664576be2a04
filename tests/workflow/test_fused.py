"""train.fuse through the real DAG on CPU: planned jobs, fused models in place, reruns.

The library's fused training is tested beside its code (tests/ssl/test_fused.py: equality
with separate runs, resume, divergence of one model). Here: fuse 1 plans today's jobs and
leaves finished results alone; fuse K plans one train_fused job per K classes; the unpacked
models sit where embed_trained reads them and equal separately trained ones to float32
rounding; a killed group job is retried and its models resume from their checkpoints, ending
bit-identical to an uninterrupted run; a model that diverges fails its own unpack job with
its error, not the group.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
import yaml

from pipeline_lib.models.checkpoints import load_checkpoint
from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.ssl.run import stream_seed
from tests.workflow.conftest import (
    ONE_THREAD_PER_JOB,
    run_snakemake,
    script_pids,
    start_snakemake,
)

pytestmark = pytest.mark.workflow

CLASSES = ["0", "1", "8"]
EPOCHS = 2
MODELS = [f"digits/{inlier}/contam0/seed0/rotnet/model.pt" for inlier in CLASSES]
GROUPS = "digits/_fused/contam0/rotnet"
#: The group of classes 0 and 1 (seed 0): its name, its log and its models' checkpoints (where
#: their separate jobs keep them).
PAIR = "0@0+1@0"
GROUP_LOG = f"logs/train_fused/digits/contam0/rotnet/{PAIR}.log"
CHECKPOINTS = [model.replace("model.pt", "checkpoint.pt") for model in MODELS[:2]]
#: Bound on ||w_fused - w_separate|| / ||w_separate - w_initial||, float32 on CPU (see below).
FLOAT32_RATIO = 2e-2


def _settings(seeds: tuple[int, ...] = (0,), **train) -> dict:
    """Three RotNets (a seed) on 32 digits each, width 8, 2 epochs of one step."""
    return {
        "experiment": "droc-fused",
        "datasets": {
            "digits": {"classes": CLASSES, "max_train_per_class": 32, "max_test_per_class": 20}
        },
        "methods": ["rotnet"],
        "seeds": list(seeds),
        "splits": {"contamination": [0.0]},
        "embed": {"batch_size": 128, "width": 8},
        "train": {"epochs": EPOCHS, "batch_size": 32, "checkpoint_every": 1, **train},
        "detectors": {"kde": {}},
        "tracking": {"enabled": False},
    }


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Config files: without train.fuse, and with fuse 1, 2 and 2 with an lr that diverges."""
    folder = tmp_path_factory.mktemp("fused_configs")
    variants = {
        "none": {},
        "fuse1": {"fuse": 1},
        "fuse2": {"fuse": 2},
        "fuse2_seeds": {"fuse": 2, "seeds": [0, 1]},
        "diverge": {"fuse": 2, "lr": 1e30},
    }
    paths = {}
    for name, train in variants.items():
        paths[name] = folder / f"{name}.yaml"
        paths[name].write_text(yaml.safe_dump(_settings(**train)))
    return paths


def _planned(workdir: Path, config: Path, *targets: str, extra: tuple[str, ...] = ()) -> dict:
    """Job counts of a dry run (rule -> count; empty when there is nothing to do)."""
    output = run_snakemake(workdir, *targets, "-n", "--configfile", str(config), *extra).stdout
    table = output.split("Job stats:", 1)[-1] if "Job stats:" in output else ""
    return {
        match.group(1): int(match.group(2))
        for match in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)
        if match.group(1) != "total"
    }


def test_dry_runs_plan_one_job_per_model_or_per_group(configs, tmp_path: Path) -> None:
    today = _planned(tmp_path, configs["none"])
    assert today["train_representation"] == 3 and "train_fused" not in today
    assert _planned(tmp_path, configs["fuse1"]) == today  # fuse 1 is today's DAG
    fused = _planned(tmp_path, configs["fuse2"])
    # Classes 0+1, then 8 alone: one train_fused job per group, one unpack per model.
    assert fused["train_fused"] == 2 and fused["unpack_fused_model"] == 3
    assert "train_representation" not in fused
    rest = {k: v for k, v in fused.items() if k not in {"train_fused", "unpack_fused_model"}}
    assert rest == {k: v for k, v in today.items() if k != "train_representation"}
    # Two seeds: six models, grouped seed by seed across the seeds (0@0+1@0, 8@0+0@1,
    # 1@1+8@1), so a one-class data set's seeds train together too.
    seeds = run_snakemake(tmp_path, "-n", "--configfile", str(configs["fuse2_seeds"])).stdout
    groups = re.findall(r"group=([^\s,]+)", seeds)
    assert sorted(set(groups)) == ["0@0+1@0", "1@1+8@1", "8@0+0@1"], groups
    assert _planned(tmp_path, configs["fuse2_seeds"])["unpack_fused_model"] == 6
    # Set on the command line (as profiles/slurm does): Snakemake hands a nested --config
    # over as strings, which the schema's types restore, merged into the file's train section.
    given = _planned(tmp_path, configs["none"], extra=("--config", "train={fuse: 2}"))
    assert given == fused


@pytest.fixture(scope="module")
def separate(tmp_path_factory: pytest.TempPathFactory, configs) -> Path:
    """The three models trained one job each (no train.fuse): the reference."""
    workdir = tmp_path_factory.mktemp("separate")
    run_snakemake(
        workdir, *MODELS, "--cores", "2", *ONE_THREAD_PER_JOB, "--configfile", str(configs["none"])
    )
    return workdir


def _with_data_of(reference: Path, workdir: Path) -> Path:
    """``workdir`` holding the reference's data set and splits (with their times)."""
    for relative in ["digits/dataset.npz"] + [
        f"digits/{inlier}/contam0/seed0/split.npz" for inlier in CLASSES
    ]:
        (workdir / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(reference / relative, workdir / relative)
    return workdir


@pytest.fixture(scope="module")
def fused(tmp_path_factory: pytest.TempPathFactory, separate: Path, configs) -> Path:
    workdir = _with_data_of(separate, tmp_path_factory.mktemp("fused"))
    run_snakemake(
        workdir, *MODELS, "--cores", "2", *ONE_THREAD_PER_JOB, "--configfile", str(configs["fuse2"])
    )
    return workdir


def test_fused_models_are_where_embed_trained_reads_them(fused: Path) -> None:
    for model in MODELS:
        assert (fused / model).is_file()
        history = json.loads((fused / model).with_name("train_history.json").read_text())
        assert [epoch["epoch"] for epoch in history["history"]] == list(range(1, EPOCHS + 1))
        assert not (fused / model).with_name("checkpoint.pt").exists()
    assert json.loads((fused / model).with_name("train_history.json").read_text())["fused"] == [
        "8@0"
    ]
    log = (fused / GROUP_LOG).read_text()
    assert "training 2 rotnet models fused from epoch 1" in log
    # The groups' outcome.json are temporary: gone once every model is unpacked.
    assert not list((fused / GROUPS).rglob("outcome.json"))
    assert not list((fused / GROUPS).rglob("*.pt"))


def _initial_weights() -> dict[str, torch.Tensor]:
    """The untrained RotNet of seed 0 (its initialisation stream, as tests/ssl/test_fused.py)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(stream_seed(0, 0))
        return build_proxy_model("rotnet", width=8, image_size=32).state_dict()


def test_fused_models_equal_separate_ones_to_float32_rounding(fused: Path, separate: Path) -> None:
    """Each fused model is its separate twin: same data, seed and split (a mix-up would be off
    by the order of the whole update), up to float32 rounding in the stacked layers, which
    later steps amplify: measured 8.3e-4 and 3.9e-3 of the update after these 2 steps (1e-2
    and 4e-2 after 4 steps of 16 images); the bound is the order of what merely running the
    separate model channels-last changes after one step (tests/ssl/test_fused.py)."""
    initial = _initial_weights()
    for model in MODELS:
        ours = torch.load(fused / model, weights_only=True)["state_dict"]
        theirs = torch.load(separate / model, weights_only=True)["state_dict"]
        assert ours.keys() == theirs.keys()
        names = [name for name in initial if name in theirs and "running" not in name]
        names = [name for name in names if theirs[name].is_floating_point()]

        def flat(weights, names=names):
            return torch.cat([weights[name].flatten() for name in names])

        ratio = float((flat(ours) - flat(theirs)).norm() / (flat(theirs) - flat(initial)).norm())
        assert ratio < FLOAT32_RATIO, (model, ratio)
        losses = [
            [
                epoch["loss"]
                for epoch in json.loads((path / model).with_name("train_history.json").read_text())[
                    "history"
                ]
            ]
            for path in (fused, separate)
        ]
        assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    # Class 8 trained alone in its group: bit for bit the separate model.
    alone = MODELS[2]
    for name, tensor in torch.load(separate / alone, weights_only=True)["state_dict"].items():
        assert torch.equal(torch.load(fused / alone, weights_only=True)["state_dict"][name], tensor)


def _kill_after_first_epoch(workdir: Path, run: subprocess.Popen[str]) -> None:
    """SIGKILL the group 0+1's job once both its epoch-1 checkpoints exist, Snakemake paused.

    Epoch 2 takes ~0.4 s after them here; the checkpoints are read back to prove the kill
    came before it ended (they are replaced atomically, so they exist only complete).
    """
    deadline, pids = time.monotonic() + 300, []
    while not (pids and all((workdir / path).exists() for path in CHECKPOINTS)):
        if run.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no checkpoints appeared:\n{run.communicate()[0][-3000:]}")
        pids = pids or script_pids(workdir, "train_fused.py")
        time.sleep(0.01)
    assert len(pids) == 1, pids
    # Snakemake waits, stopped, so that the remains are seen before its retry starts.
    os.kill(run.pid, signal.SIGSTOP)
    os.kill(pids[0], signal.SIGKILL)  # as an out-of-memory killer or a lost node would


def test_killed_fused_job_is_retried_and_both_models_resume(
    fused: Path, separate: Path, configs, tmp_path: Path
) -> None:
    """Fused training through the DAG: the retry resumes both models after epoch 1 (neither
    trains epoch 1 again) and ends with the uninterrupted run's weights, bit for bit."""
    workdir = _with_data_of(separate, tmp_path)
    # One thread per job, as the reference: a thread count can change float32 sums.
    options = ("--cores", "2", *ONE_THREAD_PER_JOB, "--configfile", str(configs["fuse2"]))
    run = start_snakemake(workdir, *MODELS[:2], *options)
    try:
        _kill_after_first_epoch(workdir, run)
        # The killed job kept both models' epoch-1 checkpoints and left nothing that looks
        # finished: no outcome.json, no model in the group's folder or where embed reads it.
        for path in CHECKPOINTS:
            assert load_checkpoint(workdir / path)["epoch"] == 1, "killed too late"
        assert not (workdir / GROUPS / PAIR / "outcome.json").exists()
        assert not list((workdir / GROUPS).rglob("model.pt"))
        assert not any((workdir / model).exists() for model in MODELS)
        os.kill(run.pid, signal.SIGCONT)
        output, _ = run.communicate(timeout=600)
    finally:
        if run.poll() is None:  # a failed check above: end the run it paused
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(30)
    assert run.returncode == 0, output[-3000:]
    assert "Trying to restart job" in output  # the rule's retries
    log = (workdir / GROUP_LOG).read_text()  # the second attempt's log
    for path in CHECKPOINTS:
        assert f"resuming rotnet from {path} after epoch 1/{EPOCHS}" in log, log
    assert "training 2 rotnet models fused from epoch 2" in log, log
    assert "rotnet epoch 1/" not in log, log  # neither model started over
    for model, path in zip(MODELS[:2], CHECKPOINTS, strict=True):
        ours = torch.load(workdir / model, weights_only=True)["state_dict"]
        theirs = torch.load(fused / model, weights_only=True)["state_dict"]
        assert ours.keys() == theirs.keys()
        for name, tensor in theirs.items():
            assert torch.equal(ours[name], tensor), (model, name)
        histories = [
            json.loads((folder / model).with_name("train_history.json").read_text())["history"]
            for folder in (workdir, fused)
        ]
        assert [epoch["loss"] for epoch in histories[0]] == [
            epoch["loss"] for epoch in histories[1]
        ]
        assert not (workdir / path).exists()  # removed once the model is saved


def test_fuse_1_or_mtime_triggers_leave_finished_models_alone(separate: Path, configs) -> None:
    # Adding train.fuse: 1 changes no job's params, code or inputs: nothing re-runs.
    assert _planned(separate, configs["fuse1"], *MODELS) == {}
    # Switching to fuse 2 re-trains (another rule makes model.pt), unless only times count.
    assert _planned(separate, configs["fuse2"], *MODELS)["train_fused"] == 2
    # Under mtime triggers a group re-runs when any member's model is older than any member's
    # inputs, and on 2 cores class 0's model can be saved before class 1's split is written
    # (seen in CI): make the finished models the newest files, as after any finished run.
    now = time.time()
    for model in MODELS:
        for path in (separate / model, (separate / model).with_name("train_history.json")):
            os.utime(path, (now, now))
    assert _planned(separate, configs["fuse2"], *MODELS, extra=("--rerun-triggers", "mtime")) == {}


def test_a_diverged_model_fails_its_own_unpack_job(separate: Path, configs, tmp_path: Path) -> None:
    """lr 1e30: both models of the group 0+1 diverge in epoch 2 (class 8 is not run)."""
    workdir = _with_data_of(separate, tmp_path)
    result = run_snakemake(
        workdir,
        *MODELS[:2],
        "--cores",
        "2",
        "--keep-going",
        "--configfile",
        str(configs["diverge"]),
        check=False,
    )
    assert result.returncode != 0
    output = result.stdout + result.stderr
    # The group jobs succeeded (their outcome.json kept for the failed unpack jobs) ...
    assert "Error in rule train_fused" not in output
    outcome = json.loads((workdir / GROUPS / PAIR / "outcome.json").read_text())
    assert outcome["models"]["0@0"]["status"] == outcome["models"]["1@0"]["status"] == "diverged"
    # ... and each unpack job fails naming its model and the divergence.
    log = (workdir / "logs/unpack_fused_model/digits/0/contam0/seed0/rotnet.log").read_text()
    assert "digits/0/contam0/seed0/rotnet (diverged in the fused group" in log
    assert outcome["models"]["0@0"]["error"] in log
    assert not any((workdir / model).exists() for model in MODELS[:2])
