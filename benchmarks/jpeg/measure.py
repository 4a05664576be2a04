"""One measurement: the AUCs of one representation on one version of the data set, through
the library's own chain; and the unit of work a worker process runs."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the library loads inside the worker, after its thread count is set
    import numpy as np

    from pipeline_lib.data import ImageDataset
    from pipeline_lib.data.split import OneClassSplit

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
FROZEN = ("raw", "resnet18_random")
TRAINED = "rotnet"
REPRESENTATIONS = (*FROZEN, TRAINED)
DETECTORS = ("kde", "ocsvm")
ROTATION_DETECTOR = "rotation_log_p"


@dataclass(frozen=True)
class Settings:
    """What every measurement of a run shares."""

    inlier: str = "automobile"
    rotnet_width: int = 16
    epochs: int = 10
    n_train: int = 1000
    frozen_width: int = 64
    batch_size: int | None = None  # embedding batch; None = the config default


def library_defaults(dataset: str, inlier: str, epochs: int) -> dict[str, Any]:
    """A minimal config validated by the workflow's schema: its defaults are the recipe
    (training, embedding batch, detector parameters at the paper's gamma, ``max_fit``)."""
    from pipeline_lib.config.validate import validate_config

    raw = {
        "datasets": {dataset: {"classes": [inlier]}},
        "methods": [TRAINED],
        "seeds": [0],
        "detectors": {detector: {} for detector in DETECTORS},
        "train": {"epochs": epochs},
    }
    return validate_config(raw, SCHEMA)


@dataclass(frozen=True)
class Embedding:
    """The features of one split, and the columns of its rows that say how they were made."""

    features: dict[str, np.ndarray]
    width: int  # 0 for raw pixels
    epochs: int = 0  # 0 for a frozen representation
    n_train: int = 0  # images trained on
    last_loss: float = math.nan
    train_s: float = 0.0
    embed_s: float = 0.0


def embed_frozen(
    dataset: ImageDataset,
    split: OneClassSplit,
    *,
    representation: str,
    seed: int,
    settings: Settings,
    batch_size: int,
    device: str,
) -> Embedding:
    """Features of a frozen representation: raw pixels or the random-weights ResNet-18."""
    from pipeline_lib.models.embed import embed_split
    from pipeline_lib.models.representation import build_representation

    # Raw pixels have no width; the random ResNet-18 has the frozen width.
    width = settings.frozen_width if representation == "resnet18_random" else 0
    model = build_representation(representation, seed=seed, width=settings.frozen_width)
    tic = time.perf_counter()
    features = embed_split(model, dataset, split.train_index, batch_size=batch_size, device=device)
    return Embedding(features, width, embed_s=time.perf_counter() - tic)


def train_and_embed(
    dataset: ImageDataset,
    split: OneClassSplit,
    *,
    seed: int,
    settings: Settings,
    config: Mapping[str, Any],
    batch_size: int,
    device: str,
) -> Embedding:
    """RotNet trained on the first ``n_train`` training inliers with the library's recipe
    (``config``'s training block), then its features."""
    from pipeline_lib.config.grids import variant_training
    from pipeline_lib.registry import training_arguments
    from pipeline_lib.ssl.jobs import embed_trained
    from pipeline_lib.ssl.settings import Execution, TrainSettings
    from pipeline_lib.ssl.train import train_representation

    width = settings.rotnet_width
    images = dataset.train_images[split.train_index[: settings.n_train]]
    arguments = training_arguments(TRAINED, variant_training(TRAINED, config["train"], {}))
    tic = time.perf_counter()
    model, history = train_representation(
        TrainSettings(TRAINED, width=width, **arguments),
        images,
        seed=seed,
        execution=Execution(device=device),
    )
    train_s = time.perf_counter() - tic
    tic = time.perf_counter()
    features = embed_trained(
        model, dataset, split, method=TRAINED, batch_size=batch_size, device=device
    )
    return Embedding(
        features,
        width,
        epochs=settings.epochs,
        n_train=len(images),
        last_loss=float(history[-1]["loss"]),
        train_s=train_s,
        embed_s=time.perf_counter() - tic,
    )


def detect(
    split: OneClassSplit,
    features: dict[str, np.ndarray],
    *,
    config: Mapping[str, Any],
    seed: int,
    device: str,
    rotation: bool,
) -> tuple[dict[str, float], dict[str, float]]:
    """AUC and seconds per detector: each of DETECTORS fitted on every training inlier, then
    with ``rotation`` the rotation classifier's score (it needs no fit)."""
    from pipeline_lib.detection.runner import run_detection, run_rotation_detection

    aurocs, detect_s = {}, {}
    for detector in DETECTORS:
        tic = time.perf_counter()
        record, _ = run_detection(
            split,
            features,
            fitset="train",
            detector=detector,
            detector_params=config["detectors"][detector],
            max_fit=config["detect"]["max_fit"],
            seed=seed,
            device=device,
        )
        aurocs[detector], detect_s[detector] = record["auroc"], time.perf_counter() - tic
    if rotation:
        tic = time.perf_counter()
        record, _ = run_rotation_detection(split, features, detector=ROTATION_DETECTOR)
        aurocs[ROTATION_DETECTOR] = record["auroc"]
        detect_s[ROTATION_DETECTOR] = time.perf_counter() - tic
    return aurocs, detect_s


def measure(
    dataset: ImageDataset,
    *,
    representation: str,
    seed: int,
    settings: Settings,
    device: str = "cpu",
) -> list[dict[str, Any]]:
    """AUCs of one representation on one version of the data set, one row per detector.

    The workflow's chain, its scripts' library calls: ``one_class_split`` ->
    ``build_representation`` + ``embed_split`` (frozen) or ``train_representation`` +
    ``embed_trained`` (RotNet, trained on the first ``n_train`` training inliers) ->
    ``run_detection`` (fitted on every training inlier) and, for RotNet,
    ``run_rotation_detection``.

    Raises
    ------
    ValueError
        If ``representation`` is not one of REPRESENTATIONS.
    """
    from pipeline_lib.data.split import one_class_split

    if representation not in REPRESENTATIONS:
        raise ValueError(
            f"unknown representation {representation!r}; allowed: {', '.join(REPRESENTATIONS)}"
        )
    config = library_defaults(dataset.name, settings.inlier, settings.epochs)
    batch_size = settings.batch_size or config["embed"]["batch_size"]
    started = time.perf_counter()
    split = one_class_split(
        dataset.train_labels,
        dataset.test_labels,
        inlier=dataset.class_names.index(settings.inlier),
        seed=seed,
    )
    shared = {"seed": seed, "settings": settings, "batch_size": batch_size, "device": device}
    if representation in FROZEN:
        embedding = embed_frozen(dataset, split, representation=representation, **shared)
    else:
        embedding = train_and_embed(dataset, split, config=config, **shared)
    aurocs, detect_s = detect(
        split,
        embedding.features,
        config=config,
        seed=seed,
        device=device,
        rotation=representation == TRAINED,
    )
    wall_s = time.perf_counter() - started
    return [
        {
            "representation": representation,
            "width": embedding.width,
            "epochs": embedding.epochs,
            "n_train": embedding.n_train,
            "seed": seed,
            "detector": detector,
            "auroc": auroc,
            "last_loss": embedding.last_loss,
            "train_s": embedding.train_s,
            "embed_s": embedding.embed_s,
            "detect_s": detect_s[detector],
            "wall_s": wall_s,
        }
        for detector, auroc in aurocs.items()
    ]


@dataclass(frozen=True)
class Unit:
    """One measurement to run in a worker: a cached data set version and a representation."""

    dose: str
    cache: str
    representation: str
    seed: int
    settings: Settings


def run_unit(unit: Unit) -> list[dict[str, Any]]:
    """A worker's job: one thread, read the cached version, :func:`measure`."""
    from pipeline_lib.runtime.devices import set_threads
    from pipeline_lib.runtime.io import load_image_dataset

    set_threads(1)
    dataset = load_image_dataset(unit.cache)
    return measure(
        dataset, representation=unit.representation, seed=unit.seed, settings=unit.settings
    )
