"""Where torch work runs, with how many threads, and on which GPU when several jobs share one.

GPU packing: several jobs may run on one device; :func:`job_device` takes a slot on the
least-loaded visible GPU for the job's life (:mod:`pipeline_lib.runtime.gpu_slots`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
from collections.abc import Iterator
from pathlib import Path

import torch

from pipeline_lib.runtime.gpu_slots import (
    DEFAULT_WAIT_S,
    LOCK_DIR_ENV,
    SLOTS_ENV,
    UNCAPPED_SLOTS,
    WAIT_ENV,
    GpuSlot,
    LockDirError,
    SlotAllocator,
    default_lock_dir,
    gpus_requested,
    slots_from_env,
    wait_from_env,
)

__all__ = [
    "DEFAULT_WAIT_S",
    "LOCK_DIR_ENV",
    "SLOTS_ENV",
    "UNCAPPED_SLOTS",
    "WAIT_ENV",
    "GpuSlot",
    "LockDirError",
    "SlotAllocator",
    "default_lock_dir",
    "device_name",
    "use_deterministic_kernels",
    "gpus_requested",
    "job_device",
    "select_device",
    "set_threads",
    "slots_from_env",
    "visible_gpu_keys",
    "wait_from_env",
]

log = logging.getLogger(__name__)


def device_name(device: torch.device) -> str:
    """The device as torch names it (a rate table's ``device``); the CPU's model name.

    On the CPU the thread count is part of the name: a rate measured on 2 threads says
    nothing about 16.
    """
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model} ({torch.get_num_threads()} threads)"


def use_deterministic_kernels(device: torch.device) -> None:
    """Make cuDNN pick deterministic algorithms for this process when training on CUDA.

    Why: with cuDNN's default choice two runs of the same config and seed on one GPU end with
    different weights (measured on an H200: 4-28 % of the distance trained, after 8 steps of
    the tiny test models; contrastive methods at width 64 too), which breaks "same config and
    seed, same numbers". Graph capture fixes the algorithms chosen at capture time, so this
    must hold before the first step. Process-wide, as cuDNN's flags are: a training job is
    one process. Nothing to do on the CPU.
    """
    if device.type == "cuda":
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


def select_device(gpus: int = 0) -> torch.device:
    """Return CUDA when the job was given a GPU and CUDA exists, else the CPU.

    The job's ``resources: gpu`` decides, not mere availability, so CPU jobs scheduled
    beside GPU jobs do not steal the accelerator.
    """
    if gpus > 0 and torch.cuda.is_available():
        return torch.device("cuda")
    if gpus > 0:
        log.warning("job asked for %d GPU(s) but CUDA is not available: using the CPU", gpus)
    return torch.device("cpu")


def set_threads(threads: int) -> None:
    """Limit torch's intra-op threads to the rule's ``threads`` so parallel jobs don't fight."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    torch.set_num_threads(threads)


def visible_gpu_keys() -> list[str]:
    """Stable identities of the visible CUDA devices, in ``cuda:i`` order.

    The device UUID when torch reports it, else the PCI address, else the index: jobs that see
    the same physical GPU under different ``CUDA_VISIBLE_DEVICES`` (SLURM gives each job its
    own) then share its slots, and jobs on different GPUs never do.
    """
    keys = []
    for index in range(torch.cuda.device_count()):
        properties = torch.cuda.get_device_properties(index)
        uuid = str(getattr(properties, "uuid", "") or "")
        if uuid:
            keys.append(f"gpu-{uuid}")
        elif hasattr(properties, "pci_bus_id"):
            keys.append(
                f"pci-{properties.pci_domain_id:04x}-{properties.pci_bus_id:02x}-"
                f"{properties.pci_device_id:02x}"
            )
        else:
            keys.append(f"cuda{index}")
    return keys


@contextlib.contextmanager
def job_device(
    gpus: int = 0,
    *,
    lock_dir: str | os.PathLike | None = None,
    slots_per_device: int | None = None,
    timeout_s: float | None = None,
) -> Iterator[torch.device]:
    """The device of one job, held for the block: CPU, or a GPU slot shared with other jobs.

    Like :func:`select_device`, a job without a GPU resource (or without CUDA) runs on the
    CPU. A GPU job takes a slot on the least-loaded visible device (see
    :class:`SlotAllocator`), makes it the current CUDA device and yields ``cuda:i``.

    Parameters
    ----------
    gpus : int, default=0
        GPUs the job was given (:func:`gpus_requested`).
    lock_dir : str or PathLike or None, default=None
        ``None`` = :func:`default_lock_dir` (``$DROC_GPU_LOCK_DIR``).
    slots_per_device : int or None, default=None
        ``None`` = :func:`slots_from_env` (``$DROC_GPU_SLOTS``, else uncapped).
    timeout_s : float or None, default=None
        Longest wait for a slot; ``None`` = ``$DROC_GPU_WAIT_S``, else
        :data:`~pipeline_lib.runtime.gpu_slots.DEFAULT_WAIT_S` (``inf``: no limit).
    """
    device = select_device(gpus)
    if device.type != "cuda":
        yield device
        return
    if slots_per_device is None:
        slots_per_device = slots_from_env()
    if timeout_s is None:
        timeout_s = wait_from_env()
    allocator = SlotAllocator(
        visible_gpu_keys(), slots_per_device=slots_per_device, lock_dir=lock_dir
    )
    with allocator.acquire(timeout_s=timeout_s) as slot:
        torch.cuda.set_device(slot.index)
        log.info(
            "GPU slot %d on cuda:%d (%s), %d job(s) on it with this one; lock %s",
            slot.slot,
            slot.index,
            slot.key,
            slot.load,
            slot.lock_path,
        )
        yield torch.device("cuda", slot.index)
