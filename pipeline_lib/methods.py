"""The registry of representation ids and their per-method training defaults, torch-free.

The Snakefile, the config checks and the cost planner import this module at parse time;
keeping torch out of it saves every ``snakemake`` invocation (a dry run, a cluster job) the
seconds that importing torch and torchvision costs.
"""

from __future__ import annotations

from typing import Any

#: Representations that need no training: their features depend at most on the seed
#: (random initialisation) and never on the inlier class, so the DAG embeds a data set once
#: per seed.
FROZEN_METHODS: tuple[str, ...] = ("raw", "resnet18_random", "resnet50_imagenet")

#: Representations learned by a self-supervised proxy task, one model per (data set, inlier
#: class, contamination, seed): see :func:`pipeline_lib.train.train_representation`.
TRAINED_METHODS: tuple[str, ...] = (
    "rotnet",
    "rotation",
    "denoising",
    "contrastive",
    "contrastive_da",
)

#: Every representation id of the main table (PROTOCOL.md, "Representations").
METHODS: tuple[str, ...] = FROZEN_METHODS + TRAINED_METHODS

#: Representations trained by rotation prediction, whose classifier is itself a detector.
ROTATION_METHODS: tuple[str, ...] = ("rotnet", "rotation")

#: Detectors read from the rotation classifier -> the feature-file key of their scores:
#: Golan et al.'s sum over k of log p(k | rot_k x), and p(y=0 | x).
ROTATION_DETECTORS: dict[str, str] = {
    "rotation_classifier": "log_p_rotations",
    "rotation_p0": "p_rot0",
}

#: What the denoising decoder reconstructs (:mod:`pipeline_lib.ssl.denoising`); the first is
#: the default.
DENOISING_TARGETS: tuple[str, ...] = ("patch_normalized", "pixels")

#: Settings of the ``train`` config that only the denoising autoencoder reads.
DENOISING_SETTINGS: tuple[str, ...] = (
    "noise_std",
    "denoising_views",
    "denoising_target",
    "denoising_patch",
)

#: The paper's batch sizes (source images per step) when the config leaves them open.
DEFAULT_BATCH_SIZE = {"contrastive": 32, "contrastive_da": 32}
DEFAULT_BATCH_SIZE_OTHERS = 64


def default_batch_size(method: str) -> int:
    """The paper's source images per step for a trained ``method`` (PROTOCOL.md, "Training")."""
    return DEFAULT_BATCH_SIZE.get(method, DEFAULT_BATCH_SIZE_OTHERS)


def training_arguments(method: str, training: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of ``train_representation`` for ``method`` from the ``train`` config.

    Fills the paper's per-method batch size and drops settings that do not apply to the
    method (so, e.g., a contrastive temperature does not enter a rotation model's record).
    """
    arguments = dict(training)
    if arguments.get("batch_size") is None:
        arguments["batch_size"] = default_batch_size(method)
    if not method.startswith("contrastive"):
        arguments.pop("temperature", None)
        arguments.pop("loss_form", None)
    if method != "contrastive_da":
        arguments.pop("distributions", None)
    if method != "denoising":
        for name in DENOISING_SETTINGS:
            arguments.pop(name, None)
    if method in ("rotnet", "denoising"):
        arguments["head_depth"] = None
    return arguments
