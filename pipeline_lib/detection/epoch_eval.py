"""Test-split AUCs of a model while it trains: the ``train.eval_every`` diagnostic.

The training loop (:mod:`pipeline_lib.ssl.train`) sits below the detectors, so it cannot
score a model itself; it takes an ``evaluate(model)`` callable, and this module builds one
from the data, the split and the configured detectors. Each call embeds the split's
training images and the whole test split exactly as the ``embed_trained`` job does
(:func:`pipeline_lib.ssl.jobs.embed_trained`), fits every detector on the training images
as ``score_detectors`` does (:func:`pipeline_lib.detection.runner.run_detection`) and, for
rotation models, reads the rotation classifier's scores
(:func:`~pipeline_lib.detection.runner.run_rotation_detection`): so the evaluation after
the last epoch gives the AUCs the pipeline reports for the trained model.

The numbers are on the TEST split. They show how the AUC moves with training; choosing an
epoch by them would tune on the test set (the paper reports the last epoch).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import torch

from pipeline_lib.data import ImageDataset
from pipeline_lib.data.split import OneClassSplit
from pipeline_lib.detection.runner import run_detection, run_rotation_detection
from pipeline_lib.models.proxy import ProxyModel
from pipeline_lib.registry import DETECTOR_DEFAULTS, ROTATION_DETECTORS, method_spec
from pipeline_lib.ssl.jobs import embed_trained

#: The figure of ``train.eval_every`` (:func:`pipeline_lib.paper.plots.plot_eval_curves`)
#: that a training job saves beside its train_history.json; logged on its training run.
EVAL_CURVE_FILE = "eval_curve.png"

__all__ = ["epoch_evaluator"]


def epoch_evaluator(
    dataset: ImageDataset,
    split: OneClassSplit,
    *,
    method: str,
    detectors: Mapping[str, Mapping[str, Any]],
    rotation_classifier: bool = True,
    max_fit: int = 20000,
    seed: int = 0,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
) -> Callable[[ProxyModel], dict[str, float]]:
    """A callable that scores a model on the split's test images: AUC x 100 per detector.

    Parameters
    ----------
    dataset : ImageDataset
        The whole data set (training and test images).
    split : OneClassSplit
        The job's split: detectors are fitted on its training images (``fitset="train"``)
        and score its test split.
    method : str
        The base method; rotation methods also get the rotation-classifier detectors.
    detectors : mapping of str to mapping
        Detector id -> parameters, the config's ``detectors``.
    rotation_classifier : bool, default=True
        ``detect.rotation_classifier``: score the rotation detectors of
        :data:`~pipeline_lib.registry.ROTATION_DETECTORS` for rotation methods.
    max_fit : int, default=20000
        ``detect.max_fit``.
    seed : int, default=0
        The job's seed (the fit subset when ``max_fit`` cuts it).
    batch_size : int, default=256
        ``embed.batch_size``.
    device : torch.device or str, default="cpu"
        Where to embed and where torch detectors score.

    Returns
    -------
    callable
        ``evaluate(model) -> {detector: auroc}``, for
        :func:`pipeline_lib.ssl.train.train_representation`'s ``evaluate``.

    Raises
    ------
    ValueError
        If a detector id is unknown or nothing would be scored.
    """
    # The built-in detectors and those of the run's plugins.
    unknown = sorted(set(detectors) - set(DETECTOR_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown detectors {unknown}; allowed: {', '.join(DETECTOR_DEFAULTS)}")
    scored = rotation_classifier and method_spec(method).rotation_classifier
    rotation = list(ROTATION_DETECTORS) if scored else []
    if not detectors and not rotation:
        raise ValueError(f"no detector to evaluate {method} with: configure at least one")
    parameters = {name: dict(params or {}) for name, params in detectors.items()}
    # The same for every epoch: fit on the split's training images, with the job's seed.
    detect = partial(
        run_detection, split, fitset="train", max_fit=max_fit, seed=seed, device=device
    )

    def evaluate(model: ProxyModel) -> dict[str, float]:
        features = embed_trained(
            model, dataset, split, method=method, batch_size=batch_size, device=device
        )
        aurocs = {}
        for detector, params in parameters.items():
            record, _ = detect(features, detector=detector, detector_params=params, intervals=False)
            aurocs[detector] = record["auroc"]
        for detector in rotation:
            record, _ = run_rotation_detection(split, features, detector=detector, intervals=False)
            aurocs[detector] = record["auroc"]
        return aurocs

    return evaluate
