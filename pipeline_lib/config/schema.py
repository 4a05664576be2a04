"""The config schema as validation uses it: loaded with its method and detector enums
filled from the tables (the built-in rows and those of the config's plugins), its defaults
filled in, and command-line strings typed as it wants them."""

from __future__ import annotations

import copy
import functools
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from pipeline_lib.registry import DETECTOR_DEFAULTS, METHOD_SPECS, MethodSpec

__all__ = ["METHOD_ENUMS", "fill_defaults", "load_schema", "typed_command_line_values"]


@functools.cache
def _read_schema(schema_path: str) -> dict[str, Any]:
    """The schema file, read once per process: every study grid is validated against it too
    (a paper config parsed it eleven times, a second of every Snakemake start). Read-only."""
    return yaml.safe_load(Path(schema_path).read_text())


#: ``x-methods`` of a schema node -> the ids of the method table its ``enum`` lists.
METHOD_ENUMS: dict[str, Callable[[MethodSpec], bool]] = {
    "all": lambda spec: True,
    "trained": lambda spec: spec.trained,
    "networks": lambda spec: spec.network,
}


def load_schema(schema_path: str | os.PathLike) -> dict[str, Any]:
    """The config schema with its method and detector enums filled from the tables.

    The schema file names no method: a node with ``x-methods: trained`` (``all``,
    ``networks``) gets the ``enum`` of those ids of :data:`pipeline_lib.registry.
    METHOD_SPECS` when the schema is loaded, so every method of the table validates, its
    built-in rows and any other; ``x-detectors: all`` gets the ids of
    :data:`pipeline_lib.registry.DETECTOR_DEFAULTS`. Read-only (shared by every caller
    until the tables change).
    """
    table = tuple((spec.id, spec.trained, spec.network) for spec in METHOD_SPECS.values())
    return _schema_with_methods(str(schema_path), table, tuple(DETECTOR_DEFAULTS))


@functools.cache
def _schema_with_methods(
    schema_path: str, table: tuple[tuple[str, bool, bool], ...], detectors: tuple[str, ...]
) -> dict:
    """:func:`load_schema` for one state of the tables (``table``, ``detectors`` key the
    cache)."""
    schema = copy.deepcopy(_read_schema(schema_path))
    _fill_enums(schema, detectors)
    return schema


def _fill_enums(node: Any, detectors: tuple[str, ...]) -> None:
    """``x-methods`` nodes get their method ids, ``x-detectors`` nodes the detector ids."""
    if isinstance(node, dict):
        if "x-methods" in node:
            keep = METHOD_ENUMS[node["x-methods"]]
            node["enum"] = [spec.id for spec in METHOD_SPECS.values() if keep(spec)]
        if "x-detectors" in node:
            node["enum"] = list(detectors)
        for value in node.values():
            _fill_enums(value, detectors)
    elif isinstance(node, list):
        for value in node:
            _fill_enums(value, detectors)


def fill_defaults(instance: Any, schema: Mapping[str, Any]) -> None:
    """Write the schema's defaults into ``instance`` (in place) where a key is absent."""
    if not isinstance(instance, dict):
        return
    for name, sub in schema.get("properties", {}).items():
        if name not in instance and "default" in sub:
            instance[name] = copy.deepcopy(sub["default"])
        if name in instance:
            fill_defaults(instance[name], sub)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for name, value in instance.items():
            if name not in schema.get("properties", {}):
                fill_defaults(value, extra)


_INTEGER = re.compile(r"[+-]?\d+")
_NULL_SPELLINGS = ("null", "~", "none")


def typed_command_line_values(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` with strings turned into the integer, number or boolean the schema wants.

    Why: Snakemake reads a nested ``--config`` value as YAML with every scalar a string
    (``--config "train={fuse: 10}"`` gives ``{'train': {'fuse': '10'}}``; a profile's
    ``config:`` entries too), so a nested override would otherwise always fail the schema.
    Only where the schema does not also allow a string, and only a string that spells such
    a value; anything else is left for the schema to reject with its usual message.
    """
    if isinstance(value, Mapping):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        typed = {}
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, Mapping) else {})
            typed[key] = typed_command_line_values(item, sub)
        return typed
    if isinstance(value, list):
        items = schema.get("items")
        return [
            typed_command_line_values(item, items if isinstance(items, Mapping) else {})
            for item in value
        ]
    if not isinstance(value, str):
        return value
    spelled = value.strip().lower()
    choices = schema.get("enum")
    if choices is not None and value not in choices:
        for choice in choices:  # e.g. train.amp's null, given as the string 'null'
            spellings = _NULL_SPELLINGS if choice is None else (str(choice).lower(),)
            if not isinstance(choice, str) and spelled in spellings:
                return choice
        return value
    types = schema.get("type") or []
    types = [types] if isinstance(types, str) else list(types)
    if "string" in types or not types:
        return value
    if "integer" in types and _INTEGER.fullmatch(spelled):
        return int(spelled)
    if "number" in types:
        try:
            return float(spelled)
        except ValueError:
            pass
    if "boolean" in types and spelled in ("true", "false"):
        return spelled == "true"
    if "null" in types and spelled in _NULL_SPELLINGS:
        return None
    return value
