"""Rule params that Snakemake does not record: how a training job executes.

Snakemake re-runs a job when one of its params changes, comparing the ``repr`` of each
param of a plain type (numbers, strings, lists, dicts); a param of any other type is left
out of the comparison (``snakemake.persistence``, "UNREPRESENTABLE"). The execution
settings of ``train`` (``step_mode``, ``draws``, ``eval_every``) and the detectors of the
per-epoch evaluation change how a job runs, not what it learns: they reach the job's
script as params, so the script reads no ``snakemake.config``, wrapped in
:class:`Unrecorded`, so changing them re-runs no finished job
(tests/workflow/test_eval_every.py checks that on a real run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pipeline_lib.registry import DRAW_SOURCES, STEP_MODES

__all__ = ["Unrecorded", "training_execution"]


@dataclasses.dataclass(frozen=True)
class Unrecorded:
    """A rule param whose value Snakemake does not record, so changing it re-runs nothing."""

    value: Any


def training_execution(config: Mapping[str, Any]) -> Unrecorded:
    """How a training job of ``config`` (validated) executes.

    Returns
    -------
    Unrecorded
        Holding ``step_mode`` and ``draws`` (:class:`~pipeline_lib.ssl.settings.Execution`'s
        fields, absent: their defaults), ``eval_every`` (0: no evaluation) and
        ``evaluation``: what :func:`pipeline_lib.detection.epoch_eval.epoch_evaluator` needs
        besides the job's own data (the sweep's detectors, whether the rotation classifier
        scores, the detectors' ``max_fit``, the embedding batch size).
    """
    train = config.get("train") or {}
    return Unrecorded(
        {
            "step_mode": train.get("step_mode") or STEP_MODES[0],
            "draws": train.get("draws") or DRAW_SOURCES[0],
            "eval_every": train.get("eval_every") or 0,
            "evaluation": {
                "detectors": dict(config["detectors"]),
                "rotation_classifier": config["detect"]["rotation_classifier"],
                "max_fit": config["detect"]["max_fit"],
                "batch_size": config["embed"]["batch_size"],
            },
        }
    )
