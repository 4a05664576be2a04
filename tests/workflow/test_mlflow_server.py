"""MLflow server mode: the pipeline's single writer logs to a real ``mlflow server`` over HTTP.

The server is started by this module on 127.0.0.1 (a free port, SQLite store and artifact
folder in a temporary directory) and stopped at the end. Nothing is mocked.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from pipeline_lib.report.tracking import KEY_TAG, KIND_TAG, SWEEP_TAG, log_sweep
from tests.workflow.conftest import REPO, run_snakemake

pytestmark = pytest.mark.workflow

TINY = REPO / "tests/configs/tiny.yaml"
MLFLOW = Path(sys.executable).with_name("mlflow")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _healthy(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``mlflow server`` for this module; yields its URI."""
    root = tmp_path_factory.mktemp("mlflow_server")
    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    with open(root / "server.log", "w") as log:
        process = subprocess.Popen(
            [
                str(MLFLOW),
                "server",
                "--backend-store-uri",
                f"sqlite:///{root / 'mlflow.db'}",
                "--artifacts-destination",
                str(root / "artifacts"),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "1",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,  # its workers share the group: stop them all at the end
        )
    try:
        deadline = time.monotonic() + 120
        while not _healthy(uri):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"mlflow server did not start:\n{(root / 'server.log').read_text()[-3000:]}"
                )
            time.sleep(0.5)
        yield uri
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _records(n: int) -> list[dict]:
    return [
        {
            "result_key": f"results/digits/{inlier}/contam0/seed0/raw/train/knn/result.json",
            "dataset": "digits",
            "inlier": str(inlier),
            "method": "raw",
            "seed": 0,
            "contamination": 0.0,
            "fitset": "train",
            "detector": "knn",
            "auroc": 50.0 + inlier,
        }
        for inlier in range(n)
    ]


def test_pipeline_logs_to_the_server(server: str, tiny_run: Path, tmp_path: Path) -> None:
    # A copy of the finished tiny run, so the shared fixture keeps its own MLflow store.
    workdir = tmp_path / "run"
    shutil.copytree(tiny_run, workdir, symlinks=True)
    run_snakemake(
        workdir,
        "--cores",
        "1",
        "--configfile",
        str(TINY),
        "--forcerun",
        "log_to_mlflow",
        env={"MLFLOW_TRACKING_URI": server},
    )
    logged = json.loads((workdir / "results/mlflow/logged.json").read_text())
    assert logged["status"] == "logged" and logged["tracking_uri"] == server

    def identities(client: MlflowClient) -> list[tuple[str, str]]:
        experiment = client.get_experiment_by_name("droc-tiny")
        runs = client.search_runs([experiment.experiment_id], max_results=5000)
        return [(run.data.tags[SWEEP_TAG], run.data.tags[KEY_TAG]) for run in runs]

    # The server holds the runs the run's own SQLite store holds for the same sweeps (the
    # sweep and each study), each once.
    remote = identities(MlflowClient(tracking_uri=server))
    sweeps = {sweep for sweep, _ in remote}
    assert logged["sweep"] in sweeps
    local = identities(MlflowClient(tracking_uri=f"sqlite:///{tiny_run}/results/mlflow/mlflow.db"))
    assert len(remote) == len(set(remote))
    assert set(remote) == {(sweep, key) for sweep, key in local if sweep in sweeps}

    client = MlflowClient(tracking_uri=server)
    experiment = client.get_experiment_by_name("droc-tiny")
    # The server keeps the artifacts: nothing points into the job's file system.
    assert experiment.artifact_location.startswith("mlflow-artifacts:")
    runs = client.search_runs([experiment.experiment_id], max_results=5000)
    parents = {
        run.data.tags[SWEEP_TAG]: run.info.run_id
        for run in runs
        if run.data.tags[KIND_TAG] == "summary"
    }
    for run in runs:
        if run.data.tags[KIND_TAG] != "summary":
            assert run.data.tags["mlflow.parentRunId"] == parents[run.data.tags[SWEEP_TAG]]
    downloaded = client.download_artifacts(
        parents[logged["sweep"]], "summary/main_table.csv", str(tmp_path)
    )
    assert (
        Path(downloaded).read_bytes() == (workdir / "results/summary/main_table.csv").read_bytes()
    )


#: One writer in its own process, as a second host would be: waits for ``go``, then logs.
WRITER = """
import json, sys, time
from pathlib import Path
from pipeline_lib.report.tracking import log_sweep
uri, records, lock, go = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
print("ready", flush=True)
while not go.exists():
    time.sleep(0.01)
summary = log_sweep(records, uri=uri, experiment="two-writers", sweep="s1", lock_path=lock)
print(json.dumps(summary), flush=True)
"""


def test_two_aggregations_at_once_and_a_rerun_leave_one_run_per_result(
    server: str, tmp_path: Path
) -> None:
    records = _records(20)
    go = tmp_path / "go"
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                server,
                json.dumps(records),
                str(tmp_path / f"host{index}.lock"),  # two hosts: no shared writer lock
                str(go),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env={k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
        )
        for index in range(2)
    ]
    for writer in writers:
        assert writer.stdout.readline().strip() == "ready"
    go.touch()
    summaries = []
    for writer in writers:
        output, _ = writer.communicate(timeout=300)
        summaries.append(json.loads(output.strip().splitlines()[-1]))
    assert [summary["status"] for summary in summaries] == ["logged", "logged"]
    # Both searched before either had created its runs: they raced, and cleaned up after.
    assert sum(summary["duplicates_removed"] for summary in summaries) > 0

    client = MlflowClient(tracking_uri=server)
    experiment_id = client.get_experiment_by_name("two-writers").experiment_id

    def check_one_run_per_result() -> None:
        runs = client.search_runs([experiment_id], max_results=1000)
        by_key = {run.data.tags[KEY_TAG]: run for run in runs}
        assert len(runs) == len(by_key) == len(records) + 1
        parent = by_key["sweep:s1"]
        for record in records:
            run = by_key[record["result_key"]]
            assert run.data.metrics["auroc"] == record["auroc"]
            assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id

    check_one_run_per_result()
    rerun = log_sweep(
        records,
        uri=server,
        experiment="two-writers",
        sweep="s1",
        lock_path=tmp_path / "host0.lock",
    )
    assert (rerun["created"], rerun["unchanged"], rerun["duplicates_removed"]) == (0, 20, 0)
    check_one_run_per_result()
