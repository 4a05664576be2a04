"""Config validation: fail before any job starts, naming the key and the allowed values.

:func:`validate_config` runs the schema (loaded by :mod:`pipeline_lib.config.schema`, its
method enums filled from the method table), then the checks that need more than the schema:
the recipe and grids here, the data sets' classes and splits
(:mod:`pipeline_lib.config.dataset_checks`) and the detector parameters and optional sections
(:mod:`pipeline_lib.config.section_checks`).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from pipeline_lib.config.dataset_checks import check_dataset_settings, resolve_classes
from pipeline_lib.config.errors import ConfigError
from pipeline_lib.config.grids import (
    Grid,
    GridError,
    base_method,
    check_methods,
    load_study,
    merge_datasets,
    merge_variants,
    study_grids,
)
from pipeline_lib.config.schema import fill_defaults, load_schema, typed_command_line_values
from pipeline_lib.config.section_checks import (
    MVTEC_DEPLOY_DATASET,
    check_deploy,
    check_detector_parameters,
    check_explain,
    check_mvtec,
)
from pipeline_lib.data import DataError, dataset_class_names
from pipeline_lib.registry import (
    CAPTURED_STEP_MODES,
    METHOD_SPECS,
    PAPER_RECIPE,
    PLUGINS_ENV,
    RENAMED_TRAIN_VALUES,
    TRAIN_EXECUTION_SETTINGS,
    PluginError,
    activate_plugins,
    detector_settings,
    fuse_setting,
    headless_error,
    is_trained,
    method_spec,
    plugin_hint,
    plugin_of,
    recipe_deviations,
)

__all__ = [
    "MVTEC_DEPLOY_DATASET",
    "ConfigError",
    "check_dataset_settings",
    "export_data_settings",
    "grid_classes",
    "load_schema",
    "merge_detectors",
    "resolve_classes",
    "sweep_id",
    "validate_config",
]

# Kept here as text so validating a config never imports torch
# (pipeline_lib.models.representation.IMAGENET_WEIGHTS_URL / IMAGENET_WEIGHTS_ENV; a test checks).
_IMAGENET_WEIGHTS_URL = "https://download.pytorch.org/models/resnet50-0676ba61.pth"
_IMAGENET_WEIGHTS_ENV = "DROC_IMAGENET_WEIGHTS"


def _key_path(path: Any) -> str:
    parts = ""
    for item in path:
        parts += f"[{item}]" if isinstance(item, int) else (f".{item}" if parts else str(item))
    return parts or "<top level>"


def _explain(error: jsonschema.ValidationError) -> str:
    key = _key_path(error.absolute_path)
    validator, expected = error.validator, error.validator_value
    if validator == "enum":
        allowed = ", ".join(map(str, expected))
        return (
            f"config key '{key}': {error.instance!r} is not allowed; allowed values: {allowed}"
            + plugin_hint(error.instance)
        )
    if validator == "propertyNames":
        allowed = ", ".join(map(str, expected.get("enum", [])))
        bad = error.instance if not isinstance(error.instance, dict) else error.message
        return f"config key '{key}': unknown name {bad!r}; allowed: {allowed}" + plugin_hint(bad)
    if validator == "additionalProperties":
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        return f"config key '{key}': {error.message}; allowed keys: {allowed}"
    if validator == "oneOf":
        hint = error.schema.get("description", "").rstrip(".")
        return f"config key '{key}': {error.instance!r} is not allowed; expected {hint}"
    if validator in {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}:
        low = error.schema.get("minimum", error.schema.get("exclusiveMinimum"))
        high = error.schema.get("maximum", error.schema.get("exclusiveMaximum"))
        bounds = (
            ("[" if "minimum" in error.schema else "(")
            + f"{'-inf' if low is None else low}, {'inf' if high is None else high}"
            + ("]" if "maximum" in error.schema else ")")
        )
        return f"config key '{key}': {error.instance!r} is outside the allowed range {bounds}"
    return f"config key '{key}': {error.message}"


def validate_config(config: Mapping[str, Any], schema_path: str | os.PathLike) -> dict[str, Any]:
    """Validate ``config`` against the JSON schema and return a copy with defaults filled.

    The packages its ``plugins`` names are activated first (and no other plugin's rows
    stay in the tables), so their methods and detectors validate like built-in ones
    (:func:`pipeline_lib.registry.activate_plugins`).

    Every problem is reported at once (a config with three mistakes takes one run to fix,
    not three): first all the schema's, else all those of the checks beyond the schema that
    can run side by side (a check that needs the study grids runs only when they load).

    Raises
    ------
    ConfigError
        Naming each key at fault and its allowed values, one line per problem.
    """
    plugins = config.get("plugins") or []
    if isinstance(plugins, list) and all(isinstance(name, str) for name in plugins):
        try:
            activate_plugins(plugins)
        except PluginError as error:
            raise ConfigError(str(error)) from error
    return _validate(config, schema_path)


def _validate(config: Mapping[str, Any], schema_path: str | os.PathLike) -> dict[str, Any]:
    """:func:`validate_config` under the plugins active now (a study's config names none)."""
    schema = load_schema(schema_path)
    config = typed_command_line_values(config, schema)
    problems = _ProblemList()
    renamed = _renamed_values(config)
    problems.extend(message for _, message in renamed)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    for error in errors:
        # A renamed value already has its own message; the bare enum error would repeat it.
        if _key_path(error.absolute_path) not in {key for key, _ in renamed}:
            problems.append(_schema_problem(error))
    problems.raise_if_any()
    filled = copy.deepcopy(dict(config))
    fill_defaults(filled, schema)
    with problems.collect():
        for options in filled["detectors"].values() if "detectors" in filled else []:
            if options is not None and not isinstance(options, dict):
                raise ConfigError("detector parameters must be a mapping")
        filled["detectors"] = {name: dict(opts or {}) for name, opts in filled["detectors"].items()}
        check_detector_parameters(filled["detectors"], "detectors")
    # 0 and 0.0 are the same ratio: one spelling keeps sweep ids and paths stable.
    splits = filled["splits"]
    splits["contamination"] = [float(ratio) for ratio in splits["contamination"]]
    for check in (_check_imagenet_weights, _check_fuse, _check_step_mode, _check_eval_every):
        with problems.collect():
            check(filled)
    with problems.collect():
        _check_grids(filled, schema_path)
        # These read the variants and studies the grids merged in.
        for check in (_check_head_depth, merge_detectors, _check_recipe, _check_execution):
            with problems.collect():
                check(filled)
    for name, settings in filled.get("datasets", {}).items():
        with problems.collect():
            check_dataset_settings(name, settings, filled["splits"])
    for section, check in (("mvtec", check_mvtec), ("explain", check_explain)):
        if section in filled:
            with problems.collect():
                check(filled)
    if "deploy" in filled:
        with problems.collect():
            check_deploy(filled)
    problems.raise_if_any()
    return filled


def grid_classes(grids: Sequence[Grid], root: str | None) -> dict[str, dict[str, list[str]]]:
    """Per grid (the main table, each study): data set -> its inlier classes.

    ``"all"`` expanded and requested names checked against each data set's classes (an
    image folder's are its subfolders, so this reads the folder), every unknown class of
    every data set reported at once.

    Raises
    ------
    ConfigError
        Naming each ``datasets.<id>.classes`` at fault, or a data set that cannot be read.
    """
    problems = _ProblemList()
    classes: dict[str, dict[str, list[str]]] = {}
    for grid in grids:
        classes[grid.name] = {}
        for name, settings in grid.datasets.items():
            with problems.collect():
                available = dataset_class_names(name, root=root, **settings.get("options", {}))
                requested = settings.get("classes", "all")
                classes[grid.name][name] = resolve_classes(name, requested, available)
    problems.raise_if_any()
    return classes


class _ProblemList(list):
    """The problems found so far; raised together as one :class:`ConfigError`."""

    @contextlib.contextmanager
    def collect(self) -> Iterator[None]:
        """Record a check's :class:`ConfigError` (or unreadable data) and go on."""
        try:
            yield
        except (ConfigError, DataError) as error:
            self.append(str(error))

    def raise_if_any(self) -> None:
        problems = list(dict.fromkeys(self))  # one line per problem, first seen first
        if len(problems) == 1:
            raise ConfigError(problems[0])
        if problems:
            lines = "\n".join(f"  - {problem}" for problem in problems)
            raise ConfigError(f"{len(problems)} problems in the config:\n{lines}")


def _schema_problem(error: jsonschema.ValidationError) -> str:
    """One schema violation, explained: its key, the value and what is allowed."""
    if error.validator == "anyOf" and not list(error.absolute_path):
        return (
            "config needs 'datasets' (the image benchmarks), 'mvtec' (MVTec AD defect "
            "detection) or both"
        )
    # The innermost error of a propertyNames failure carries the bad name.
    inner = error
    if error.context:
        inner = min(error.context, key=lambda e: len(list(e.absolute_path)))
    return _explain(error if inner.validator == "const" else inner)


def _renamed_values(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, message) of each former value of a ``train`` switch, naming its new name.

    E.g. ``loss_form: paper`` (same-view negatives) is now ``same_view``, a variant; the
    recipe's loss is ``released``, the default. Without this the schema would answer with a
    bare enum error.
    """
    sections = [("train", config.get("train"))]
    variants = config.get("variants")
    if isinstance(variants, Mapping):
        sections += [
            (f"variants.{name}.train", spec.get("train"))
            for name, spec in variants.items()
            if isinstance(spec, Mapping)
        ]
    found = []
    for where, train in sections:
        if not isinstance(train, Mapping):
            continue
        for key, renamed in RENAMED_TRAIN_VALUES.items():
            value = train.get(key)
            if isinstance(value, str) and value in renamed:
                new = renamed[value]
                found.append(
                    (
                        f"{where}.{key}",
                        f"config key '{where}.{key}': {value!r} was renamed {new!r} (the same "
                        f"setting). For the paper's recipe drop the key (default "
                        f"{PAPER_RECIPE[key]!r}); to keep the former behaviour write {key}: "
                        f"{new} in a named variant, e.g. variants: {{contrastive_{new}: "
                        f"{{method: contrastive, train: {{{key}: {new}}}}}}} (docs/protocol.md)",
                    )
                )
    return found


def _check_fuse(config: Mapping[str, Any]) -> None:
    """``train.fuse`` > 1 trains with one optimiser step for K models: no float16 scaling."""
    train = config.get("train") or {}
    if fuse_setting(train) > 1 and train.get("amp") == "float16":
        raise ConfigError(
            f"config key 'train.fuse': {train['fuse']} needs train.amp bfloat16 or null, not "
            "float16 (one loss scaler would skip every fused model's step when one overflows)"
        )


def _check_step_mode(config: Mapping[str, Any]) -> None:
    """``train.step_mode`` graph or compiled cannot run with float16 amp (its GradScaler
    syncs the host)."""
    train = config.get("train") or {}
    mode = train.get("step_mode")
    if mode in CAPTURED_STEP_MODES and train.get("amp") == "float16":
        raise ConfigError(
            f"config key 'train.step_mode': {mode} needs train.amp bfloat16 or null, not "
            "float16 (the GradScaler reads its overflow flag on the host every step); use auto "
            "or eager"
        )


def _check_execution(config: Mapping[str, Any]) -> None:
    """A method that cannot train fused or captured (:attr:`MethodSpec.fusable`,
    :attr:`MethodSpec.capturable`) refuses ``train.fuse`` > 1 or a captured step mode."""
    train = config.get("train") or {}
    fused, mode = fuse_setting(train) > 1, train.get("step_mode")
    variants = config.get("variants") or {}
    named = [
        *config["methods"],
        *(m for study in config.get("studies", []) for m in study["methods"]),
    ]
    for name in dict.fromkeys(named):
        spec = METHOD_SPECS[base_method(name, variants)]
        if fused and not spec.fusable:
            raise ConfigError(
                f"config key 'train.fuse': {train['fuse']} but {name} ({spec.id}) cannot train "
                "fused; set train.fuse to 1 or drop the method"
            )
        if mode in CAPTURED_STEP_MODES and not spec.capturable:
            raise ConfigError(
                f"config key 'train.step_mode': {mode} but the step of {name} ({spec.id}) "
                "cannot be captured as a CUDA graph; use auto or eager"
            )


def _check_eval_every(config: Mapping[str, Any]) -> None:
    """``train.eval_every`` needs one model per job: the fused trainer has no evaluation hook."""
    train = config.get("train") or {}
    if (train.get("eval_every") or 0) > 0 and fuse_setting(train) > 1:
        raise ConfigError(
            f"config key 'train.eval_every': {train['eval_every']} cannot run with train.fuse "
            f"{train['fuse']} (a fused job trains K models in one loop with no per-epoch "
            "evaluation); drop train.fuse (or set it to 1) for the runs whose AUC curves you "
            "want, or drop eval_every"
        )


def _check_grids(config: dict[str, Any], schema_path: str | os.PathLike) -> None:
    """Methods name methods or variants; included studies are loaded and validated too."""
    search = (Path.cwd(), Path(schema_path).resolve().parents[2])
    try:
        check_methods(config)
        config["studies"] = [
            load_study(entry, search=search, validate=lambda raw: _validate(raw, schema_path))
            for entry in config.get("studies", [])
        ]
        config["variants"] = merge_variants(config, config["studies"])
        merge_datasets(study_grids(config, config["studies"]))
    except GridError as error:
        raise ConfigError(str(error)) from error


def _check_head_depth(config: Mapping[str, Any]) -> None:
    """A variant may not give a head depth to a method without an MLP head.

    The top-level ``train.head_depth`` applies to the methods with an MLP head only (RotNet
    and the denoising autoencoder ignore it by definition, see
    :func:`pipeline_lib.registry.method_training`); a variant names one method, so a head
    depth there that the method would ignore is a mistake in the config.
    """
    for name, variant in (config.get("variants") or {}).items():
        depth = (variant.get("train") or {}).get("head_depth")
        if not method_spec(variant["method"]).has_mlp_head and depth is not None:
            raise ConfigError(
                f"config key 'variants.{name}.train.head_depth': "
                f"{headless_error(variant['method'], depth)}"
            )


def merge_detectors(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Detector id -> parameters over the config's ``detectors`` and its studies' ones.

    The result path of a detector names its id, not its parameters, so one sweep runs each
    detector with one parameter set: the first source that lists a detector gives its
    parameters (the top level, then the studies in order), and a later source may only
    repeat them (compared with the registry defaults filled, so ``{}`` equals
    ``{nu: 0.5}``).

    Raises
    ------
    ConfigError
        Naming the detector and both sources when two of them give it different parameters.
    """
    sources = [("the top-level detectors", config.get("detectors") or {})]
    sources += [
        (f"study {study.get('_source', '?')!r}", study.get("detectors") or {})
        for study in config.get("studies", [])
    ]
    merged: dict[str, dict[str, Any]] = {}
    first: dict[str, str] = {}
    for where, detectors in sources:
        for name, params in detectors.items():
            params = dict(params or {})
            if name not in merged:
                merged[name], first[name] = params, where
            elif detector_settings(name, params) != detector_settings(name, merged[name]):
                raise ConfigError(
                    f"config key 'detectors.{name}': {where} sets {params} but "
                    f"{first[name]} sets {merged[name]}; a sweep runs a detector with one "
                    "parameter set (its results share one path), so make them equal or "
                    f"drop {name} from one of them"
                )
    return merged


#: Suggested variant-name suffixes for the recipe switches (e.g. ``denoising_patchnorm``).
_VARIANT_SUFFIX = {
    "exclude_bn_from_decay": "bn_no_decay",
    "denoising_target": "patchnorm",
    "da_batching": "per_image",
    "view_jitter": "tv_jitter",
    "view_blur": "blur",
    "view_flip": "flip",
    "loss_form": "loss",
    "epoch_order": "permutation",
    "init": "torch_init",
    "momentum_form": "torch_momentum",
    "distributions": "set",
    "denoising_views": "no_views",
    "denoising_decoder": "spatial",
    "noise_std": "noise",
}


def _check_recipe(config: dict[str, Any]) -> None:
    """Rows named after a paper method run the paper's recipe (docs/protocol.md).

    The top-level ``train`` settings apply to every row, so a switch that leaves the
    paper's recipe there would run a different method under the paper's name; it belongs
    in a named variant.
    """
    named = list(config["methods"])
    for study in config.get("studies", []):
        named += list(study.get("methods", []))
    named += list((config.get("mvtec") or {}).get("methods") or [])
    for method in dict.fromkeys(named):
        # A plugin's row is never a paper method: its recipe is its own.
        if not is_trained(method) or plugin_of(method) is not None:
            continue
        deviations = recipe_deviations(method, config["train"])
        if deviations:
            key, value = next(iter(deviations.items()))
            spelled = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...")
            name = f"{method}_{_VARIANT_SUFFIX.get(key, key)}"
            raise ConfigError(
                f"train.{key}: {spelled.strip()} is not the paper's recipe "
                f"(paper: {PAPER_RECIPE[key]!r}), so the row {method!r} would not run the "
                f"paper's method. Move it into a named variant and list that name in "
                f"methods, e.g. variants: {{{name}: {{method: {method}, train: {{{key}: "
                f"{spelled.strip()}}}}}}} (docs/protocol.md)"
            )


def _check_imagenet_weights(config: Mapping[str, Any]) -> None:
    """The ResNet-50 (ImageNet) row needs its local weights file: fail before any job."""
    mvtec_methods = (config.get("mvtec") or {}).get("methods") or []
    if "resnet50_imagenet" not in [*config.get("methods", []), *mvtec_methods]:
        return
    weights = config.get("embed", {}).get("imagenet_weights")
    if weights is None:
        raise ConfigError(
            "config key 'embed.imagenet_weights' must be set when methods include "
            "resnet50_imagenet: the path of a local copy of torchvision's ResNet-50 ImageNet "
            f"weights (ResNet50_Weights.IMAGENET1K_V1, {_IMAGENET_WEIGHTS_URL})"
        )
    if not Path(weights).is_file():
        raise ConfigError(
            f"config key 'embed.imagenet_weights': no such file {str(Path(weights).resolve())!r}"
            f"; download torchvision's ResNet-50 ImageNet weights from {_IMAGENET_WEIGHTS_URL}"
        )


def sweep_id(config: Mapping[str, Any]) -> str:
    """A short stable hash of the science in ``config`` (not of paths or tracking settings).

    The ImageNet weights path (``embed.imagenet_weights``) is a file location like the data
    root, so it is left out too.
    """
    # deploy only packages finished results: choosing another cell changes no result.
    science = {
        key: value for key, value in config.items() if key not in {"data", "tracking", "deploy"}
    }
    # train.fuse / step_mode decide how training executes, not what the models learn.
    if isinstance(science.get("train"), Mapping):
        science["train"] = {
            k: v for k, v in science["train"].items() if k not in TRAIN_EXECUTION_SETTINGS
        }
    if isinstance(science.get("embed"), Mapping):
        science["embed"] = {k: v for k, v in science["embed"].items() if k != "imagenet_weights"}
    digest = hashlib.sha256(json.dumps(science, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:12]


def export_data_settings(
    *,
    root: str | None,
    download: bool,
    imagenet_weights: str | None = None,
    plugins: Sequence[str] = (),
) -> None:
    """Hand the data root, download flag and ImageNet weights path to jobs via the environment.

    They are environment-like: as rule params, moving the data (or the weights file) would
    re-run every job. Environment variables also reach jobs on cluster nodes. Paths are
    made absolute, since jobs may run in another working directory. The weights path
    becomes ``$DROC_IMAGENET_WEIGHTS``, read back with
    :func:`pipeline_lib.models.representation.imagenet_weights_from_env`. The config's
    ``plugins`` become ``$DROC_PLUGINS``, which a job activates when it imports the registry
    (what is installed is the environment's; the package versions are in the job params).
    """
    if plugins:
        os.environ[PLUGINS_ENV] = ",".join(plugins)
    else:
        os.environ.pop(PLUGINS_ENV, None)
    if root:
        os.environ["DROC_DATA_ROOT"] = str(Path(root).resolve())
    if download:
        os.environ["DROC_DOWNLOAD"] = "1"
    if imagenet_weights:
        os.environ[_IMAGENET_WEIGHTS_ENV] = str(Path(imagenet_weights).resolve())
