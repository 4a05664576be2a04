"""Which rules get a GPU, and a warning when a run that has GPUs gives them none.

A job uses CUDA only when it is given a ``gpu`` resource
(:func:`pipeline_lib.runtime.devices.select_device`), so that CPU jobs beside GPU jobs do not
take the accelerator. The rules declare ``gpu=0``: on a plain ``snakemake --resources gpu=1``
every training job would run on the CPU, for days, without a word. ``profiles/gpu`` gives
each rule of :data:`GPU_RULES` one GPU; the Snakefile warns (:func:`gpu_warning`) when a run
declares GPUs, or finds CUDA devices, but its jobs of those rules ask for none.

Torch-free: the Snakefile imports this at parse time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "GPU_PROFILE",
    "GPU_RULES",
    "IMAGE_GPU_RULES",
    "gpu_warning",
    "visible_cuda_devices",
]

#: The profile that gives every rule of :data:`GPU_RULES` one GPU.
GPU_PROFILE = "profiles/gpu"

#: Training and embedding of the image benchmarks: the rules the cost planner counts in
#: device-hours (:data:`pipeline_lib.planning.defaults.DEVICE_RULES`).
IMAGE_GPU_RULES: tuple[str, ...] = (
    "train_representation",
    "train_fused",
    "embed_trained",
    "embed_frozen_dataset",
)

#: Every rule that should run on a GPU when there is one: the image benchmarks' training and
#: embedding, MVTec AD's training, dense embedding and patch scoring (KDE over hundreds of
#: thousands of patches), and the explanations' gradients. The detector rules of the image
#: benchmarks (``score_detectors``, ``score_detectors_g``) take a ``gpu`` resource too but
#: stay on the CPU: thousands of jobs of seconds each would queue behind a few GPUs.
GPU_RULES: tuple[str, ...] = (
    *IMAGE_GPU_RULES,
    "train_patch_representation",
    "embed_patches",
    "score_patches",
    "score_patches_and_rotation_classifier",
    "explain_detectors",
)


def visible_cuda_devices(
    environ: Mapping[str, str] | None = None, driver: str | os.PathLike = "/proc/driver/nvidia"
) -> int:
    """NVIDIA GPUs this process could use, without importing torch (seconds at parse time).

    The GPUs the driver lists, limited by ``CUDA_VISIBLE_DEVICES`` when it is set (empty or
    ``-1``: none). Linux's NVIDIA driver only; elsewhere 0.
    """
    environ = os.environ if environ is None else environ
    try:
        present = len(list((Path(driver) / "gpus").iterdir()))
    except OSError:
        return 0
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return present
    entries = [entry for entry in visible.split(",") if entry.strip()]
    if not entries or entries[0].strip().startswith("-"):
        return 0
    return min(present, len(entries))


def gpu_warning(
    rule_gpus: Mapping[str, int], *, declared: int | None, cuda_devices: int
) -> str | None:
    """The warning for a run whose jobs of :data:`GPU_RULES` get no GPU, if it has GPUs.

    Parameters
    ----------
    rule_gpus : mapping
        Each rule of :data:`GPU_RULES` with jobs in this run -> the GPUs a job of it asks for.
    declared : int or None
        The run's ``--resources gpu=N`` (None: not declared).
    cuda_devices : int
        CUDA devices on this host (:func:`visible_cuda_devices`; 0 for a cluster run, whose
        submit host runs none of these jobs).

    Returns
    -------
    str or None
        None when no GPU is declared or present, or every such rule gets one.
    """
    if not declared and not cuda_devices:
        return None
    on_cpu = sorted(rule for rule, gpus in rule_gpus.items() if rule in GPU_RULES and gpus < 1)
    if not on_cpu:
        return None
    if declared:
        why = f"--resources gpu={declared} declares {declared} GPU{'s' if declared > 1 else ''}"
    else:
        why = f"{cuda_devices} CUDA device{'s are' if cuda_devices > 1 else ' is'} visible"
    if len(on_cpu) == len([rule for rule in rule_gpus if rule in GPU_RULES]):
        what = "but none of its training or embedding jobs asks for one: they all run on the CPU"
    else:
        what = f"but the jobs of {', '.join(on_cpu)} ask for none and run on the CPU"
    settings = " ".join(f"{rule}:gpu=1" for rule in on_cpu)
    return (
        f"Warning: {why}, {what} (a job uses CUDA only when given a `gpu` resource; the "
        f"rules declare gpu=0). Run with --profile {GPU_PROFILE} (one GPU for each rule "
        f"that trains or embeds), or --set-resources {settings}."
    )
