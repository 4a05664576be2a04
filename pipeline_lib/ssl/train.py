"""Self-supervised representation training: one plain epoch loop for every proxy task.

PROTOCOL.md, "Training": ResNet-18 (3x3 stem, no max-pool), SGD with momentum 0.9,
lr 0.01 with a single cosine decay to 0 and no warm-up (stepped once an epoch, as the
released code's default ``--sched_freq=epoch``), L2 weight decay
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
import inspect
import logging
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from pipeline_lib.models.checkpoints import load_checkpoint, plain, save_checkpoint
from pipeline_lib.models.proxy import ProxyModel, build_proxy_model
from pipeline_lib.models.representation import TRAINED_METHODS
from pipeline_lib.registry import (
    CAPTURED_STEP_MODES,
    DA_BATCHINGS,
    DENOISING_DECODERS,
    DENOISING_TARGETS,
    EPOCH_ORDERS,
    INITS,
    LR_SCHEDULES,
    VIEW_FLIPS,
    VIEW_JITTERS,
)
from pipeline_lib.runtime.devices import use_deterministic_kernels
from pipeline_lib.ssl.augment import (
    DEFAULT_DISTRIBUTIONS,
    ViewAugment,
    distribution_copies,
    parse_distribution,
)
from pipeline_lib.ssl.compiling import compile_network, eager_copy, release_network
from pipeline_lib.ssl.contrastive import LOSS_FORMS, RENAMED_LOSS_FORMS, contrastive_step
from pipeline_lib.ssl.denoising import DEFAULT_NOISE_STD, DEFAULT_TARGET_PATCH, denoising_step
from pipeline_lib.ssl.order import EpochOrder
from pipeline_lib.ssl.rotation import rotation_step
from pipeline_lib.ssl.stepper import StaticStep, one_member, resolve_step_mode

__all__ = ["TrainingDivergedError", "train_representation"]

log = logging.getLogger(__name__)

_AMP_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


class TrainingDivergedError(RuntimeError):
    """The proxy loss or the weights became NaN or infinite.

    The message names the epoch (and, for a loss, the step) and suggests a lower lr.
    """


def _stream_seed(seed: int, stream: int) -> int:
    """Independent 64-bit seeds per purpose (model init, shuffling, augmentation)."""
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


def _all_finite(model: nn.Module) -> bool:
    """Whether every floating-point parameter and buffer is finite (one host sync)."""
    tensors = [t for t in model.state_dict().values() if t.is_floating_point()]
    return bool(torch.stack([torch.isfinite(t).all() for t in tensors]).all())


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


def _step_function(
    method: str,
    *,
    augment: ViewAugment | None,
    temperature: float,
    loss_form: str,
    distributions: Sequence[str],
    noise_std: float,
    denoising_target: str,
    denoising_patch: int,
) -> Callable[..., torch.Tensor]:
    if method in ("rotnet", "rotation"):
        return functools.partial(rotation_step, augment=augment)
    if method == "contrastive":
        return functools.partial(
            contrastive_step, augment=augment, temperature=temperature, form=loss_form
        )
    if method == "contrastive_da":
        # With ``expanded`` batching the copies are already instances of the training set
        # (``distributions`` is empty here); ``per_image`` makes them inside the step.
        return functools.partial(
            contrastive_step,
            augment=augment,
            temperature=temperature,
            form=loss_form,
            distributions=tuple(distributions),
        )
    return functools.partial(
        denoising_step,
        noise_std=noise_std,
        target=denoising_target,
        patch=denoising_patch,
        augment=augment,
    )


def _view_augment(
    seed: int, distributions: Sequence[str], *, view_flip: str, view_jitter: str, blur: bool
) -> ViewAugment:
    """The released view augmentation with the run's switches applied."""
    flips_distribution = any("hflip" in name.split("+") for name in distributions)
    flip = view_flip == "always" or (view_flip == "auto" and not flips_distribution)
    return ViewAugment(
        flip_p=0.5 if flip else 0.0,
        jitter=view_jitter,
        order_seed=_stream_seed(seed, 3),
        blur_p=0.5 if blur else 0.0,
    )


def _check_arguments(
    method: str,
    *,
    epochs: int,
    batch_size: int,
    checkpoint_every: int,
    log_every: int,
    lr: float,
    momentum: float,
    weight_decay: float,
    amp: str | None,
    loss_form: str,
    temperature: float,
    distributions: Sequence[str],
    da_batching: str,
    view_flip: str,
    view_jitter: str,
    lr_schedule: str,
    epoch_order: str,
    init: str,
) -> tuple[str, ...]:
    """Raise ValueError naming the first bad argument; return the distribution set in use.

    Only ``contrastive_da`` uses ``distributions``: the other methods get ``()``.
    """
    if method not in TRAINED_METHODS:
        raise ValueError(
            f"unknown trained representation {method!r}; allowed: {', '.join(TRAINED_METHODS)}"
        )
    for name, value in (("epochs", epochs), ("batch_size", batch_size)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if checkpoint_every < 1 or log_every < 1:
        raise ValueError(
            f"checkpoint_every and log_every must be >= 1, got {checkpoint_every}, {log_every}"
        )
    if lr <= 0 or not 0 <= momentum < 1 or weight_decay < 0:
        raise ValueError(
            f"need lr > 0, 0 <= momentum < 1, weight_decay >= 0; got {lr}, "
            f"{momentum}, {weight_decay}"
        )
    if amp is not None and amp not in _AMP_DTYPES:
        raise ValueError(f"amp must be one of {', '.join(_AMP_DTYPES)} or None, got {amp!r}")
    if method.startswith("contrastive"):
        if loss_form in RENAMED_LOSS_FORMS:
            raise ValueError(
                f"loss_form {loss_form!r} was renamed {RENAMED_LOSS_FORMS[loss_form]!r} (same "
                f"loss); the recipe's is {LOSS_FORMS[0]!r}"
            )
        if loss_form not in LOSS_FORMS:
            raise ValueError(f"unknown loss_form {loss_form!r}; allowed: {', '.join(LOSS_FORMS)}")
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
    for name, value, allowed in (
        ("da_batching", da_batching, DA_BATCHINGS),
        ("view_flip", view_flip, VIEW_FLIPS),
        ("view_jitter", view_jitter, VIEW_JITTERS),
        ("lr_schedule", lr_schedule, LR_SCHEDULES),
        ("epoch_order", epoch_order, EPOCH_ORDERS),
        ("init", init, INITS),
    ):
        if value not in allowed:
            raise ValueError(f"unknown {name} {value!r}; allowed: {', '.join(allowed)}")
    distributions = tuple(distributions) if method == "contrastive_da" else ()
    if method == "contrastive_da":
        if not distributions:
            raise ValueError("contrastive_da needs at least one distribution transform")
        for name in distributions:
            parse_distribution(name)
    return distributions


@dataclasses.dataclass(frozen=True)
class _TrainingData:
    """The training instances on the device and how one epoch walks through them."""

    images: torch.Tensor  # uint8 (instances, 3, side, side); DA copies included if expanded
    n_images: int  # source images, before any expansion
    side: int
    sha1: str  # of the source images
    per_step: int
    steps_per_epoch: int


def _training_data(
    images_uint8: np.ndarray | torch.Tensor,
    *,
    method: str,
    batch_size: int,
    distributions: tuple[str, ...],
    expand: bool,
    denoising_target: str,
    denoising_patch: int,
    device: torch.device,
) -> _TrainingData:
    """Move the images to the device once (expanded by the DA set if ``expand``); size steps."""
    data = _images_on_device(images_uint8, device)
    n, _, side, _ = data.shape
    data_sha1 = _data_digest(data)
    if expand:
        # Released data/cifar.py: every transformed copy is an instance of the training set.
        data = distribution_copies(data, distributions).images
    instances = len(data)
    if method == "denoising" and denoising_target == "patch_normalized":
        if denoising_patch < 2 or side % denoising_patch:
            raise ValueError(
                f"denoising_patch must be >= 2 and divide the image side {side}, "
                f"got {denoising_patch}"
            )
    per_step = min(batch_size, instances)
    return _TrainingData(data, n, side, data_sha1, per_step, instances // per_step)


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
class _TrainingState:
    """Everything a checkpoint saves and restores, and how far training got."""

    model: ProxyModel
    optimizer: torch.optim.SGD
    scheduler: torch.optim.lr_scheduler.LambdaLR
    scaler: torch.amp.GradScaler
    shuffle_generator: torch.Generator
    augment_generator: torch.Generator
    history: list[dict[str, float]] = dataclasses.field(default_factory=list)
    epoch: int = 0  # epochs completed


def _fresh_state(
    method: str,
    *,
    seed: int,
    arch: dict[str, Any],
    device: torch.device,
    lr: float,
    momentum: float,
    weight_decay: float,
    exclude_bn_from_decay: bool,
    cosine: Callable[[int], float],
    use_scaler: bool,
    init: str = INITS[0],
) -> _TrainingState:
    """The untrained model, optimiser and generators of ``seed`` (the global RNG is untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_stream_seed(seed, 0))
        model = build_proxy_model(method, init=init, **arch)
    model = model.to(device)
    if device.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    groups = _parameter_groups(
        model, weight_decay=weight_decay, exclude_bn_from_decay=exclude_bn_from_decay
    )
    optimizer = torch.optim.SGD(groups, lr=lr, momentum=momentum)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine)
    scaler = torch.amp.GradScaler(device.type, enabled=use_scaler)
    shuffle_generator = torch.Generator().manual_seed(_stream_seed(seed, 1))
    augment_generator = torch.Generator().manual_seed(_stream_seed(seed, 2))
    return _TrainingState(model, optimizer, scheduler, scaler, shuffle_generator, augment_generator)


@dataclasses.dataclass(frozen=True)
class _Run:
    """What one training run fixes before its first step, derived from its arguments and data."""

    method: str
    epochs: int
    lr: float
    data: _TrainingData
    cosine: Callable[[int], float]
    step: Callable[..., torch.Tensor]
    #: ``_step_function``'s keyword arguments (the fused trainer builds its steps from them).
    step_options: dict[str, Any]
    fingerprint: dict[str, Any]
    new_state: Callable[[], _TrainingState]
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
    run_arguments: dict[str, Any], data: _TrainingData, arch: dict[str, Any]
) -> dict[str, Any]:
    """What a checkpoint must have been written for to be resumed (JSON-plain values)."""
    a = run_arguments
    return plain(
        {
            "method": a["method"],
            "data_sha1": data.sha1,
            "n_images": data.n_images,
            "image_size": data.side,
            "seed": a["seed"],
            "epochs": a["epochs"],
            "batch_size": a["batch_size"],
            "lr": a["lr"],
            "lr_schedule": a["lr_schedule"],
            "momentum": a["momentum"],
            "weight_decay": a["weight_decay"],
            "exclude_bn_from_decay": a["exclude_bn_from_decay"],
            "arch": arch,
            "temperature": a["temperature"],
            "loss_form": a["loss_form"],
            "epoch_order": a["epoch_order"],
            "init": a["init"],
            "distributions": list(a["distributions"]),
            "da_batching": a["da_batching"] if a["method"] == "contrastive_da" else None,
            "noise_std": a["noise_std"],
            "denoising_patch": a["denoising_patch"],
            "augment": dataclasses.asdict(a["augment"]) if a["augment"] is not None else None,
            "amp": a["amp"] if a["device"].type == "cuda" else None,
        }
    )


def _prepare_run(
    method: str,
    images_uint8: np.ndarray | torch.Tensor,
    *,
    seed: int,
    epochs: int,
    batch_size: int,
    lr: float,
    momentum: float,
    weight_decay: float,
    exclude_bn_from_decay: bool,
    head_depth: int | None,
    head_hidden: int,
    proj_dim: int,
    temperature: float,
    loss_form: str,
    distributions: Sequence[str],
    da_batching: str,
    view_flip: str,
    view_jitter: str,
    view_blur: bool,
    lr_schedule: str,
    epoch_order: str,
    init: str,
    noise_std: float,
    denoising_views: bool,
    denoising_target: str,
    denoising_patch: int,
    denoising_decoder: str,
    width: int,
    augment: ViewAugment | None,
    amp: str | None,
    device: torch.device | str,
    checkpoint_every: int,
    log_every: int,
    step_mode: str = "eager",
) -> tuple[_Run, _TrainingState]:
    """Check the arguments, load the data and build the fresh state of one run.

    Raises
    ------
    ValueError
        On a bad argument (the message names it).
    """
    distributions = _check_arguments(
        method,
        epochs=epochs,
        batch_size=batch_size,
        checkpoint_every=checkpoint_every,
        log_every=log_every,
        lr=lr,
        momentum=momentum,
        weight_decay=weight_decay,
        amp=amp,
        loss_form=loss_form,
        temperature=temperature,
        distributions=distributions,
        da_batching=da_batching,
        view_flip=view_flip,
        view_jitter=view_jitter,
        lr_schedule=lr_schedule,
        epoch_order=epoch_order,
        init=init,
    )
    if augment is None and (method != "denoising" or denoising_views):
        augment = _view_augment(
            seed, distributions, view_flip=view_flip, view_jitter=view_jitter, blur=view_blur
        )
    device = torch.device(device)
    on_cuda = device.type == "cuda"
    use_deterministic_kernels(device)
    expand = method == "contrastive_da" and da_batching == "expanded"
    data = _training_data(
        images_uint8,
        method=method,
        batch_size=batch_size,
        distributions=distributions,
        expand=expand,
        denoising_target=denoising_target,
        denoising_patch=denoising_patch,
        device=device,
    )
    cosine = _cosine_schedule(lr_schedule, data.steps_per_epoch, epochs * data.steps_per_epoch)
    use_scaler = on_cuda and amp == "float16"
    step_mode = resolve_step_mode(step_mode, device, float16_scaler=use_scaler)
    new_state = functools.partial(
        _fresh_state,
        method,
        seed=seed,
        arch={
            "width": width,
            "head_depth": head_depth,
            "head_hidden": head_hidden,
            "proj_dim": proj_dim,
            "image_size": data.side,
            "denoising_target": denoising_target,
            "denoising_decoder": denoising_decoder,
        },
        device=device,
        lr=lr,
        momentum=momentum,
        weight_decay=weight_decay,
        exclude_bn_from_decay=exclude_bn_from_decay,
        cosine=cosine,
        use_scaler=use_scaler,
        init=init,
    )
    state = new_state()
    step_options = {
        "augment": augment,
        "temperature": temperature,
        "loss_form": loss_form,
        "distributions": () if expand else distributions,
        "noise_std": noise_std,
        "denoising_target": denoising_target,
        "denoising_patch": denoising_patch,
    }
    fingerprint = _fingerprint(
        {
            "method": method,
            "seed": seed,
            "epochs": epochs,
            "batch_size": batch_size,
            "lr": lr,
            "lr_schedule": lr_schedule,
            "momentum": momentum,
            "weight_decay": weight_decay,
            "exclude_bn_from_decay": exclude_bn_from_decay,
            "temperature": temperature,
            "loss_form": loss_form,
            "epoch_order": epoch_order,
            "init": init,
            "distributions": distributions,
            "da_batching": da_batching,
            "noise_std": noise_std,
            "denoising_patch": denoising_patch,
            "augment": augment,
            "amp": amp,
            "device": device,
        },
        data,
        state.model.arch,
    )
    run = _Run(
        method=method,
        epochs=epochs,
        lr=lr,
        data=data,
        cosine=cosine,
        step=_step_function(method, **step_options),
        step_options=step_options,
        fingerprint=fingerprint,
        new_state=new_state,
        device=device,
        amp=amp,
        use_scaler=use_scaler,
        # The frozen order's own seed stream: drawn once, never checkpointed (the seed and
        # the data's size decide it); each epoch's choices come from the shuffle generator.
        order=EpochOrder.build(epoch_order, len(data.images), seed=_stream_seed(seed, 4)),
        step_mode=step_mode,
    )
    return run, state


def _resume(
    run: _Run, state: _TrainingState, checkpoint_path: str | os.PathLike | None
) -> _TrainingState:
    """``state`` advanced to the checkpoint's epoch, or a fresh state if it cannot be resumed.

    A missing path or file is no resume; a file that fails to load or was written for other
    arguments or data is logged as a warning naming it (never fatal).
    """
    if checkpoint_path is None or not Path(checkpoint_path).exists():
        return state
    try:
        saved = load_checkpoint(checkpoint_path)
        if saved["fingerprint"] != run.fingerprint:
            changed = sorted(
                key
                for key in set(run.fingerprint) | set(saved["fingerprint"])
                if run.fingerprint.get(key) != saved["fingerprint"].get(key)
            )
            raise ValueError(f"written for other arguments or data (differs in {changed})")
        state.model.load_state_dict(saved["model"])
        state.optimizer.load_state_dict(saved["optimizer"])
        state.scheduler.load_state_dict(saved["scheduler"])
        if run.use_scaler and saved.get("scaler"):
            state.scaler.load_state_dict(saved["scaler"])
        state.shuffle_generator.set_state(saved["rng"]["shuffle"])
        state.augment_generator.set_state(saved["rng"]["augment"])
        torch.random.set_rng_state(saved["rng"]["torch"])
        if run.on_cuda and saved["rng"].get("cuda") is not None:
            torch.cuda.set_rng_state_all(saved["rng"]["cuda"])
        state.history = list(saved["history"])
        state.epoch = int(saved["epoch"])
        log.info(
            "resuming %s from %s after epoch %d/%d",
            run.method,
            checkpoint_path,
            state.epoch,
            run.epochs,
        )
        return state
    except Exception as error:  # a damaged file raises many types; never fatal
        log.warning(
            "could not resume from checkpoint %s (%s: %s); training from scratch",
            checkpoint_path,
            type(error).__name__,
            error,
        )
        # Loading may have changed the model or optimiser half-way: rebuild everything.
        return run.new_state()


#: Arguments of :func:`train_representation` that concern one call, not how the run trains.
_PER_CALL: tuple[str, ...] = ("checkpoint_path", "progress", "callback", "evaluate", "eval_every")


def prepare_run(
    method: str, images_uint8: np.ndarray | torch.Tensor, **options: Any
) -> tuple[_Run, _TrainingState]:
    """A run prepared as :func:`train_representation` prepares it, its defaults filling what
    ``options`` leaves out: for the tests and benchmarks that drive the epochs themselves."""
    parameters = inspect.signature(train_representation).parameters
    defaults = {
        name: parameter.default
        for name, parameter in parameters.items()
        if parameter.default is not inspect.Parameter.empty and name not in _PER_CALL
    }
    return _prepare_run(method, images_uint8, **{**defaults, **options})


def run_static_step(run: _Run, state: _TrainingState, *, capture: bool) -> StaticStep:
    """The two-phase step of one run on ``state``: what ``graph`` training steps through.

    One constructor for the trainer, the tests and benchmarks/bench_compile.py, so they all
    time and check the step that training runs. ``capture=False`` never captures (the CPU).
    A ``compiled`` run's network is compiled here (in place, before its first step).
    """
    compiled = run.step_mode == "compiled"
    if compiled:
        compile_network(state.model)
    return StaticStep(
        model=state.model,
        optimizer=state.optimizer,
        step=one_member(run.step),
        images=[run.data.images],
        per_step=run.data.per_step,
        generators=[state.augment_generator],
        autocast=run.autocast,
        capture=capture,
        compiled=compiled,
    )


def _static_step(run: _Run, state: _TrainingState) -> StaticStep | None:
    """The two-phase step of a ``graph`` or ``compiled`` run (built after any resume), None
    for ``eager``.

    ``two_phase`` (tests only) is the same step never captured, which runs on the CPU.
    """
    if run.step_mode == "eager":
        return None
    return run_static_step(run, state, capture=run.step_mode in CAPTURED_STEP_MODES)


def _train_epoch(
    run: _Run, state: _TrainingState, static_step: StaticStep | None = None
) -> torch.Tensor:
    """One pass in the run's epoch order; the steps' losses (on the device, no sync).

    With ``static_step`` every step runs through it (the same random numbers, drawn in the
    same order, so the generators end where the eager loop leaves them). The steps run in
    the run's precision block (:meth:`_Run.precision`): a graph captured in an epoch keeps
    the kernels chosen there.
    """
    with run.precision():
        return _epoch_steps(run, state, static_step)


def _epoch_steps(run: _Run, state: _TrainingState, static_step: StaticStep | None) -> torch.Tensor:
    """:func:`_train_epoch`'s steps."""
    data, model = run.data, state.model
    model.train()
    order = run.order.draw(state.shuffle_generator).to(run.device)
    losses = torch.zeros(data.steps_per_epoch, device=run.device)
    if static_step is not None:
        for index in range(data.steps_per_epoch):
            loss = static_step(order[index * data.per_step : (index + 1) * data.per_step])
            state.scheduler.step()
            losses[index] = loss  # a copy: a replayed step's loss tensor is reused
        return losses
    for index in range(data.steps_per_epoch):
        batch = data.images[order[index * data.per_step : (index + 1) * data.per_step]]
        with run.autocast():
            loss = run.step(model, batch, generator=state.augment_generator)
        state.optimizer.zero_grad(set_to_none=True)
        state.scaler.scale(loss).backward()
        state.scaler.step(state.optimizer)
        state.scaler.update()
        state.scheduler.step()
        losses[index] = loss.detach()
    return losses


def _divergence(
    run: _Run, losses: torch.Tensor, model: nn.Module, epoch: int
) -> TrainingDivergedError | None:
    """The error to raise if epoch ``epoch`` (0-based) left a non-finite loss or weight."""
    finite = torch.isfinite(losses)
    steps, epochs = run.data.steps_per_epoch, run.epochs
    if not bool(finite.all()):  # one host sync per epoch
        bad = int((~finite).nonzero()[0, 0])
        return TrainingDivergedError(
            f"{run.method} loss is {losses[bad].item()} at epoch {epoch + 1}/{epochs}, step "
            f"{bad + 1}/{steps} (global step {epoch * steps + bad + 1}); "
            f"training diverged: lower the learning rate (lr={run.lr})"
        )
    if not _all_finite(model):
        return TrainingDivergedError(
            f"{run.method} weights became NaN or infinite during epoch {epoch + 1}/{epochs} "
            f"(losses were finite, last {losses[-1].item():.4g}); training diverged: "
            f"lower the learning rate (lr={run.lr})"
        )
    return None


def _epoch_record(
    run: _Run, epoch: int, losses: torch.Tensor, seconds: float, step_mode: str = "eager"
) -> dict[str, Any]:
    """The history record of epoch ``epoch`` (0-based); ``step_mode``: what ran its steps."""
    steps = run.data.steps_per_epoch
    return {
        "epoch": epoch + 1,
        "loss": float(losses.mean()),
        "lr": run.lr * run.cosine((epoch + 1) * steps - 1),
        "images_per_s": steps * run.data.per_step / seconds,
        "seconds": seconds,
        "steps": steps,
        "step_mode": step_mode,
    }


def _log_epoch(run: _Run, record: dict[str, float], *, first: bool, log_every: int) -> None:
    """An INFO line for the first, every ``log_every``-th and the last epoch."""
    epoch = int(record["epoch"])
    if first or epoch % log_every == 0 or epoch == run.epochs:
        log.info(
            "%s epoch %d/%d: loss %.4f, lr %.3g, %.0f images/s",
            run.method,
            epoch,
            run.epochs,
            record["loss"],
            record["lr"],
            record["images_per_s"],
        )


def _write_checkpoint(run: _Run, state: _TrainingState, checkpoint_path: str | os.PathLike) -> None:
    """Save ``state`` after its ``state.epoch``-th epoch (atomically)."""
    save_checkpoint(
        checkpoint_path,
        {
            "fingerprint": run.fingerprint,
            "epoch": state.epoch,
            "model": state.model.state_dict(),
            "optimizer": state.optimizer.state_dict(),
            "scheduler": state.scheduler.state_dict(),
            "scaler": state.scaler.state_dict() if run.use_scaler else None,
            "history": state.history,
            "rng": {
                "torch": torch.random.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if run.on_cuda else None,
                "shuffle": state.shuffle_generator.get_state(),
                "augment": state.augment_generator.get_state(),
            },
        },
    )


def _checkpoint_due(run: _Run, epochs_done: int, checkpoint_every: int) -> bool:
    """Every ``checkpoint_every`` epochs, and always after the last."""
    return epochs_done % checkpoint_every == 0 or epochs_done == run.epochs


def _evaluate(
    run: _Run,
    state: _TrainingState,
    evaluate: Callable[[ProxyModel], Mapping[str, float]],
    record: dict[str, Any],
) -> None:
    """Add ``evaluate``'s result to ``record`` (``eval``), leaving training as it was.

    ``evaluate`` gets an inference-mode copy of the model
    (:func:`~pipeline_lib.ssl.compiling.eager_copy`), so BatchNorm statistics, compiled
    modules and captured graphs of the trained model are untouched, and runs under a forked
    RNG, so the global streams stay where training left them: the weights come out the same
    with or without evaluation. An exception becomes ``eval_error`` and a warning.
    """
    started = time.perf_counter()
    devices = []
    if run.on_cuda:
        devices = [torch.cuda.current_device() if run.device.index is None else run.device.index]
    try:
        with torch.random.fork_rng(devices=devices):
            scores = evaluate(eager_copy(state.model).eval())
        record["eval"] = {name: float(value) for name, value in scores.items()}
        log.info("%s epoch %d: test split %s", run.method, state.epoch, record["eval"])
    except Exception as error:  # noqa: BLE001 - a diagnostic must not end the training
        record["eval_error"] = f"{type(error).__name__}: {error}"
        log.warning("%s epoch %d: evaluation failed (%s)", run.method, state.epoch, error)
    record["eval_seconds"] = time.perf_counter() - started


def train_representation(
    method: str,
    images_uint8: np.ndarray | torch.Tensor,
    *,
    seed: int,
    epochs: int,
    batch_size: int,
    lr: float = 0.01,
    momentum: float = 0.9,
    weight_decay: float = 3e-4,
    exclude_bn_from_decay: bool = False,
    head_depth: int | None = None,
    head_hidden: int = 512,
    proj_dim: int = 128,
    temperature: float = 0.2,
    loss_form: str = LOSS_FORMS[0],
    distributions: Sequence[str] = DEFAULT_DISTRIBUTIONS,
    da_batching: str = DA_BATCHINGS[0],
    view_flip: str = VIEW_FLIPS[0],
    view_jitter: str = VIEW_JITTERS[0],
    view_blur: bool = False,
    lr_schedule: str = LR_SCHEDULES[0],
    epoch_order: str = EPOCH_ORDERS[0],
    init: str = INITS[0],
    noise_std: float = DEFAULT_NOISE_STD,
    denoising_views: bool = True,
    denoising_target: str = DENOISING_TARGETS[0],
    denoising_patch: int = DEFAULT_TARGET_PATCH,
    denoising_decoder: str = DENOISING_DECODERS[0],
    width: int = 64,
    augment: ViewAugment | None = None,
    amp: str | None = "bfloat16",
    device: torch.device | str = "cpu",
    step_mode: str = "auto",
    checkpoint_path: str | os.PathLike | None = None,
    checkpoint_every: int = 1,
    progress: bool = False,
    log_every: int = 10,
    callback: Callable[[dict[str, float]], None] | None = None,
    evaluate: Callable[[ProxyModel], Mapping[str, float]] | None = None,
    eval_every: int = 0,
) -> tuple[ProxyModel, list[dict[str, float]]]:
    """Train a representation with a self-supervised proxy task.

    Parameters
    ----------
    method : str
        One of :data:`~pipeline_lib.models.representation.TRAINED_METHODS`: ``rotnet``
        (rotation prediction, linear classifier on ``f``), ``rotation`` (MLP head),
        ``denoising``, ``contrastive``, ``contrastive_da``.
    images_uint8 : ndarray or Tensor of shape (n, h, w, 3), uint8
        The training images (square; 32x32 or 64x64 in the protocol), moved once to
        ``device`` as a single uint8 tensor.
    seed : int
        Seeds the initialisation, the batch order (the frozen order of ``epoch_order``
        ``released`` and each epoch's choices) and the augmentations, via independent
        streams.
    epochs : int
    batch_size : int
        Training instances per step: source images, except for contrastive DA with
        ``da_batching="expanded"``, whose instances are the ``n (1 + len(distributions))``
        transformed copies. Rotation methods see ``4 * batch_size`` views, contrastive
        ``2 * batch_size``, contrastive DA ``2 * batch_size`` (``expanded``) or
        ``2 * batch_size * (1 + len(distributions))`` (``per_image``). Steps per epoch:
        ``instances // batch_size`` (the last partial batch of each epoch is dropped, as
        the released ``drop_remainder=True``; the order is ``epoch_order``'s); with fewer
        instances than ``batch_size`` every step uses all of them.
    lr, momentum, weight_decay : float, default=0.01, 0.9, 3e-4
        SGD; the learning rate follows ``lr * (1 + cos(pi * t / T)) / 2``, see ``lr_schedule``.
    lr_schedule : {"per_epoch", "per_step"}, default="per_epoch"
        ``per_epoch`` (released code): ``t`` is the first step of the current epoch, so the
        rate is constant within an epoch; ``per_step``: ``t`` is the step itself. Both for
        ``T = epochs * steps_per_epoch``, no warm-up.
    exclude_bn_from_decay : bool, default=False
        ``True`` exempts BatchNorm weights and biases from weight decay (a variant); the
        paper and the released code decay every parameter.
    head_depth : int or None, default=None
        Hidden layers of the MLP head; ``None`` = method default (8; RotNet 0; denoising
        has no head). Must be 0/None for ``rotnet`` and ``denoising``.
    head_hidden, proj_dim : int, default=512, 128
        Hidden width of the head and output of the contrastive head.
    temperature : float, default=0.2
    loss_form : {"released", "same_view", "ntxent"}, default="released"
        Contrastive loss (see :mod:`pipeline_lib.ssl.contrastive`): the released
        one-directional cross-view form (Eq. 2 read with Sohn 2016), or a variant.
    epoch_order : {"released", "permutation"}, default="released"
        How an epoch orders the instances (:mod:`pipeline_lib.ssl.order`): the released input
        pipeline's (one seeded shuffle frozen for the run, then a 1,000-element shuffle
        buffer each epoch) or a fresh uniform permutation each epoch (a variant).
    init : {"released", "torch"}, default="released"
        Initial weights of every layer (:mod:`pipeline_lib.models.init`): the released
        Keras initialisers or torch's (a variant).
    distributions : sequence of str, default=("rot90", "rot180", "rot270")
        Distribution-augmentation set of ``contrastive_da`` (identity always included);
        ignored by the other methods.
    da_batching : {"expanded", "per_image"}, default="expanded"
        ``contrastive_da``: draw each batch from the training set expanded once by the
        distribution set (released code), or take ``batch_size`` images with all their
        copies (a variant; the other copies of an image are then always in its batch).
    view_flip : {"auto", "always", "never"}, default="auto"
        Horizontal flip of the views; ``auto`` drops it when ``hflip`` is a distribution.
    view_jitter : {"released", "torchvision"}, default="released"
        Colour jitter of the views (:mod:`pipeline_lib.ssl.color_ops`).
    view_blur : bool, default=False
        SimCLR's Gaussian blur (p = 0.5) in the views; the released code never applies it.
    noise_std : float, default=0.1
        Gaussian corruption of ``denoising``.
    width : int, default=64
        ResNet-18 first-stage width (tests use 8).
    denoising_views : bool, default=True
        ``denoising`` only: corrupt and reconstruct one augmented view of each image (the
        view augmentation of the other methods, the paper's "same condition"); ``False``
        uses the plain image (the ``denoising_no_views`` variant).
    denoising_target : {"pixels", "patch_normalized"}, default="pixels"
        ``denoising`` only: reconstruct the clean image (the paper's denoising autoencoder)
        or the clean image with each ``denoising_patch``-sided block of each channel
        standardised (the ``denoising_patchnorm`` variant; docs/denoising.md).
    denoising_patch : int, default=8
        Side of those blocks; must divide the image side.
    denoising_decoder : {"pooled", "spatial"}, default="pooled"
        ``denoising`` only: decode from ``f`` or from the feature map before pooling (the
        ``denoising_spatial`` variant).
    augment : ViewAugment or None, default=None
        View augmentation; ``None`` builds one from ``view_flip``, ``view_jitter`` and
        ``view_blur`` (released-code settings by default); ``denoising`` uses it only with
        ``denoising_views``.
    amp : {"bfloat16", "float16"} or None, default="bfloat16"
        Autocast dtype on CUDA (float16 adds a GradScaler); CPU always trains in float32.
        The released code trains in float32: ``None`` does so on CUDA too, with TF32 off for
        the training steps (:meth:`_Run.precision`). Channels-last memory format is CUDA-only.
    device : torch.device or str, default="cpu"
    step_mode : {"auto", "eager", "graph", "compiled"}, default="auto"
        How a step runs (an execution setting, not part of the recipe): ``graph`` captures
        the whole step (views, forward, loss, backward, SGD) once as a CUDA graph and
        replays it (:mod:`pipeline_lib.ssl.stepper`), with the same random numbers as
        ``eager``, so the two differ only in kernel rounding; ``auto`` is ``graph`` on CUDA
        (``eager`` with ``amp="float16"``) and ``eager`` elsewhere. If the capture fails,
        training goes on uncaptured with a warning. Each history record's ``step_mode``
        says what ran: ``eager``, ``graph``, ``compiled`` or ``uncaptured``. ``compiled``
        (CUDA, opt-in) is ``graph`` with the network compiled by inductor inside the
        captured step (:mod:`pipeline_lib.ssl.compiling`): faster, reproducible, but with
        its own rounding. A checkpoint resumes under any mode (it holds the same state);
        the uninterrupted result is repeated exactly when both runs use the same mode.
    checkpoint_path : str or PathLike or None, default=None
        Resumable checkpoint. If the file exists and was written for the same arguments
        and data, training resumes after its last epoch (on the CPU the result is
        bit-identical to an uninterrupted run). A file that cannot be loaded, or that was
        written for other arguments, is logged as a warning naming it, and training starts
        from scratch (and overwrites it). The file is left in place at the end (a re-run
        with the same arguments returns at once); delete it once the representation is
        saved if it is not wanted.
    checkpoint_every : int, default=1
        Epochs between checkpoints (the last epoch is always checkpointed).
    progress : bool, default=False
        tqdm bar over epochs.
    log_every : int, default=10
        Epochs between INFO log lines (the first and last epoch are always logged).
    callback : callable or None, default=None
        Called with each epoch's history record after its checkpoint is written
        (for tracking; an exception raised there stops training, as a kill would).
    evaluate : callable or None, default=None
        ``evaluate(model) -> {name: value}``, run every ``eval_every`` epochs and after the
        last one; its result becomes the epoch record's ``eval`` (before the checkpoint and
        ``callback``). It gets an uncompiled copy of the model in inference mode, under a
        forked RNG, so training is the same with or without it. The workflow passes
        :func:`pipeline_lib.detection.epoch_eval.epoch_evaluator` (test-split AUCs, a
        diagnostic). An execution setting: not part of the checkpoint's fingerprint. An
        exception there is logged as a warning and recorded as the record's
        ``eval_error``; training goes on (a diagnostic must not cost the run).
    eval_every : int, default=0
        Epochs between evaluations; 0 = never (``evaluate`` is then not called).

    Returns
    -------
    model : ProxyModel
        In inference mode, on ``device``. A Representation: ``f`` is the pooled backbone
        feature; ``g`` is the contrastive projection (contrastive methods) or the output of
        the rotation MLP, i.e. the input of the 4-way classifier (``rotation``; equals ``f``
        for ``rotnet``); ``denoising`` has no ``g``. The rotation classifier / decoder is
        ``model.proxy``.
    history : list of dict
        One record per epoch: ``epoch`` (1-based), ``loss`` (mean over the epoch's steps),
        ``lr`` (of the epoch's last step), ``images_per_s`` (training instances per second of
        training, excluding checkpointing and evaluation), ``seconds``, ``steps``,
        ``step_mode``, and ``eval`` (or ``eval_error``) and ``eval_seconds`` on the epochs
        ``evaluate`` ran.

    Raises
    ------
    ValueError
        On a bad argument (the message names it).
    TrainingDivergedError
        If a loss or a weight is NaN or infinite (checked at the end of every epoch, before
        its checkpoint is written, so a checkpoint never holds diverged weights).
    """
    if eval_every < 0:
        raise ValueError(f"eval_every must be >= 0 (0 = never), got {eval_every}")
    run, state = _prepare_run(
        method,
        images_uint8,
        seed=seed,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        momentum=momentum,
        weight_decay=weight_decay,
        exclude_bn_from_decay=exclude_bn_from_decay,
        head_depth=head_depth,
        head_hidden=head_hidden,
        proj_dim=proj_dim,
        temperature=temperature,
        loss_form=loss_form,
        distributions=distributions,
        da_batching=da_batching,
        view_flip=view_flip,
        view_jitter=view_jitter,
        view_blur=view_blur,
        lr_schedule=lr_schedule,
        epoch_order=epoch_order,
        init=init,
        noise_std=noise_std,
        denoising_views=denoising_views,
        denoising_target=denoising_target,
        denoising_patch=denoising_patch,
        denoising_decoder=denoising_decoder,
        width=width,
        augment=augment,
        amp=amp,
        device=device,
        checkpoint_every=checkpoint_every,
        log_every=log_every,
        step_mode=step_mode,
    )
    state = _resume(run, state, checkpoint_path)
    static_step = _static_step(run, state)
    start_epoch = state.epoch
    epochs_bar = tqdm(
        range(start_epoch, epochs),
        desc=f"train {method}",
        unit="epoch",
        disable=not progress,
        initial=start_epoch,
        total=epochs,
    )
    for epoch in epochs_bar:
        started = time.perf_counter()
        losses = _train_epoch(run, state, static_step)
        error = _divergence(run, losses, state.model, epoch)
        if error is not None:
            raise error
        mode = "eager" if static_step is None else static_step.mode
        record = _epoch_record(run, epoch, losses, time.perf_counter() - started, mode)
        state.history.append(record)
        state.epoch = epoch + 1
        epochs_bar.set_postfix(loss=f"{record['loss']:.4f}")
        _log_epoch(run, record, first=epoch == start_epoch, log_every=log_every)
        # Evaluation falls when a checkpoint with checkpoint_every = eval_every would.
        if evaluate is not None and eval_every and _checkpoint_due(run, state.epoch, eval_every):
            _evaluate(run, state, evaluate, record)
        if checkpoint_path is not None and _checkpoint_due(run, state.epoch, checkpoint_every):
            _write_checkpoint(run, state, checkpoint_path)
        if callback is not None:
            callback(dict(record))
    return release_network(state.model).eval(), state.history
