"""The cheapest measured setting: a config's training hours at each (step mode, fuse) that the
rate tables measured, its models regrouped as ``train.fuse`` would group them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline_lib.config.fusing import fused_groups, group_members, group_name
from pipeline_lib.planning.costs import RuleCost, plan_costs
from pipeline_lib.planning.defaults import TRAINING_RULES
from pipeline_lib.planning.jobs import Job
from pipeline_lib.planning.rate_choice import Setting, settings_measured
from pipeline_lib.planning.rates import Rate


def training_models(jobs: Iterable[Job]) -> dict[tuple[str, ...], list[tuple[str, str]]]:
    """(data set, contamination, method) -> the (class, seed) of each of its trained models.

    Read from either training rule (a train_fused job's group names its members,
    :mod:`pipeline_lib.config.fusing`), so a plan made at any ``train.fuse`` can be regrouped at
    another.
    """
    models: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for job in jobs:
        if job.rule not in TRAINING_RULES:
            continue
        w = job.wildcards
        key = (w.get("dataset", ""), w.get("contamination", ""), w["method"])
        if job.rule == "train_fused":
            members = group_members(w["group"])
        else:
            members = [(w.get("inlier", ""), w.get("seed", "0"))]
        models.setdefault(key, []).extend(members)
    return models


def regroup(jobs: Iterable[Job], fuse: int) -> list[Job]:
    """The training jobs the DAG runs at ``train.fuse = fuse`` for the models of ``jobs``.

    As workflow/rules/common.smk groups them (:func:`pipeline_lib.config.fusing.fused_groups`:
    the models of one data set, contamination and method, classes and seeds, ``fuse`` at a
    time); fuse 1 is one train_representation job per model. Outputs are left empty: only
    the hours are wanted.
    """
    regrouped = []
    for (dataset, contamination, method), members in training_models(jobs).items():
        common = {"dataset": dataset, "contamination": contamination, "method": method}
        if fuse == 1:
            regrouped += [
                Job("train_representation", {**common, "inlier": inlier, "seed": seed}, ())
                for inlier, seed in members
            ]
            continue
        for group in fused_groups(members, fuse):
            regrouped.append(Job("train_fused", {**common, "group": group_name(group)}, ()))
    return regrouped


@dataclass(frozen=True)
class SettingCost:
    """The training hours of a config's models at one (step mode, fuse) setting."""

    setting: Setting
    hours: float | None
    #: Base method -> where its rates at this setting came from (image size measured or
    #: extrapolated, median of repeats or single sample: ``rates.Choice.describe``).
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)


def rate_sources(costs: Mapping[str, RuleCost]) -> dict[str, tuple[str, ...]]:
    """Base method -> the sources of its training rates in ``costs`` (every variant's)."""
    found: dict[str, set[str]] = {}
    for rule in TRAINING_RULES:
        for part in costs[rule].by_method.values() if rule in costs else ():
            found.setdefault(part.spec.base, set()).update(part.sources)
    return {method: tuple(sorted(sources)) for method, sources in sorted(found.items())}


def training_hours(costs: Mapping[str, RuleCost]) -> float | None:
    """Hours of the training rules; None if any is unknown."""
    parts = [costs[rule].hours for rule in TRAINING_RULES if rule in costs]
    return None if any(part is None for part in parts) else sum(p or 0.0 for p in parts)


def setting_costs(
    jobs: Sequence[Job],
    config: Mapping[str, Any],
    *,
    device: str,
    rates: Sequence[Rate],
    workdir: str | os.PathLike | None = None,
    images_per_s: Mapping[str, float] | None = None,
) -> list[SettingCost]:
    """The training hours of ``jobs``' models at each setting the rate tables measured.

    Each setting is one config for every trained method (``train.fuse`` and
    ``train.step_mode`` are global): each measured (step mode, fuse), fused ones included
    (a fused job steps as ``train.step_mode`` says). The models are regrouped as the DAG
    would group them (:func:`regroup`) and costed by :func:`plan_costs` with the setting in
    the config, so a method without a row for the setting falls back as the plan does (and
    says so).
    """
    width = int((config.get("embed") or {}).get("width") or 64)
    settings = {Setting("eager", 1)}
    settings.update(settings_measured(rates, kind=device, width=width))
    results = []
    for setting in sorted(settings, key=lambda s: (s.fuse, s.step_mode)):
        train = {**(config.get("train") or {}), "fuse": setting.fuse}
        train["step_mode"] = setting.step_mode
        costs = plan_costs(
            regroup(jobs, setting.fuse),
            {**config, "train": train},
            device=device,
            workdir=workdir,
            images_per_s=images_per_s,
            rates=rates,
        )
        results.append(SettingCost(setting, training_hours(costs), rate_sources(costs)))
    return results
