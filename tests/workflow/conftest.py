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


def run_snakemake(
    workdir: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``snakemake`` on the repo's Snakefile with ``workdir`` as working directory."""
    command = [
        str(SNAKEMAKE),
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        *args,
    ]
    environment = {**os.environ, "PATH": f"{SNAKEMAKE.parent}{os.pathsep}{os.environ['PATH']}"}
    environment.pop("MLFLOW_TRACKING_URI", None)
    environment.update(env or {})
    result = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=1800)
    if check and result.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed ({result.returncode}):\n"
            f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )
    return result


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny config run end to end once per test session; returns its working directory."""
    workdir = tmp_path_factory.mktemp("tiny_run")
    run_snakemake(workdir, "--cores", "2", "--configfile", str(REPO / "tests/configs/tiny.yaml"))
    return workdir
