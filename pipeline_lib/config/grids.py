"""Study grids and representation variants: what a config asks the DAG to compute.

A config holds one grid at top level (data sets x classes x methods x seeds x splits x
detectors: the main table, or a study when it has a ``study`` block) and may pull in more
grids through ``studies`` (study config files or inline mappings), so one ``snakemake``
call regenerates the whole paper. Grids share one results tree: a job's path names its
data set, class, split, seed, method (or variant), fit set and detector, so a result two
studies need is computed once.

Torch-free on purpose: the Snakefile imports this at parse time.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline_lib.registry import (
    METHOD_SPECS,
    TRAIN_EXECUTION_SETTINGS,
    method_training,
    plugin_hint,
)

#: Keys a study takes from its own file; training, embedding and detection settings are
#: global because result paths do not name them.
GRID_KEYS: tuple[str, ...] = (
    "datasets",
    "methods",
    "variants",
    "seeds",
    "splits",
    "detectors",
    "spaces",
    "study",
)

#: Global sections an included study file may not change (they are not in result paths).
GLOBAL_KEYS: tuple[str, ...] = ("train", "embed", "detect", "data", "tracking", "mvtec")


class GridError(ValueError):
    """A study or variant definition the DAG cannot run."""


@dataclass(frozen=True)
class Grid:
    """One study's cross product, after defaults."""

    name: str
    kind: str
    datasets: dict[str, dict[str, Any]]
    methods: list[str]
    seeds: list[int]
    contamination: list[float]
    clean_inliers: list[int]
    detectors: list[str]
    spaces: list[str]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def fitsets(self) -> list[str]:
        return ["train"] + [f"clean{n}" for n in self.clean_inliers]


def base_method(name: str, variants: Mapping[str, Mapping[str, Any]]) -> str:
    """The method a representation name trains with (itself unless it is a variant)."""
    if name in variants:
        return str(variants[name]["method"])
    if name in METHOD_SPECS:
        return name
    raise GridError(f"unknown representation {name!r}: not a method and not a variant")


def variant_training(
    name: str, training: Mapping[str, Any], variants: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The ``train`` settings of ``name``: the global ones with the variant's overrides.

    Merged by :func:`pipeline_lib.registry.method_training`, so a method without an MLP
    head does not inherit the top-level ``head_depth`` (and a variant giving it one raises).
    """
    overrides = (variants.get(name) or {}).get("train")
    return method_training(base_method(name, variants), training, overrides)


def variant_train_size(name: str, variants: Mapping[str, Mapping[str, Any]]) -> int | None:
    """Images a variant learns from (None: the whole training set)."""
    return (variants.get(name) or {}).get("train_size")


def check_methods(config: Mapping[str, Any], *, where: str = "") -> None:
    """Every entry of ``methods`` is a method or a declared variant; variants don't shadow."""
    variants = config.get("variants") or {}
    prefix = f"{where}: " if where else ""
    for name in variants:
        if name in METHOD_SPECS:
            raise GridError(
                f"{prefix}config key 'variants.{name}': a variant may not reuse a method name"
            )
    allowed = [*METHOD_SPECS, *variants]
    for index, name in enumerate(config.get("methods") or []):
        if name not in allowed:
            raise GridError(
                f"{prefix}config key 'methods[{index}]': {name!r} is not allowed; "
                f"allowed values: {', '.join(allowed)}{plugin_hint(name)}"
            )


def _grid_from(config: Mapping[str, Any], name: str, kind: str, options: Mapping) -> Grid:
    splits = config.get("splits") or {}
    return Grid(
        name=name,
        kind=kind,
        datasets={k: dict(v or {}) for k, v in (config.get("datasets") or {}).items()},
        methods=list(config["methods"]),
        seeds=[int(seed) for seed in config["seeds"]],
        contamination=[float(c) for c in splits.get("contamination", [0.0])],
        clean_inliers=[int(n) for n in splits.get("clean_inliers", [])],
        detectors=list(config.get("detectors") or {}),
        spaces=list(config.get("spaces") or ["f"]),
        options=dict(options),
    )


def _study_name(config: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    study = config["study"]
    return study.get("name") or study["kind"], study["kind"], dict(study.get("options") or {})


def load_study(
    entry: str | Mapping[str, Any], *, search: tuple[Path, ...], validate: Any
) -> dict[str, Any]:
    """A study entry of ``studies`` as a validated config mapping.

    ``validate`` is :func:`pipeline_lib.config.validate.validate_config` bound to the schema (passed
    in to keep this module free of the jsonschema dependency cycle).
    """
    if isinstance(entry, str):
        candidates = (
            [base / entry for base in search] if not Path(entry).is_absolute() else [Path(entry)]
        )
        path = next((c for c in candidates if c.is_file()), None)
        if path is None:
            tried = ", ".join(str(c) for c in candidates)
            raise GridError(f"config key 'studies': no study file {entry!r} (looked at {tried})")
        raw = yaml.safe_load(path.read_text())
        where = str(entry)
    else:
        raw, where = copy.deepcopy(dict(entry)), "inline study"
    if not isinstance(raw, Mapping) or "study" not in raw:
        raise GridError(f"config key 'studies': {where} has no 'study' block (kind, name, options)")
    if raw.get("studies"):
        raise GridError(
            f"config key 'studies': {where} includes studies itself; nest only one level"
        )
    try:
        filled = validate(raw)
    except ValueError as error:
        raise GridError(f"{where}: {error}") from error
    filled["_source"] = where
    filled["_explicit"] = sorted(key for key in GLOBAL_KEYS if key in raw)
    return filled


def _global_section(config: Mapping[str, Any], key: str, *, like: Mapping | None = None) -> Any:
    """``config[key]`` as a study file must repeat it: without ``train.fuse`` or
    ``train.step_mode`` (how training executes, settings of the whole run) unless ``like``,
    the study, sets them too."""
    section = config.get(key)
    if key == "train" and isinstance(section, Mapping) and like is not None:
        kept = like.get("train") or {}
        section = {
            name: value
            for name, value in section.items()
            if name not in TRAIN_EXECUTION_SETTINGS or name in kept
        }
    return section


def study_grids(config: Mapping[str, Any], studies: list[Mapping[str, Any]]) -> list[Grid]:
    """The config's grids: its own (``main`` or its study) and each included study's.

    Raises
    ------
    GridError
        Two studies with one name, a variant defined twice differently, a data set read
        with different options, or a study file changing a global setting.
    """
    grids: list[Grid] = []
    if config.get("datasets"):
        grids.append(_grid_from(config, "main", "main", {}))
        if config.get("study") and config["study"]["kind"] != "main":
            grids.append(_grid_from(config, *_study_name(config)))
    for study in studies:
        for key in study["_explicit"]:
            if _global_section(study, key) != _global_section(config, key, like=study):
                raise GridError(
                    f"{study['_source']}: sets '{key}', which differs from the including "
                    f"config's; {key} settings are global (result paths do not name them)"
                )
        grids.append(_grid_from(study, *_study_name(study)))
    names = [grid.name for grid in grids]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise GridError(
            f"config key 'studies': study name(s) {duplicates} used twice; set study.name"
        )
    return grids


def _merge_agreeing(
    merged: dict[str, Any], entries: Mapping[str, Any]
) -> tuple[str, Any, Any] | None:
    """Add ``entries`` to ``merged`` in order; at the first name already there with another
    value stop and return ``(name, earlier, new)`` (one name must mean one thing everywhere)."""
    for name, value in entries.items():
        if name in merged and merged[name] != value:
            return name, merged[name], value
        merged[name] = value
    return None


def merge_variants(config: Mapping[str, Any], studies: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One variant registry for the whole DAG (a name means one thing everywhere)."""
    merged = dict(config.get("variants") or {})
    for study in studies:
        if clash := _merge_agreeing(merged, study.get("variants") or {}):
            name, earlier, spec = clash
            raise GridError(
                f"{study['_source']}: variant {name!r} differs from its definition "
                f"elsewhere ({earlier} vs {spec})"
            )
    return merged


def merge_datasets(grids: list[Grid]) -> dict[str, dict[str, Any]]:
    """Data set id -> reader settings shared by all grids (classes left out).

    Raises
    ------
    GridError
        If two grids read one data set with different options or subsampling.
    """
    settings: dict[str, dict[str, Any]] = {}
    for grid in grids:
        readings = {
            name: {k: v for k, v in spec.items() if k != "classes"}
            for name, spec in grid.datasets.items()
        }
        if clash := _merge_agreeing(settings, readings):
            name, earlier, reading = clash
            raise GridError(
                f"study {grid.name!r} reads data set {name!r} with {reading}, another grid "
                f"with {earlier}: one {name}/dataset.npz cannot be both"
            )
    return settings
