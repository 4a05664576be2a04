"""Train, package, register and serve a detector for real; compare served scores.

The deploy toy config trains a RotNet (width 8, 3 epochs) on digits class 0, scores it,
logs the sweep and registers the packaged RotNet + KDE cell in the run's SQLite MLflow
store. ``mlflow models serve`` then answers on 127.0.0.1 (a free port, bounded wait,
stopped at the end); the served scores of the real test images must equal the in-process
ones and give the AUC the pipeline recorded for that cell.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from pipeline_lib.data.split import load_split
from pipeline_lib.deploy.package import PackagedDetector
from pipeline_lib.detection.metrics import auroc
from pipeline_lib.runtime.io import load_image_dataset, load_json
from tests.deploy.conftest import png_bytes
from tests.workflow.conftest import ONE_THREAD_PER_JOB, REPO, run_snakemake
from tests.workflow.test_mlflow_server import _free_port

pytestmark = pytest.mark.workflow

MLFLOW = Path(sys.executable).with_name("mlflow")
NAME = "droc-digits-0"
CELL = "results/digits/0/contam0/seed0"


@pytest.fixture(scope="module")
def deploy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("deploy_run")
    config = REPO / "tests/configs/deploy_toy.yaml"
    run_snakemake(workdir, "--cores", "2", *ONE_THREAD_PER_JOB, "--configfile", str(config))
    return workdir


def _post(url: str, payload: dict) -> tuple[int, dict | str]:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_deploy_registers_the_cell(deploy_run: Path) -> None:
    record = load_json(deploy_run / f"results/deploy/{NAME}/deployed.json")
    assert record["cell"]["method"] == "rotnet" and record["cell"]["detector"] == "kde"
    result = load_json(deploy_run / f"{CELL}/rotnet/train/kde/result.json")
    metrics = record["metrics"]
    assert metrics["auroc_recorded"] == result["auroc"]
    assert metrics["auroc_pixels"] == pytest.approx(result["auroc"], abs=1e-9)
    assert 0.0 <= metrics["test_fpr"] <= 1.0 and metrics["heldout_fpr"] <= 0.05
    client = MlflowClient(f"sqlite:///{deploy_run / 'results/mlflow/mlflow.db'}")
    versions = client.search_model_versions(f"name = '{NAME}'")
    assert [str(v.version) for v in versions] == ["1"]
    run = client.get_run(versions[0].run_id)
    assert run.data.metrics["threshold"] == pytest.approx(metrics["threshold"])
    assert run.data.metrics["test_fpr"] == pytest.approx(metrics["test_fpr"])


def test_served_scores_match_in_process_and_recorded_auc(deploy_run: Path) -> None:
    port = _free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    # The scoring server runs uvicorn from the environment's bin folder.
    environment["PATH"] = f"{MLFLOW.parent}{os.pathsep}{environment['PATH']}"
    environment["MLFLOW_TRACKING_URI"] = f"sqlite:///{deploy_run / 'results/mlflow/mlflow.db'}"
    log_path = deploy_run / "serve.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [
                str(MLFLOW),
                "models",
                "serve",
                "-m",
                f"models:/{NAME}/1",
                "--env-manager",
                "local",
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-w",
                "1",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
            cwd=deploy_run,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{url}/ping", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"mlflow models serve did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(1)

        dataset = load_image_dataset(deploy_run / "results/digits/dataset.npz")
        split = load_split(deploy_run / f"{CELL}/split.npz")
        images = dataset.test_images[split.test_index]
        records = [
            {"name": str(i), "image": base64.b64encode(png_bytes(image)).decode()}
            for i, image in enumerate(images)
        ]
        records.append({"name": "broken", "image": base64.b64encode(b"\x89PNG\r\n").decode()})
        status, answer = _post(f"{url}/invocations", {"dataframe_records": records})
        assert status == 200, answer
        rows = answer["predictions"]
        assert [row["name"] for row in rows] == [*map(str, range(len(images))), "broken"]
        assert rows[-1]["score"] is None and "image" in rows[-1]["error"]
        served = np.array([row["score"] for row in rows[:-1]], dtype=np.float64)

        package = PackagedDetector.load(deploy_run / f"results/deploy/{NAME}/package")
        in_process = package.anomaly_scores(images)
        difference = float(np.max(np.abs(served - in_process)))
        print(f"served vs in-process: max |diff| {difference:.3g} over {len(images)} images")
        assert difference <= 1e-9
        recorded = load_json(deploy_run / f"{CELL}/rotnet/train/kde/result.json")["auroc"]
        served_auc = auroc(served, split.test_is_outlier)
        print(f"AUC served {served_auc:.6f}, recorded by the pipeline {recorded:.6f}")
        assert served_auc == pytest.approx(recorded, abs=1e-9)
        assert [row["is_anomaly"] for row in rows[:-1]] == list(in_process > package.threshold)

        status, reason = _post(f"{url}/invocations", {"dataframe_records": [{"image": "x"}] * 257})
        assert status == 400 and "over the limit of 256" in reason
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
