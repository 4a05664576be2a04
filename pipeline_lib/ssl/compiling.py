"""The ``compiled`` step mode: the network compiled by inductor, inside the captured step.

Why: a kernel profile of the captured contrastive step on an H200 (2026-11-27,
``benchmarks/profile_step.py``) found about 785 kernels per step averaging 3.6 us, of which
the convolutions were only 35 % of the kernel time: the native BatchNorm kernels took 29 %
(140 of them) and elementwise work and casts most of the rest. Inductor fuses each BatchNorm
with its neighbours into a few Triton kernels. Compiling the model's top-level modules
(backbone, heads), with the whole step still captured as one CUDA graph by
:class:`~pipeline_lib.ssl.stepper.StaticStep`, trained 1.16-1.22x the instances of the
captured step alone and 1.07-1.20x with K runs side by side (benchmarks/rates/README.md).

What it costs: other kernels give other rounding, so a compiled run is not bit for bit the
eager or ``graph`` run of the same seed (as two devices are not); it is reproducible on its
own: inductor's ``deterministic`` mode skips the on-device benchmarking that could pick
different kernels in another process, cuDNN's deterministic algorithms still serve the
convolutions, and a resumed compiled run repeats an uninterrupted one. Compiling takes
10-20 s per job on an H200 (inductor caches it on disk for later jobs of the same shapes).
The modules are compiled in place (``nn.Module.compile``), so parameters, state dicts and
checkpoints are the uncompiled model's.
"""

from __future__ import annotations

import copy
import logging
import os
import shutil

import torch
from torch import nn

__all__ = ["check_compiler", "compile_network", "eager_copy", "release_network"]

log = logging.getLogger(__name__)


def check_compiler(device: torch.device) -> None:
    """Fail before training if inductor cannot build kernels for ``device``.

    Raises
    ------
    ValueError
        Off CUDA, without Triton, or without the C compiler Triton builds its launcher with,
        naming what is missing and the mode that needs none of it.
    """
    if device.type != "cuda":
        raise ValueError(
            f"step_mode='compiled' needs a CUDA device, got {device.type!r}; use 'auto' "
            "(graph on CUDA, eager elsewhere) or 'eager'"
        )
    from torch.utils._triton import has_triton  # noqa: PLC0415  (imports triton if present)

    if not has_triton():
        raise ValueError(
            "step_mode='compiled' needs Triton for this GPU (pip install triton, which "
            "torch's CUDA wheels bring); use step_mode 'graph'"
        )
    compiler = os.environ.get("CC") or next(
        (name for name in ("cc", "gcc", "clang") if shutil.which(name)), None
    )
    if compiler is None or shutil.which(compiler) is None:
        raise ValueError(
            "step_mode='compiled' needs a C compiler (Triton builds its kernel launcher with "
            "it): install gcc or set CC, or use step_mode 'graph'"
        )


def compile_network(model: nn.Module, *, backend: str = "inductor") -> nn.Module:
    """Compile ``model``'s top-level modules in place (static shapes); return ``model``.

    The training steps call the top-level modules (``model.backbone``, ``model.head``, ...)
    rather than ``model`` itself, so those are what is compiled. ``backend`` other than
    inductor is for the CPU tests of the plumbing.
    """
    if backend == "inductor":
        import torch._inductor.config as inductor_config  # noqa: PLC0415

        if hasattr(inductor_config, "deterministic"):
            inductor_config.deterministic = True  # process-wide, as cuDNN's flags are
    for child in model.children():
        child.compile(backend=backend, dynamic=False)
    return model


def release_network(model: nn.Module) -> nn.Module:
    """Undo :func:`compile_network`: the trained model runs eagerly at any batch size."""
    for child in model.children():
        child._compiled_call_impl = None  # what nn.Module.compile sets
    return model


def eager_copy(model: nn.Module) -> nn.Module:
    """An uncompiled deep copy of ``model``, which stays as it was (compiled or not).

    For work beside training (scoring the test split every few epochs): the copy can change
    mode, batch size and memory format without recompiling or touching the trained
    module, whose compiled call would otherwise be copied by reference and still run the
    original's modules.
    """
    saved = [(child, child._compiled_call_impl) for child in model.children()]
    try:
        release_network(model)
        return copy.deepcopy(model)
    finally:
        for child, compiled in saved:
            child._compiled_call_impl = compiled
