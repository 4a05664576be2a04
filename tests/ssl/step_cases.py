"""The tiny runs and helpers of the two-phase step tests (test_stepper*.py): every method and
the switches that change what a step draws, run alone or fused, and the fake-tensor and
meta-device harnesses that show a step's device phase syncs nothing with the host."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import pipeline_lib.ssl.fused as fused_module
from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.ssl.augment import ViewAugment
from pipeline_lib.ssl.loop import run_static_step
from pipeline_lib.ssl.run import _parameter_groups
from pipeline_lib.ssl.stepper import StaticStep
from tests.ssl.tiny_runs import FUSED_TINY, keyword_prepare, keyword_train, keyword_train_fused

#: Tiny runs covering every method and the switches that change what a step draws.
CASES = {
    "rotnet": ("rotnet", {"batch_size": 12}),
    "rotation": ("rotation", {"batch_size": 12, "head_depth": 1, "head_hidden": 32}),
    "contrastive": (
        "contrastive",
        {"batch_size": 12, "head_depth": 1, "head_hidden": 32, "proj_dim": 16},
    ),
    "contrastive_per_image_blur": (
        "contrastive",
        {
            "batch_size": 12,
            "head_depth": 1,
            "head_hidden": 32,
            "proj_dim": 16,
            "augment": ViewAugment(jitter_order="per_image", blur_p=0.5),
        },
    ),
    "contrastive_torchvision_ntxent": (
        "contrastive",
        {
            "batch_size": 12,
            "head_depth": 1,
            "head_hidden": 32,
            "proj_dim": 16,
            "view_jitter": "torchvision",
            "loss_form": "ntxent",
        },
    ),
    "contrastive_da_expanded": (
        "contrastive_da",
        {"batch_size": 24, "head_depth": 1, "head_hidden": 32, "proj_dim": 16},
    ),
    "contrastive_da_per_image": (
        "contrastive_da",
        {
            "batch_size": 6,
            "head_depth": 1,
            "head_hidden": 32,
            "proj_dim": 16,
            "da_batching": "per_image",
            "distributions": ("rot90", "hflip"),
        },
    ),
    "denoising": ("denoising", {"batch_size": 12}),
    "denoising_patch_views": (
        "denoising",
        {"batch_size": 12, "denoising_target": "patch_normalized", "denoising_views": True},
    ),
}


def train_case(case: str, images: np.ndarray, **overrides):
    method, options = CASES[case]
    kwargs = {"seed": 5, "epochs": 2, "width": 8, "lr": 0.05, "lr_schedule": "per_step"}
    return keyword_train(method, images, **{**kwargs, **options, **overrides})


def assert_equal_trees(first, second, where: str = "") -> None:
    """Nested dicts / lists / tensors equal bit for bit (floats compared exactly)."""
    if isinstance(first, torch.Tensor):
        assert isinstance(second, torch.Tensor) and torch.equal(first, second), where
    elif isinstance(first, dict):
        assert first.keys() == second.keys(), where
        for key in first:
            assert_equal_trees(first[key], second[key], f"{where}/{key}")
    elif isinstance(first, (list, tuple)):
        assert len(first) == len(second), where
        for index, (a, b) in enumerate(zip(first, second, strict=True)):
            assert_equal_trees(a, b, f"{where}[{index}]")
    else:
        assert first == second, where


def without_timing(history: list[dict]) -> list[dict]:
    drop = ("images_per_s", "seconds", "step_mode")
    return [{k: v for k, v in record.items() if k not in drop} for record in history]


def prepared_case(case: str, images: np.ndarray):
    """A run with ``train_representation``'s defaults and the case's options."""
    method, options = CASES[case]
    return keyword_prepare(
        method, images, seed=5, epochs=2, width=8, lr=0.05, step_mode="eager", **options
    )


def static_step_of(run, state, *, device_lr: bool = False) -> StaticStep:
    step = run_static_step(run, state, capture=False)
    step.device_lr = device_lr  # the fused SGD kernel reading a device lr, as on CUDA
    return step


def fake_state(run) -> SimpleNamespace:
    """A fresh model, SGD and schedule of ``run`` built inside the active fake mode."""
    model = build_proxy_model(run.method, **run.new_state.keywords["arch"])
    groups = _parameter_groups(model, weight_decay=3e-4, exclude_bn_from_decay=False)
    optimizer = torch.optim.SGD(groups, lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, run.cosine)
    return SimpleNamespace(
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        augment_generator=torch.Generator().manual_seed(0),
    )


class HostToDevice(TorchDispatchMode):
    """Records every op that reads a CPU tensor into a tensor on another device."""

    def __init__(self) -> None:
        super().__init__()
        self.copies: list[str] = []
        self.ops = 0  # every op seen: the watch was on

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        out = func(*args, **(kwargs or {}))
        reads_host = any(isinstance(a, torch.Tensor) and a.device.type == "cpu" for a in args)
        outputs = out if isinstance(out, (list, tuple)) else [out]
        if reads_host and any(
            isinstance(o, torch.Tensor) and o.device.type != "cpu" for o in outputs
        ):
            self.copies.append(str(func))
        return out


META = torch.device("meta")


def meta_state(run) -> SimpleNamespace:
    """A fresh model, SGD and schedule of ``run`` on the meta device."""
    with META:
        model = build_proxy_model(run.method, **run.new_state.keywords["arch"])
    groups = _parameter_groups(model, weight_decay=3e-4, exclude_bn_from_decay=False)
    optimizer = torch.optim.SGD(groups, lr=0.05, momentum=0.9)
    return SimpleNamespace(
        model=model,
        optimizer=optimizer,
        scheduler=torch.optim.lr_scheduler.LambdaLR(optimizer, run.cosine),
        augment_generator=torch.Generator().manual_seed(0),
    )


def host_reads(step: StaticStep, indices: list[torch.Tensor]) -> tuple[list[str], list[str]]:
    """Two steps of ``step`` after its recording step, watched: (host copies, torch.tensor calls).

    The first lists ops reading a CPU tensor into a device one inside the device phase; the
    second, ``torch.tensor(..., device=...)`` calls off the CPU during those steps.
    """
    step(*indices)  # records the plan (copies allowed)
    made_from_data: list[str] = []
    real_tensor = torch.tensor

    def tensor(*args, **kwargs):
        if kwargs.get("device") is not None and torch.device(kwargs["device"]).type != "cpu":
            made_from_data.append(repr(args)[:60])
        return real_tensor(*args, **kwargs)

    watch = HostToDevice()

    def watching(device_phase):
        def watched(cache_enabled: bool) -> torch.Tensor:
            with watch:
                return device_phase(cache_enabled)

        return watched

    step.wrap_device_phase(watching)
    torch.tensor = tensor  # type: ignore[assignment]
    try:
        for _ in range(2):
            step(*indices)
    finally:
        torch.tensor = real_tensor
    assert watch.ops > 0  # the device phases ran inside the watch
    return watch.copies, made_from_data


#: Two fused models at width 4 on 16x16 noise, 2 steps an epoch (contrastive DA: 8 images, 4
#: copies each, batch 16), so 2 epochs cross an epoch boundary; every method.
FUSED = {**FUSED_TINY, "contrastive_da": {**FUSED_TINY["contrastive_da"], "batch_size": 16}}


def train_fused_case(method: str, sets: list[np.ndarray], **overrides):
    if method == "contrastive_da":
        sets = [images[:8] for images in sets]
    options = {"epochs": 2, "width": 4, "lr": 0.1, "lr_schedule": "per_step", **FUSED[method]}
    seeds = [3, 4][: len(sets)]
    return keyword_train_fused(method, sets, seeds=seeds, **{**options, **overrides})


def separate_runs(method: str, sets: list[np.ndarray], **overrides) -> list:
    """Each member of ``train_fused_case`` trained by train_representation alone."""
    if method == "contrastive_da":
        sets = [images[:8] for images in sets]
    options = {"epochs": 2, "width": 4, "lr": 0.1, "lr_schedule": "per_step", **FUSED[method]}
    return [
        keyword_train(method, images, seed=seed, **{**options, **overrides})
        for images, seed in zip(sets, [3, 4], strict=False)
    ]


def poisoned_resume(seed: int):
    """``fused_module.resume`` that puts a NaN into the weights of the run of ``seed``."""
    resume = fused_module.resume

    def poisoned(run, state, path):
        state = resume(run, state, path)
        if run.fingerprint["seed"] == seed:
            with torch.no_grad():
                state.model.backbone.stem[0].weight[0, 0, 0, 0] = float("nan")
        return state

    return poisoned


#: One case of each task family, with the switches that add the most ops to a step.
FUSED_TRACE_CASES = ["rotation", "contrastive_da_per_image", "denoising_patch_views"]


def fused_runs(case: str, images: np.ndarray) -> tuple[list, list]:
    """Two runs of ``case`` (on halves of ``images``) set to two_phase, and their states."""
    half = len(images) // 2
    prepared = [prepared_case(case, part) for part in (images[:half], images[half:])]
    runs = [dataclasses.replace(run, step_mode="two_phase") for run, _ in prepared]
    return runs, [state for _, state in prepared]
