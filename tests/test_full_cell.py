"""benchmarks/full_cell.sh, the run of the full-protocol cell across device calls, on a tiny
config on the CPU: a first call starts the workflow's run in a process session of its own and
returns while it trains; a second call finds it still running; a run killed mid-training is
started again by the next call and its training resumes from the checkpoint; that call follows
the run to its end and brings back the record (benchmarks/run_record.py), the history with
the test-split AUCs of eval_every, the features as float16 and the rotation logits of the four
rotated views as float32; a call after the end hands the same record back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipeline_lib.registry import ROTATION_DETECTORS
from tests.workflow.conftest import script_pids

pytestmark = pytest.mark.workflow  # the run is Snakemake's

REPO = Path(__file__).resolve().parents[1]
STEM = "digits-3-c0-s0-rotnet"
EPOCHS = 6
#: The training job's checkpoint in the run's folder.
CHECKPOINT = "workflow/digits/3/contam0/seed0/rotnet/checkpoint.pt"


def _call(out: Path, config: Path, run: Path, *, wait: int, **extra: str) -> str:
    env = {
        **os.environ,
        "OUT": str(out),
        "CONFIG": str(config),
        "DEVICE": "cpu",
        "RUN": str(run),
        "WAIT": str(wait),
        "CORES": "1",
        "PYTHON": sys.executable,
        **extra,
    }
    done = subprocess.run(
        ["bash", str(REPO / "benchmarks/full_cell.sh")],
        env=env,
        timeout=600,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _check_outputs(out: Path, result: dict) -> None:
    """What a finished call brings back beside results.json: history, features, logits."""
    history = json.loads((out / f"{STEM}.history.json").read_text())["history"]
    assert len(history) == EPOCHS
    evaluated = [record for record in history if "eval" in record]
    assert [record["epoch"] for record in evaluated] == [3, 6]
    assert {frozenset(record["eval"]) for record in evaluated} == {
        frozenset(["kde", "ocsvm", *ROTATION_DETECTORS])
    }
    # The evaluation after the last epoch scores the model the run reports.
    assert history[-1]["eval"] == pytest.approx(result["auroc"], rel=1e-12)
    assert [e["epoch"] for e in result["training"]["eval"]] == [3, 6]
    n_train, n_test = result["n_train"], result["n_test"]
    with np.load(out / f"{STEM}.features.npz") as features:
        assert features["f_train"].shape == (n_train, 32)  # width 4: 8 x 4 features
        assert features["f_test"].shape == (n_test, 32)
        assert features["f_train"].dtype == features["f_test"].dtype == np.float16
        assert features["is_outlier"].shape == (n_test,)
        assert 0 < features["is_outlier"].sum() < n_test
        # Digit 3 is the inlier: the outliers are exactly the other labels.
        assert np.array_equal(features["is_outlier"] == 1, features["test_labels"] != 3)
        assert np.isfinite(features["f_test"].astype(np.float32)).all()
    with np.load(out / f"{STEM}.rotation.npz") as rotation:
        assert rotation["rotation_logits_train"].shape == (n_train, 4, 4)
        assert rotation["rotation_logits_test"].shape == (n_test, 4, 4)
        assert rotation["rotation_logits_test"].dtype == np.float32
        assert rotation["log_p_rotations_test"].shape == (n_test,)


def _processes_of(run: Path) -> list[int]:
    """The run's Python processes: Snakemake, its jobs and the record, working in or naming
    its folder."""
    return script_pids(run / "workflow", "python")


def _kill(run: Path) -> None:
    """The whole run dies, as on a machine handed back: its session and any job beside it."""
    pid_file = run / "run.pid"
    if pid_file.exists():
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 30
    while (left := _processes_of(run)) and time.monotonic() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    assert not _processes_of(run)


def test_full_cell_runs_across_calls_and_resumes_when_started_again(tmp_path: Path) -> None:
    config = yaml.safe_load((REPO / "config/experiments/cifar10_fullcell.yaml").read_text())
    config["datasets"] = {"digits": {"classes": ["3"]}}
    # The eager step: compiling on the CPU would take most of the test's time.
    config["train"] = {"epochs": EPOCHS, "batch_size": 16, "checkpoint_every": 1}
    config["train"] |= {"eval_every": 3, "step_mode": "eager"}
    config["embed"] = {"batch_size": 256, "width": 4}
    path = tmp_path / "cell.yaml"
    path.write_text(yaml.safe_dump(config))
    run = tmp_path / "run"
    try:
        said = _call(tmp_path / "out1", path, run, wait=0, CHECKPOINT_EVERY="2")
        assert "starting the run" in said and "still running" in said
        assert not (tmp_path / "out1" / "results.json").exists()
        # The override went into the run's own config, not into the user's file.
        assert yaml.safe_load((run / "config.yaml").read_text())["train"]["checkpoint_every"] == 2
        said = _call(tmp_path / "out2", path, run, wait=0)
        assert "following the run started earlier" in said and "still running" in said

        # The run dies after its first checkpoint (epoch 2 of 6, the override's).
        deadline = time.monotonic() + 500
        while not (run / CHECKPOINT).exists():
            assert (run / "run.pid").exists() and time.monotonic() < deadline
            assert not (run / "exit_code").exists(), (run / "run.log").read_text()[-3000:]
            time.sleep(0.05)
        _kill(run)
        assert not (run / "exit_code").exists()

        # The next call starts it again; the training resumes and the call follows it to its end.
        said = _call(tmp_path / "out3", path, run, wait=600, CHECKPOINT_EVERY="2")
        assert "starting the run" in said
        log = (tmp_path / "out3" / "full_cell.txt").read_text()
        assert f"after epoch 2/{EPOCHS}" in log and "resuming rotnet" in log
        assert f"rotnet epoch {EPOCHS}/{EPOCHS}: loss" in log  # the job's lines, in the run's log
        record = json.loads((tmp_path / "out3" / "results.json").read_text())
        (result,) = record["results"]
        assert result["method"] == "rotnet" and result["training"]["epochs"] == EPOCHS
        assert set(result["auroc"]) == {"kde", "ocsvm", *ROTATION_DETECTORS}
        assert all(0 <= auroc <= 100 for auroc in result["auroc"].values())
        assert result["device"] == "cpu" and result["training"]["batch_size"] == 16
        assert set(result["timings"]) == {"train_s", "embed_s", "detect_s"}
        assert record["config"]["train"]["checkpoint_every"] == 2
        assert record["commit"]  # this checkout's, or "unknown" without git
        _check_outputs(tmp_path / "out3", result)

        # A call after the end only hands the record back again.
        said = _call(tmp_path / "out4", path, run, wait=600)
        assert "the run has finished" in said
        assert json.loads((tmp_path / "out4" / "results.json").read_text()) == record
        _check_outputs(tmp_path / "out4", result)
    finally:
        _kill(run)
