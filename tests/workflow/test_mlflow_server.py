"""MLflow server mode: the pipeline's single writer logs to a real ``mlflow server`` over HTTP.

The server is started by this module as docs/cluster.md says, with basic authentication
(``mlflow server --app-name basic-auth``), on 127.0.0.1 (a free port, SQLite stores and artifact
folder in a temporary directory), and stopped at the end. The admin's password and the
writer's account are made up per run and reach the processes through environment variables
only (``MLFLOW_AUTH_ADMIN_PASSWORD`` for the server, ``MLFLOW_TRACKING_USERNAME`` and
``MLFLOW_TRACKING_PASSWORD`` for the pipeline). Nothing is mocked.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient

from pipeline_lib.tracking.mlflow_store import KEY_TAG, KIND_TAG, SWEEP_TAG, log_sweep
from tests.serving import MLFLOW, free_port, stop_group, wait_until_answers
from tests.tracking_cases import job_records
from tests.workflow.conftest import REPO, relog_to_mlflow, run_snakemake

pytestmark = pytest.mark.workflow

TINY = REPO / "tests/configs/tiny.yaml"


@dataclass(frozen=True)
class Server:
    uri: str
    user: str
    password: str

    def env(self, password: str | None = None) -> dict[str, str]:
        """The client side's environment: the account, never in a config or the repo."""
        return {
            "MLFLOW_TRACKING_URI": self.uri,
            "MLFLOW_TRACKING_USERNAME": self.user,
            "MLFLOW_TRACKING_PASSWORD": self.password if password is None else password,
        }


def _request(
    url: str, *, auth: tuple[str, str] | None = None, body: dict | None = None
) -> tuple[int, str]:
    """HTTP status and body of a GET (or a JSON POST when ``body`` is given)."""
    headers = {"Content-Type": "application/json"}
    if auth is not None:
        token = base64.b64encode(":".join(auth).encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A real ``mlflow server --app-name basic-auth`` and a writer account on it."""
    root = tmp_path_factory.mktemp("mlflow_server")
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    admin = ("admin", secrets.token_urlsafe(16))
    # The auth app's settings file: its user database; the admin's password is not in it.
    (root / "basic_auth.ini").write_text(
        "[mlflow]\n"
        "default_permission = READ\n"
        f"database_uri = sqlite:///{root / 'basic_auth.db'}\n"
        f"admin_username = {admin[0]}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
        # Without it every request hashes the password again (PBKDF2): about 3x slower.
        "auth_cache_ttl_seconds = 300\n"
    )
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    environment |= {
        "MLFLOW_AUTH_CONFIG_PATH": str(root / "basic_auth.ini"),
        "MLFLOW_AUTH_ADMIN_PASSWORD": admin[1],  # read once, when the user store is created
        "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(16),  # CSRF protection needs one
    }
    with open(root / "server.log", "w") as log:
        process = subprocess.Popen(
            [
                str(MLFLOW),
                "server",
                "--app-name",
                "basic-auth",
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
        if not wait_until_answers(f"{uri}/health", process, timeout_s=120):  # needs no login
            raise RuntimeError(
                f"mlflow server did not start:\n{(root / 'server.log').read_text()[-3000:]}"
            )
        writer = Server(uri, "droc-writer", secrets.token_urlsafe(16))
        status, body = _request(
            f"{uri}/api/2.0/mlflow/users/create",
            auth=admin,
            body={"username": writer.user, "password": writer.password},
        )
        assert status == 200, body
        yield writer
    finally:
        stop_group(process, grace_s=5)


@pytest.fixture
def login(server: Server, monkeypatch: pytest.MonkeyPatch) -> Server:
    """The writer's account in this process's environment, for the test's own MlflowClient."""
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    return server


def test_the_server_refuses_requests_without_the_right_credentials(server: Server) -> None:
    search = f"{server.uri}/api/2.0/mlflow/experiments/search?max_results=5"
    assert _request(search)[0] == 401
    assert _request(search, auth=(server.user, "wrong-password"))[0] == 401
    assert _request(search, auth=(server.user, server.password))[0] == 200


@pytest.fixture(scope="module")
def small_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny config cut to one class, one seed, no contamination, two detectors.

    Its sweep has 4 results (2 methods x 2 detectors) instead of the tiny config's 80, each
    logged under the sweep's parent run and the main study's: about 10 runs, tens of requests.
    The auth app answers a request in about 0.5 s on 2 shared cores, and logging the whole
    tiny sweep took about 1,250 requests (over 10 minutes). Its jobs are a subset of the tiny
    run's, so a copy of that run only re-aggregates.
    """
    settings = yaml.safe_load(TINY.read_text())
    settings["datasets"]["digits"]["classes"] = ["0"]
    settings["seeds"] = [0]
    settings["splits"] = {"contamination": [0.0], "clean_inliers": []}
    settings["detectors"] = {"kde": {}, "knn": {}}
    path = tmp_path_factory.mktemp("small_config") / "small.yaml"
    # The tiny config's key order: Snakemake compares a job's params as written, so sorted
    # keys would re-run the data set job for the same settings.
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return path


def test_pipeline_logs_to_the_server(
    login: Server, tiny_run: Path, small_config: Path, tmp_path: Path
) -> None:
    server = login.uri
    # A copy of the finished tiny run, so the shared fixture keeps its own MLflow store. The
    # small sweep is first aggregated and logged to a new SQLite store of the copy's own (the
    # reference below; the copied store's artifact folder would be the tiny run's), then
    # logged again, to the server.
    workdir = tmp_path / "run"
    shutil.copytree(tiny_run, workdir, symlinks=True)
    shutil.rmtree(workdir / "mlflow")
    run_snakemake(workdir, "--cores", "1", "--configfile", str(small_config))
    relog_to_mlflow(workdir, small_config, env=login.env())
    logged = json.loads((workdir / "mlflow/logged.json").read_text())
    assert logged["status"] == "logged" and logged["tracking_uri"] == server
    results = pd.read_csv(workdir / "summary/results.csv")
    assert len(results) == 4  # small: tens of requests, not a thousand

    def identities(client: MlflowClient) -> list[tuple[str, str]]:
        experiment = client.get_experiment_by_name("droc-tiny")
        runs = client.search_runs([experiment.experiment_id], max_results=5000)
        return [(run.data.tags[SWEEP_TAG], run.data.tags[KEY_TAG]) for run in runs]

    # The server holds the runs the run's own SQLite store holds for the same sweeps (the
    # sweep and each study), each once.
    remote = identities(MlflowClient(tracking_uri=server))
    sweeps = {sweep for sweep, _ in remote}
    assert logged["sweep"] in sweeps
    local = identities(MlflowClient(tracking_uri=f"sqlite:///{workdir}/mlflow/mlflow.db"))
    assert len(remote) == len(set(remote))
    assert set(remote) == {(sweep, key) for sweep, key in local if sweep in sweeps}
    assert {key for sweep, key in remote if sweep == logged["sweep"]} >= set(results["result_key"])

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
    assert Path(downloaded).read_bytes() == (workdir / "summary/main_table.csv").read_bytes()


#: One writer in its own process, as a second host would be: waits for ``go``, then logs.
WRITER = """
import json, sys, time
from pathlib import Path
from pipeline_lib.tracking.mlflow_store import log_sweep
uri, records, lock, go = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
print("ready", flush=True)
while not go.exists():
    time.sleep(0.01)
summary = log_sweep(records, uri=uri, experiment="two-writers", sweep="s1", lock_path=lock)
print(json.dumps(summary), flush=True)
"""


def test_two_aggregations_at_once_and_a_rerun_leave_one_run_per_result(
    login: Server, tmp_path: Path
) -> None:
    server = login.uri
    records = job_records(20)
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
            env=os.environ | login.env(),
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


def test_a_wrong_password_warns_and_keeps_every_result(
    server: Server, tiny_run: Path, tmp_path: Path
) -> None:
    workdir = tmp_path / "run"
    shutil.copytree(tiny_run, workdir, symlinks=True)
    started = time.monotonic()
    run_snakemake(  # check=True: a refused login must not fail the pipeline
        workdir,
        "--cores",
        "1",
        "--configfile",
        str(TINY),
        "--forcerun",
        "init_tracking",  # and so log_to_mlflow, which needs its output
        env=server.env(password="not-the-password"),
    )
    assert time.monotonic() - started < 120
    for step in ("init_tracking", "log_to_mlflow"):
        log = (workdir / f"logs/{step}/{step}.log").read_text()
        assert f"MLflow tracking server {server.uri} refused access" in log, log
        assert f"refused the password of user '{server.user}' (HTTP 401)" in log
        assert "MLFLOW_TRACKING_PASSWORD" in log
    store = json.loads((workdir / "mlflow/store.json").read_text())
    logged = json.loads((workdir / "mlflow/logged.json").read_text())
    assert store["status"] == logged["status"] == "unauthorized"
    assert "refused access" in logged["warning"]
    assert (
        "not-the-password"
        not in logged["warning"] + (workdir / "logs/log_to_mlflow/log_to_mlflow.log").read_text()
    )

    # The results are complete: every file of the local run is there, the summary unchanged.
    def files(root: Path) -> set[str]:
        skipped = ("mlflow", "benchmarks", ".snakemake")
        return {
            path.relative_to(root).as_posix()
            for path in root.rglob("*")
            if path.is_file() and path.relative_to(root).parts[0] not in skipped
        }

    assert files(tiny_run) <= files(workdir)
    for table in (tiny_run / "summary").glob("*.csv"):
        assert (workdir / "summary" / table.name).read_bytes() == table.read_bytes()
