"""Warm workers: a job handed over runs in a fork of the server, with the job's directory,
environment, streams and exit code; anything the server cannot take runs cold."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline_lib.runtime import warm_jobs

REPO = Path(__file__).resolve().parents[1]

#: A job script as Snakemake would run it, reduced to what hand_over reads.
JOB = """
from pipeline_lib.runtime.warm_jobs import hand_over


class Job:
    resources = {{"gpu": {gpu}}}


hand_over(Job())
import json, os, sys
print(json.dumps({{"pid": os.getpid(), "cwd": os.getcwd(), "flavour": os.environ.get("FLAVOUR"),
                  "child": os.environ.get("DROC_WARM_CHILD")}}), flush=True)
print("to stderr", file=sys.stderr)
{tail}
"""


def _script(directory: Path, name: str, *, tail: str = "", gpu: int = 0) -> Path:
    path = directory / name
    path.write_text(JOB.format(tail=tail, gpu=gpu))
    return path


def _run(script: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(REPO), "FLAVOUR": "lemon", **env}
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A running server (preloading for one tiny script) and the socket its jobs use."""
    script = tmp_path / "tiny.py"
    script.write_text('"""x"""\n\nimport json\n')
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.delenv(warm_jobs.SOCKET_VARIABLE, raising=False)
    process = warm_jobs.start_server([script] * warm_jobs.MIN_JOBS, tmp_path / "logs")
    assert process is not None
    socket_path = Path(os.environ[warm_jobs.SOCKET_VARIABLE])
    _wait_for(socket_path)
    yield process, socket_path
    warm_jobs.stop_server(process)
    assert process.returncode is not None
    assert not socket_path.exists()


def _log(tmp_path: Path) -> str:
    return "".join(path.read_text() for path in (tmp_path / "logs").glob("warm_jobs.*.log"))


def test_a_job_runs_in_a_fork_with_its_directory_environment_and_streams(server, tmp_path):
    _, socket_path = server
    workdir = tmp_path / "work"
    workdir.mkdir()
    script = _script(tmp_path, "job.py")
    result = _run(script, workdir, DROC_WARM_SOCKET=str(socket_path))
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["child"] == "1"  # ran in the server's child, not in the client
    assert seen["cwd"] == str(workdir) and seen["flavour"] == "lemon"
    assert result.stderr.strip() == "to stderr"
    assert f"ran job.py (pid {seen['pid']}): exit 0" in _log(tmp_path)


def test_exit_codes_and_tracebacks_come_back(server, tmp_path):
    _, socket_path = server
    exits = _run(
        _script(tmp_path, "exits.py", tail="sys.exit(3)"),
        tmp_path,
        DROC_WARM_SOCKET=str(socket_path),
    )
    assert exits.returncode == 3
    fails = _run(
        _script(tmp_path, "fails.py", tail="raise RuntimeError('boom')"),
        tmp_path,
        DROC_WARM_SOCKET=str(socket_path),
    )
    assert fails.returncode == 1
    assert "RuntimeError: boom" in fails.stderr and "fails.py" in fails.stderr
    assert json.loads(fails.stdout.splitlines()[0])["child"] == "1"


def _start_sleeping_job(tmp_path: Path, socket_path: Path) -> tuple[subprocess.Popen[str], int]:
    """A handed-over job that sleeps; its client process and the pid of the forked job."""
    marker = tmp_path / "started"
    tail = f"open({str(marker)!r}, 'w').write(str(os.getpid()))\nimport time\ntime.sleep(120)"
    script = _script(tmp_path, "sleeps.py", tail=tail)
    environment = {**os.environ, "PYTHONPATH": str(REPO), "DROC_WARM_SOCKET": str(socket_path)}
    client = subprocess.Popen(
        [sys.executable, str(script)],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(marker)
    _wait_for_text(marker)
    return client, int(marker.read_text())


def test_a_job_whose_client_dies_is_killed(server, tmp_path):
    _, socket_path = server
    client, child = _start_sleeping_job(tmp_path, socket_path)
    assert child != client.pid
    client.kill()  # as Snakemake cancelling the job, or the fault tests, would
    client.communicate()
    deadline = time.monotonic() + 10
    while _running(child):
        assert time.monotonic() < deadline, "the orphaned job kept running"
        time.sleep(0.05)
    # The kernel ended it (SIGIO from its client's closed connection), or the server did.
    assert re.search(rf"client went away; killed|\(pid {child}\): exit -(29|9)\b", _log(tmp_path))


def test_a_job_dies_with_its_server_and_its_client_fails(server, tmp_path):
    process, socket_path = server
    client, child = _start_sleeping_job(tmp_path, socket_path)
    process.kill()  # the server dies (OOM killer), its job with it
    _, stderr = client.communicate(timeout=30)
    assert client.returncode == 1 and "stopped answering" in stderr
    assert not _running(child)


def _wait_for_text(path: Path) -> None:
    deadline = time.monotonic() + 30
    while not path.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for the server to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_jobs_the_server_cannot_take_run_cold(server, tmp_path):
    _, socket_path = server
    gpu = _run(_script(tmp_path, "gpu.py", gpu=1), tmp_path, DROC_WARM_SOCKET=str(socket_path))
    assert gpu.returncode == 0 and json.loads(gpu.stdout)["child"] is None
    nowhere = _run(_script(tmp_path, "cold.py"), tmp_path, DROC_WARM_SOCKET=str(tmp_path / "no"))
    assert nowhere.returncode == 0 and json.loads(nowhere.stdout)["child"] is None


def test_bad_requests_are_refused_and_the_server_goes_on(server, tmp_path):
    _, socket_path = server
    library = str(REPO / "pipeline_lib")
    for request in (
        {"script": "x.py", "cwd": "/", "env": {}, "library": "/elsewhere/pipeline_lib"},
        "x" * (warm_jobs.MAX_REQUEST_BYTES + 1),  # over the size bound
        [1, 2],  # not an object
        {"cwd": "/", "env": {}, "library": library},  # no script
    ):
        payload = json.dumps(request).encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(str(socket_path))
            header = struct.pack("!I", len(payload))
            socket.send_fds(connection, [header], [0, 1, 2])
            with contextlib.suppress(OSError):  # the server may close before the end
                connection.sendall(payload[:65536])
            reply = json.loads(connection.makefile("rb").readline())
        assert "refused" in reply and "pid" not in reply
    assert _log(tmp_path).count("rejected a request") == 4
    after = _run(_script(tmp_path, "after.py"), tmp_path, DROC_WARM_SOCKET=str(socket_path))
    assert after.returncode == 0 and json.loads(after.stdout)["child"] == "1"


def _server_of(parent: int, socket_path: Path, script_list: Path, output) -> subprocess.Popen:
    """A server started by hand, as start_server does, for the Snakemake process ``parent``."""
    command = [sys.executable, "-m", "pipeline_lib.runtime.warm_jobs", str(socket_path)]
    command += ["--parent", str(parent), "--scripts", str(script_list)]
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(command, env=environment, stdout=output, stderr=output)


def test_the_server_exits_with_its_snakemake_process(tmp_path, monkeypatch):
    script = tmp_path / "tiny.py"
    script.write_text("import json\n")
    script_list = tmp_path / "scripts.json"
    script_list.write_text(json.dumps([str(script)]))
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    socket_path = tmp_path / "s.sock"
    server = _server_of(parent.pid, socket_path, script_list, subprocess.DEVNULL)
    _wait_for(socket_path)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert server.wait(timeout=30) == 0
    assert not socket_path.exists()


def test_a_process_outside_the_servers_run_is_refused_and_runs_cold(tmp_path):
    """A cluster job inherits the socket's address through ``sbatch --export=ALL``; on the
    submitting host itself it must still run in its own process, under SLURM's limits."""
    script_list = tmp_path / "scripts.json"
    script_list.write_text("[]")
    other_run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    socket_path = tmp_path / "s.sock"
    log = tmp_path / "server.log"
    with open(log, "w") as handle:
        server = _server_of(other_run.pid, socket_path, script_list, handle)
    try:
        _wait_for(socket_path)
        result = _run(_script(tmp_path, "job.py"), tmp_path, DROC_WARM_SOCKET=str(socket_path))
        assert result.returncode == 0 and json.loads(result.stdout)["child"] is None
        assert f"not a job of process {other_run.pid}" in log.read_text()
    finally:
        other_run.kill()
        other_run.wait()
        server.wait(timeout=30)


def test_no_server_when_switched_off_or_for_a_run_of_few_jobs(tmp_path, monkeypatch):
    monkeypatch.delenv(warm_jobs.SOCKET_VARIABLE, raising=False)
    few = [tmp_path / "job.py"] * (warm_jobs.MIN_JOBS - 1)
    assert warm_jobs.start_server(few, tmp_path / "logs") is None
    monkeypatch.setenv(warm_jobs.SWITCH_VARIABLE, "0")
    assert warm_jobs.start_server(few * 10, tmp_path / "logs") is None
    assert warm_jobs.SOCKET_VARIABLE not in os.environ


def test_preloads_what_the_job_scripts_import():
    modules = warm_jobs.modules_to_preload(sorted((REPO / "workflow" / "scripts").glob("*.py")))
    assert "pipeline_lib.detection.runner" in modules and "pipeline_lib.ssl.train" in modules
    assert modules[:2] == list(warm_jobs.PREAMBLE_MODULES)


@pytest.mark.parametrize(
    "script", sorted((REPO / "workflow" / "scripts").glob("*.py")), ids=lambda path: path.name
)
def test_every_job_script_hands_over_before_its_other_imports(script):
    """A heavy import above the hand-over would be paid twice, once cold and once warm."""
    body = ast.parse(script.read_text()).body
    docstring, first_import, call = body[:3]
    assert isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant)
    assert ast.unparse(first_import) == "from pipeline_lib.runtime.warm_jobs import hand_over"
    assert ast.unparse(call) == "hand_over(snakemake)"


def test_preload_loads_what_library_modules_import_lazily():
    """mlflow_store imports mlflow inside its functions, and a training job's first optimiser
    imports torch._dynamo: the server loads both up front, so a forked job imports neither."""
    probe = (
        "import sys; from pipeline_lib.runtime import warm_jobs; "
        "failures = warm_jobs.preload("
        "['pipeline_lib.tracking.mlflow_store', 'pipeline_lib.ssl.run', 'no_such_module']); "
        "print(sorted(m for m in sys.modules if m in ('mlflow.tracking', 'mlflow.entities'))); "
        "import torch; before = set(sys.modules); "
        "torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1); "
        "print(sorted(set(sys.modules) - before)); "
        "print(failures)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    loaded, imported_by_the_optimiser, failures = result.stdout.splitlines()
    assert loaded == "['mlflow.entities', 'mlflow.tracking']"
    assert imported_by_the_optimiser == "[]"
    assert "no_such_module: ModuleNotFoundError" in failures
