"""A registered model served by ``mlflow models serve`` for the HTTP tests: start, wait, stop.

Shared by the image cell's (tests/workflow/test_deploy_serve.py) and the MVTec cell's
(tests/mvtec/test_workflow.py) tests, so both start the server the way docs/deploy.md says:
``--env-manager local`` on 127.0.0.1, a free port, one worker, the tracking URI from the
environment. The server runs in its own process group, so stopping it stops its uvicorn
worker too, and a server that exits or does not answer ``/ping`` in time fails the test
with the end of its log.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

MLFLOW = Path(sys.executable).with_name("mlflow")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop_group(process: subprocess.Popen, *, grace_s: float = 10) -> None:
    """SIGTERM the process group of ``process`` (started with a new session), then SIGKILL.

    The whole group, even when ``process`` itself has exited: its workers may outlive it.
    """
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:  # the group is gone already
        pass
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def post_json(url: str, payload: dict, *, timeout_s: float = 120) -> tuple[int, dict | str]:
    """HTTP status and answer of a JSON POST: the parsed JSON on 2xx, else the body's text."""
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def wait_until_answers(url: str, process: subprocess.Popen, *, timeout_s: float) -> bool:
    """Poll ``url`` until it answers 200 (True), or ``process`` exits or ``timeout_s`` pass
    (False): a server started in the background is ready, or will not be."""
    deadline = time.monotonic() + timeout_s
    while not _answers(url):
        if process.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


@contextmanager
def served_model(
    model_uri: str, *, tracking_uri: str, workdir: Path, start_timeout_s: float = 180
) -> Iterator[str]:
    """Serve ``model_uri`` until the block ends; yields the base URL (``http://127.0.0.1:PORT``).

    The server's log goes to ``workdir/serve.log``. Other ``MLFLOW_*`` variables of this
    process are dropped, so only ``tracking_uri`` decides where ``models:/`` resolves.
    """
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    # The scoring server runs uvicorn from the environment's bin folder.
    environment["PATH"] = f"{MLFLOW.parent}{os.pathsep}{environment['PATH']}"
    environment["MLFLOW_TRACKING_URI"] = tracking_uri
    log_path = workdir / "serve.log"
    command = [
        str(MLFLOW),
        "models",
        "serve",
        "-m",
        model_uri,
        "--env-manager",
        "local",
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "-w",
        "1",
    ]
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
            cwd=workdir,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_until_answers(f"{url}/ping", process, timeout_s=start_timeout_s):
            pytest.fail(f"mlflow models serve did not start:\n{log_path.read_text()[-3000:]}")
        yield url
    finally:
        stop_group(process)
