"""Run the real Snakemake workflow in a temporary working directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
#: Toy runs cap every rule at one torch thread so two jobs share the two cores: the tiny
#: networks gain nothing from a second thread, a job's start-up (importing torch and
#: scikit-learn, ~3 s) is single-threaded anyway, and OpenMP's spin-waiting makes two-thread
#: jobs crawl on a busy machine.
ONE_THREAD_PER_JOB = ("--max-threads", "1")


def _command(workdir: Path, *args: str) -> list[str]:
    """``snakemake`` on the repo's Snakefile with ``workdir`` as working directory."""
    snakefile = str(REPO / "Snakefile")
    return [str(SNAKEMAKE), "--snakefile", snakefile, "--directory", str(workdir), *args]


def _environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """This environment with the venv's tools first and no tracking server."""
    environment = {**os.environ, "PATH": f"{SNAKEMAKE.parent}{os.pathsep}{os.environ['PATH']}"}
    environment.pop("MLFLOW_TRACKING_URI", None)
    environment.update(env or {})
    return environment


def run_snakemake(
    workdir: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``snakemake`` on the repo's Snakefile with ``workdir`` as working directory."""
    return _run(_command(workdir, *args), args, check=check, env=env)


def relog_to_mlflow(
    workdir: Path,
    config: Path = REPO / "tests/configs/tiny.yaml",
    *,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """The finished run in ``workdir`` logs to MLflow again (``--forcerun log_to_mlflow``, one
    core): what a rerun, a server or an unreachable tracking URI does to the logging step."""
    return run_snakemake(
        workdir,
        "--cores",
        "1",
        "--configfile",
        str(config),
        "--forcerun",
        "log_to_mlflow",
        env=env,
    )


def run_snakemake_in(
    folder: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``snakemake`` started in ``folder`` without ``--directory``, as a user runs it: the
    Snakefile moves into the config's experiment folder, ``folder/results/<name>/``."""
    command = [str(SNAKEMAKE), "--snakefile", str(REPO / "Snakefile"), *args]
    return _run(command, args, check=check, env=env, cwd=folder)


def _run(
    command: list[str],
    args: tuple[str, ...],
    *,
    check: bool,
    env: dict[str, str] | None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    environment = _environment(env)
    result = subprocess.run(
        command, capture_output=True, text=True, env=environment, timeout=1800, cwd=cwd
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed ({result.returncode}):\n"
            f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )
    return result


def start_snakemake(
    workdir: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """``run_snakemake`` in the background, for a test that kills its jobs or the whole run.

    Output (stdout and stderr) is one text pipe; the run is its own process group, so
    ``os.killpg(process.pid, ...)`` reaches Snakemake and its jobs at once.
    """
    return subprocess.Popen(
        _command(workdir, *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_environment(env),
        start_new_session=True,
    )


def script_pids(workdir: Path, script: str) -> list[int]:
    """Processes running ``workdir``'s job script ``script`` (``train_fused.py``, say)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if script in command and (str(workdir) in command or cwd == str(workdir)):
            pids.append(int(entry.name))
    return pids


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny config run end to end once per test session; returns its working directory."""
    workdir = tmp_path_factory.mktemp("tiny_run")
    run_snakemake(workdir, "--cores", "2", "--configfile", str(REPO / "tests/configs/tiny.yaml"))
    return workdir


@pytest.fixture(scope="session")
def studies_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/configs/studies_toy.yaml run end to end once per test session: every study, the
    deployed cell and the curves of train.eval_every; returns its working directory."""
    workdir = tmp_path_factory.mktemp("studies_run")
    config = REPO / "tests/configs/studies_toy.yaml"
    run_snakemake(workdir, "--cores", "2", *ONE_THREAD_PER_JOB, "--configfile", str(config))
    return workdir
