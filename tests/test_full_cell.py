"""benchmarks/full_cell.sh, the two-call run of the full-protocol cell, on a tiny config on
the CPU: a first call trains, scores and leaves its checkpoint; a second call (the resume
call on the device) resumes from it and reports the same AUCs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def _run(out: Path, config: Path, run: Path) -> dict:
    env = {
        **os.environ,
        "OUT": str(out),
        "CONFIG": str(config),
        "DEVICE": "cpu",
        "RUN": str(run),
        "DEADLINE": "600",
        "PYTHON": sys.executable,
    }
    subprocess.run(
        ["bash", str(REPO / "benchmarks/full_cell.sh")], env=env, check=True, timeout=600
    )
    return json.loads((out / "results.json").read_text())


def test_full_cell_script_trains_scores_and_a_second_call_resumes(tmp_path: Path) -> None:
    config = yaml.safe_load((REPO / "config/cifar10_fullcell.yaml").read_text())
    config["datasets"] = {"digits": {"classes": ["3"]}}
    config["train"] = {"epochs": 2, "batch_size": 16, "checkpoint_every": 1}
    config["embed"] = {"batch_size": 256, "width": 4}
    path = tmp_path / "cell.yaml"
    path.write_text(yaml.safe_dump(config))
    run = tmp_path / "run"
    first = _run(tmp_path / "out1", path, run)
    (result,) = first["results"]
    assert result["method"] == "rotnet" and result["training"]["epochs"] == 2
    assert {"kde", "ocsvm"} <= set(result["auroc"]) and 0 <= result["auroc"]["kde"] <= 100
    (checkpoint,) = run.glob("jobs/*.ckpt")  # what the second call resumes from
    written = checkpoint.stat().st_mtime_ns
    second = _run(tmp_path / "out2", path, run)
    assert second["results"][0]["auroc"] == result["auroc"]
    # Resumed after its last epoch, not trained again (that would rewrite it every epoch).
    assert checkpoint.stat().st_mtime_ns == written
    assert second["results"][0]["training"]["epochs"] == 2
    assert "train" in (tmp_path / "out1" / "full_cell.txt").read_text()
