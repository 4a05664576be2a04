"""The tiny config on a real one-node SLURM cluster through ``--profile profiles/slurm``.

The cluster (munged, slurmctld, slurmd on this machine; tests/cluster/slurm.py) is started
once per session and stopped by PID at the end. The shipped profile is used as it is, except
for what differs per cluster, given on the command line: the partition (this cluster has one,
``droc``), no account, no GPU (the torch rules ask for one), this node's CPUs and memory as
the caps of a bundle, and a 1 s wait before the first status check (the plugin's 40 s default
makes the run take minutes). Every Snakemake run is SIGKILLed as a process group if it outlives
its timeout: the plugin can loop forever, ignoring SIGTERM, when it loses a job.

Needs root and apt-get (or SLURM installed); skipped otherwise, unless ``DROC_REQUIRE_SLURM=1``
(set by .ci/run when it installed SLURM), where a missing cluster fails the test instead.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.cluster import slurm
from tests.workflow.conftest import REPO, SNAKEMAKE

pytestmark = [pytest.mark.workflow, pytest.mark.cluster]

TINY = REPO / "tests/configs/tiny.yaml"
PROFILE = REPO / "profiles/slurm"
SPLIT = "digits/0/contam0/seed0/split.npz"
#: Hard limits: the run below takes 1-2 minutes on 2 shared cores; one failing job seconds.
RUN_TIMEOUT_S = 480
FAIL_TIMEOUT_S = 180


@pytest.fixture(scope="session")
def slurm_cluster(request: pytest.FixtureRequest) -> slurm.Cluster:
    stack = contextlib.ExitStack()
    try:
        cluster = stack.enter_context(slurm.running_cluster())
    except slurm.Unavailable as error:
        stack.close()
        if os.environ.get("DROC_REQUIRE_SLURM") == "1":
            pytest.fail(f"DROC_REQUIRE_SLURM=1 but no SLURM cluster: {error}")
        pytest.skip(f"no one-node SLURM cluster here: {error}")
    request.addfinalizer(stack.close)  # stops every daemon it started, by PID
    return cluster


def cluster_overrides(cluster: slurm.Cluster) -> list[str]:
    """The profile's cluster-specific values, replaced on the command line for this cluster.

    A command-line key replaces the profile's whole entry, so the other values of
    ``default-resources`` and ``set-resources`` are carried over from the profile itself.
    """
    profile = yaml.safe_load((PROFILE / "config.v8+.yaml").read_text())

    def adapt(resources: dict) -> dict:
        adapted = {}
        for key, value in resources.items():
            if key == "slurm_account" or key == "cpus_per_gpu":
                continue  # --slurm-no-account; no GPU here
            adapted[key] = {"slurm_partition": cluster.partition, "gpu": 0}.get(key, value)
        return adapted

    defaults = adapt(profile["default-resources"])
    per_rule = {rule: adapt(values) for rule, values in profile["set-resources"].items()}
    bundle_mem = min(profile["resources"]["mem_mb"], cluster.memory_mb)
    for values in [defaults, *per_rule.values()]:
        if "mem_mb" in values:
            values["mem_mb"] = min(values["mem_mb"], bundle_mem)
    return [
        "--slurm-no-account",
        "--slurm-init-seconds-before-status-checks",
        "1",
        "--slurm-keep-successful-logs",
        "--cores",
        str(cluster.cpus),
        "--resources",
        f"mem_mb={bundle_mem}",
        "--default-resources",
        *(f"{key}={value}" for key, value in defaults.items()),
        "--set-resources",
        *(
            f"{rule}:{key}={value}"
            for rule, values in per_rule.items()
            for key, value in values.items()
        ),
    ]


def start_on_slurm(cluster: slurm.Cluster, workdir: Path, *args: str) -> slurm.Started:
    command = [
        str(SNAKEMAKE),
        *args,  # first: targets after `--set-resources a:b=c ...` would be read as resources
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--profile",
        str(PROFILE),
        *cluster_overrides(cluster),
    ]
    environment = {**os.environ, "PATH": f"{SNAKEMAKE.parent}{os.pathsep}{os.environ['PATH']}"}
    environment.pop("MLFLOW_TRACKING_URI", None)
    # Jobs get this environment through `sbatch --export=ALL`: the venv's python and, where
    # set, the PYTHONPATH that points at this checkout's pipeline_lib.
    return slurm.start_killable(command, env=environment, log=workdir.parent / "snakemake.log")


def submitted_job_ids(output: str) -> list[str]:
    return re.findall(r"submitted with SLURM jobid (\d+)", output)


def scontrol_job(job_id: str) -> str:
    return subprocess.run(
        ["scontrol", "show", "job", job_id], capture_output=True, text=True, timeout=30
    ).stdout


@pytest.fixture(scope="module")
def tiny_subset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny config cut to one class, one seed, no contamination, no clean subset.

    The same kinds of jobs (data set, split, both embeddings, detectors), a few of each. On 2
    cores every SLURM job costs its Python start-up, and the detector group runs its jobs one
    after another: with both contaminations and the clean subset its 8 scoring jobs took
    1 min 45 s of the run's 3 min; here it has 2. Its results must equal the local run's
    rows for the same cells.
    """
    settings = yaml.safe_load(TINY.read_text())
    settings["datasets"]["digits"]["classes"] = ["0"]
    settings["seeds"] = [0]
    settings["splits"] = {"contamination": [0.0], "clean_inliers": []}
    path = tmp_path_factory.mktemp("slurm_config") / "tiny_subset.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def test_tiny_config_runs_through_sbatch_and_matches_a_local_run(
    slurm_cluster: slurm.Cluster,
    tiny_subset: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    workdir = tmp_path / "run"
    workdir.mkdir()
    started = start_on_slurm(slurm_cluster, workdir, "--configfile", str(tiny_subset))
    # The local run to compare with (the session's tiny run, made here when this test is the
    # first of its unit, tests/conftest.py) runs while the cluster's jobs do: most of a SLURM
    # run's minutes are the executor's waits between status checks, which leave the cores
    # idle.
    tiny_run: Path = request.getfixturevalue("tiny_run")
    request.getfixturevalue("damaged_run")  # the failing-job test's run, started now (below)
    run = started.wait(RUN_TIMEOUT_S)
    assert not run.killed, f"killed after {RUN_TIMEOUT_S} s:\n{run.output[-4000:]}"
    assert run.returncode == 0, run.output[-6000:]
    print(f"SLURM run of the tiny config (class 0, seed 0, contamination 0): {run.seconds:.1f} s")

    # Every cluster job went through sbatch: its SLURM job id is in Snakemake's log, in the
    # plugin's per-job log file, and in slurmctld's record of finished jobs (MinJobAge).
    job_ids = submitted_job_ids(run.output)
    assert len(job_ids) >= 4, run.output[-4000:]  # data set, 2 embeddings, splits, detectors
    print(f"SLURM job ids: {' '.join(job_ids)}")
    logged = {path.stem for path in (workdir / ".snakemake/slurm_logs").rglob("*.log")}
    assert set(job_ids) <= logged
    history = subprocess.run(
        ["squeue", "--states=all", "--noheader", "--format=%i|%T|%P"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    states = dict(line.split("|", 1) for line in history.split())
    for job_id in job_ids:
        assert states[job_id] == f"COMPLETED|{slurm_cluster.partition}", history
        record = scontrol_job(job_id)
        assert "JobState=COMPLETED" in record and f"WorkDir={workdir}" in record, record
    # The aggregation (localrules) ran on the submitting host, not as SLURM jobs, and there
    # in the run's warm workers; the cluster jobs, which inherit the socket's address through
    # `sbatch --export=ALL`, were refused by it and ran in their own processes.
    assert "localrule collect_results" in run.output
    warm_log = "".join(p.read_text() for p in (workdir / ".snakemake/log").glob("warm_jobs.*"))
    served = set(re.findall(r"^ran tmp\w+\.(\w+)\.py \(pid \d+\): exit 0$", warm_log, re.M))
    assert {"collect_results", "make_tables", "make_summary"} <= served, warm_log
    assert not served & {"prepare_dataset", "prepare_split", "score_detectors"}, warm_log

    # The same numbers as the same jobs run locally (timings aside).
    ours = pd.read_csv(workdir / "summary/results.csv")
    local = pd.read_csv(tiny_run / "summary/results.csv")
    local = local[
        (local["inlier"].astype(str) == "0")
        & (local["seed"] == 0)
        & (local["contamination"] == 0.0)
        & (local["fitset"] == "train")
    ]
    assert len(ours) == len(local) > 0
    columns = [column for column in ours.columns if not column.endswith("_seconds")]
    pd.testing.assert_frame_equal(
        ours[columns].sort_values("result_key").reset_index(drop=True),
        local[columns].sort_values("result_key").reset_index(drop=True),
    )


@pytest.fixture(scope="module")
def damaged_run(
    slurm_cluster: slurm.Cluster,
    tiny_run: Path,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> tuple[Path, slurm.Started]:
    """A split job on the cluster whose data set cache is damaged on the shared disk.

    Started by the first test that asks for it: the SLURM run test does, as soon as the
    tiny run exists, so that the two runs' status-check waits overlap.
    """
    workdir = tmp_path_factory.mktemp("damaged") / "run"
    dataset = workdir / "digits/dataset.npz"
    dataset.parent.mkdir(parents=True)
    whole = (tiny_run / "digits/dataset.npz").read_bytes()
    dataset.write_bytes(whole[: len(whole) // 3])
    started = start_on_slurm(slurm_cluster, workdir, SPLIT, "--configfile", str(TINY))
    request.addfinalizer(lambda: started.wait(FAIL_TIMEOUT_S))  # killed if it hangs
    return workdir, started


def test_a_failing_slurm_job_fails_the_run(damaged_run: tuple[Path, slurm.Started]) -> None:
    workdir, started = damaged_run
    run = started.wait(FAIL_TIMEOUT_S)
    assert not run.killed, f"killed after {FAIL_TIMEOUT_S} s:\n{run.output[-4000:]}"
    assert run.returncode != 0, run.output[-4000:]
    assert run.seconds < 120, run.seconds
    (job_id,) = submitted_job_ids(run.output)
    assert "Error in rule prepare_split" in run.output
    assert f"SLURM-jobid: {job_id}" in run.output or job_id in run.output
    assert "JobState=FAILED" in scontrol_job(job_id)
    log = (workdir / "logs/prepare_split/digits/0/contam0/seed0.log").read_text()
    assert "truncated or damaged .npz" in log
    assert not (workdir / SPLIT).exists()


def test_the_shipped_profile_polls_with_squeue() -> None:
    # sacct without slurmdbd makes the plugin lose every job and wait forever.
    profile = yaml.safe_load((PROFILE / "config.v8+.yaml").read_text())
    assert profile["slurm-status-command"] == "squeue"
