"""Warm workers: the jobs a run starts on this host fork from one process that has already
imported the stack.

Most toy and smoke-run jobs compute for a fraction of a second after spending seconds of CPU
importing torch, scikit-learn, SciPy and pandas. The Snakefile's ``onstart`` hook starts one
server per run (``start_server``) when the run has ``MIN_JOBS`` or more script jobs on this
host (all of a local run's; a cluster run's localrules). It imports what those jobs' scripts
import, once, then forks a child per job. Each job script's first statement,
``hand_over(snakemake)``, asks the server to run the script (the same file, preamble and all)
in such a child with the job's working directory, environment and standard streams, waits,
and exits with the child's exit code. The child runs exactly the code a cold process would.

Where no server takes the job (a cluster job, which is not a descendant of the server's
Snakemake process; a conda or container job; ``DROC_WARM_JOBS=0``; a job that asks for a GPU;
a server that could not start), ``hand_over`` returns and the script runs in its own process
as before: the warm path only ever saves time.

Safety: the socket lives in a private temporary directory; the server serves only its own
user and its own run's processes (``SO_PEERCRED`` and /proc), and bounds a request's size. A
job dies the moment its client does (the OOM killer, Snakemake cancelling it) or its server
does, and the server exits when its Snakemake process does. Standard library only: clients
import this module before anything else.
"""

from __future__ import annotations

import argparse
import ast
import atexit
import contextlib
import ctypes
import fcntl
import gc
import importlib
import json
import os
import runpy
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path

#: Environment variable that carries the server's socket path to the jobs.
SOCKET_VARIABLE = "DROC_WARM_SOCKET"
#: Set to 0 (or false, no, off) to run every job in its own process.
SWITCH_VARIABLE = "DROC_WARM_JOBS"
#: Marks the forked child, whose own ``hand_over`` must not hand over again.
CHILD_VARIABLE = "DROC_WARM_CHILD"
#: A request is a script path, a directory and an environment: far below this.
MAX_REQUEST_BYTES = 4 * 1024 * 1024
#: Modules every job script's Snakemake preamble imports.
PREAMBLE_MODULES = ("snakemake.logging", "snakemake.iocontainers")
#: Fewest script jobs a run must have for a server: loading the stack once costs about as
#: much CPU as two jobs importing it each.
MIN_JOBS = 3
_OFF = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Job:
    """What the child runs: the job's script file in the job's directory and environment."""

    script: str
    cwd: str
    env: dict[str, str]


# --------------------------------------------------------------------------- client side


def hand_over(snakemake: object) -> None:
    """Run this job script in the run's warm worker and exit with its code; else return.

    Call it first in a job script, before the heavy imports. ``snakemake`` is the script's
    Snakemake object (its ``resources`` say whether the job asks for a GPU: those run cold,
    so that CUDA is initialised only in processes that never fork).
    """
    if os.environ.get(CHILD_VARIABLE) or not os.environ.get(SOCKET_VARIABLE):
        return
    resources = getattr(snakemake, "resources", {})
    if int(resources.get("gpu", 0) or 0) > 0:
        return
    code = _run_remotely(os.environ[SOCKET_VARIABLE])
    if code is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        raise SystemExit(code)


def _run_remotely(socket_path: str) -> int | None:
    """The job's exit code from the server, or None where it did not take the job."""
    try:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(socket_path)
    except OSError:
        return None
    with connection:
        request = {
            "script": os.path.abspath(sys.argv[0]),
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "library": _library_dir(),
        }
        payload = json.dumps(request).encode()
        try:
            socket.send_fds(connection, [struct.pack("!I", len(payload))], [0, 1, 2])
            connection.sendall(payload)
            reply = connection.makefile("rb")
            first = _read_message(reply)
        except OSError:
            return None
        if first is None or "pid" not in first:
            return None  # refused, or the server is going away: run cold
        try:
            last = _read_message(reply)
        except OSError:
            last = None
    if last is None or "exit" not in last:
        print(
            f"error: the warm worker running this job (pid {first['pid']}) stopped answering; "
            "its server's log is .snakemake/log/warm_jobs.<Snakemake's pid>.log",
            file=sys.stderr,
        )
        return 1
    return int(last["exit"])


def _read_message(stream: object) -> dict | None:
    line = stream.readline(MAX_REQUEST_BYTES)  # type: ignore[attr-defined]
    return json.loads(line) if line.endswith(b"\n") else None


def _library_dir() -> str:
    """Where this process imports pipeline_lib from; server and job must agree."""
    return str(Path(__file__).resolve().parents[1])


# --------------------------------------------------------------------------- server side


def enabled(environ: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """False where ``DROC_WARM_JOBS`` switches warm workers off, or off Linux (the server
    checks who connects with ``SO_PEERCRED``, a Linux socket option)."""
    switched_on = environ.get(SWITCH_VARIABLE, "1").strip().lower() not in _OFF
    return switched_on and sys.platform.startswith("linux")


def start_server(scripts: list[Path], log_dir: Path) -> subprocess.Popen[bytes] | None:
    """Start this run's server and point the jobs at it (the ``onstart`` hook's half).

    ``scripts`` holds the job script of every job the run will start (repeats included). The
    server loads what those scripts import. Returns the server process, or None where warm
    workers are switched off or the run has fewer than ``MIN_JOBS`` script jobs. The jobs
    learn the socket through the environment Snakemake's local jobs inherit.
    """
    if not enabled() or len(scripts) < MIN_JOBS:
        return None
    socket_dir = Path(tempfile.mkdtemp(prefix="droc-warm-"))
    socket_path = socket_dir / "jobs.sock"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"warm_jobs.{os.getpid()}.log"
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(Path(_library_dir()).parent), *filter(None, [environment.get("PYTHONPATH")])]
    )
    command = [sys.executable, "-m", "pipeline_lib.runtime.warm_jobs", str(socket_path)]
    # The script list goes in a file: a server whose command line named job scripts would
    # look like one of those jobs to anyone who finds jobs by their command line.
    script_list = socket_dir / "scripts.json"
    script_list.write_text(json.dumps(sorted({str(path) for path in scripts})))
    command += ["--parent", str(os.getpid()), "--scripts", str(script_list)]
    with open(log_path, "ab") as log:
        server = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=environment
        )
    os.environ[SOCKET_VARIABLE] = str(socket_path)
    return server


def stop_server(server: subprocess.Popen[bytes] | None) -> None:
    """Stop the server (the ``onsuccess`` / ``onerror`` hooks' half); jobs run cold after."""
    socket_path = os.environ.pop(SOCKET_VARIABLE, None)
    if server is None:
        return
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    if socket_path:
        with contextlib.suppress(OSError):
            Path(socket_path).unlink(missing_ok=True)
            Path(socket_path).with_name("scripts.json").unlink(missing_ok=True)
            Path(socket_path).parent.rmdir()


def modules_to_preload(scripts: list[Path]) -> list[str]:
    """Every module the job scripts import at their top level, plus the preamble's."""
    names: dict[str, None] = dict.fromkeys(PREAMBLE_MODULES)
    for script in scripts:
        for node in ast.parse(script.read_text(), filename=str(script)).body:
            if isinstance(node, ast.Import):
                names.update(dict.fromkeys(alias.name for alias in node.names))
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names[node.module] = None
    return list(names)


def preload(modules: list[str]) -> list[str]:
    """Import ``modules``, then what those of pipeline_lib declare they import lazily.

    A module that imports something heavy inside its functions names it in ``WARM_PRELOAD``
    (a tuple of module names). Returns the messages of the imports that failed: the jobs that
    need them still run, and report the error themselves.
    """
    failures = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as error:  # noqa: BLE001 - a job importing it will report it
            failures.append(f"{name}: {type(error).__name__}: {error}")
    declared = {
        name
        for module_name, module in list(sys.modules.items())
        if module_name.startswith("pipeline_lib.")
        for name in getattr(module, "WARM_PRELOAD", ())
    }
    for name in sorted(declared - set(sys.modules)):
        try:
            importlib.import_module(name)
        except Exception as error:  # noqa: BLE001
            failures.append(f"{name}: {type(error).__name__}: {error}")
    return failures


def _cuda_initialised() -> bool:
    """A process that has initialised CUDA must not fork: its children could not use it."""
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


class _Server:
    """One listening socket, one child per accepted job, one thread (no fork with threads)."""

    def __init__(self, listener: socket.socket, parent: int) -> None:
        self.listener = listener
        self.parent = parent
        self.selector = selectors.DefaultSelector()
        self.children: dict[int, socket.socket] = {}
        self.scripts: dict[int, str] = {}
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_write, False)

    def serve(self) -> Job | None:
        """Serve until told to stop (returns None); in a forked child, returns its job."""
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_write)
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.selector.register(self.wake_read, selectors.EVENT_READ)
        while _alive(self.parent):
            for key, _ in self.selector.select(timeout=2.0):
                if key.fileobj is self.listener:
                    job = self._accept()
                    if job is not None:
                        return job
                elif key.fileobj == self.wake_read:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_read, 4096)
                else:
                    self._client_readable(key.fileobj)  # type: ignore[arg-type]
            self._reap()
        return None

    def _accept(self) -> Job | None:
        connection, _ = self.listener.accept()
        try:
            request = _receive_request(connection, self.parent)
        except (OSError, ValueError) as error:
            print(f"rejected a request: {error}", file=sys.stderr, flush=True)
            with contextlib.suppress(OSError):
                _send(connection, {"refused": str(error)})
            connection.close()
            return None
        job, streams = request
        sys.stdout.flush()
        sys.stderr.flush()
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            self._become_child(connection, streams, server)
            return job
        for stream in streams:
            os.close(stream)
        self.children[pid] = connection
        self.scripts[pid] = Path(job.script).name
        self.selector.register(connection, selectors.EVENT_READ, pid)
        with contextlib.suppress(OSError):  # a client gone already: its job is killed next
            _send(connection, {"pid": pid})
        return None

    def _become_child(self, connection: socket.socket, streams: list[int], server: int) -> None:
        """Drop the server's state: signals, sockets, other jobs; take the job's streams."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self.selector.close()
        for other in self.children.values():
            other.close()
        for descriptor in (self.wake_read, self.wake_write):
            os.close(descriptor)
        self.listener.close()
        _die_with_client(connection, server)
        for target, stream in enumerate(streams):
            os.dup2(stream, target)
            os.close(stream)

    def _client_readable(self, connection: socket.socket) -> None:
        """A client sends nothing after its request: readable means it went away."""
        pid = self.selector.get_key(connection).data
        with contextlib.suppress(OSError):
            if connection.recv(1):
                return
        self.selector.unregister(connection)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        print(f"job {pid}: its client went away; killed", file=sys.stderr, flush=True)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            connection = self.children.pop(pid, None)
            if connection is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            print(f"ran {self.scripts.pop(pid, '?')} (pid {pid}): exit {code}", flush=True)
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(connection)
            with contextlib.suppress(OSError):
                _send(connection, {"exit": code if code >= 0 else 128 - code})
            connection.close()

    def shut_down(self) -> None:
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for connection in self.children.values():
            connection.close()
        self.selector.close()


#: prctl's option to have the kernel signal a process when its parent ends (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
#: The child's end of its client's connection, kept open for as long as the child lives.
_CLIENT: list[socket.socket] = []


def _die_with_client(connection: socket.socket, server: int) -> None:
    """Have the kernel end this child the moment its client's process ends.

    The client sends nothing after its request, so its connection becomes readable only when
    the client goes (killed by Snakemake, the OOM killer, a test): with O_ASYNC that sends
    SIGIO, whose default action ends the process at once, as if the kill had hit the job
    itself. A job that kept running for even a moment could finish an epoch or write an
    output that the retry then takes for its own. (The server kills it too, as a backstop.)
    """
    _CLIENT.append(connection)
    # And with the server: a job whose server was killed would hold its client's connection
    # open, and the client would wait for it in vain.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server:  # the server died before the signal was armed
        os._exit(128 + signal.SIGKILL)
    signal.signal(signal.SIGIO, signal.SIG_DFL)
    descriptor = connection.fileno()
    fcntl.fcntl(descriptor, fcntl.F_SETOWN, os.getpid())
    fcntl.fcntl(descriptor, fcntl.F_SETFL, fcntl.fcntl(descriptor, fcntl.F_GETFL) | os.O_ASYNC)
    if select.select([descriptor], [], [], 0)[0]:  # gone before the signal was armed
        os._exit(128 + signal.SIGIO)


def _receive_request(connection: socket.socket, parent: int) -> tuple[Job, list[int]]:
    connection.settimeout(10)
    header, streams, _, _ = socket.recv_fds(connection, 4, 3)
    if len(header) != 4 or len(streams) != 3:
        for stream in streams:
            os.close(stream)
        raise ValueError("malformed request: no length or not three streams")
    try:
        credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        peer, uid, _ = struct.unpack("3i", credentials)
        (size,) = struct.unpack("!I", header)
        if uid != os.getuid():
            raise ValueError(f"request from user {uid}, not {os.getuid()}")
        if not _descends_from(peer, parent):
            raise ValueError(f"request from process {peer}, not a job of process {parent}")
        if size > MAX_REQUEST_BYTES:
            raise ValueError(f"request of {size} bytes, over {MAX_REQUEST_BYTES}")
        payload = b""
        while len(payload) < size:
            chunk = connection.recv(size - len(payload))
            if not chunk:
                raise ValueError("request cut short")
            payload += chunk
        request = json.loads(payload)
        if request.get("library") != _library_dir():
            raise ValueError(
                f"the job imports pipeline_lib from {request.get('library')}, this server from "
                f"{_library_dir()}"
            )
        job = Job(script=str(request["script"]), cwd=str(request["cwd"]), env=dict(request["env"]))
    except (KeyError, TypeError, AttributeError, ValueError, OSError) as error:
        for stream in streams:
            os.close(stream)
        if isinstance(error, (OSError, ValueError)):
            raise
        raise ValueError(f"malformed request: {type(error).__name__}: {error}") from error
    connection.settimeout(None)
    return job, list(streams)


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether ``pid`` is ``ancestor`` or one of its descendants (read from /proc)."""
    for _ in range(256):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state: ppid
    return False


def _send(connection: socket.socket, message: dict) -> None:
    connection.sendall(json.dumps(message).encode() + b"\n")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_job(job: Job) -> None:
    """In the child: become the job's process and run its script as ``python script`` would."""
    os.chdir(job.cwd)
    os.environ.clear()
    os.environ.update(job.env)
    os.environ[CHILD_VARIABLE] = "1"
    _limit_native_threads(job.env)
    sys.argv = [job.script]
    code: int | str | None = 0
    try:
        runpy.run_path(job.script, run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code
    except BaseException:
        traceback.print_exc()
        code = 1
    _exit_quickly(code)


def _limit_native_threads(env: dict[str, str]) -> None:
    """Apply the job's thread variables to the BLAS and OpenMP pools the server loaded.

    A cold process reads OMP_NUM_THREADS / OPENBLAS_NUM_THREADS (Snakemake sets them to the
    rule's ``threads``) when it loads those libraries; the server loaded them under its own
    environment. Same pools, same sums: results match a cold run bit for bit.
    """
    limits = {
        "blas": env.get("OPENBLAS_NUM_THREADS") or env.get("OMP_NUM_THREADS"),
        "openmp": env.get("OMP_NUM_THREADS"),
    }
    if not any(limits.values()):
        return
    from threadpoolctl import threadpool_limits  # loaded by scikit-learn in the server

    for api, value in limits.items():
        if value and value.isdigit() and int(value) > 0:
            threadpool_limits(limits=int(value), user_api=api)


def _exit_quickly(code: int | str | None) -> None:
    """End the child as the interpreter would, minus tearing down the preloaded modules.

    Finalising every module of the inherited heap would copy it page by page (copy on write)
    for nothing: the threads are joined and the exit handlers (logging's flush, MLflow's) run
    as at a normal exit, then the process ends.
    """
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    try:
        atexit._run_exitfuncs()  # the interpreter's own exit step; no public name for it
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code or 0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("socket", type=Path, help="where to listen")
    parser.add_argument("--parent", type=int, required=True, help="exit when this pid does")
    parser.add_argument(
        "--scripts", type=Path, required=True, help="JSON list of the job scripts to preload for"
    )
    arguments = parser.parse_args(argv)
    old_mask = os.umask(0o077)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(arguments.socket))
    os.umask(old_mask)
    listener.listen(64)  # jobs queue here while the imports below run
    scripts = [Path(path) for path in json.loads(arguments.scripts.read_text())]
    failures = preload(modules_to_preload(scripts))
    for failure in failures:
        print(f"could not preload {failure}", file=sys.stderr, flush=True)
    if _cuda_initialised():
        print("CUDA was initialised while preloading: not serving", file=sys.stderr, flush=True)
        return
    gc.freeze()  # the children's collections then leave the shared preloaded heap alone
    server = _Server(listener, arguments.parent)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    job = None
    try:
        job = server.serve()
    finally:
        if job is None:
            server.shut_down()
            listener.close()
            with contextlib.suppress(OSError):
                arguments.socket.unlink()
                if arguments.socket.parent.name.startswith("droc-warm-"):  # start_server's own dir
                    arguments.scripts.unlink()
                    arguments.socket.parent.rmdir()
    if job is not None:
        run_job(job)


if __name__ == "__main__":
    main()
