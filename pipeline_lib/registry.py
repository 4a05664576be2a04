"""The registry of method, detector and data set ids and their defaults, torch-free.

Method ids and per-method training defaults, detector ids with their accepted parameters
and defaults (the paper's RBF gamma scale is stated here once), and the rule for the MLP
head depth. Data set ids live in the data set registry, :data:`pipeline_lib.data.DATASETS`,
which is torch-free too.

The Snakefile, the config checks and the cost planner import this module at parse time;
keeping torch out of it saves every ``snakemake`` invocation (a dry run, a cluster job) the
seconds that importing torch and torchvision costs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Representations that need no training: their features depend at most on the seed
#: (random initialisation) and never on the inlier class, so the DAG embeds a data set once
#: per seed.
FROZEN_METHODS: tuple[str, ...] = ("raw", "resnet18_random", "resnet50_imagenet")

#: Representations learned by a self-supervised proxy task, one model per (data set, inlier
#: class, contamination, seed): see :func:`pipeline_lib.ssl.train.train_representation`.
TRAINED_METHODS: tuple[str, ...] = (
    "rotnet",
    "rotation",
    "denoising",
    "contrastive",
    "contrastive_da",
)

#: Every representation id of the main table (docs/protocol.md, "Representations").
METHODS: tuple[str, ...] = FROZEN_METHODS + TRAINED_METHODS

#: Representations trained by rotation prediction, whose classifier is itself a detector.
ROTATION_METHODS: tuple[str, ...] = ("rotnet", "rotation")

#: Detectors read from the rotation classifier -> the feature-file key of their scores
#: (:func:`pipeline_lib.ssl.rotation.scores_from_rotation_logits`; docs/protocol.md), all
#: from one log-softmax of the four rotated views, higher = more normal:
#: ``rotation_classifier``, the paper's Table 1 score sum_k p(k | rot_k x) (the paper's
#: "Rotation Classifier" numbers belong to it); ``rotation_log_p``, Golan et al.'s sum_k
#: log p(k | rot_k x) (``rotation_classifier`` before the paper's form became the default);
#: ``rotation_p0``, p(0 | x); ``rotation_released``, the released code's float32
#: 1 - exp(sum_k log p(k | rot_k x)), negated, with its float32 ties.
ROTATION_DETECTORS: dict[str, str] = {
    "rotation_classifier": "sum_p_rotations",
    "rotation_log_p": "log_p_rotations",
    "rotation_p0": "p_rot0",
    "rotation_released": "released_rotations",
}

#: What the denoising decoder reconstructs (:mod:`pipeline_lib.ssl.denoising`); the first is
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
#: transformed copies, the project's former way).
DA_BATCHINGS: tuple[str, ...] = ("expanded", "per_image")

#: The horizontal flip of the view augmentation: ``auto`` flips with p = 0.5 unless
#: ``hflip`` is a distribution of DA (paper Sec. 5.2 and the released script of that
#: figure), ``always`` keeps it, ``never`` drops it.
VIEW_FLIPS: tuple[str, ...] = ("auto", "always", "never")

#: Colour jitter of the views (:mod:`pipeline_lib.ssl.color_ops`): the released code's TF
#: operations or the former torchvision-style variant.
VIEW_JITTERS: tuple[str, ...] = ("released", "torchvision")

#: When the cosine learning rate moves: once an epoch (released ``--sched_freq=epoch``) or
#: every step.
LR_SCHEDULES: tuple[str, ...] = ("per_epoch", "per_step")

#: The order of an epoch's instances (:mod:`pipeline_lib.ssl.order`): the released input
#: pipeline's (one shuffle frozen for the run, then a 1,000-element shuffle buffer each
#: epoch) or a fresh uniform permutation each epoch (a variant, the former order).
EPOCH_ORDERS: tuple[str, ...] = ("released", "permutation")

#: Initial weights of a network (:mod:`pipeline_lib.models.init`): the released code's Keras
#: initialisers or torch's (torchvision's ResNet rule, torch's layer defaults elsewhere).
INITS: tuple[str, ...] = ("released", "torch")

#: Where SGD's momentum carries the learning rate (:mod:`pipeline_lib.ssl.schedule`): inside
#: the velocity, as Keras' SGD that the released code trains with (``v <- m v - lr g``), or
#: at the update, as torch's (``b <- m b + g; w <- w - lr b``; a variant, the former form).
#: They differ whenever the rate moves.
MOMENTUM_FORMS: tuple[str, ...] = ("released", "torch")

#: Settings of the ``train`` config that only methods with augmented views read.
VIEW_SETTINGS: tuple[str, ...] = ("view_flip", "view_jitter", "view_blur")
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

#: Which trained methods read each recipe switch (a switch that a method ignores cannot make
#: its row unfaithful).
RECIPE_READERS: dict[str, tuple[str, ...]] = {
    "exclude_bn_from_decay": TRAINED_METHODS,
    "lr_schedule": TRAINED_METHODS,
    "loss_form": ("contrastive", "contrastive_da"),
    "epoch_order": TRAINED_METHODS,
    "init": TRAINED_METHODS,
    "momentum_form": TRAINED_METHODS,
    "distributions": ("contrastive_da",),
    "da_batching": ("contrastive_da",),
    "view_flip": ("rotnet", "rotation", "denoising", "contrastive", "contrastive_da"),
    "view_jitter": ("rotnet", "rotation", "denoising", "contrastive", "contrastive_da"),
    "view_blur": ("rotnet", "rotation", "denoising", "contrastive", "contrastive_da"),
    "denoising_target": ("denoising",),
    "denoising_views": ("denoising",),
    "denoising_decoder": ("denoising",),
    "noise_std": ("denoising",),
}


def recipe_deviations(method: str, training: dict[str, Any]) -> dict[str, Any]:
    """The ``train`` settings that take a paper ``method`` off the paper's recipe.

    Returns ``{key: value}`` for every switch of :data:`PAPER_RECIPE` that ``method`` reads
    and ``training`` sets to another value (an empty dict for a faithful row).
    """
    return {
        key: training[key]
        for key, paper in PAPER_RECIPE.items()
        if key in training
        and method in RECIPE_READERS[key]
        and _plain(training[key]) != _plain(paper)
    }


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


#: Settings of the ``train`` config that only the denoising autoencoder reads.
DENOISING_SETTINGS: tuple[str, ...] = (
    "noise_std",
    "denoising_views",
    "denoising_target",
    "denoising_patch",
    "denoising_decoder",
)

#: The paper's batch sizes (training instances per step: source images, except contrastive
#: DA's expanded copies, :func:`instances_per_image`) when the config leaves them open.
DEFAULT_BATCH_SIZE = {"contrastive": 32, "contrastive_da": 32}
DEFAULT_BATCH_SIZE_OTHERS = 64


def default_batch_size(method: str) -> int:
    """The paper's instances per step for ``method`` (docs/protocol.md, "Training recipe")."""
    return DEFAULT_BATCH_SIZE.get(method, DEFAULT_BATCH_SIZE_OTHERS)


def instances_per_image(method: str, training: Mapping[str, Any]) -> int:
    """Training instances one source image becomes under ``training`` (a ``train`` section).

    Contrastive DA with ``da_batching: expanded`` (the released code's, the default) trains on
    the training set expanded by its distributions, so an epoch is ``1 + len(distributions)``
    instances per source image; everything else trains on the source images. Throughput is
    counted in instances per second (the trainer's ``images_per_s``), so whoever turns epochs
    into time (the planner, bench_train.py) must count instances too.
    """
    if method != "contrastive_da":
        return 1
    if training.get("da_batching", PAPER_RECIPE["da_batching"]) != "expanded":
        return 1
    distributions = training.get("distributions")
    if distributions is None:
        distributions = DEFAULT_DISTRIBUTIONS
    return 1 + len(distributions)


#: Trained methods without an MLP head: RotNet classifies rotations from the features
#: directly and the denoising autoencoder decodes them (docs/protocol.md, "Representations").
#: A head depth has no meaning for them. The one statement of that fact: every head check reads it.
HEADLESS_METHODS: tuple[str, ...] = ("rotnet", "denoising")

#: Head depth per trained method when ``head_depth`` is None (docs/protocol.md, "Heads"): the
#: MLP heads have 8 hidden layers; the methods of :data:`HEADLESS_METHODS` have depth 0.
DEFAULT_HEAD_DEPTH: dict[str, int] = {
    method: 0 if method in HEADLESS_METHODS else 8 for method in TRAINED_METHODS
}

#: Accepted values of the contrastive loss ``form`` (:mod:`pipeline_lib.ssl.contrastive`);
#: the first is the recipe's.
LOSS_FORMS: tuple[str, ...] = ("released", "same_view", "ntxent")

#: Names a distribution-augmentation transform may combine with ``+``
#: (:func:`pipeline_lib.ssl.augment.parse_distribution` implements them).
DISTRIBUTION_PRIMITIVES: tuple[str, ...] = ("hflip", "vflip", "rot90", "rot180", "rot270")


def method_training(
    method: str, training: Mapping[str, Any], overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The ``train`` settings ``method`` runs with: the top-level ones, then ``overrides``.

    The top-level ``train.head_depth`` sizes the MLP head of the methods that have one; the
    methods of :data:`HEADLESS_METHODS` have none, so they do not inherit it (its value is
    None for them) and a config with ``methods: [rotnet, contrastive]`` and
    ``train.head_depth: 2`` stays valid. A head depth set in ``overrides`` (a variant's
    ``train`` or ``mvtec.train``) names this one method, so a headless method there is an
    error rather than a setting ignored without a word.

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
        The merged settings, to hand to :func:`training_arguments`.

    Raises
    ------
    ValueError
        If ``overrides`` sets a head depth for a method of :data:`HEADLESS_METHODS`.
    """
    # train.fuse / step_mode say how training executes, not how a model trains.
    merged = {k: v for k, v in training.items() if k not in TRAIN_EXECUTION_SETTINGS}
    if method in HEADLESS_METHODS:
        merged["head_depth"] = None
    overrides = dict(overrides or {})
    if method in HEADLESS_METHODS and overrides.get("head_depth") is not None:
        raise ValueError(headless_error(method, overrides["head_depth"]))
    merged.update(overrides)
    return merged


def headless_error(method: str, depth: Any) -> str:
    """The message for a head depth given to a method of :data:`HEADLESS_METHODS`."""
    return (
        f"head_depth: {depth} but {method} has no MLP head (methods with one: "
        f"{', '.join(m for m in TRAINED_METHODS if m not in HEADLESS_METHODS)}); drop "
        "head_depth or set it to null. The top-level train.head_depth applies only to the "
        "methods with an MLP head."
    )


def training_arguments(method: str, training: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of ``train_representation`` for ``method`` from the ``train`` config.

    Fills the paper's per-method batch size and drops settings that do not apply to the
    method (so, e.g., a contrastive temperature does not enter a rotation model's record).
    ``training`` is the result of :func:`method_training`, whose head depth is None for a
    headless method; any other head depth for one raises instead of being dropped.

    Raises
    ------
    ValueError
        If ``training`` sets a head depth for a method of :data:`HEADLESS_METHODS`.
    """
    arguments = dict(training)
    if arguments.get("batch_size") is None:
        arguments["batch_size"] = default_batch_size(method)
    if not method.startswith("contrastive"):
        arguments.pop("temperature", None)
        arguments.pop("loss_form", None)
    if method != "contrastive_da":
        arguments.pop("distributions", None)
        arguments.pop("da_batching", None)
    views = arguments.get("denoising_views", PAPER_RECIPE["denoising_views"])
    if method == "denoising" and not views:
        for name in VIEW_SETTINGS:
            arguments.pop(name, None)
    if method != "denoising":
        for name in DENOISING_SETTINGS:
            arguments.pop(name, None)
    if method in HEADLESS_METHODS:
        if arguments.get("head_depth") is not None:
            raise ValueError(headless_error(method, arguments["head_depth"]))
        arguments["head_depth"] = None
    return arguments


#: The paper's RBF kernel-width multiplier: ``gamma = GAMMA_SCALE / (d * Var(X_fit))``, ten
#: times scikit-learn's ``gamma="scale"`` ("we reduce [the kernel width] by 10 times than
#: default", Sec. 3.2; appendix "Details of shallow one-class classifiers"). The one place
#: this number is written: the RBF one-class SVM, the KDE and the explanations read it here.
GAMMA_SCALE: float = 10.0

#: Detector id -> every keyword parameter its class accepts, with the default the class
#: uses (the paper's where the paper fixes one). The detector classes
#: (:mod:`pipeline_lib.detection.detectors`) take their ``__init__`` defaults from here and
#: the config check (:func:`pipeline_lib.config.validate.validate_config`) rejects any other
#: name before a job runs. ``gamma=None`` derives the kernel width from ``gamma_scale``.
DETECTOR_DEFAULTS: dict[str, dict[str, Any]] = {
    "ocsvm": {
        "nu": 0.5,
        "gamma": None,
        "gamma_scale": GAMMA_SCALE,
        "normalize": True,
        "tol": 1e-3,
        "cache_size": 200.0,
        "max_iter": -1,
        # Scoring: blocked float64 kernel sums in torch, on the CPU unless set.
        "chunk_size": 4096,
        "dtype": "float64",
        "device": "cpu",
    },
    "ocsvm_linear": {
        "nu": 0.5,
        "normalize": False,
        "tol": 1e-3,
        "cache_size": 200.0,
        "max_iter": -1,
    },
    "kde": {
        "gamma": None,
        "gamma_scale": GAMMA_SCALE,
        "normalize": True,
        "chunk_size": 2048,
        "dtype": "float32",
        "device": "auto",
    },
    "gde": {"normalize": True, "reg_covar": 1e-6, "random_state": 0},
    "knn": {"n_neighbors": 1, "chunk_size": 2048, "dtype": "float32", "device": "auto"},
}

#: Every detector id of the feature detectors (the schema's ``detectors`` names).
DETECTORS: tuple[str, ...] = tuple(DETECTOR_DEFAULTS)


def unknown_detector_parameters(detector: str, params: Mapping[str, Any]) -> list[str]:
    """The names in ``params`` that ``detector`` does not accept, in the given order.

    Raises
    ------
    KeyError
        If ``detector`` is not an id of :data:`DETECTOR_DEFAULTS`.
    """
    accepted = DETECTOR_DEFAULTS[detector]
    return [name for name in params if name not in accepted]


def detector_settings(detector: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every parameter of ``detector`` with ``params`` over the registry defaults.

    Two parameter sets are the same detector exactly when these are equal
    (``{}`` and ``{nu: 0.5}`` both run the paper's one-class SVM).
    """
    return {**DETECTOR_DEFAULTS[detector], **(params or {})}
