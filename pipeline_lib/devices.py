"""Where torch work runs, and with how many threads."""

from __future__ import annotations

import logging

import torch

log = logging.getLogger(__name__)


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
