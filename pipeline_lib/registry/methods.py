"""The method table: one torch-free :class:`MethodSpec` per representation.

Every question the workflow, the config checks, the planner, the network builder and the
trainer ask of a method (trained or frozen, its head kind, the settings its task reads, its
default batch size, its views per instance, whether it fuses and captures, its fallback
training rates) is answered by its row here, never by its name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

#: What a method puts on top of the backbone ``f`` (:mod:`pipeline_lib.models.proxy` builds
#: each; docs/protocol.md, "Heads"): ``none`` (a frozen representation), ``projection`` (an
#: MLP projection ``g``, the contrastive loss on ``g``), ``rotation_mlp`` (an MLP ``g`` and a
#: 4-way rotation classifier on it), ``rotation_linear`` (a 4-way linear classifier on ``f``
#: itself, ``g = f``: RotNet) and ``decoder`` (the denoising decoder on ``f``, no ``g``).
HEAD_KINDS: tuple[str, ...] = ("none", "projection", "rotation_mlp", "rotation_linear", "decoder")
#: Head kinds with an MLP ``g`` whose depth ``train.head_depth`` sets.
MLP_HEADS: tuple[str, ...] = ("projection", "rotation_mlp")
#: Head kinds ending in a 4-way rotation classifier, itself a detector (ROTATION_DETECTORS).
ROTATION_HEADS: tuple[str, ...] = ("rotation_mlp", "rotation_linear")
#: Hidden layers of an MLP head when ``head_depth`` is None: the paper's ``[512 x 8, 128]``
#: (docs/protocol.md, "Heads"). The one statement of the number.
MLP_HEAD_DEPTH = 8

#: Settings of the ``train`` config that only methods with augmented views read.
VIEW_SETTINGS: tuple[str, ...] = ("view_flip", "view_jitter", "view_blur")

#: Device kinds of the fallback training rates (:attr:`MethodSpec.rates`).
RATE_DEVICES: tuple[str, ...] = ("cpu", "cuda")


@dataclasses.dataclass(frozen=True)
class MethodSpec:
    """One representation of the benchmark: what the workflow, the config checks, the
    planner and the trainer ask of a method, without importing torch.

    A trained method names its proxy task by ``task``, a ``"module:attribute"`` path that
    only a training job imports (:func:`pipeline_lib.ssl.tasks.load_task`): the Snakefile
    reads this table at parse time and stays torch-free. A new proxy task is one task
    module plus one of these.

    Parameters
    ----------
    id : str
        The method id, as configs, result paths and tables name it.
    trained : bool
        Trained by a proxy task (one model per data set, class, contamination and seed), or
        frozen (features that depend at most on the seed, embedded once per data set).
    head : str, default="none"
        One of :data:`HEAD_KINDS`: what the network carries on top of ``f``.
    task : str or None, default=None
        ``"module:attribute"`` of a trained method's proxy task object.
    reads : tuple of str, default=()
        The task's own ``train`` settings, beyond those every trained method reads (budget,
        optimiser, head sizes, views). A setting some other task reads is dropped from this
        method's training arguments, and a recipe switch it does not read cannot make its
        row unfaithful.
    batch_size : int or None, default=None
        Training instances per step when the config leaves ``batch_size`` open (the
        paper's; docs/protocol.md, "Training recipe").
    views_per_instance : int, default=0
        Views of one training instance that pass through the network in a step.
    views : bool, default=True
        Whether the task draws the view augmentation (the ``view_*`` settings).
    views_switch : str or None, default=None
        A boolean setting of ``reads`` that turns the views off (``denoising_views``).
    fusable : bool, default=True
        Whether ``train.fuse > 1`` may train K models of it in one job.
    capturable : bool, default=True
        Whether its step may run captured as a CUDA graph (``step_mode`` graph, compiled).
    network : bool, default=True
        Whether its features come from a network (``raw`` pixels: nothing to explain).
    rates : mapping of str to float, default={}
        Training instances per second by device kind (:data:`RATE_DEVICES`) that the cost
        planner falls back to when no rate table or earlier run measured the method; a
        device kind without one is unmeasured.
    """

    id: str
    trained: bool
    head: str = "none"
    task: str | None = None
    reads: tuple[str, ...] = ()
    batch_size: int | None = None
    views_per_instance: int = 0
    views: bool = True
    views_switch: str | None = None
    fusable: bool = True
    capturable: bool = True
    network: bool = True
    rates: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.head not in HEAD_KINDS:
            raise ValueError(
                f"method {self.id!r}: unknown head kind {self.head!r}; allowed: "
                f"{', '.join(HEAD_KINDS)}"
            )
        if self.trained != (self.task is not None) or self.trained == (self.head == "none"):
            raise ValueError(
                f"method {self.id!r}: a trained method names its task and a head kind other "
                "than none, a frozen one neither"
            )
        if self.trained and (self.batch_size is None or self.views_per_instance < 1):
            raise ValueError(
                f"method {self.id!r}: a trained method needs a default batch size and its "
                "views per instance"
            )
        if self.views_switch is not None and self.views_switch not in self.reads:
            raise ValueError(
                f"method {self.id!r}: views_switch {self.views_switch!r} is not one of the "
                "settings it reads"
            )
        unknown = sorted(set(self.rates) - set(RATE_DEVICES))
        if unknown:
            raise ValueError(f"method {self.id!r}: rates for unknown device kinds {unknown}")

    @property
    def has_mlp_head(self) -> bool:
        """Whether ``train.head_depth`` sizes an MLP head (:data:`MLP_HEADS`)."""
        return self.head in MLP_HEADS

    @property
    def rotation_classifier(self) -> bool:
        """Whether the network ends in a rotation classifier (:data:`ROTATION_HEADS`)."""
        return self.head in ROTATION_HEADS

    @property
    def default_head_depth(self) -> int:
        """The head depth ``head_depth=None`` stands for: :data:`MLP_HEAD_DEPTH`, or 0."""
        return MLP_HEAD_DEPTH if self.has_mlp_head else 0

    def uses_views(self, training: Mapping[str, object]) -> bool:
        """Whether it draws the view augmentation under ``training`` (``train`` settings)."""
        if not self.views:
            return False
        return self.views_switch is None or bool(training.get(self.views_switch, True))

    def reads_setting(self, key: str) -> bool:
        """Whether the ``train`` setting ``key`` can change what this method learns."""
        if not self.trained:
            return False
        if key in task_settings():
            return key in self.reads
        if key in VIEW_SETTINGS:
            return self.views
        return True


def _trained(
    method: str,
    head: str,
    task: str,
    batch_size: int,
    views: int,
    rates: tuple[float, float],
    reads: tuple[str, ...] = (),
    views_switch: str | None = None,
) -> MethodSpec:
    """A built-in trained method: head kind, task module, default batch size, views per
    instance, fallback rates (CPU, CUDA), the task's own settings and views switch."""
    return MethodSpec(
        method,
        trained=True,
        head=head,
        task=f"pipeline_lib.ssl.tasks.{task}:TASK",
        reads=reads,
        batch_size=batch_size,
        views_per_instance=views,
        views_switch=views_switch,
        rates=dict(zip(RATE_DEVICES, rates, strict=True)),
    )


_CONTRASTIVE = ("temperature", "loss_form")
_DA = (*_CONTRASTIVE, "distributions", "da_batching")
_DENOISING = (
    "noise_std",
    "denoising_views",
    "denoising_target",
    "denoising_patch",
    "denoising_decoder",
)

#: The built-in methods, in the order of the paper's tables. RotNet (Golan et al.) is the
#: rotation task with a linear classifier on ``f``; contrastive DA reads the distribution set
#: and, under its default ``expanded`` batching, makes every transformed copy an instance of
#: its own, seen in two views (:func:`pipeline_lib.registry.instances_per_image`). The
#: fallback rates: ResNet-18 width 64 on 32x32 images at the paper's batch size, measured
#: with ``benchmarks/bench_train.py``; ``cpu`` on a 2-core CPU (the CI machine), ``cuda``
#: one job alone on an NVIDIA H200 (bf16 autocast, channels-last) with the graph-captured
#: step, the default on CUDA: the fuse-1 graph rows of benchmarks/rates/h200.csv (the
#: median of a day's rows, as ``--rates`` takes them). The eager step trained 2.5-6.3x
#: slower there; a fused job of K captured models side by side trains 1.3-2.4x one job's
#: images (benchmarks/rates/README.md).
BUILTIN_METHODS: tuple[MethodSpec, ...] = (
    MethodSpec("raw", trained=False, network=False),
    MethodSpec("resnet18_random", trained=False),
    MethodSpec("resnet50_imagenet", trained=False),
    _trained("rotnet", "rotation_linear", "rotation", 64, 4, (5.8, 11297.0)),
    _trained("rotation", "rotation_mlp", "rotation", 64, 4, (6.7, 10687.0)),
    _trained(
        "denoising", "decoder", "denoising", 64, 1, (26.4, 23088.0), _DENOISING, "denoising_views"
    ),
    _trained("contrastive", "projection", "contrastive", 32, 2, (12.0, 10280.5), _CONTRASTIVE),
    _trained("contrastive_da", "projection", "contrastive", 32, 2, (3.0, 10414.0), _DA),
)

#: Method id -> its spec: the table every lookup reads.
METHOD_SPECS: dict[str, MethodSpec] = {spec.id: spec for spec in BUILTIN_METHODS}

#: The built-in ids, which no variant may take. Frozen representations need no training:
#: their features depend at most on the seed (random initialisation) and never on the inlier
#: class, so the DAG embeds a data set once per seed.
FROZEN_METHODS: tuple[str, ...] = tuple(s.id for s in BUILTIN_METHODS if not s.trained)
#: Built-in representations learned by a proxy task, one model per (data set, inlier class,
#: contamination, seed): see :func:`pipeline_lib.ssl.train.train_representation`.
TRAINED_METHODS: tuple[str, ...] = tuple(s.id for s in BUILTIN_METHODS if s.trained)
#: Every built-in representation id of the main table (docs/protocol.md, "Representations").
METHODS: tuple[str, ...] = FROZEN_METHODS + TRAINED_METHODS
#: Built-in methods whose rotation classifier is itself a detector.
ROTATION_METHODS: tuple[str, ...] = tuple(s.id for s in BUILTIN_METHODS if s.rotation_classifier)


def method_spec(method: str) -> MethodSpec:
    """The spec of ``method``.

    Raises
    ------
    ValueError
        On an unknown id, naming the known ones.
    """
    try:
        return METHOD_SPECS[method]
    except KeyError:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(METHOD_SPECS)}") from None


def method_ids(*, trained: bool | None = None) -> tuple[str, ...]:
    """The ids of the table in its order; only the trained or the frozen ones if asked."""
    return tuple(
        spec.id for spec in METHOD_SPECS.values() if trained is None or spec.trained == trained
    )


def is_trained(method: str) -> bool:
    """Whether ``method`` is a trained method of the table (False for frozen, unknown ids)."""
    spec = METHOD_SPECS.get(method)
    return spec is not None and spec.trained


def task_settings() -> tuple[str, ...]:
    """The ``train`` settings that some task reads and others do not (all ``reads``)."""
    return tuple(dict.fromkeys(key for spec in METHOD_SPECS.values() for key in spec.reads))


def reads_setting(method: str, key: str) -> bool:
    """Whether ``method`` reads the ``train`` setting ``key`` (False for an unknown id)."""
    spec = METHOD_SPECS.get(method)
    return spec is not None and spec.reads_setting(key)


def default_batch_size(method: str) -> int:
    """The paper's instances per step for ``method`` (docs/protocol.md, "Training recipe").

    Raises
    ------
    ValueError
        If ``method`` is not a trained method of the table.
    """
    size = method_spec(method).batch_size
    if size is None:
        raise ValueError(f"{method} is not a trained method: it has no batch size")
    return size
