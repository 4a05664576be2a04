"""What a proxy task is to the loops: a :class:`ProxyTask` and the :class:`StepParts` it builds."""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from pipeline_lib.registry import method_spec
from pipeline_lib.ssl.augment import ViewAugment
from pipeline_lib.ssl.draws import Draws
from pipeline_lib.ssl.settings import TrainSettings

__all__ = ["ProxyTask", "StepParts", "at_least_float32", "load_task", "task_of"]


def at_least_float32(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32 if it is narrower (autocast's bf16 / fp16), else as it is (float64):
    the losses compute in float32 at least, inside the training loop's autocast too."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


@dataclasses.dataclass(frozen=True)
class StepParts:
    """One run's proxy-task step in the three parts the single and the fused step compose.

    Calling it is the single step on a uint8 batch ``(n, 3, h, w)``: ``x, extra =
    inputs(batch, generator)``, then ``loss(forward(model, x), extra)`` (a scalar). The
    fused trainer composes the same parts over K models
    (:class:`~pipeline_lib.ssl.fused_groups.StackedGroup`): each model's ``inputs`` from its
    own generator, one ``forward`` of the stacked network on the stacked inputs, each
    model's ``loss`` on its share of the output; so a fused model draws exactly the numbers
    and computes exactly the loss of its separate run.
    """

    #: ``(uint8 batch, generator or draws) -> (network input, what the loss needs besides)``
    inputs: Callable[[torch.Tensor, torch.Generator | Draws], tuple[torch.Tensor, Any]]
    #: ``(network, input) -> output``: the network's modules only, since it may be a stacked
    #: network of K models whose output the fused trainer splits per model before ``loss``.
    forward: Callable[[nn.Module, torch.Tensor], torch.Tensor]
    #: ``(one model's output, what inputs returned besides the input) -> scalar loss``
    loss: Callable[[torch.Tensor, Any], torch.Tensor]

    def __call__(
        self, model: nn.Module, batch: torch.Tensor, *, generator: torch.Generator | Draws
    ) -> torch.Tensor:
        x, extra = self.inputs(batch, generator)
        return self.loss(self.forward(model, x), extra)


def _fits_any_side(settings: TrainSettings, side: int) -> None:
    """The default data check: every image side fits."""


@dataclasses.dataclass(frozen=True)
class ProxyTask:
    """A self-supervised proxy task: the step it trains with, bound to a run's settings.

    Parameters
    ----------
    name : str
        What log lines and errors call it.
    bind : callable
        ``bind(settings, augment) -> StepParts``: reads what the task needs from the
        :class:`~pipeline_lib.ssl.settings.TrainSettings` (the settings its method's
        :attr:`~pipeline_lib.registry.MethodSpec.reads` names, the view augmentation or
        ``None`` when its views are off) and binds it into the step.
    check_data : callable, optional
        ``check_data(settings, side)``: raises ValueError, before any step, when the
        settings cannot train on square images of ``side`` pixels.
    """

    name: str
    bind: Callable[[TrainSettings, ViewAugment | None], StepParts]
    check_data: Callable[[TrainSettings, int], None] = _fits_any_side

    def step(self, settings: TrainSettings, augment: ViewAugment | None) -> StepParts:
        """The step of a run with ``settings`` and ``augment`` (single and fused)."""
        return self.bind(settings, augment)


@functools.cache
def load_task(path: str) -> ProxyTask:
    """The task object at ``path``, ``"module:attribute"`` (imported on first use).

    Raises
    ------
    ValueError
        If the module or attribute does not exist or is not a :class:`ProxyTask`.
    """
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"task path {path!r} must read 'module:attribute'")
    try:
        task = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"cannot load the proxy task {path!r}: {error}") from error
    if not isinstance(task, ProxyTask):
        raise ValueError(f"{path!r} is a {type(task).__name__}, not a ProxyTask")
    return task


def task_of(method: str) -> ProxyTask:
    """The proxy task of a trained ``method`` (its :attr:`~pipeline_lib.registry.MethodSpec.task`).

    Raises
    ------
    ValueError
        If ``method`` is not a trained method of the table, or its task does not load.
    """
    path = method_spec(method).task
    if path is None:
        raise ValueError(f"{method} is a frozen representation: it has no proxy task")
    return load_task(path)
