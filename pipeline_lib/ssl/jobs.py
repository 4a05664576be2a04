"""A trained representation's per-split steps: train it on a split, embed the split with it.

The workflow's ``train_representation`` (or ``train_fused``) and ``embed_trained`` scripts
call these two functions. Embedding lives here rather
than in :mod:`pipeline_lib.models.embed` because it adds the rotation classifier's scores
(:mod:`pipeline_lib.ssl.rotation`), and the models stage sits below the ssl stage.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from pipeline_lib.data import ImageDataset
from pipeline_lib.data.split import OneClassSplit, training_subset
from pipeline_lib.models.checkpoints import save_representation
from pipeline_lib.models.embed import embed_split
from pipeline_lib.models.proxy import ProxyModel
from pipeline_lib.registry import method_spec, training_arguments
from pipeline_lib.runtime.devices import device_name
from pipeline_lib.runtime.io import save_json
from pipeline_lib.ssl.fused import FusedResult, train_representations_fused
from pipeline_lib.ssl.rotation import rotation_scores
from pipeline_lib.ssl.settings import Execution, TrainSettings
from pipeline_lib.ssl.train import train_representation


def train_on_split(
    method: str,
    train_images: np.ndarray,
    split: OneClassSplit,
    *,
    training: Mapping[str, Any],
    train_size: int | None,
    seed: int,
    width: int,
    execution: Execution,
    checkpoint_path: str | os.PathLike | None = None,
    progress: bool = False,
    evaluate: Callable[[ProxyModel], Mapping[str, float]] | None = None,
    eval_every: int = 0,
) -> tuple[ProxyModel, list[dict[str, Any]], dict[str, Any]]:
    """Train ``method`` on the split's training images, as the workflow's job does.

    Parameters
    ----------
    method : str
        The base method (a variant's ``method``), which decides the training arguments.
    train_images : ndarray of shape (n, h, w, 3), uint8
        The data set's whole training split; the split picks its rows.
    split : OneClassSplit
    training : mapping
        The ``train`` settings after the variant's overrides
        (:func:`pipeline_lib.config.grids.variant_training`).
    train_size : int or None
        A data-efficiency variant learns from a seeded subset of this many images (the
        detectors still use every image); None = all of them.
    seed : int
    width : int
        Network width.
    execution : Execution
        The job's device and ``train.step_mode`` / ``train.draws``
        (:meth:`~pipeline_lib.ssl.settings.Execution.from_config`; not part of
        ``arguments``, the recipe).
    checkpoint_path : str or PathLike or None, default=None
        Where training checkpoints (and resumes from).
    progress : bool, default=False
    evaluate : callable or None, default=None
        The per-epoch diagnostic of :func:`pipeline_lib.ssl.train.train_representation`
        (built by the caller, e.g. :func:`pipeline_lib.detection.epoch_eval.epoch_evaluator`).
    eval_every : int, default=0
        ``train.eval_every``: epochs between evaluations, 0 = none (not part of ``arguments``).

    Returns
    -------
    model : ProxyModel
    history : list of dict
        Per-epoch records of :func:`pipeline_lib.ssl.train.train_representation`.
    arguments : dict
        The keyword arguments it trained with (batch size filled in), for the record.
    """
    train_index = training_subset(split.train_index, train_size, seed=seed)
    arguments = training_arguments(method, dict(training))
    model, history = train_representation(
        TrainSettings.from_config(method, training, width=width),
        train_images[train_index],
        seed=seed,
        execution=execution,
        checkpoint_path=checkpoint_path,
        progress=progress,
        evaluate=evaluate,
        eval_every=eval_every,
    )
    return model, history, arguments


def train_on_splits_fused(
    method: str,
    train_images: np.ndarray,
    splits: Sequence[OneClassSplit],
    *,
    training: Mapping[str, Any],
    train_size: int | None,
    seeds: Sequence[int],
    width: int,
    execution: Execution,
    checkpoint_paths: Sequence[str | os.PathLike | None] | None = None,
) -> tuple[list[FusedResult], dict[str, Any]]:
    """Train one model per split as :func:`train_on_split` would, fused into one computation.

    The workflow's ``train_fused`` job: the K splits are K models (inlier classes and seeds,
    :mod:`pipeline_lib.config.fusing`) of one data set, contamination and method
    (``train.fuse``). Each model gets the images, seed and
    checkpoint its separate job would (:func:`pipeline_lib.ssl.fused.train_representations_fused`,
    equal to a separate run up to float32 rounding); models whose steps per epoch differ
    (classes of different sizes) train in one fused group after another.

    Parameters
    ----------
    method, train_images, training, train_size, width
        As for :func:`train_on_split`.
    splits : sequence of OneClassSplit
        One per model.
    seeds : sequence of int
        One per model: its seed, as its separate job's ``seed``.
    execution : Execution
        As for :func:`train_on_split`; under step mode ``graph`` or ``compiled`` each
        model's step is captured as a CUDA graph and the models replay side by side.
    checkpoint_paths : sequence of (str or PathLike or None), or None, default=None
        One per model.

    Returns
    -------
    results : list of ((ProxyModel, list of dict) or TrainingDivergedError)
        Per split, in order: the model and its history, or the error that stopped it (the
        other models train on).
    arguments : dict
        The keyword arguments every model trained with, as :func:`train_on_split` records.
    """
    if len(seeds) != len(splits):
        raise ValueError(f"need one seed per split: {len(splits)} splits, {len(seeds)} seeds")
    arguments = training_arguments(method, dict(training))
    images = [
        train_images[training_subset(split.train_index, train_size, seed=seed)]
        for split, seed in zip(splits, seeds, strict=True)
    ]
    results = train_representations_fused(
        TrainSettings.from_config(method, training, width=width),
        images,
        seeds=list(seeds),
        execution=execution,
        checkpoint_paths=checkpoint_paths,
    )
    return results, arguments


def save_trained(
    model_path: str | os.PathLike,
    history_path: str | os.PathLike,
    model: ProxyModel,
    history: list[dict[str, Any]],
    *,
    method: str,
    arguments: Mapping[str, Any],
    device: torch.device,
    width: int,
    **extra: Any,
) -> None:
    """Write a trained model and its history as the workflow's jobs do (separate or fused).

    Device and width are recorded so the cost planner reuses the rates only for matching
    plans, and the device's name so the tables say what the model trained on
    (:func:`pipeline_lib.paper.protocol.training_notes`); ``extra`` adds fields to the
    history file (a fused group's members).
    """
    save_json(
        history_path,
        {
            "method": method,
            "arguments": dict(arguments),
            "history": history,
            "device": device.type,
            "device_name": device_name(device),
            "width": width,
            **extra,
        },
    )
    save_representation(model_path, model, method=method, config_dict=dict(arguments))


def embed_trained(
    model: ProxyModel,
    dataset: ImageDataset,
    split: OneClassSplit,
    *,
    method: str,
    batch_size: int,
    device: torch.device | str,
    progress: bool = False,
) -> dict[str, np.ndarray]:
    """Feature file of a trained model: its fit images, the test split, rotation scores.

    The fit images are the split's training set and every clean subset (the ``clean{n}``
    fit sets are rows of it); a RotNet or rotation model also gets its classifier's four
    scores, ``<name>_test`` for each name of
    :data:`pipeline_lib.ssl.rotation.ROTATION_SCORE_NAMES`, for the rotation detectors
    (:data:`pipeline_lib.registry.ROTATION_DETECTORS`).

    Parameters
    ----------
    model : ProxyModel
    dataset : ImageDataset
    split : OneClassSplit
    method : str
        The base method (a variant's ``method``): it decides the rotation scores.
    batch_size : int
    device : torch.device or str
    progress : bool, default=False

    Returns
    -------
    dict of str to ndarray
        The layout of :func:`pipeline_lib.models.embed.embed_split`, plus the rotation
        scores.
    """
    fit_index = np.concatenate([split.train_index, *split.clean_index.values()])
    features = embed_split(
        model, dataset, fit_index, batch_size=batch_size, device=device, progress=progress
    )
    if method_spec(method).rotation_classifier:
        scores = rotation_scores(model, dataset.test_images, device=device, batch_size=batch_size)
        features.update({f"{name}_test": values for name, values in scores.items()})
    return features
