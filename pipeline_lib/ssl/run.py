"""A training run prepared: its data on the device, its state, seeds and step function.

One module for the single loop (:mod:`pipeline_lib.ssl.train`), the fused loop
(:mod:`pipeline_lib.ssl.fused`), the tests and the benchmarks, so they all prepare a run the
same way: :func:`prepare_run` turns :class:`~pipeline_lib.ssl.settings.TrainSettings`, the
images, a seed and an :class:`~pipeline_lib.ssl.settings.Execution` (device, step mode,
draws) into a :class:`Run` (what the run fixes before its first step) and its fresh
:class:`TrainingState`. What happens in and after each epoch lives in
:mod:`pipeline_lib.ssl.loop`.

docs/protocol.md, "Training recipe": ResNet-18 (3x3 stem, no max-pool), SGD with momentum 0.9,
lr 0.01 with a single cosine decay to 0 and no warm-up (stepped once an epoch, as the
released code's default ``--sched_freq=epoch``; the momentum in Keras' form,
:mod:`pipeline_lib.ssl.schedule`), L2 weight decay
3e-4 on every parameter, BatchNorm included (the released code's ``--regularize_bn=false``
leaves its exclusion list empty), inputs in [0, 1].

The whole training set lives on the device as one uint8 tensor; every step indexes a batch
from it and builds the views there (:mod:`pipeline_lib.ssl.augment`), so there is no
DataLoader and no host-to-device image traffic.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

from pipeline_lib.models.checkpoints import plain
from pipeline_lib.models.proxy import ProxyModel, build_proxy_model
from pipeline_lib.registry import CAPTURED_STEP_MODES, DRAW_SOURCES
from pipeline_lib.runtime.devices import use_deterministic_kernels
from pipeline_lib.ssl.augment import ViewAugment, distribution_copies
from pipeline_lib.ssl.draws import augment_generator_on
from pipeline_lib.ssl.order import EpochOrder
from pipeline_lib.ssl.schedule import MomentumFormLR
from pipeline_lib.ssl.settings import DEFAULT_EXECUTION, Execution, TrainSettings
from pipeline_lib.ssl.stepper import resolve_step_mode
from pipeline_lib.ssl.tasks import ProxyTask, StepParts, task_of

#: torch's optimisers import torch._dynamo (with sympy and half of torch besides) when the
#: first one is built: about 4 s of CPU in every training job. A warm-worker server
#: (pipeline_lib.runtime.warm_jobs) loads it once for all the training jobs of a run.
WARM_PRELOAD = ("torch._dynamo",)

__all__ = ["Run", "TrainingData", "TrainingState", "prepare_run", "stream_seed"]

_AMP_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def stream_seed(seed: int, stream: int) -> int:
    """Independent 64-bit seeds per purpose of one run's ``seed``.

    Streams: 0 model init, 1 shuffling, 2 augmentation, 3 the jitter order, 4 the frozen
    epoch order. Public so that a check can rebuild a run's generators without running it
    (benchmarks/check_fused.py, the tests).
    """
    state = np.random.SeedSequence([seed, stream]).generate_state(2, dtype=np.uint32)
    return int(state[0]) << 32 | int(state[1])


def _images_on_device(images: np.ndarray | torch.Tensor, device: torch.device) -> torch.Tensor:
    """uint8 ``(n, h, w, 3)`` -> contiguous uint8 ``(n, 3, h, w)`` on ``device``."""
    if isinstance(images, np.ndarray):
        images = torch.from_numpy(np.ascontiguousarray(images))
    if images.dtype != torch.uint8 or images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(
            f"images must be uint8 of shape (n, h, w, 3), got {images.dtype} {tuple(images.shape)}"
        )
    if images.shape[1] != images.shape[2]:
        raise ValueError(f"training images must be square, got {tuple(images.shape[1:3])}")
    if len(images) < 2:
        raise ValueError(f"need at least 2 training images, got {len(images)}")
    return images.to(device).permute(0, 3, 1, 2).contiguous()


def _data_digest(images: torch.Tensor) -> str:
    """SHA-1 of the pixels, so a checkpoint never resumes on different data."""
    array = np.ascontiguousarray(images.cpu().numpy())
    return hashlib.sha1(memoryview(array).cast("B"), usedforsecurity=False).hexdigest()


def _parameter_groups(
    model: nn.Module, *, weight_decay: float, exclude_bn_from_decay: bool
) -> list[dict[str, Any]]:
    norm_types = (nn.modules.batchnorm._BatchNorm,)
    no_decay: list[nn.Parameter] = []
    decay: list[nn.Parameter] = []
    for module in model.modules():
        for parameter in module.parameters(recurse=False):
            exempt = exclude_bn_from_decay and isinstance(module, norm_types)
            (no_decay if exempt else decay).append(parameter)
    groups = [{"params": decay, "weight_decay": weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return groups


def _view_augment(seed: int, settings: TrainSettings) -> ViewAugment:
    """The released view augmentation with the recipe's ``view_*`` switches applied."""
    flips_distribution = any("hflip" in name.split("+") for name in settings.distributions)
    view_flip = settings.view_flip
    flip = view_flip == "always" or (view_flip == "auto" and not flips_distribution)
    return ViewAugment(
        flip_p=0.5 if flip else 0.0,
        jitter=settings.view_jitter,
        order_seed=stream_seed(seed, 3),
        blur_p=0.5 if settings.view_blur else 0.0,
    )


@dataclasses.dataclass(frozen=True)
class TrainingData:
    """The training instances on the device and how one epoch walks through them.

    Public as a field of :class:`Run`: the loops and benchmarks read its sizes.
    """

    images: torch.Tensor  # uint8 (instances, 3, side, side); DA copies included if expanded
    n_images: int  # source images, before any expansion
    side: int
    sha1: str  # of the source images
    per_step: int
    steps_per_epoch: int


def _training_data(
    images_uint8: np.ndarray | torch.Tensor,
    settings: TrainSettings,
    task: ProxyTask,
    device: torch.device,
) -> TrainingData:
    """Move the images to the device once (expanded by the DA set if the recipe ``expands``);
    size the steps by its ``batch_size``. The task checks that the images fit its settings."""
    s = settings
    data = _images_on_device(images_uint8, device)
    n, _, side, _ = data.shape
    data_sha1 = _data_digest(data)
    if s.expands:
        # Released data/cifar.py: every transformed copy is an instance of the training set.
        data = distribution_copies(data, s.distributions).images
    instances = len(data)
    task.check_data(s, side)
    per_step = min(s.batch_size, instances)
    return TrainingData(data, n, side, data_sha1, per_step, instances // per_step)


def _cosine_schedule(
    lr_schedule: str, steps_per_epoch: int, total_steps: int
) -> Callable[[int], float]:
    """The LambdaLR factor: one cosine decay to 0 over ``total_steps``, no warm-up."""

    def cosine(step_index: int) -> float:
        if lr_schedule == "per_epoch":
            step_index -= step_index % steps_per_epoch  # the epoch's first step
        return 0.5 * (1.0 + math.cos(math.pi * min(step_index, total_steps) / total_steps))

    return cosine


@dataclasses.dataclass
class TrainingState:
    """Everything a checkpoint saves and restores, and how far training got.

    Mutable: the loops advance it in place; the fused loop copies stacked weights back in.
    """

    model: ProxyModel
    optimizer: torch.optim.SGD
    scheduler: MomentumFormLR
    scaler: torch.amp.GradScaler
    shuffle_generator: torch.Generator
    augment_generator: torch.Generator
    history: list[dict[str, float]] = dataclasses.field(default_factory=list)
    epoch: int = 0  # epochs completed


def _fresh_state(
    s: TrainSettings,
    *,
    seed: int,
    arch: dict[str, Any],
    device: torch.device,
    cosine: Callable[[int], float],
    use_scaler: bool,
    draws: str = DRAW_SOURCES[0],
) -> TrainingState:
    """The untrained model, optimiser and generators of ``seed`` (the global RNG is untouched):
    ``s``'s method, initialisation and optimiser settings, the network ``arch``.

    The augmentation generator is on the CPU, or on ``device`` with ``draws="device"``.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(stream_seed(seed, 0))
        model = build_proxy_model(s.method, init=s.init, **arch)
    model = model.to(device)
    if device.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    groups = _parameter_groups(
        model, weight_decay=s.weight_decay, exclude_bn_from_decay=s.exclude_bn_from_decay
    )
    optimizer = torch.optim.SGD(groups, lr=s.lr, momentum=s.momentum)
    scheduler = MomentumFormLR(optimizer, cosine, momentum_form=s.momentum_form)
    scaler = torch.amp.GradScaler(device.type, enabled=use_scaler)
    shuffle_generator = torch.Generator().manual_seed(stream_seed(seed, 1))
    augment_generator = augment_generator_on(stream_seed(seed, 2), device, draws)
    return TrainingState(model, optimizer, scheduler, scaler, shuffle_generator, augment_generator)


@dataclasses.dataclass(frozen=True)
class Run:
    """What one training run fixes before its first step, derived from its settings and data.

    Frozen and shared by every loop (single, fused, benchmarks), so they all train the same
    run; built by :func:`prepare_run`.
    """

    method: str
    epochs: int
    lr: float
    #: SGD's momentum form (:mod:`pipeline_lib.ssl.schedule`), which every schedule of the
    #: run keeps (the fused loop builds its stacked group's with it).
    momentum_form: str
    data: TrainingData
    cosine: Callable[[int], float]
    #: The proxy task's step bound to the run (:class:`~pipeline_lib.ssl.tasks.StepParts`):
    #: called as one step, composed part by part by the fused trainer.
    step: StepParts
    #: The view augmentation the step draws (None when the method's views are off).
    augment: ViewAugment | None
    fingerprint: dict[str, Any]
    new_state: Callable[[], TrainingState]
    device: torch.device
    amp: str | None
    use_scaler: bool
    #: How each epoch orders the training instances (:mod:`pipeline_lib.ssl.order`).
    order: EpochOrder
    #: ``eager`` (today's loop), ``graph`` (:class:`~pipeline_lib.ssl.stepper.StaticStep`) or
    #: ``compiled`` (the same with the network compiled, :mod:`pipeline_lib.ssl.compiling`).
    step_mode: str = "eager"

    @property
    def on_cuda(self) -> bool:
        return self.device.type == "cuda"

    def autocast(self, cache_enabled: bool = True) -> contextlib.AbstractContextManager[Any]:
        """Autocast on CUDA with ``amp``; nothing on the CPU (always float32).

        A captured step needs ``cache_enabled=False``: cached casts would outlive the graph.
        """
        if self.on_cuda and self.amp is not None:
            return torch.autocast(
                device_type="cuda", dtype=_AMP_DTYPES[self.amp], cache_enabled=cache_enabled
            )
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def precision(self) -> Iterator[None]:
        """Around training steps: on CUDA without ``amp``, float32 that is float32.

        An Ampere or later GPU may compute float32 convolutions (cuDNN, on by default) and
        matrix products (cuBLAS, off by default) in TF32, with a 10-bit mantissa; the
        released code trains in float32. Both are switched off for each epoch and restored
        after it, so what runs between epochs and after training in the process (an
        evaluation, an embedding, another run) computes as it would have. Nothing changes
        with ``amp`` or on the CPU.
        """
        if not (self.on_cuda and self.amp is None):
            yield
            return
        saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _fingerprint(
    settings: TrainSettings,
    *,
    seed: int,
    data: TrainingData,
    arch: dict[str, Any],
    augment: ViewAugment | None,
    device: torch.device,
) -> dict[str, Any]:
    """What a checkpoint must have been written for to be resumed (JSON-plain values).

    Execution settings (device type aside from ``amp``, step mode, evaluation) stay out.
    """
    s = settings
    return plain(
        {
            "method": s.method,
            "data_sha1": data.sha1,
            "n_images": data.n_images,
            "image_size": data.side,
            "seed": seed,
            "epochs": s.epochs,
            "batch_size": s.batch_size,
            "lr": s.lr,
            "lr_schedule": s.lr_schedule,
            "momentum": s.momentum,
            "momentum_form": s.momentum_form,
            "weight_decay": s.weight_decay,
            "exclude_bn_from_decay": s.exclude_bn_from_decay,
            "arch": arch,
            "temperature": s.temperature,
            "loss_form": s.loss_form,
            "epoch_order": s.epoch_order,
            "init": s.init,
            "distributions": list(s.distributions),
            "da_batching": s.da_batching if s.spec.reads_setting("da_batching") else None,
            "noise_std": s.noise_std,
            "denoising_patch": s.denoising_patch,
            "augment": dataclasses.asdict(augment) if augment is not None else None,
            "amp": s.amp if device.type == "cuda" else None,
            # A plugin method's package and settings (absent for a built-in method, whose
            # fingerprints stay as they were).
            **({"package": s.package, "plugin": dict(s.plugin)} if s.package else {}),
        }
    )


def _state_factory(
    s: TrainSettings,
    *,
    seed: int,
    side: int,
    device: torch.device,
    cosine: Callable[[int], float],
    use_scaler: bool,
    draws: str = DRAW_SOURCES[0],
) -> Callable[[], TrainingState]:
    """What builds the run's fresh state (:attr:`Run.new_state`): model, optimiser, schedule."""
    return functools.partial(
        _fresh_state,
        s,
        seed=seed,
        arch={
            "width": s.width,
            "stem_width": s.stem_width,
            "head_depth": s.head_depth,
            "head_hidden": s.head_hidden,
            "proj_dim": s.proj_dim,
            "image_size": side,
            "denoising_target": s.denoising_target,
            "denoising_decoder": s.denoising_decoder,
        },
        device=device,
        cosine=cosine,
        use_scaler=use_scaler,
        draws=draws,
    )


def prepare_run(
    settings: TrainSettings,
    images_uint8: np.ndarray | torch.Tensor,
    *,
    seed: int,
    execution: Execution = DEFAULT_EXECUTION,
) -> tuple[Run, TrainingState]:
    """Load the data and build the run and fresh state of ``settings`` on ``images_uint8``.

    Parameters
    ----------
    settings : TrainSettings
        The recipe (already checked).
    images_uint8 : ndarray or Tensor of shape (n, h, w, 3), uint8
        Square training images, moved once to the execution's device.
    seed : int
        Seeds the initialisation, the epoch order and the augmentations (:func:`stream_seed`).
    execution : Execution, default=DEFAULT_EXECUTION
        Device, step mode (:func:`~pipeline_lib.ssl.stepper.resolve_step_mode`), where the
        steps' random numbers are drawn, and optionally the view augmentation.

    Returns
    -------
    run : Run
    state : TrainingState

    Raises
    ------
    ValueError
        On bad images, images the task's settings do not fit (a denoising patch that does
        not divide the side), or a step mode that cannot run on the device.
    """
    s = settings
    augment, draws = execution.augment, execution.draws
    if augment is None and s.uses_views:
        augment = _view_augment(seed, s)
    device = torch.device(execution.device)
    on_cuda = device.type == "cuda"
    use_deterministic_kernels(device)
    task = task_of(s.method)
    data = _training_data(images_uint8, s, task, device)
    cosine = _cosine_schedule(s.lr_schedule, data.steps_per_epoch, s.epochs * data.steps_per_epoch)
    use_scaler = on_cuda and s.amp == "float16"
    requested = execution.step_mode
    if not s.spec.capturable:  # auto never captures its step; a captured mode is an error
        if requested in CAPTURED_STEP_MODES:
            raise ValueError(f"step_mode={requested!r}: the step of {s.method} cannot be captured")
        requested = "eager"
    step_mode = resolve_step_mode(requested, device, float16_scaler=use_scaler)
    new_state = _state_factory(
        s,
        seed=seed,
        side=data.side,
        device=device,
        cosine=cosine,
        use_scaler=use_scaler,
        draws=draws,
    )
    state = new_state()
    fingerprint = _fingerprint(
        s, seed=seed, data=data, arch=state.model.arch, augment=augment, device=device
    )
    run = Run(
        method=s.method,
        epochs=s.epochs,
        lr=s.lr,
        momentum_form=s.momentum_form,
        data=data,
        cosine=cosine,
        step=task.step(s, augment),
        augment=augment,
        fingerprint=fingerprint,
        new_state=new_state,
        device=device,
        amp=s.amp,
        use_scaler=use_scaler,
        # The frozen order's own seed stream: drawn once, never checkpointed (the seed and
        # the data's size decide it); each epoch's choices come from the shuffle generator.
        order=EpochOrder.build(s.epoch_order, len(data.images), seed=stream_seed(seed, 4)),
        step_mode=step_mode,
    )
    return run, state
