"""What a config's jobs cost per rule: hours (device-hours on the torch rules) and disk.

The sources of each number, in the order they are tried, are in the module docstring of
:mod:`pipeline_lib.planning.planner`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline_lib.config.fusing import group_members
from pipeline_lib.config.grids import base_method
from pipeline_lib.planning.defaults import (
    DEFAULT_CHECKPOINT_EVERY,
    DEFAULT_JOB_SECONDS,
    DEFAULT_OTHER_SECONDS,
    TRAINING_RULES,
)
from pipeline_lib.planning.jobs import Job
from pipeline_lib.planning.measured import (
    measured_images_per_s,
    measured_job_seconds,
    measured_output_bytes,
    median,
)
from pipeline_lib.planning.rate_choice import embedding_rate
from pipeline_lib.planning.rates import Rate
from pipeline_lib.planning.sizes import dataset_size, estimated_output_bytes
from pipeline_lib.planning.training import TableQuery, TrainingSpec, training_rate, training_spec
from pipeline_lib.registry import RATE_DEVICES, method_spec


@dataclass
class MethodCost:
    """The training jobs of one method or variant: what they train and what they cost."""

    spec: TrainingSpec
    jobs: int = 0
    hours: float | None = 0.0
    #: Where its rates came from (a rate table's setting, device and date; a default).
    sources: set[str] = field(default_factory=set)


@dataclass
class RuleCost:
    """What one rule's jobs cost in all; ``sources`` says where each number came from."""

    jobs: int = 0
    hours: float | None = 0.0
    disk_bytes: float = 0.0
    sources: set[str] = field(default_factory=set)
    #: Training only: method or variant -> its spec, job count and hours.
    by_method: dict[str, MethodCost] = field(default_factory=dict)


@dataclass(frozen=True)
class Measured:
    """What an earlier run in the working directory measured (empty without one)."""

    #: Base method -> per-epoch training rates of its histories on this device and width.
    images_per_s: dict[str, list[float]] = field(default_factory=dict)
    #: Rule -> wall seconds of its ``benchmark:`` files.
    job_seconds: dict[str, list[float]] = field(default_factory=dict)
    #: Rule -> sizes of its planned outputs that already exist.
    output_bytes: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def of(
        cls, workdir: str | os.PathLike | None, jobs: Sequence[Job], *, device: str, width: int
    ) -> Measured:
        """The measurements in the working directory ``workdir`` (an experiment's folder,
        whose outputs lie directly in it; ``None``: none, defaults only)."""
        if workdir is None:
            return cls()
        root = Path(workdir)
        return cls(
            measured_images_per_s(root, device=device, width=width),
            measured_job_seconds(root / "benchmarks"),
            measured_output_bytes(root, jobs),
        )


def plan_costs(
    jobs: Sequence[Job],
    config: Mapping[str, Any],
    *,
    device: str = "cuda",
    workdir: str | os.PathLike | None = None,
    images_per_s: Mapping[str, float] | None = None,
    rates: Sequence[Rate] = (),
) -> dict[str, RuleCost]:
    """Hours and disk of ``jobs`` per rule (the planner's module docstring says from what).

    Parameters
    ----------
    jobs : sequence of Job
        From :func:`pipeline_lib.planning.jobs.snakemake_jobs`.
    config : mapping
        The config the jobs were planned from (epochs, batch size, subsampling, width).
    device : {"cuda", "cpu"}, default="cuda"
        Which default training rates apply to the torch rules.
    workdir : str or PathLike or None, default=None
        A working directory with earlier results to measure; ``None`` = defaults only.
    images_per_s : mapping or None, default=None
        Training rates per method that override everything else.
    rates : sequence of Rate, default=()
        Rows of rate tables (:func:`pipeline_lib.planning.rates.read_rates`), after
        ``images_per_s`` and before earlier runs' histories.

    Returns
    -------
    dict
        Rule -> :class:`RuleCost`; ``hours`` is None when a training rate is unknown.

    Raises
    ------
    ValueError
        On an unknown ``device``.
    RateTableError
        If ``rates`` hold rows of two devices of ``device``'s kind.
    """
    if device not in RATE_DEVICES:
        raise ValueError(f"device must be one of {sorted(RATE_DEVICES)}, got {device!r}")
    width = int((config.get("embed") or {}).get("width") or 64)
    train = config.get("train") or {}
    table = TableQuery(rates, device, width, train.get("step_mode"), train.get("amp"))
    measured = Measured.of(workdir, jobs, device=device, width=width)
    sources = _RateSources(device, images_per_s, table, measured.images_per_s)
    costs: dict[str, RuleCost] = {}
    for job in jobs:
        cost = costs.setdefault(job.rule, RuleCost())
        cost.jobs += 1
        _add_disk(cost, job, config, measured)
        spec = None
        if job.rule in TRAINING_RULES:
            spec = training_spec(job.wildcards.get("method", ""), config)
        if spec is not None:
            _add_training(cost, job, spec, config, sources)
        elif cost.hours is not None:
            cost.hours += _job_seconds(cost, job, config, measured, table) / 3600
    return costs


@dataclass(frozen=True)
class _RateSources:
    """Where a plan's training rates come from (:func:`training_rate`'s arguments)."""

    device: str
    overrides: Mapping[str, float] | None
    table: TableQuery
    measured: Mapping[str, list[float]]


def _add_disk(cost: RuleCost, job: Job, config: Mapping[str, Any], measured: Measured) -> None:
    """The disk of ``job``'s outputs: as measured for its rule, else estimated."""
    if job.rule in measured.output_bytes:
        cost.disk_bytes += median(measured.output_bytes[job.rule])
        cost.sources.add("disk measured")
    else:
        cost.disk_bytes += estimated_output_bytes(job, config)
        cost.sources.add("disk estimated")


def _job_seconds(
    cost: RuleCost, job: Job, config: Mapping[str, Any], measured: Measured, table: TableQuery
) -> float:
    """Wall seconds of one job that does not train: its rule's time measured by an earlier
    run, else (``embed_trained``) its images at a rate table's embedding rate, else a
    default."""
    rule = job.rule
    if rule in measured.job_seconds:
        cost.sources.add("time measured")
        return median(measured.job_seconds[rule])
    if rule == "embed_trained" and table.rates:
        seconds, why = _embedding_seconds(job, config, table)
        cost.sources.add(why)
        if seconds is not None:
            return seconds
    cost.sources.add("time default")
    return DEFAULT_JOB_SECONDS.get(rule, DEFAULT_OTHER_SECONDS)


def _embedding_seconds(
    job: Job, config: Mapping[str, Any], table: TableQuery
) -> tuple[float | None, str]:
    """An ``embed_trained`` job's forward passes at the table's embedding rate: the class's
    training images and the test split, and for a rotation method the test split's four
    rotations through the classifier (:func:`pipeline_lib.ssl.jobs.embed_trained`)."""
    size, _ = dataset_size(config, job.wildcards.get("dataset", ""))
    rate, why = embedding_rate(
        table.rates, kind=table.kind, width=table.width, image_size=size.side
    )
    if rate is None:
        return None, why
    base = base_method(job.wildcards.get("method", ""), config.get("variants") or {})
    images = size.train_per_class + size.n_test
    if method_spec(base).rotation_classifier:
        images += 4 * size.n_test
    return images / rate, why


def _add_training(
    cost: RuleCost, job: Job, spec: TrainingSpec, config: Mapping[str, Any], rates: _RateSources
) -> None:
    """The hours of one training job (its group's models, for train_fused) into ``cost``."""
    models = 1
    if job.rule == "train_fused":
        # train.fuse: the group's members (classes and seeds). Costed at the fused rate of
        # that many models if a rate table has it, else as TableQuery.fused says.
        models = len(group_members(job.wildcards.get("group", "")))
    by_method = cost.by_method.setdefault(spec.name, MethodCost(spec))
    by_method.jobs += models
    fused = models if job.rule == "train_fused" else None
    size, known = dataset_size(config, job.wildcards.get("dataset", ""))
    rate, sources = training_rate(
        spec.base,
        rates.device,
        rates.overrides,
        rates.table,
        rates.measured,
        fused=fused,
        image_size=size.side,
    )
    cost.sources.update(sources)
    by_method.sources.update(sources)
    if rate is None:
        # Unmeasured (a plugin's method, say): this method's and the rule's hours are
        # unknown; the other methods keep theirs.
        cost.hours = by_method.hours = None
        cost.sources.add(f"{spec.base} unmeasured: no {rates.device} rate")
        return
    if not known:
        cost.sources.add(f"size of {job.wildcards.get('dataset')} guessed")
    images = size.train_per_class
    if spec.train_size is not None:
        images = min(images, spec.train_size)
    # Rates count training instances (contrastive DA's expanded copies included).
    instances = images * spec.instances_per_image
    batch = spec.batch_size
    per_epoch = max(instances // batch, 1) * min(batch, instances)
    # The rate is for this data set's image size (a 32x32 rate scaled by pixels where
    # nothing was measured at that size: training_rate).
    seconds = models * spec.epochs * per_epoch / rate
    if rates.table.rates:  # only rate tables measure overheads
        seconds += _overhead_seconds(cost, by_method, spec, models, size.side, config, rates)
    hours = seconds / 3600
    if cost.hours is not None:
        cost.hours += hours
    if by_method.hours is not None:
        by_method.hours += hours


def _overhead_seconds(
    cost: RuleCost,
    by_method: MethodCost,
    spec: TrainingSpec,
    models: int,
    image_size: int,
    config: Mapping[str, Any],
    rates: _RateSources,
) -> float:
    """A training job's compilation and capture, epoch ends and checkpoints, as the rate
    table measured them for its setting; 0 (and said so) where it did not."""
    overheads, why = rates.table.overheads(spec.base, models, image_size)
    cost.sources.add("overheads measured" if overheads is not None else why)
    by_method.sources.add(why)
    if overheads is None:
        return 0.0
    every = (config.get("train") or {}).get("checkpoint_every") or DEFAULT_CHECKPOINT_EVERY
    return overheads.job_seconds(spec.epochs, int(every))
