"""The frame of a torch rule's script: log file, threads and device from the job."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from pipeline_lib.runtime.torch_jobs import torch_job


def _job(tmp_path: Path, threads: int) -> SimpleNamespace:
    return SimpleNamespace(log=[str(tmp_path / "logs" / "job.log")], threads=threads, resources={})


def test_a_job_without_a_gpu_runs_on_the_cpu_with_its_threads(tmp_path: Path) -> None:
    before = torch.get_num_threads()
    try:
        with torch_job(_job(tmp_path, threads=1)) as device:
            assert device == torch.device("cpu")
            assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_an_error_in_the_job_is_in_its_log_before_it_fails(tmp_path: Path) -> None:
    before = torch.get_num_threads()
    try:
        with pytest.raises(ValueError, match="bad split"), torch_job(_job(tmp_path, threads=1)):
            raise ValueError("bad split")
    finally:
        torch.set_num_threads(before)
    assert "ValueError: bad split" in (tmp_path / "logs" / "job.log").read_text()
