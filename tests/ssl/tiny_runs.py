"""Tiny training runs shared by the step-mode tests (CPU and CUDA): each a method and the
keyword options that make it small (4 steps an epoch on 48 images); a spy on the steps."""

from __future__ import annotations

import pytest
import torch

from pipeline_lib.ssl.tasks import StepParts

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

#: name -> (method, options of ``prepare_keyword_run`` / ``train_representation``).
TINY_RUNS: dict[str, tuple[str, dict[str, int]]] = {
    "rotnet": ("rotnet", {"batch_size": 12}),
    "contrastive_da": (
        "contrastive_da",
        {"batch_size": 24, "head_depth": 1, "head_hidden": 32, "proj_dim": 16},
    ),
    "denoising": ("denoising", {"batch_size": 12}),
}


def spy_on_steps(monkeypatch, seen) -> None:
    """Call ``seen(batch)`` with each batch a single (uncaptured) step trains on, every task."""
    real = StepParts.__call__

    def step(self, model, batch, **kwargs):
        seen(batch)
        return real(self, model, batch, **kwargs)

    monkeypatch.setattr(StepParts, "__call__", step)
