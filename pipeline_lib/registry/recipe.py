"""The ``train`` settings: the switches of the paper's recipe, the execution settings, and
what a method's ``train`` section becomes (its merged settings, its training arguments).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline_lib.registry.methods import (
    METHOD_SPECS,
    VIEW_SETTINGS,
    method_spec,
    reads_setting,
    task_settings,
)
from pipeline_lib.registry.plugins import plugin_of

#: What the denoising decoder reconstructs (:mod:`pipeline_lib.ssl.tasks.denoising`); the first is
#: the default: the clean image, the paper's denoising autoencoder.
DENOISING_TARGETS: tuple[str, ...] = ("pixels", "patch_normalized")

#: What the denoising decoder reads (:class:`pipeline_lib.models.heads.Decoder`); the first
#: is the default: ``pooled`` decodes the image from the representation ``f`` itself (the
#: paper's proxy losses are computed from ``f``, Sec. 3), ``spatial`` from the backbone's
#: last feature map before the average pooling (a variant, ``denoising_spatial``).
DENOISING_DECODERS: tuple[str, ...] = ("pooled", "spatial")

#: How contrastive DA forms its batches: ``expanded`` (released ``data/cifar.py``: the
#: training set is expanded once by the distribution set and a batch draws ``batch_size``
#: instances from it) or ``per_image`` (a batch of ``batch_size`` images brings all their
#: transformed copies, a variant: the other copies of an image are then always in its batch).
DA_BATCHINGS: tuple[str, ...] = ("expanded", "per_image")

#: The horizontal flip of the view augmentation: ``auto`` flips with p = 0.5 unless
#: ``hflip`` is a distribution of DA (paper Sec. 5.2 and the released script of that
#: figure), ``always`` keeps it, ``never`` drops it.
VIEW_FLIPS: tuple[str, ...] = ("auto", "always", "never")

#: Colour jitter of the views (:mod:`pipeline_lib.ssl.color_ops`): the released code's TF
#: operations, or torchvision's ColorJitter (a variant).
VIEW_JITTERS: tuple[str, ...] = ("released", "torchvision")

#: When the cosine learning rate moves: once an epoch (released ``--sched_freq=epoch``) or
#: every step.
LR_SCHEDULES: tuple[str, ...] = ("per_epoch", "per_step")

#: The order of an epoch's instances (:mod:`pipeline_lib.ssl.order`): the released input
#: pipeline's (one shuffle frozen for the run, then a 1,000-element shuffle buffer each
#: epoch) or a fresh uniform permutation each epoch (a variant).
EPOCH_ORDERS: tuple[str, ...] = ("released", "permutation")

#: Initial weights of a network (:mod:`pipeline_lib.models.init`): the released code's Keras
#: initialisers or torch's (torchvision's ResNet rule, torch's layer defaults elsewhere).
INITS: tuple[str, ...] = ("released", "torch")

#: Where SGD's momentum carries the learning rate (:mod:`pipeline_lib.ssl.schedule`): inside
#: the velocity, as Keras' SGD that the released code trains with (``v <- m v - lr g``), or
#: at the update, as torch's (``b <- m b + g; w <- w - lr b``; a variant).
#: They differ whenever the rate moves.
MOMENTUM_FORMS: tuple[str, ...] = ("released", "torch")


#: ``train`` keys that say how training executes, not what a model learns: how many models
#: one job trains (``fuse``), whether a step is graph-captured (``step_mode``) and how often
#: the test split is scored during training as a diagnostic (``eval_every``), and where a
#: step's random numbers are drawn (``draws``). They are left out of a model's training
#: arguments, of job params, of checkpoint fingerprints and of sweep ids.
TRAIN_EXECUTION_SETTINGS: tuple[str, ...] = ("fuse", "step_mode", "eval_every", "draws")
#: Values of ``train.draws`` (pipeline_lib.ssl.draws): the augmentation generator on the
#: CPU (the default; the eager and graph steps draw the same numbers) or on the step's
#: device (other numbers: a candidate execution setting awaiting a paired AUC check).
DRAW_SOURCES: tuple[str, ...] = ("host", "device")
#: Values of ``train.step_mode`` (pipeline_lib.ssl.stepper): one list for the trainer, the
#: config check, the rate tables and the planner (the last three are torch-free).
STEP_MODES: tuple[str, ...] = ("auto", "eager", "graph", "compiled")
#: The modes whose whole step is captured as a CUDA graph (``compiled``: with the network
#: compiled by inductor inside it, pipeline_lib.ssl.compiling).
CAPTURED_STEP_MODES: tuple[str, ...] = ("graph", "compiled")

#: Distribution augmentation of the paper's main table (rotations as new instances).
DEFAULT_DISTRIBUTIONS: tuple[str, ...] = ("rot90", "rot180", "rot270")

#: The paper's recipe where a ``train`` switch can leave it (docs/protocol.md). A row named
#: after a paper method must keep these values; any other value belongs to a named variant.
#: Budget settings (epochs) and the search-grid hyper-parameters of reduced runs (lr, batch
#: size, head depth) are reported as protocol differences instead. The paper names the
#: denoising autoencoder and nothing of its setup; its four switches hold this project's
#: reading of the paper's words (docs/denoising.md): the view augmentation on the inputs as
#: for every method, the decoder on ``f``, the clean view as target, Gaussian noise 0.1.
PAPER_RECIPE: dict[str, Any] = {
    "exclude_bn_from_decay": False,
    "lr_schedule": "per_epoch",
    "loss_form": "released",
    "epoch_order": "released",
    "init": "released",
    "momentum_form": "released",
    "distributions": list(DEFAULT_DISTRIBUTIONS),
    "da_batching": "expanded",
    "view_flip": "auto",
    "view_jitter": "released",
    "view_blur": False,
    "denoising_target": "pixels",
    "denoising_views": True,
    "denoising_decoder": "pooled",
    "noise_std": 0.1,
}

#: Former values of ``train`` switches -> the value that now runs the same thing
#: (``validate_config`` names the replacement instead of a bare "not allowed").
RENAMED_TRAIN_VALUES: dict[str, dict[str, str]] = {"loss_form": {"paper": "same_view"}}

#: Accepted values of the contrastive loss ``form`` (:mod:`pipeline_lib.ssl.tasks.contrastive`);
#: the first is the recipe's.
LOSS_FORMS: tuple[str, ...] = ("released", "same_view", "ntxent")

#: Names a distribution-augmentation transform may combine with ``+``
#: (:func:`pipeline_lib.ssl.augment.parse_distribution` implements them).
DISTRIBUTION_PRIMITIVES: tuple[str, ...] = ("hflip", "vflip", "rot90", "rot180", "rot270")


#: Models one training job trains when ``train.fuse`` is absent: one job per model.
DEFAULT_FUSE = 1

#: Side of the blocks that the denoising target ``patch_normalized`` standardises (a quarter
#: of a 32x32 image): :class:`~pipeline_lib.ssl.settings.TrainSettings` and
#: :mod:`pipeline_lib.ssl.tasks.denoising` read it here.
DENOISING_PATCH = 8


def fuse_setting(training: Mapping[str, Any]) -> int:
    """How many models one training job trains under ``training`` (``train.fuse``)."""
    return int(training.get("fuse") or DEFAULT_FUSE)


def recipe_deviations(method: str, training: dict[str, Any]) -> dict[str, Any]:
    """The ``train`` settings that take a paper ``method`` off the paper's recipe.

    Returns ``{key: value}`` for every switch of :data:`PAPER_RECIPE` that ``method`` reads
    and ``training`` sets to another value (an empty dict for a faithful row).
    """
    return {
        key: training[key]
        for key, paper in PAPER_RECIPE.items()
        if key in training and reads_setting(method, key) and _plain(training[key]) != _plain(paper)
    }


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def instances_per_image(method: str, training: Mapping[str, Any]) -> int:
    """Training instances one source image becomes under ``training`` (a ``train`` section).

    A method that reads ``da_batching`` (contrastive DA) and runs it ``expanded`` (the
    released code's, the default) trains on the training set expanded by its
    ``distributions``, so an epoch is ``1 + len(distributions)`` instances per source image;
    everything else trains on the source images. Throughput is counted in instances per
    second (the trainer's ``images_per_s``), so whoever turns epochs into time (the planner,
    bench_train.py) must count instances too.
    """
    if not reads_setting(method, "da_batching"):
        return 1
    if training.get("da_batching", PAPER_RECIPE["da_batching"]) != "expanded":
        return 1
    distributions = training.get("distributions")
    if distributions is None:
        distributions = DEFAULT_DISTRIBUTIONS
    return 1 + len(distributions)


def method_training(
    method: str, training: Mapping[str, Any], overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The ``train`` settings ``method`` runs with: the top-level ones, then ``overrides``.

    The top-level ``train.head_depth`` sizes the MLP head of the methods that have one
    (:attr:`~pipeline_lib.registry.MethodSpec.has_mlp_head`); the others do not inherit it
    (its value is None for them), so a config with ``methods: [rotnet, contrastive]`` and
    ``train.head_depth: 2`` stays valid. A head depth set in ``overrides`` (a variant's
    ``train`` or ``mvtec.train``) names this one method, so one for a method without an MLP
    head is an error rather than a setting ignored without a word.

    Parameters
    ----------
    method : str
        A trained method id (the base method of a variant).
    training : mapping
        The top-level ``train`` settings.
    overrides : mapping, optional
        The variant's (or ``mvtec.train``'s) settings, which win.

    Returns
    -------
    dict
        The merged settings, to hand to :func:`training_arguments`; for a method of a
        plugin (:mod:`~pipeline_lib.registry.plugins`) with ``package``, its package's
        ``name==version``, and ``plugin``, the ``train.plugin`` settings its task reads.

    Raises
    ------
    ValueError
        If ``overrides`` sets a head depth for a method without an MLP head.
    """
    spec = method_spec(method)
    # train.fuse / step_mode say how training executes, not how a model trains.
    merged = {k: v for k, v in training.items() if k not in TRAIN_EXECUTION_SETTINGS}
    if not spec.has_mlp_head:
        merged["head_depth"] = None
    overrides = dict(overrides or {})
    if not spec.has_mlp_head and overrides.get("head_depth") is not None:
        raise ValueError(headless_error(method, overrides["head_depth"]))
    merged.update(overrides)
    plugin = plugin_of(method)
    if plugin is None:
        # train.plugin holds the settings of plugin methods; no built-in task reads it.
        merged.pop("plugin", None)
    else:
        # The code that trains the row: a new version of the package re-runs its jobs.
        merged["package"] = plugin.provenance
    return merged


def headless_error(method: str, depth: Any) -> str:
    """The message for a head depth given to a method without an MLP head."""
    with_head = [spec.id for spec in METHOD_SPECS.values() if spec.has_mlp_head]
    return (
        f"head_depth: {depth} but {method} has no MLP head (methods with one: "
        f"{', '.join(with_head)}); drop head_depth or set it to null. The top-level "
        "train.head_depth applies only to the methods with an MLP head."
    )


def training_arguments(method: str, training: Mapping[str, Any]) -> dict[str, Any]:
    """The recipe of ``method`` from its ``train`` settings: the fields of
    :class:`~pipeline_lib.ssl.settings.TrainSettings` but the method and the width.

    Fills the method's default batch size and drops the task settings it does not read
    (:attr:`~pipeline_lib.registry.MethodSpec.reads`: a contrastive temperature does not
    enter a rotation model's record) and, when its views are off, the view settings.
    ``training`` is the result of :func:`method_training`, whose head depth is None for a
    method without an MLP head; any other head depth for one raises instead of being
    dropped.

    Raises
    ------
    ValueError
        If ``training`` sets a head depth for a method without an MLP head.
    """
    spec = method_spec(method)
    arguments = dict(training)
    if arguments.get("batch_size") is None:
        arguments["batch_size"] = spec.batch_size
    views = spec.uses_views(arguments)
    for name in task_settings():
        if name not in spec.reads:
            arguments.pop(name, None)
    if not views:
        for name in VIEW_SETTINGS:
            arguments.pop(name, None)
    if not spec.has_mlp_head:
        if arguments.get("head_depth") is not None:
            raise ValueError(headless_error(method, arguments["head_depth"]))
        arguments["head_depth"] = None
    return arguments
