"""Config checks of the detector parameters and of the optional sections (mvtec, explain, deploy).

Each check names the config key, the bad value and the allowed ones; the mvtec and explain
checks also fill the defaults that depend on the rest of the config.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from pipeline_lib.config.errors import ConfigError
from pipeline_lib.registry import (
    DETECTOR_DEFAULTS,
    METHODS,
    plugin_of,
    unknown_detector_parameters,
)

__all__ = [
    "MVTEC_DEPLOY_DATASET",
    "check_deploy",
    "check_detector_parameters",
    "check_explain",
    "check_mvtec",
]


def check_detector_parameters(detectors: Mapping[str, Mapping[str, Any]], where: str) -> None:
    """Every detector parameter is one its class accepts (:data:`DETECTOR_DEFAULTS`).

    The schema types the parameters only as a mapping; checked here, a misspelt name fails
    before any job instead of in the detection job, after the representation was trained.
    """
    for name, params in detectors.items():
        unknown = unknown_detector_parameters(name, params)
        if unknown:
            allowed = list(DETECTOR_DEFAULTS[name])
            close = difflib.get_close_matches(unknown[0], allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(
                f"config key '{where}.{name}': unknown parameter {unknown[0]!r}{hint}; "
                f"allowed: {', '.join(allowed)}"
            )


def check_mvtec(config: dict[str, Any]) -> None:
    """Fill ``mvtec.methods`` and check that the patch grid tiles the images exactly."""
    mvtec = config["mvtec"]
    if mvtec["methods"] is None:
        # Study variants (pipeline_lib.config.grids) are not run on MVTec: only plain method ids.
        mvtec["methods"] = [m for m in config["methods"] if m in METHODS]
        if not mvtec["methods"]:
            raise ConfigError(
                "config key 'mvtec.methods' must be set: the top-level methods hold no plain "
                f"method id ({', '.join(METHODS)})"
            )
    mvtec["detectors"] = {name: dict(opts or {}) for name, opts in mvtec["detectors"].items()}
    check_detector_parameters(mvtec["detectors"], "mvtec.detectors")
    size, patch, stride = mvtec["image_size"], mvtec["patches"]["size"], mvtec["patches"]["stride"]
    if patch > size:
        raise ConfigError(
            f"config key 'mvtec.patches.size': {patch} is larger than mvtec.image_size {size}"
        )
    if (size - patch) % stride:
        raise ConfigError(
            f"config key 'mvtec.patches.stride': {stride} does not tile mvtec.image_size - "
            f"mvtec.patches.size = {size - patch} exactly (the score map must up-sample back "
            "to the image size)"
        )


def check_explain(config: dict[str, Any]) -> None:
    """The explained data set and methods must be part of the sweep."""
    explain = config["explain"]
    if explain["dataset"] not in config["datasets"]:
        raise ConfigError(
            f"config key 'explain.dataset': {explain['dataset']!r} is not one of the sweep's "
            f"datasets ({', '.join(config['datasets']) or 'none'})"
        )
    if explain["methods"] is None:
        explain["methods"] = [m for m in config["methods"] if m in METHODS and m != "raw"]
    missing = [m for m in explain["methods"] if m not in config["methods"]]
    if missing or not explain["methods"]:
        raise ConfigError(
            f"config key 'explain.methods': {missing or 'none left'} must be methods of the "
            f"sweep other than raw (methods: {', '.join(config['methods'])})"
        )


#: ``deploy.dataset`` of an MVTec category cell (``deploy.inlier`` is then the category).
MVTEC_DEPLOY_DATASET = "mvtec"


def check_deploy(config: dict[str, Any]) -> None:
    """The deployed cell must be one the sweep computes (or ``best`` must choose it)."""
    deploy = config["deploy"]
    where = "config key 'deploy"
    mvtec = deploy["dataset"] == MVTEC_DEPLOY_DATASET
    if mvtec and "mvtec" not in config:
        raise ConfigError(
            f"{where}.dataset': 'mvtec' packages an MVTec category cell, but the config has no "
            "'mvtec' section to compute it"
        )
    if not mvtec and deploy["dataset"] not in config.get("datasets", {}):
        known = [
            *config.get("datasets", {}),
            *([MVTEC_DEPLOY_DATASET] if "mvtec" in config else []),
        ]
        raise ConfigError(
            f"{where}.dataset': {deploy['dataset']!r} is not one of the sweep's datasets "
            f"({', '.join(known) or 'none'})"
        )
    if deploy["seed"] is not None and deploy["seed"] not in config["seeds"]:
        raise ConfigError(f"{where}.seed': {deploy['seed']} is not a seed of the sweep")
    if mvtec and isinstance(config["mvtec"]["categories"], list) and deploy["inlier"] is not None:
        # With categories "all" the folders are only known to the workflow (deploy_common.smk).
        named = list(config["mvtec"]["categories"])
        if str(deploy["inlier"]) not in named:
            raise ConfigError(
                f"{where}.inlier': {deploy['inlier']!r} is not one of mvtec.categories "
                f"({', '.join(named)})"
            )
    if deploy["best"]:
        given = [key for key in ("method", "detector") if deploy[key] is not None]
        if given:
            raise ConfigError(f"{where}': best chooses {' and '.join(given)}; leave it null")
        return
    sweep = config["mvtec"] if mvtec else config
    label = "the MVTec sweep's (mvtec.{key}s)" if mvtec else "the sweep's {key}s"
    for key, allowed in (("method", sweep["methods"]), ("detector", sweep["detectors"])):
        if deploy[key] not in allowed:
            raise ConfigError(
                f"{where}.{key}': {deploy[key]!r} must be one of "
                f"{label.format(key=key)} ({', '.join(allowed)}), or set deploy.best: true"
            )
    plugin = plugin_of(deploy["detector"])
    if plugin is not None:
        raise ConfigError(
            f"{where}.detector': {deploy['detector']!r} comes from the plugin package "
            f"{plugin.provenance} and cannot be packaged: a deploy package holds data only "
            "(droc score imports no code a package names) and this detector scores with its "
            "package's code; deploy a built-in detector (a plugin's method packages as data)"
        )
