"""A real one-node SLURM cluster for the tests: munged, slurmctld and slurmd on this machine.

Debian's packages (``slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge``, SLURM
22.05) are installed with ``apt-get`` when missing. The configuration is generated from
``slurmd -C`` and ``hostname -s``; state, spool, PID and log files live in a scratch folder.
Only ``/etc/slurm/slurm.conf`` is written outside it: the executor plugin's job step strips
every ``SLURM_*`` variable (``SLURM_CONF`` included) before its inner ``srun``, which then only
finds the configuration at the default path. The daemons are stopped by the PIDs they wrote,
and the configuration is removed again. docs/cluster.md lists the traps this avoids.

Needs root (the daemons, ``/etc/slurm``) and, when SLURM is not installed yet, a working
``apt-get``; :class:`Unavailable` says which is missing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "slurm-wlm-basic-plugins", "munge")
COMMANDS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "srun", "scontrol", "sinfo")
CONF = Path("/etc/slurm/slurm.conf")
MARKER = "# Written by droc-bench tests/cluster/slurm.py for a test; removed when it ends."
LOCK = Path("/run/lock/droc-bench-slurm.lock")
PARTITION = "droc"
#: squeue answers for finished jobs this long; 3x the plugin's first status check (1 s in the
#: tests, 40 s by default) must fit, or squeue can lose a finished job (docs/cluster.md).
MIN_JOB_AGE_S = 300


class Unavailable(Exception):
    """SLURM cannot be started here (not root, no apt, packages missing, a cluster running)."""


def _run(command: Sequence[str], *, timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)


def ensure_installed() -> None:
    """Install the SLURM and munge packages through apt-get when their commands are missing."""
    if os.geteuid() != 0:
        raise Unavailable("a real SLURM needs root (daemons, /etc/slurm/slurm.conf)")
    if all(shutil.which(command) for command in COMMANDS):
        return
    if not shutil.which("apt-get"):
        raise Unavailable(f"SLURM is not installed and there is no apt-get to install {PACKAGES}")
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    result = _run(install, timeout=600, env=environment)
    if result.returncode != 0:  # stale package lists: update once, then try again
        _run(["apt-get", "update", "-qq"], timeout=600, env=environment)
        result = _run(install, timeout=600, env=environment)
    missing = [command for command in COMMANDS if not shutil.which(command)]
    if result.returncode != 0 or missing:
        raise Unavailable(
            f"apt-get could not install {' '.join(PACKAGES)} (missing {missing}): "
            f"{result.stderr.strip()[-500:]}"
        )


def node_line() -> tuple[str, int, int]:
    """The ``NodeName=...`` line of ``slurmd -C`` (name = ``hostname -s``), CPUs, memory MB."""
    line = _run(["slurmd", "-C"], check=True).stdout.splitlines()[0]
    name = _run(["hostname", "-s"], check=True).stdout.strip()
    line = re.sub(r"^NodeName=\S+", f"NodeName={name}", line)
    cpus = int(re.search(r"\bCPUs=(\d+)", line).group(1))
    memory = int(re.search(r"\bRealMemory=(\d+)", line).group(1))
    return line, cpus, memory


def slurm_conf(scratch: Path, node: str, munge_socket: Path) -> str:
    """A minimal single-node configuration: no accounting, no cgroups, root as SlurmUser."""
    host = node.split()[0].removeprefix("NodeName=")
    return "\n".join(
        [
            MARKER,
            "ClusterName=droctest",
            f"SlurmctldHost={host}",
            "SlurmUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={munge_socket}",
            f"StateSaveLocation={scratch / 'state'}",
            f"SlurmdSpoolDir={scratch / 'spool'}",
            f"SlurmctldPidFile={scratch / 'slurmctld.pid'}",
            f"SlurmdPidFile={scratch / 'slurmd.pid'}",
            f"SlurmctldLogFile={scratch / 'log/slurmctld.log'}",
            f"SlurmdLogFile={scratch / 'log/slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "DefMemPerCPU=1000",  # else a job without --mem takes the node's whole memory
            f"MinJobAge={MIN_JOB_AGE_S}",
            "ReturnToService=2",
            "MailProg=/bin/true",
            "MpiDefault=none",
            f"{node} State=UNKNOWN",
            f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


@dataclass
class Cluster:
    """A started cluster: where its files are and the PID files of its daemons."""

    scratch: Path
    node: str
    cpus: int
    memory_mb: int
    partition: str = PARTITION
    pid_files: dict[str, Path] = field(default_factory=dict)

    def log(self, name: str) -> str:
        folder = "munge" if name == "munged" else "log"
        path = self.scratch / folder / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (a daemon's exited fork that nobody reaped) counts as gone.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    return False


def _wait_for(predicate, timeout: float, what: str, cluster: Cluster | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            logs = ""
            if cluster is not None:
                logs = "\n".join(
                    f"--- {name}.log\n{cluster.log(name)[-2000:]}"
                    for name in ("munged", "slurmctld", "slurmd")
                )
            raise RuntimeError(f"{what} within {timeout} s\n{logs}")
        time.sleep(0.2)


def _daemon_running(name: str) -> bool:
    return _run(["pgrep", "-x", name]).returncode == 0


def _port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def start() -> Cluster:
    """Write the configuration, start munged, slurmctld and slurmd, wait for an idle node."""
    ensure_installed()
    for name in ("slurmctld", "slurmd"):
        if _daemon_running(name):
            raise Unavailable(f"a {name} is already running on this machine; not touching it")
    for port in (6817, 6818):
        if _port_in_use(port):
            raise Unavailable(f"port {port} (SLURM's) is taken on this machine")
    if CONF.exists() and MARKER not in CONF.read_text():
        raise Unavailable(f"{CONF} exists and is not this test's: not overwriting a real cluster")
    node, cpus, memory = node_line()
    # munged runs as user munge and checks its folders: the scratch folder must be readable
    # by it (pytest's own temporary folders are mode 700) and its socket folder mode 755.
    scratch = Path(tempfile.mkdtemp(prefix="droc-slurm-"))
    scratch.chmod(0o755)
    for folder in ("state", "spool", "log", "munge"):
        (scratch / folder).mkdir()
    munge_dir = scratch / "munge"
    munge_dir.chmod(0o755)
    shutil.chown(munge_dir, "munge", "munge")
    munge_socket = munge_dir / "munge.socket.2"
    cluster = Cluster(scratch=scratch, node=node, cpus=cpus, memory_mb=memory)
    try:
        CONF.parent.mkdir(parents=True, exist_ok=True)
        CONF.write_text(slurm_conf(scratch, node, munge_socket))
        munged = [
            "runuser",
            "-u",
            "munge",
            "--",
            "munged",
            f"--socket={munge_socket}",
            f"--pid-file={munge_dir / 'munged.pid'}",
            f"--log-file={munge_dir / 'munged.log'}",
            f"--seed-file={munge_dir / 'munged.seed'}",
        ]
        starts = {
            "munged": (munged, munge_dir / "munged.pid"),
            "slurmctld": (["slurmctld"], scratch / "slurmctld.pid"),
            "slurmd": (["slurmd"], scratch / "slurmd.pid"),
        }
        for name, (command, pid_file) in starts.items():
            cluster.pid_files[name] = pid_file
            result = _run(command, timeout=30)  # each daemon forks itself and writes its PID
            if result.returncode != 0:
                raise RuntimeError(f"{name} did not start: {result.stdout}{result.stderr}")
            _wait_for(
                lambda p=pid_file: _pid(p) is not None and _alive(_pid(p)),
                15,
                f"{name} wrote no PID file",
                cluster,
            )
            if name == "munged":
                _wait_for(
                    lambda: _run(["munge", "-n", f"--socket={munge_socket}"]).returncode == 0,
                    15,
                    "munge gave no credential",
                    cluster,
                )
            if name == "slurmctld":
                _wait_for(
                    lambda: _run(["scontrol", "ping"]).stdout.count("UP") >= 1,
                    30,
                    "slurmctld did not answer",
                    cluster,
                )
        host = node.split()[0].removeprefix("NodeName=")
        _wait_for(
            lambda: _run(["sinfo", "-h", "-n", host, "-o", "%T"]).stdout.strip() == "idle",
            60,
            f"node {host} was not idle",
            cluster,
        )
    except BaseException:
        stop(cluster)
        raise
    return cluster


def stop(cluster: Cluster) -> None:
    """Cancel the partition's jobs, stop each daemon by its PID, remove the config and files."""
    if "slurmctld" in cluster.pid_files and shutil.which("scancel"):
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            _run(["scancel", "--partition", cluster.partition], timeout=10)
    for name in ("slurmd", "slurmctld", "munged"):
        pid_file = cluster.pid_files.get(name)
        pid = _pid(pid_file) if pid_file else None
        if pid is None or not _alive(pid):
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    if CONF.exists() and MARKER in CONF.read_text():
        CONF.unlink()
    shutil.rmtree(cluster.scratch, ignore_errors=True)


@contextlib.contextmanager
def running_cluster(wait_s: float = 600) -> Iterator[Cluster]:
    """A started cluster for the ``with`` block; one test session at a time on a machine."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise Unavailable(f"another test session holds {LOCK}") from None
                time.sleep(1)
        cluster = start()
        try:
            yield cluster
        finally:
            stop(cluster)


@dataclass
class Run:
    """A finished (or killed) command: exit status, output, seconds, whether it was killed."""

    returncode: int
    output: str
    seconds: float
    killed: bool


@dataclass
class Started:
    """A command running in its own process group (:func:`start_killable`)."""

    process: subprocess.Popen[bytes]
    log: Path
    started: float

    def wait(self, timeout_s: float) -> Run:
        """Its :class:`Run`; SIGKILL to the whole group ``timeout_s`` after it started.

        The SLURM executor plugin can loop forever and ignores SIGTERM (a job it lost track
        of), so a polite timeout is not enough.
        """
        killed = False
        try:
            self.process.wait(timeout=max(0.0, self.started + timeout_s - time.monotonic()))
        except subprocess.TimeoutExpired:
            killed = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        return Run(
            self.process.returncode,
            self.log.read_text(errors="replace"),
            time.monotonic() - self.started,
            killed,
        )


def start_killable(command: Sequence[str], *, env: dict[str, str], log: Path) -> Started:
    """``command`` in its own process group, its output in ``log``; returns at once."""
    with open(log, "w") as handle:
        process = subprocess.Popen(
            list(command), stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    return Started(process, log, time.monotonic())
