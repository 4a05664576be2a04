"""The frame every torch rule's script runs in: its log, its threads and its device.

Each GPU-capable script (training, embedding, patch scoring, explanations) needs the same
three things before its work: ``logging`` into the job's log file (which also records an
exception before the job fails), torch limited to the job's threads, and the job's device
held for the whole block (a slot on the least-loaded GPU it was given, GPU packing, or the
CPU). Scripts that hold a GPU for part of their job only (the training scripts, which read
their data first) compose the three themselves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from pipeline_lib.runtime.devices import gpus_requested, job_device, set_threads
from pipeline_lib.runtime.logs import job_logging


@contextlib.contextmanager
def torch_job(job: Any) -> Iterator[torch.device]:
    """Run a block as the Snakemake job ``job`` (a script's ``snakemake`` object): log to its
    first log file, use its ``threads``, and yield the device its ``resources`` give it."""
    with job_logging(job.log[0]), job_device(gpus_requested(job.resources)) as device:
        set_threads(job.threads)
        yield device
