"""Faults through the real DAG on CPU: killed jobs, a killed run, damaged files, no tracker.

The library-level cases are tested beside their code (tests/ssl/test_train.py: resume and a
corrupt checkpoint inside one process; tests/data/: truncated pickles, IDX files and images;
tests/test_tracking.py: an unreachable server). Here the same faults hit a running workflow:
processes are really killed with SIGKILL and Snakemake really retries or is re-run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import torch
import yaml

from tests.workflow.conftest import (
    relog_to_mlflow,
    run_snakemake,
    script_pids,
    start_snakemake,
)

pytestmark = pytest.mark.workflow

EPOCHS = 5
MODEL_DIR = "digits/0/contam0/seed0/rotnet"
MODEL = f"{MODEL_DIR}/model.pt"
CHECKPOINT = f"{MODEL_DIR}/checkpoint.pt"
TRAIN_LOG = "logs/train_representation/digits/0/contam0/seed0/rotnet.log"
SPLIT = "digits/0/contam0/seed0/split.npz"


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small RotNet: 32 digits, width 8, 5 epochs, a checkpoint after every epoch."""
    settings = {
        "experiment": "droc-faults",
        "datasets": {
            "digits": {"classes": ["0"], "max_train_per_class": 32, "max_test_per_class": 20}
        },
        "methods": ["rotnet"],
        "seeds": [0],
        "splits": {"contamination": [0.0]},
        "embed": {"batch_size": 128, "width": 8},
        "train": {"epochs": EPOCHS, "batch_size": 16, "checkpoint_every": 1},
        "detectors": {"kde": {}},
        "tracking": {"enabled": False},
    }
    path = tmp_path_factory.mktemp("faults") / "config.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def _weights(workdir: Path) -> dict[str, torch.Tensor]:
    return torch.load(workdir / MODEL, weights_only=True)["state_dict"]


def _assert_same_model(workdir: Path, reference: Path) -> None:
    ours, theirs = _weights(workdir), _weights(reference)
    assert ours.keys() == theirs.keys()
    for name, tensor in theirs.items():
        assert torch.equal(ours[name], tensor), name
    # The same losses per epoch too (timings differ).
    losses = [
        [
            epoch["loss"]
            for epoch in json.loads((path / MODEL_DIR / "train_history.json").read_text())[
                "history"
            ]
        ]
        for path in (workdir, reference)
    ]
    assert losses[0] == losses[1] and len(losses[0]) == EPOCHS


def _with_data_of(reference: Path, tmp_path: Path) -> Path:
    """A fresh working directory holding the reference's data set and split (with their
    times), so a test pays only for the training job."""
    workdir = tmp_path / "run"
    for relative in ("digits/dataset.npz", SPLIT):
        (workdir / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(reference / relative, workdir / relative)
    return workdir


def _training_pids(workdir: Path) -> list[int]:
    return script_pids(workdir, "train_representation.py")


def _start(workdir: Path, config: Path) -> subprocess.Popen[str]:
    return start_snakemake(workdir, MODEL, "--cores", "1", "--configfile", str(config))


def _wait_for_checkpoint(workdir: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 300
    while not (workdir / CHECKPOINT).exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"no checkpoint appeared:\n{process.communicate()[0][-3000:]}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def retrained(tmp_path_factory: pytest.TempPathFactory, config: Path) -> Path:
    """A run killed whole mid-training, its checkpoint then truncated, then run again.

    Its final model is trained from epoch 1 to the end without interruption (the damaged
    checkpoint is not used), so it is also the reference the resumed run must equal.
    """
    workdir = tmp_path_factory.mktemp("retrained")
    run = _start(workdir, config)
    _wait_for_checkpoint(workdir, run)
    # The whole run dies (the submit host reboots): Snakemake and its job at once.
    os.killpg(run.pid, signal.SIGKILL)
    run.wait(30)
    for pid in _training_pids(workdir):  # a job that was not in the group
        os.kill(pid, signal.SIGKILL)
    checkpoint = workdir / CHECKPOINT
    checkpoint.write_bytes(checkpoint.read_bytes()[: checkpoint.stat().st_size // 2])
    # A killed run may leave its lock behind: --unlock clears it (docs/cluster.md).
    run_snakemake(workdir, MODEL, "--unlock", "--configfile", str(config))
    run_snakemake(workdir, MODEL, "--cores", "1", "--configfile", str(config))
    return workdir


def test_truncated_checkpoint_is_reported_and_training_restarts(retrained: Path) -> None:
    log = (retrained / TRAIN_LOG).read_text()
    assert f"could not resume from checkpoint {CHECKPOINT}" in log
    assert "training from scratch" in log
    assert f"rotnet epoch 1/{EPOCHS}" in log and f"rotnet epoch {EPOCHS}/{EPOCHS}" in log
    history = json.loads((retrained / MODEL_DIR / "train_history.json").read_text())["history"]
    assert [epoch["epoch"] for epoch in history] == list(range(1, EPOCHS + 1))
    assert not (retrained / CHECKPOINT).exists()


def test_killed_training_job_is_retried_and_resumes(
    retrained: Path, config: Path, tmp_path: Path
) -> None:
    workdir = _with_data_of(retrained, tmp_path)
    run = _start(workdir, config)
    _wait_for_checkpoint(workdir, run)
    pids = _training_pids(workdir)
    assert len(pids) == 1
    os.kill(pids[0], signal.SIGKILL)  # as an out-of-memory killer or a lost node would
    output, _ = run.communicate(timeout=600)
    assert run.returncode == 0, output[-3000:]
    assert "Trying to restart job" in output  # the rule's retries
    log = (workdir / TRAIN_LOG).read_text()  # the second attempt's log
    resumed = re.search(rf"resuming rotnet from \S+ after epoch (\d+)/{EPOCHS}", log)
    assert resumed is not None, log
    assert 1 <= int(resumed.group(1)) < EPOCHS
    assert "rotnet epoch 1/" not in log  # it did not start over
    _assert_same_model(workdir, retrained)
    assert not (workdir / CHECKPOINT).exists()  # removed once the model is saved


def test_truncated_data_file_is_named(retrained: Path, config: Path, tmp_path: Path) -> None:
    # The data set cache damaged on disk after it was written (a full disk, a cut copy).
    workdir = tmp_path / "run"
    dataset = workdir / "digits/dataset.npz"
    dataset.parent.mkdir(parents=True)
    whole = (retrained / "digits/dataset.npz").read_bytes()
    dataset.write_bytes(whole[: len(whole) // 3])
    result = run_snakemake(workdir, SPLIT, "--cores", "1", "--configfile", str(config), check=False)
    assert result.returncode != 0
    log = (workdir / "logs/prepare_split/digits/0/contam0/seed0.log").read_text()
    assert "cannot read digits/dataset.npz: truncated or damaged .npz" in log
    assert "delete it and re-run" in log
    assert not (workdir / SPLIT).exists()


def test_unreachable_tracking_server_costs_a_warning_not_the_run(
    tiny_run: Path, tmp_path: Path
) -> None:
    workdir = tmp_path / "run"
    shutil.copytree(tiny_run, workdir, symlinks=True)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    started = time.monotonic()
    relog_to_mlflow(workdir, env={"MLFLOW_TRACKING_URI": closed})
    elapsed = time.monotonic() - started
    logged = json.loads((workdir / "mlflow/logged.json").read_text())
    assert logged["status"] == "unreachable" and closed in logged["warning"]
    log = (workdir / "logs/log_to_mlflow/log_to_mlflow.log").read_text()
    assert "does not answer" in log
    job = (workdir / "benchmarks/log_to_mlflow/log_to_mlflow.tsv").read_text()
    job_seconds = float(job.splitlines()[1].split("\t")[0])
    assert job_seconds < 30, job_seconds  # tracking.timeout_s is 3 in the tiny config
    assert elapsed < 120
