"""Tiny training runs shared by the step-mode tests (CPU and CUDA): each a method and the
keyword options that make it small (4 steps an epoch on 48 images); a spy on the steps; and
the run API with a test's recipe and execution given as keywords; the comparisons of two
runs' weights and histories."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from pipeline_lib.ssl.fused import train_representations_fused
from pipeline_lib.ssl.run import prepare_run
from pipeline_lib.ssl.settings import Execution, TrainSettings
from pipeline_lib.ssl.tasks import StepParts
from pipeline_lib.ssl.train import train_representation

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


#: Per method, the recipe of the tiny runs that fused training is compared on: batch 8, a
#: one-layer head of 16 units, an 8-d projection (every method).
FUSED_TINY: dict[str, dict[str, int]] = {
    "rotnet": {"batch_size": 8},
    "rotation": {"batch_size": 8, "head_depth": 1, "head_hidden": 16},
    "denoising": {"batch_size": 8},
    "contrastive": {"batch_size": 8, "head_depth": 1, "head_hidden": 16, "proj_dim": 8},
    "contrastive_da": {"batch_size": 8, "head_depth": 1, "head_hidden": 16, "proj_dim": 8},
}

#: History fields that measure the machine, not the run: left out when runs are compared.
TIMING_FIELDS = ("images_per_s", "seconds")


def without_timing(history: list[dict], drop: tuple[str, ...] = TIMING_FIELDS) -> list[dict]:
    """``history`` without the fields in ``drop``."""
    return [{k: v for k, v in record.items() if k not in drop} for record in history]


def assert_same_weights(first: torch.nn.Module, second: torch.nn.Module) -> None:
    """The two models hold the same tensors, bit for bit, under the same names."""
    one, two = first.state_dict(), second.state_dict()
    assert one.keys() == two.keys()
    for name in one:
        assert torch.equal(one[name].cpu(), two[name].cpu()), name


def killed_then_resumed(train: Callable[..., Any], path: Path, *, epoch: int = 1) -> Any:
    """``train(checkpoint_path=path, callback=...)`` killed after its epoch ``epoch``, then
    ``train(checkpoint_path=path)`` again: what the resumed run returns."""

    def kill(record: dict) -> None:
        if record["epoch"] == epoch:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(checkpoint_path=path, callback=kill)
    return train(checkpoint_path=path)


def spy_on_steps(monkeypatch, seen) -> None:
    """Call ``seen(batch)`` with each batch a single (uncaptured) step trains on, every task."""
    real = StepParts.__call__

    def step(self, model, batch, **kwargs):
        seen(batch)
        return real(self, model, batch, **kwargs)

    monkeypatch.setattr(StepParts, "__call__", step)


#: Keywords of a run that are not its recipe: the execution's, then train_representation's own.
EXECUTION_KEYWORDS = tuple(field.name for field in dataclasses.fields(Execution))
RUN_KEYWORDS = ("checkpoint_path", "progress", "callback", "evaluate", "eval_every")


def _split(method: str, options: dict[str, Any]) -> tuple[TrainSettings, Execution, dict]:
    """A test's keywords as the run API takes them: recipe, execution and the rest."""
    execution = Execution(**{k: options.pop(k) for k in EXECUTION_KEYWORDS if k in options})
    rest = {k: options.pop(k) for k in RUN_KEYWORDS if k in options}
    return TrainSettings(method, **options), execution, rest


def keyword_train(method: str, images, *, seed: int, **options: Any):
    """``train_representation`` of ``method`` with its recipe and execution as keywords."""
    settings, execution, rest = _split(method, options)
    return train_representation(settings, images, seed=seed, execution=execution, **rest)


def keyword_train_fused(method: str, images_per_model, *, seeds, **options: Any):
    """``train_representations_fused`` with the recipe and execution as keywords."""
    paths = options.pop("checkpoint_paths", None)
    callback = options.pop("callback", None)
    settings, execution, rest = _split(method, options)
    if rest:
        raise TypeError(f"fused training takes no {sorted(rest)}")
    return train_representations_fused(
        settings,
        images_per_model,
        seeds=seeds,
        execution=execution,
        checkpoint_paths=paths,
        callback=callback,
    )


def keyword_prepare(method: str, images, *, seed: int, **options: Any):
    """``prepare_run`` of ``method`` with its recipe and execution as keywords."""
    settings, execution, rest = _split(method, options)
    if rest:
        raise TypeError(f"prepare_run takes no {sorted(rest)}")
    return prepare_run(settings, images, seed=seed, execution=execution)
