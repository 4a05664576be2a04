"""GPU packing: the lock-file slot allocator of ``pipeline_lib.runtime.devices``, simulated.

No CUDA needed: devices are plain keys, and "jobs" are this process's open slots or forked
processes holding one (flock is per open file, so both count as separate holders).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from pipeline_lib.runtime import gpu_slots
from pipeline_lib.runtime.devices import (
    DEFAULT_WAIT_S,
    LOCK_DIR_ENV,
    SLOTS_ENV,
    UNCAPPED_SLOTS,
    WAIT_ENV,
    LockDirError,
    SlotAllocator,
    default_lock_dir,
    gpus_requested,
    job_device,
    slots_from_env,
    use_deterministic_kernels,
    wait_from_env,
)
from pipeline_lib.runtime.gpu_slots import prepare_lock_dir
from tests.ssl.tiny_runs import keyword_prepare

#: A "job" in its own process: take a slot, print its device index, hold it until stdin closes.
HOLD_SLOT = """
import sys
from pipeline_lib.runtime.gpu_slots import SlotAllocator
allocator = SlotAllocator(sys.argv[1].split(","), lock_dir=sys.argv[2])
with allocator.acquire(poll_s=0.05) as slot:
    print(slot.index, flush=True)
    sys.stdin.read()
"""


def test_jobs_spread_evenly_over_devices(tmp_path: Path) -> None:
    allocator = SlotAllocator(["gpu-a", "gpu-b", "gpu-c"], lock_dir=tmp_path)
    with contextlib.ExitStack() as stack:
        slots = [stack.enter_context(allocator.acquire()) for _ in range(7)]
        assert [slot.index for slot in slots] == [0, 1, 2, 0, 1, 2, 0]
        assert [slot.load for slot in slots] == [1, 1, 1, 2, 2, 2, 3]
        assert allocator.loads() == {"gpu-a": 3, "gpu-b": 2, "gpu-c": 2}
        assert len({slot.lock_path for slot in slots}) == 7
    assert allocator.loads() == {"gpu-a": 0, "gpu-b": 0, "gpu-c": 0}


def test_a_released_slot_is_reused_on_the_least_loaded_device(tmp_path: Path) -> None:
    allocator = SlotAllocator(["gpu-a", "gpu-b"], lock_dir=tmp_path)
    with contextlib.ExitStack() as stack:
        first = stack.enter_context(allocator.acquire())
        with allocator.acquire() as second:
            assert (first.index, second.index) == (0, 1)
            third = stack.enter_context(allocator.acquire())
            assert third.index == 0
        # gpu-b is free again: it is now the least-loaded device.
        with allocator.acquire() as fourth:
            assert fourth.index == 1
            assert allocator.loads() == {"gpu-a": 2, "gpu-b": 1}


def test_capped_slots_make_a_job_wait_then_time_out(tmp_path: Path) -> None:
    allocator = SlotAllocator(["gpu-a", "gpu-b"], slots_per_device=1, lock_dir=tmp_path)
    with allocator.acquire(), allocator.acquire():
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=str(tmp_path)) as error:
            with allocator.acquire(timeout_s=0.3, poll_s=0.05):
                pass
        assert time.monotonic() - start >= 0.3
        assert "all 1 slots of 2 device(s)" in str(error.value)
    with allocator.acquire(timeout_s=0.3) as slot:  # both slots released
        assert slot.index == 0


def test_the_wait_has_a_default_limit_that_names_the_folder_and_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(WAIT_ENV, raising=False)
    assert wait_from_env() == DEFAULT_WAIT_S == 12 * 3600
    monkeypatch.setattr(gpu_slots, "DEFAULT_WAIT_S", 0.2)  # the default, shortened
    allocator = SlotAllocator(["gpu-a"], slots_per_device=1, lock_dir=tmp_path)
    with allocator.acquire():
        start = time.monotonic()
        with pytest.raises(TimeoutError, match="within 0.2 s") as error:
            with allocator.acquire(poll_s=0.05):  # no timeout_s given
                pass
        assert 0.2 <= time.monotonic() - start < 30
    assert str(tmp_path) in str(error.value) and f"${WAIT_ENV}=<seconds>" in str(error.value)
    monkeypatch.setenv(WAIT_ENV, "inf")
    assert wait_from_env() == math.inf
    monkeypatch.setenv(WAIT_ENV, "90")
    assert wait_from_env() == 90.0
    for bad in ("0", "-5", "soon", "nan"):
        monkeypatch.setenv(WAIT_ENV, bad)
        with pytest.raises(ValueError, match=f"{WAIT_ENV} must be a positive number.*{bad!r}"):
            wait_from_env()


def test_lock_folder_is_created_private(tmp_path: Path) -> None:
    folder = tmp_path / "droc-gpu-slots-test"
    saved = os.umask(0)  # even with no umask, the folder is 0700
    try:
        with SlotAllocator(["gpu-a"], lock_dir=folder).acquire(timeout_s=1) as slot:
            assert slot.lock_path.parent == folder
    finally:
        os.umask(saved)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_lock_folder_of_another_user_or_writable_by_others_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # e.g. made by someone else's `mkdir -m 777`
    with pytest.raises(LockDirError, match=f"{shared} is writable by its group or by others"):
        with SlotAllocator(["gpu-a"], lock_dir=shared).acquire(timeout_s=1):
            pass
    assert not list(shared.iterdir())  # refused before any lock file was made
    shared.chmod(0o775)
    with pytest.raises(LockDirError, match="mode 0775"):
        prepare_lock_dir(shared)
    shared.chmod(0o755)  # readable by others is fine: only writers can swap locks
    assert prepare_lock_dir(shared) == shared

    link = tmp_path / "link"
    link.symlink_to(shared)
    with pytest.raises(LockDirError, match=f"{link} is a link"):
        prepare_lock_dir(link)

    real_uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real_uid + 4242)  # now the folder is not ours
    with pytest.raises(LockDirError, match=f"belongs to user id {real_uid}, not to you") as error:
        SlotAllocator(["gpu-a"], lock_dir=shared).loads()
    assert LOCK_DIR_ENV in str(error.value)


def test_concurrent_processes_spread_and_a_killed_job_frees_its_slot(tmp_path: Path) -> None:
    devices = ["gpu-a", "gpu-b"]
    jobs = [
        subprocess.Popen(
            [sys.executable, "-c", HOLD_SLOT, ",".join(devices), str(tmp_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    try:
        indices = sorted(int(job.stdout.readline()) for job in jobs)
        assert indices == [0, 0, 1, 1]
        allocator = SlotAllocator(devices, lock_dir=tmp_path)
        assert allocator.loads() == {"gpu-a": 2, "gpu-b": 2}
        jobs[0].send_signal(signal.SIGKILL)  # no cleanup code runs: the kernel frees it
        jobs[0].wait(10)
        assert sum(allocator.loads().values()) == 3
    finally:
        for job in jobs:
            with contextlib.suppress(BrokenPipeError):
                job.stdin.close()
            try:
                job.wait(10)
            except subprocess.TimeoutExpired:
                job.kill()
                job.wait()
    assert sorted(job.returncode for job in jobs) == [-signal.SIGKILL, 0, 0, 0]
    assert SlotAllocator(devices, lock_dir=tmp_path).loads() == {"gpu-a": 0, "gpu-b": 0}


def test_bad_allocator_arguments_raise(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no devices"):
        SlotAllocator([], lock_dir=tmp_path)
    with pytest.raises(ValueError, match="unique"):
        SlotAllocator(["a", "a"], lock_dir=tmp_path)
    with pytest.raises(ValueError, match="slots_per_device"):
        SlotAllocator(["a"], slots_per_device=0, lock_dir=tmp_path)


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({}, 0),
        ({"gpu": 0}, 0),
        ({"gpu": 2}, 2),
        ({"gpu": 0, "gres": "gpu:1"}, 1),
        ({"gres": "gpu:a100:2"}, 2),
        ({"gres": "gpu"}, 1),
        ({"gres": "shard:4"}, 1),
        ({"gres": "tmpdisk:10G,mps:50"}, 1),
        ({"gres": "tmpdisk:10G"}, 0),
    ],
)
def test_gpus_requested(resources: dict, expected: int) -> None:
    assert gpus_requested(resources) == expected


def test_lock_dir_and_slots_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    assert default_lock_dir() == tmp_path / "locks"
    monkeypatch.delenv(LOCK_DIR_ENV)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert default_lock_dir() == tmp_path / "droc-gpu-slots"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert default_lock_dir().name == f"droc-gpu-slots-{os.getuid()}"

    monkeypatch.delenv(SLOTS_ENV, raising=False)
    assert slots_from_env() == UNCAPPED_SLOTS
    monkeypatch.setenv(SLOTS_ENV, "3")
    assert slots_from_env() == 3
    monkeypatch.setenv(SLOTS_ENV, "0")
    with pytest.raises(ValueError, match=SLOTS_ENV):
        slots_from_env()


def test_job_device_without_a_gpu_resource_is_the_cpu_and_takes_no_slot(tmp_path: Path) -> None:
    with job_device(0, lock_dir=tmp_path / "locks") as device:
        assert device == torch.device("cpu")
    assert not (tmp_path / "locks").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU fallback")
def test_job_device_without_cuda_warns_and_uses_the_cpu(tmp_path: Path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="pipeline_lib.runtime.devices"):
        with job_device(1, lock_dir=tmp_path / "locks") as device:
            assert device == torch.device("cpu")
    assert "CUDA is not available" in caplog.text
    assert not (tmp_path / "locks").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_job_device_on_cuda_holds_a_slot(tmp_path: Path) -> None:
    with job_device(1, lock_dir=tmp_path) as device:
        assert device.type == "cuda"
        assert torch.cuda.current_device() == device.index
        held = [path for path in tmp_path.glob("*.slot*.lock") if path.stat().st_size > 0]
        assert len(held) == 1


@contextlib.contextmanager
def _cudnn_flags_kept() -> Iterator[None]:
    saved = torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark
    try:
        yield
    finally:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved


def test_deterministic_kernels_are_chosen_for_cuda_only() -> None:
    # The flags are plain settings: they can be read and set without a GPU.
    with _cudnn_flags_kept():
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = False, True
        use_deterministic_kernels(torch.device("cpu"))
        assert not torch.backends.cudnn.deterministic and torch.backends.cudnn.benchmark
        use_deterministic_kernels(torch.device("cuda"))
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_run_prepared_on_cuda_uses_deterministic_kernels() -> None:
    images = torch.randint(0, 256, (16, 32, 32, 3), dtype=torch.uint8)
    with _cudnn_flags_kept():
        torch.backends.cudnn.deterministic = False
        keyword_prepare(
            "rotnet", images, seed=0, device=torch.device("cuda"), epochs=1, batch_size=8, width=4
        )
        assert torch.backends.cudnn.deterministic
