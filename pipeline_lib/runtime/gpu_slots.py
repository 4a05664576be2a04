"""GPU slots: several jobs share one device through one ``flock`` per (device, slot).

Snakemake caps how many GPU jobs run at once (``--resources gpu=K``); each job then picks its
device at run time with :class:`SlotAllocator`: one lock file per (device, slot) in a
node-local directory, locked with ``fcntl.flock`` for the job's whole life, so the kernel
frees the slot even when the job is killed with SIGKILL. A job takes a free slot on the
least-loaded visible device, which spreads K jobs evenly over the GPUs of a machine, and also
across several Snakemake runs that share the machine.

No torch here: devices are plain string keys (:func:`pipeline_lib.runtime.devices.visible_gpu_keys`
makes them for CUDA), so the allocator is cheap to import and testable without a GPU.

The lock folder has a predictable name (``/tmp/droc-gpu-slots-<uid>`` without
``$XDG_RUNTIME_DIR``), so another user could create it first, or a link in its place, and
hold or swap the locks. It is therefore created ``0700`` and refused (:class:`LockDirError`)
when it is a link, belongs to another user, or others may write in it. A job waits for a
slot at most :data:`DEFAULT_WAIT_S` (``$DROC_GPU_WAIT_S`` changes it; ``inf`` waits without
limit), so a hung slot holder fails the jobs behind it with a message instead of stalling
the run.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline_lib.runtime.io import exclusive_lock

log = logging.getLogger(__name__)

#: Directory of the slot lock files (must be node-local: flock is unreliable on NFS).
LOCK_DIR_ENV = "DROC_GPU_LOCK_DIR"
#: Most jobs one device takes at once; unset = :data:`UNCAPPED_SLOTS` (balance only, the
#: number of GPU jobs is then capped by Snakemake's ``--resources gpu=K`` alone).
SLOTS_ENV = "DROC_GPU_SLOTS"
#: Seconds a job waits for a free slot before it fails (``inf``: no limit); unset =
#: :data:`DEFAULT_WAIT_S`.
WAIT_ENV = "DROC_GPU_WAIT_S"
#: Default longest wait for a slot: longer than a training job holds one in the
#: configurations shipped (a job waits behind others only when ``$DROC_GPU_SLOTS`` caps the
#: slots below ``--resources gpu`` or several runs share a machine), short enough that a hung
#: holder does not stall a run for days.
DEFAULT_WAIT_S = 12 * 3600.0
UNCAPPED_SLOTS = 64


class LockDirError(PermissionError):
    """The slot lock folder is not private to this user (owner, mode, or a link)."""


def gpus_requested(resources: Mapping[str, Any]) -> int:
    """GPUs a job asked its scheduler for: ``gpu=N``, or a SLURM ``gres`` naming a GPU.

    ``gres`` is how a bundle of jobs shares one GPU on SLURM (docs/cluster.md): the members
    declare ``gpu=0`` and the bundle ``gres="gpu:1"`` (or a ``shard``/``mps`` share).

    Parameters
    ----------
    resources : mapping
        The job's resources (``snakemake.resources``).

    Returns
    -------
    int
        ``gpu`` when positive, else the count in ``gres`` (``gpu:2`` -> 2, ``gpu:a100:1`` -> 1,
        ``shard:4`` or ``mps:50`` -> 1), else 0.
    """
    gpus = int(resources.get("gpu", 0) or 0)
    if gpus > 0:
        return gpus
    for part in str(resources.get("gres", "") or "").split(","):
        fields = part.strip().split(":")
        if fields[0] == "gpu":
            count = fields[-1] if len(fields) > 1 else "1"
            return int(count) if count.isdigit() else 1
        if fields[0] in ("shard", "mps"):
            return 1
    return 0


def default_lock_dir() -> Path:
    """``$DROC_GPU_LOCK_DIR``, else ``$XDG_RUNTIME_DIR/droc-gpu-slots``, else a per-user
    folder in the system temporary directory (node-local on clusters)."""
    if os.environ.get(LOCK_DIR_ENV):
        return Path(os.environ[LOCK_DIR_ENV])
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "droc-gpu-slots"
    return Path(tempfile.gettempdir()) / f"droc-gpu-slots-{os.getuid()}"


def wait_from_env() -> float:
    """Longest wait for a slot, in seconds: ``$DROC_GPU_WAIT_S``, else :data:`DEFAULT_WAIT_S`.

    Raises
    ------
    ValueError
        If the variable is not a positive number of seconds (or ``inf``).
    """
    value = os.environ.get(WAIT_ENV, "").strip()
    if not value:
        return DEFAULT_WAIT_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not seconds > 0:  # also NaN
        raise ValueError(
            f"${WAIT_ENV} must be a positive number of seconds (or inf for no limit), got {value!r}"
        )
    return seconds


def prepare_lock_dir(path: str | os.PathLike) -> Path:
    """Create the lock folder ``0700`` if missing; refuse one that is not private to us.

    Parameters
    ----------
    path : str or PathLike
        The lock folder (:func:`default_lock_dir`).

    Returns
    -------
    Path

    Raises
    ------
    LockDirError
        If ``path`` is a symbolic link or not a folder, belongs to another user, or is
        writable by its group or by others; the message names the folder and the fix.
    """
    folder = Path(path)
    if not folder.is_symlink():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)  # the umask can only remove bits from 0700
    info = os.lstat(folder)
    fix = (
        f"remove it, or set ${LOCK_DIR_ENV} to a folder of your own (node-local, mode 0700), "
        "e.g. under $XDG_RUNTIME_DIR"
    )
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise LockDirError(f"GPU slot lock folder {folder} is a link or not a folder; {fix}")
    if info.st_uid != os.getuid():
        raise LockDirError(
            f"GPU slot lock folder {folder} belongs to user id {info.st_uid}, not to you "
            f"({os.getuid()}): another user could hold or swap its locks; {fix}"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise LockDirError(
            f"GPU slot lock folder {folder} is writable by its group or by others (mode "
            f"{stat.S_IMODE(info.st_mode):04o}): they could swap its lock files; "
            f"`chmod go-w {folder}`, or {fix}"
        )
    return folder


def slots_from_env() -> int:
    """Slots per device from ``$DROC_GPU_SLOTS`` (a positive integer), else uncapped."""
    value = os.environ.get(SLOTS_ENV, "").strip()
    if not value:
        return UNCAPPED_SLOTS
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"${SLOTS_ENV} must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class GpuSlot:
    """A held slot: ``index`` is the device's position among the visible devices (``cuda:i``),
    ``key`` its stable identity, ``slot`` the slot number on it, ``load`` the jobs on the
    device including this one when it was taken."""

    index: int
    key: str
    slot: int
    load: int
    lock_path: Path


def _safe(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)


class SlotAllocator:
    """Share devices between jobs with one ``flock`` per (device, slot).

    Parameters
    ----------
    devices : sequence of str
        Stable identities of the visible devices, in ``cuda:i`` order (see
        :func:`visible_gpu_keys`); the same physical GPU must get the same key in every job,
        whatever its ``CUDA_VISIBLE_DEVICES``.
    slots_per_device : int, default=UNCAPPED_SLOTS
        Most jobs one device takes at once.
    lock_dir : str or PathLike or None, default=None
        Folder of the lock files; ``None`` = :func:`default_lock_dir`.

    Raises
    ------
    ValueError
        If ``devices`` is empty or has duplicates, or ``slots_per_device`` < 1.
    """

    def __init__(
        self,
        devices: Sequence[str],
        *,
        slots_per_device: int = UNCAPPED_SLOTS,
        lock_dir: str | os.PathLike | None = None,
    ) -> None:
        if not devices:
            raise ValueError("no devices to allocate slots on")
        if len(set(devices)) != len(devices):
            raise ValueError(f"device keys must be unique, got {list(devices)}")
        if slots_per_device < 1:
            raise ValueError(f"slots_per_device must be >= 1, got {slots_per_device}")
        self.devices = list(devices)
        self.slots_per_device = slots_per_device
        self.lock_dir = Path(lock_dir) if lock_dir is not None else default_lock_dir()

    def _slot_path(self, key: str, slot: int) -> Path:
        return self.lock_dir / f"{_safe(key)}.slot{slot}.lock"

    def _free_slots(self) -> dict[str, list[int]]:
        """Free slot numbers per device, found by trying each lock without blocking."""
        free: dict[str, list[int]] = {}
        for key in self.devices:
            free[key] = []
            for slot in range(self.slots_per_device):
                with open(self._slot_path(key, slot), "a+") as handle:
                    try:
                        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue
                    fcntl.flock(handle, fcntl.LOCK_UN)
                    free[key].append(slot)
        return free

    def loads(self) -> dict[str, int]:
        """Jobs holding a slot on each device now."""
        prepare_lock_dir(self.lock_dir)
        with exclusive_lock(self.lock_dir / "allocate.lock"):
            free = self._free_slots()
        return {key: self.slots_per_device - len(slots) for key, slots in free.items()}

    def _try_acquire(self) -> tuple[GpuSlot, Any] | None:
        # One allocator at a time looks and takes, so two jobs starting together cannot both
        # pick the same "least loaded" device; holders never need this lock to let go.
        with exclusive_lock(self.lock_dir / "allocate.lock"):
            free = self._free_slots()
            candidates = [key for key in self.devices if free[key]]
            if not candidates:
                return None
            # Least loaded first; ties go to the lowest device index (deterministic).
            key = min(candidates, key=lambda k: (-len(free[k]), self.devices.index(k)))
            slot = free[key][0]
            path = self._slot_path(key, slot)
            handle = open(path, "a+")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # taken by a process that skipped allocate.lock
                handle.close()
                return None
            handle.truncate(0)
            handle.write(f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%S')}\n")
            handle.flush()
            load = self.slots_per_device - len(free[key]) + 1
            return GpuSlot(self.devices.index(key), key, slot, load, path), handle

    @contextlib.contextmanager
    def acquire(self, *, timeout_s: float | None = None, poll_s: float = 0.5) -> Iterator[GpuSlot]:
        """Hold a slot on the least-loaded device with a free one until the block ends.

        Waits (polling every ``poll_s`` seconds) while every slot is taken.

        Parameters
        ----------
        timeout_s : float or None, default=None
            Longest wait; ``None`` = :func:`wait_from_env` (``$DROC_GPU_WAIT_S``, else
            :data:`DEFAULT_WAIT_S`); ``math.inf`` waits without limit.
        poll_s : float, default=0.5

        Raises
        ------
        TimeoutError
            If no slot frees up within ``timeout_s`` seconds; the message names the lock
            folder, the slot count and how to raise the limit.
        LockDirError
            If the lock folder is not private to this user (:func:`prepare_lock_dir`).
        """
        prepare_lock_dir(self.lock_dir)
        if timeout_s is None:
            timeout_s = wait_from_env()
        deadline = time.monotonic() + timeout_s
        waited = False
        while True:
            taken = self._try_acquire()
            if taken is not None:
                break
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"no free GPU slot within {timeout_s:g} s: all {self.slots_per_device} "
                    f"slots of {len(self.devices)} device(s) are held (lock files in "
                    f"{self.lock_dir}, each naming its holder's pid). Wait longer with "
                    f"${WAIT_ENV}=<seconds> (inf: no limit), raise ${SLOTS_ENV} or lower "
                    "--resources gpu"
                )
            if not waited:
                log.info(
                    "all GPU slots are held; waiting up to %g s for one (lock files in %s)",
                    timeout_s,
                    self.lock_dir,
                )
                waited = True
            time.sleep(poll_s)
        slot, handle = taken
        try:
            yield slot
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
