"""benchmarks/full_cell.sh, the run of the full-protocol cell across device calls, on a tiny
config on the CPU: a first call starts the run in a process session of its own and returns
while it trains; a second call follows that same run to its end and brings back the AUCs;
a run started again after it has gone resumes from its checkpoint instead of training
again. The finished run hands back its history with the test-split AUCs of eval_every, the
features as float16 and the rotation logits of the four rotated views as float32."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipeline_lib.registry import ROTATION_DETECTORS

REPO = Path(__file__).resolve().parents[1]


def _call(out: Path, config: Path, run: Path, *, wait: int, **extra: str) -> str:
    env = {
        **os.environ,
        "OUT": str(out),
        "CONFIG": str(config),
        "DEVICE": "cpu",
        "RUN": str(run),
        "WAIT": str(wait),
        "PYTHON": sys.executable,
        **extra,
    }
    done = subprocess.run(
        ["bash", str(REPO / "benchmarks/full_cell.sh")],
        env=env,
        check=True,
        timeout=600,
        capture_output=True,
        text=True,
    )
    return done.stdout


def _check_outputs(out: Path, result: dict) -> None:
    """What a finished call brings back beside results.json: history, features, logits."""
    stem = "digits-3-c0-s0-rotnet"
    history = json.loads((out / f"{stem}.history.json").read_text())["history"]
    assert [sorted(record.get("eval", {})) for record in history] == [
        sorted(["kde", "ocsvm", *ROTATION_DETECTORS])
    ] * 2
    # The evaluation after the last epoch scores the model the run reports.
    assert history[-1]["eval"] == pytest.approx(result["auroc"], rel=1e-12)
    assert [e["epoch"] for e in result["training"]["eval"]] == [1, 2]
    n_train, n_test = result["n_train"], result["n_test"]
    with np.load(out / f"{stem}.features.npz") as features:
        assert features["f_train"].shape == (n_train, 32)  # width 4: 8 x 4 features
        assert features["f_test"].shape == (n_test, 32)
        assert features["f_train"].dtype == features["f_test"].dtype == np.float16
        assert features["is_outlier"].shape == (n_test,)
        assert 0 < features["is_outlier"].sum() < n_test
        # Digit 3 is the inlier: the outliers are exactly the other labels.
        assert np.array_equal(features["is_outlier"] == 1, features["test_labels"] != 3)
        assert np.isfinite(features["f_test"].astype(np.float32)).all()
    with np.load(out / f"{stem}.rotation.npz") as rotation:
        assert rotation["rotation_logits_train"].shape == (n_train, 4, 4)
        assert rotation["rotation_logits_test"].shape == (n_test, 4, 4)
        assert rotation["rotation_logits_test"].dtype == np.float32
        assert rotation["log_p_rotations_test"].shape == (n_test,)


def _stop(run: Path) -> None:
    """End a background run a failed assertion left behind."""
    pid_file = run / "run.pid"
    if pid_file.exists() and not (run / "exit_code").exists():
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_full_cell_runs_across_calls_and_resumes_when_started_again(tmp_path: Path) -> None:
    config = yaml.safe_load((REPO / "config/experiments/cifar10_fullcell.yaml").read_text())
    config["datasets"] = {"digits": {"classes": ["3"]}}
    config["train"] = {"epochs": 2, "batch_size": 16, "checkpoint_every": 1, "eval_every": 1}
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
        said = _call(tmp_path / "out2", path, run, wait=600)
        assert "following the run started earlier" in said
        first = json.loads((tmp_path / "out2" / "results.json").read_text())
        (result,) = first["results"]
        assert result["method"] == "rotnet" and result["training"]["epochs"] == 2
        assert {"kde", "ocsvm"} <= set(result["auroc"]) and 0 <= result["auroc"]["kde"] <= 100
        assert "train rotnet" in (tmp_path / "out2" / "full_cell.txt").read_text()  # its bar
        _check_outputs(tmp_path / "out2", result)
        assert first["commit"]  # this checkout's, or "unknown" without git
        # A call after the end only hands the result back again.
        said = _call(tmp_path / "out2b", path, run, wait=600)
        assert "the run has finished" in said
        assert json.loads((tmp_path / "out2b" / "results.json").read_text()) == first
        (checkpoint,) = run.glob("jobs/*.ckpt")  # written once, after epoch 2
        written = checkpoint.stat().st_mtime_ns
        # As if the run had gone unfinished: the next call starts it again.
        (run / "exit_code").unlink()
        (run / "results.json").unlink()
        said = _call(tmp_path / "out3", path, run, wait=600)
        assert "starting the run" in said
        again = json.loads((tmp_path / "out3" / "results.json").read_text())
        assert again["results"][0]["auroc"] == result["auroc"]
        # Resumed after its last epoch, not trained again (that would rewrite the checkpoint).
        assert checkpoint.stat().st_mtime_ns == written
        assert again["results"][0]["training"]["epochs"] == 2
        _check_outputs(tmp_path / "out3", again["results"][0])  # the history came back too
    finally:
        _stop(run)
