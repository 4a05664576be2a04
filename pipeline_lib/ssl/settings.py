"""What one training run learns with, and how it executes, as two frozen, torch-free values.

:class:`TrainSettings` is the recipe: built once (from a config's ``train`` section, or by
hand), checked in one place and handed to the run API (:mod:`pipeline_lib.ssl.run`), the
single, fused and MVTec trainers alike. :class:`Execution` is how the steps run (device,
step mode, where random numbers are drawn): not part of the recipe, of job params or of
checkpoint fingerprints (:data:`pipeline_lib.registry.TRAIN_EXECUTION_SETTINGS`). The module
imports no torch, so the config checks and the planner can build and validate settings at
parse time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline_lib.registry import (
    MethodSpec,
    is_trained,
    method_ids,
    method_spec,
    plugin_of,
    recipe,
    training_arguments,
)

__all__ = ["AMP_DTYPES", "DEFAULT_EXECUTION", "Execution", "TrainSettings"]

#: Autocast dtypes a run may train in on CUDA (``None``: float32).
AMP_DTYPES: tuple[str, ...] = ("bfloat16", "float16")


@dataclasses.dataclass(frozen=True)
class TrainSettings:
    """The recipe of one training run: method, budget, optimiser, heads, losses, views.

    The instance is checked when it is made, so whoever holds one holds a valid recipe
    (:func:`pipeline_lib.ssl.train.train_representation` takes nothing else).
    ``distributions`` holds the set in use: ``()`` for a method that does not read it
    (every method but ``contrastive_da``).

    Parameters
    ----------
    method : str
        A trained method of the method table (:mod:`pipeline_lib.registry.methods`):
        ``rotnet`` (rotation prediction, linear classifier on ``f``), ``rotation`` (MLP
        head), ``denoising``, ``contrastive``, ``contrastive_da``.
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
    momentum_form : {"released", "torch"}, default="released"
        Where the momentum carries the rate (:mod:`pipeline_lib.ssl.schedule`): inside the
        velocity, as the released code's Keras SGD (``v <- m v - lr g; w <- w + v``), or at
        the update, as torch's SGD (``b <- m b + g; w <- w - lr b``; a variant). They differ
        whenever the rate moves (once an epoch under ``per_epoch``).
    lr_schedule : {"per_epoch", "per_step"}, default="per_epoch"
        ``per_epoch`` (released code): ``t`` is the first step of the current epoch, so the
        rate is constant within an epoch; ``per_step``: ``t`` is the step itself. Both for
        ``T = epochs * steps_per_epoch``, no warm-up.
    exclude_bn_from_decay : bool, default=False
        ``True`` exempts BatchNorm weights and biases from weight decay (a variant); the
        paper and the released code decay every parameter.
    head_depth : int or None, default=None
        Hidden layers of the MLP head; ``None`` = method default (8, or 0). Must be 0/None
        for a method without an MLP head (:attr:`~pipeline_lib.registry.MethodSpec.head`).
    head_hidden, proj_dim : int, default=512, 128
        Hidden width of the head and output of the contrastive head.
    temperature : float, default=0.2
    loss_form : {"released", "same_view", "ntxent"}, default="released"
        Contrastive loss (see :mod:`pipeline_lib.ssl.tasks.contrastive`): the released
        one-directional cross-view form (Eq. 2 read with Sohn 2016), or a variant.
    epoch_order : {"released", "permutation"}, default="released"
        How an epoch orders the instances (:mod:`pipeline_lib.ssl.order`): the released input
        pipeline's (one seeded shuffle frozen for the run, then a 1,000-element shuffle
        buffer each epoch) or a fresh uniform permutation each epoch (a variant).
    init : {"released", "torch"}, default="released"
        Initial weights of every layer (:mod:`pipeline_lib.models.init`): the released
        Keras initialisers or torch's (a variant).
    distributions : sequence of str, default=("rot90", "rot180", "rot270")
        Distribution-augmentation set of the methods that read it (``contrastive_da``;
        identity always included); ``()`` for the others.
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
    noise_std : float, default=PAPER_RECIPE["noise_std"]
        Gaussian corruption of ``denoising``.
    width : int, default=64
        ResNet-18 first-stage width (tests use 8).
    stem_width : int or None, default=None
        Channels of the ResNet's stem; None: ``width``. The released stem has 64 channels at
        every width, so ``stem_width=64`` is the released network at a reduced width (the
        paper's width 64 has a 64-channel stem either way).
    denoising_views : bool, default=True
        ``denoising`` only: corrupt and reconstruct one augmented view of each image (the
        view augmentation of the other methods, the paper's "same condition"); ``False``
        uses the plain image (the ``denoising_no_views`` variant).
    denoising_target : {"pixels", "patch_normalized"}, default="pixels"
        ``denoising`` only: reconstruct the clean image (the paper's denoising autoencoder)
        or the clean image with each ``denoising_patch``-sided block of each channel
        standardised (the ``denoising_patchnorm`` variant; docs/denoising.md).
    denoising_patch : int, default=:data:`~pipeline_lib.registry.DENOISING_PATCH`
        Side of those blocks; must divide the image side.
    denoising_decoder : {"pooled", "spatial"}, default="pooled"
        ``denoising`` only: decode from ``f`` or from the feature map before pooling (the
        ``denoising_spatial`` variant).
    amp : {"bfloat16", "float16"} or None, default="bfloat16"
        Autocast dtype on CUDA (float16 adds a GradScaler); CPU always trains in float32.
        The released code trains in float32: ``None`` does so on CUDA too, with TF32 off for
        the training steps (:meth:`pipeline_lib.ssl.run.Run.precision`). Channels-last
        memory format is CUDA-only.
    checkpoint_every : int, default=1
        Epochs between checkpoints (the last epoch is always checkpointed).
    log_every : int, default=10
        Epochs between INFO log lines (the first and last epoch are always logged). These
        two are bookkeeping: not part of a checkpoint's fingerprint.
    plugin : mapping, default={}
        A plugin method's own settings (``train.plugin``), read by its task; empty for a
        built-in method.
    package : str or None, default=None
        ``name==version`` of the installed package a plugin method comes from
        (:func:`pipeline_lib.registry.method_training` fills it); it must be the package
        this process has, and it enters the checkpoint's fingerprint.

    Raises
    ------
    ValueError
        On a bad value (the message names the setting and what is allowed).
    """

    method: str
    epochs: int
    batch_size: int
    lr: float = 0.01
    momentum: float = 0.9
    momentum_form: str = recipe.MOMENTUM_FORMS[0]
    weight_decay: float = 3e-4
    exclude_bn_from_decay: bool = False
    head_depth: int | None = None
    head_hidden: int = 512
    proj_dim: int = 128
    temperature: float = 0.2
    loss_form: str = recipe.LOSS_FORMS[0]
    distributions: Sequence[str] = recipe.DEFAULT_DISTRIBUTIONS
    da_batching: str = recipe.DA_BATCHINGS[0]
    view_flip: str = recipe.VIEW_FLIPS[0]
    view_jitter: str = recipe.VIEW_JITTERS[0]
    view_blur: bool = False
    lr_schedule: str = recipe.LR_SCHEDULES[0]
    epoch_order: str = recipe.EPOCH_ORDERS[0]
    init: str = recipe.INITS[0]
    noise_std: float = recipe.PAPER_RECIPE["noise_std"]
    denoising_views: bool = True
    denoising_target: str = recipe.DENOISING_TARGETS[0]
    denoising_patch: int = recipe.DENOISING_PATCH
    denoising_decoder: str = recipe.DENOISING_DECODERS[0]
    width: int = 64
    stem_width: int | None = None
    amp: str | None = "bfloat16"
    checkpoint_every: int = 1
    log_every: int = 10
    plugin: Mapping[str, Any] = dataclasses.field(default_factory=dict, hash=False)
    package: str | None = None

    def __post_init__(self) -> None:
        self._check()
        reads = self.spec.reads_setting("distributions")
        distributions = tuple(self.distributions) if reads else ()
        object.__setattr__(self, "distributions", distributions)
        if reads:
            if not distributions:
                raise ValueError(f"{self.method} needs at least one distribution transform")
            for name in distributions:
                _check_distribution(name)

    @classmethod
    def from_config(cls, method: str, training: Mapping[str, Any], **extra: Any) -> TrainSettings:
        """The settings of ``method`` from a ``train`` section merged for it.

        ``training`` is :func:`pipeline_lib.registry.method_training`'s result; the
        registry's :func:`~pipeline_lib.registry.training_arguments` fills the batch size and
        drops what the method does not read. ``extra`` adds settings the config keeps
        elsewhere (``width``).
        """
        return cls(method=method, **training_arguments(method, dict(training)), **extra)

    @property
    def spec(self) -> MethodSpec:
        """The method's row of the method table."""
        return method_spec(self.method)

    @property
    def has_head(self) -> bool:
        """Whether the method has an MLP head (:attr:`MethodSpec.has_mlp_head`)."""
        return self.spec.has_mlp_head

    @property
    def default_head_depth(self) -> int:
        """The head depth ``head_depth=None`` stands for (docs/protocol.md, "Heads")."""
        return self.spec.default_head_depth

    @property
    def expands(self) -> bool:
        """Whether the training set is expanded once by the distribution set (released DA)."""
        return self.spec.reads_setting("da_batching") and self.da_batching == "expanded"

    @property
    def uses_views(self) -> bool:
        """Whether the method draws the view augmentation under these settings."""
        return self.spec.uses_views({name: getattr(self, name) for name in self.spec.reads})

    def _check(self) -> None:
        """Raise ValueError naming the first bad setting, in the order of the keywords."""
        method = self.method
        if not is_trained(method):
            raise ValueError(
                f"unknown trained representation {method!r}; allowed: "
                f"{', '.join(method_ids(trained=True))}"
            )
        for name, value in (("epochs", self.epochs), ("batch_size", self.batch_size)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.checkpoint_every < 1 or self.log_every < 1:
            raise ValueError(
                "checkpoint_every and log_every must be >= 1, got "
                f"{self.checkpoint_every}, {self.log_every}"
            )
        if self.lr <= 0 or not 0 <= self.momentum < 1 or self.weight_decay < 0:
            raise ValueError(
                f"need lr > 0, 0 <= momentum < 1, weight_decay >= 0; got {self.lr}, "
                f"{self.momentum}, {self.weight_decay}"
            )
        plugin = plugin_of(method)
        have = None if plugin is None else plugin.provenance
        if self.package != have:
            raise ValueError(
                f"{method} was planned with {self.package or 'the built-in code'} but this "
                f"environment has {have or 'the built-in code'}; install the same package "
                "version where the jobs run (docs/extending.md)"
            )
        if self.stem_width is not None and self.stem_width < 1:
            raise ValueError(f"stem_width must be >= 1 or None, got {self.stem_width}")
        if self.amp is not None and self.amp not in AMP_DTYPES:
            raise ValueError(
                f"amp must be one of {', '.join(AMP_DTYPES)} or None, got {self.amp!r}"
            )
        if self.spec.reads_setting("loss_form"):
            renamed = recipe.RENAMED_TRAIN_VALUES["loss_form"]
            if self.loss_form in renamed:
                raise ValueError(
                    f"loss_form {self.loss_form!r} was renamed {renamed[self.loss_form]!r} "
                    f"(same loss); the recipe's is {recipe.LOSS_FORMS[0]!r}"
                )
            if self.loss_form not in recipe.LOSS_FORMS:
                raise ValueError(
                    f"unknown loss_form {self.loss_form!r}; allowed: {', '.join(recipe.LOSS_FORMS)}"
                )
        if self.spec.reads_setting("temperature") and self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        for name, value, allowed in (
            ("da_batching", self.da_batching, recipe.DA_BATCHINGS),
            ("view_flip", self.view_flip, recipe.VIEW_FLIPS),
            ("view_jitter", self.view_jitter, recipe.VIEW_JITTERS),
            ("lr_schedule", self.lr_schedule, recipe.LR_SCHEDULES),
            ("epoch_order", self.epoch_order, recipe.EPOCH_ORDERS),
            ("init", self.init, recipe.INITS),
            ("momentum_form", self.momentum_form, recipe.MOMENTUM_FORMS),
        ):
            if value not in allowed:
                raise ValueError(f"unknown {name} {value!r}; allowed: {', '.join(allowed)}")


def _check_distribution(name: str) -> None:
    """Raise ValueError unless ``name`` combines known primitives with ``+``."""
    parts = name.split("+")
    if not name or any(part not in recipe.DISTRIBUTION_PRIMITIVES for part in parts):
        raise ValueError(
            f"unknown distribution transform {name!r}; combine with '+' any of "
            f"{', '.join(recipe.DISTRIBUTION_PRIMITIVES)} (e.g. 'rot90+hflip')"
        )


@dataclasses.dataclass(frozen=True)
class Execution:
    """How a run's steps execute, apart from what they learn (the same weights either way,
    up to the step mode's rounding; docs/usage.md).

    Parameters
    ----------
    device : torch.device or str, default="cpu"
    step_mode : {"auto", "eager", "graph", "compiled"}, default="auto"
        ``train.step_mode`` (:func:`pipeline_lib.ssl.stepper.resolve_step_mode`): ``auto``
        is ``graph`` on CUDA and ``eager`` elsewhere.
    draws : {"host", "device"}, default="host"
        ``train.draws``: where a step's random numbers are drawn
        (:mod:`pipeline_lib.ssl.draws`; on the CPU both are the host).
    augment : ViewAugment or None, default=None
        A view augmentation to use instead of the one the settings describe (tests and
        benchmarks); None builds the settings' one (none when the method's views are off).

    Raises
    ------
    ValueError
        On an unknown step mode or draw source.
    """

    device: Any = "cpu"
    step_mode: str = recipe.STEP_MODES[0]
    draws: str = recipe.DRAW_SOURCES[0]
    augment: Any = None

    def __post_init__(self) -> None:
        if self.step_mode not in recipe.STEP_MODES:
            raise ValueError(
                f"unknown step_mode {self.step_mode!r}; allowed: {', '.join(recipe.STEP_MODES)}"
            )
        if self.draws not in recipe.DRAW_SOURCES:
            raise ValueError(
                f"unknown draws {self.draws!r}; allowed: {', '.join(recipe.DRAW_SOURCES)}"
            )

    @classmethod
    def from_config(cls, training: Mapping[str, Any], **extra: Any) -> Execution:
        """The execution a ``train`` section asks for (its ``step_mode`` and ``draws``,
        absent: the defaults); ``extra`` adds what the job decides (``device``)."""
        chosen = {key: training[key] for key in ("step_mode", "draws") if training.get(key)}
        return cls(**chosen, **extra)


#: The CPU, each step as its device allows (``auto``), random numbers drawn on the host.
DEFAULT_EXECUTION = Execution()
