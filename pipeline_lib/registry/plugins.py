"""Methods and detectors from installed packages, joined to the tables only when a config
names their package (``plugins: [droc_plugin_example]``).

A package declares its rows as entry points: ``droc_bench.methods`` (each resolving to a
:class:`~pipeline_lib.registry.methods.MethodSpec`) and ``droc_bench.detectors`` (each a
:class:`DetectorSpec`). Both objects are torch-free and name their task or estimator class
by a ``"module:attribute"`` path that only a job imports, so the Snakefile can read them at
parse time. Until :func:`activate_plugins` names a package, its rows are in no table: an
installed package a config does not name changes no enum, plan or table (docs/extending.md).

Jobs learn the run's plugins from ``$DROC_PLUGINS`` (:data:`PLUGINS_ENV`), set by the
Snakefile like the data root, and activate them when the registry is imported.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pipeline_lib.registry.detectors import DETECTOR_DEFAULTS, ROTATION_DETECTORS
from pipeline_lib.registry.methods import BUILTIN_METHODS, METHOD_SPECS, MethodSpec

__all__ = [
    "DETECTOR_GROUP",
    "METHOD_GROUP",
    "PLUGINS_ENV",
    "DetectorSpec",
    "Plugin",
    "PluginError",
    "activate_plugins",
    "active_plugins",
    "detector_job_params",
    "detector_spec",
    "installed_plugins",
    "plugin_hint",
    "plugin_note",
    "plugin_of",
    "plugins_from_environment",
]

#: Entry-point group of the methods a package adds (each a ``MethodSpec``).
METHOD_GROUP = "droc_bench.methods"
#: Entry-point group of the detectors a package adds (each a :class:`DetectorSpec`).
DETECTOR_GROUP = "droc_bench.detectors"
#: The environment variable that carries the run's plugin names to its jobs.
PLUGINS_ENV = "DROC_PLUGINS"

#: Row ids are wildcard-safe and path-safe, as the variant names are.
_ROW_ID = re.compile(r"^[a-z][a-z0-9_]*$")
#: Built-in ids no plugin may take: the methods, the detectors, the rotation scores.
_BUILTIN_METHOD_IDS = frozenset(spec.id for spec in BUILTIN_METHODS)
_BUILTIN_DETECTOR_IDS = frozenset(DETECTOR_DEFAULTS) | frozenset(ROTATION_DETECTORS)


class PluginError(ValueError):
    """A plugin that is not installed, does not load, or collides with another row."""


@dataclasses.dataclass(frozen=True)
class DetectorSpec:
    """A detector a package adds, without importing it.

    Parameters
    ----------
    id : str
        The detector id, as configs, result paths and tables name it.
    estimator : str
        ``"module:Class"`` of a scikit-learn style estimator (keyword-only ``__init__``,
        ``fit(X)`` returning self, ``score_samples(X)`` higher = more normal), imported only
        inside a scoring job.
    params : mapping of str to object, default={}
        Every keyword parameter the class accepts, with its default: the config check
        rejects any other name before a job runs, as for the built-in detectors.
    """

    id: str
    estimator: str
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        module, _, attribute = self.estimator.partition(":")
        if not module or not attribute:
            raise ValueError(
                f"detector {self.id!r}: estimator {self.estimator!r} must read 'module:Class'"
            )


@dataclasses.dataclass(frozen=True)
class Plugin:
    """One installed package's rows: what ``plugins: [name]`` adds to a run."""

    #: The name a config gives (the distribution's name, lower case, ``-`` and ``.`` as ``_``).
    name: str
    #: The distribution's own name and version (job params and checkpoints record them).
    package: str
    version: str
    methods: tuple[MethodSpec, ...]
    detectors: tuple[DetectorSpec, ...]

    @property
    def provenance(self) -> str:
        """``package==version``: what a job records of the code that made its result."""
        return f"{self.package}=={self.version}"

    @property
    def ids(self) -> tuple[str, ...]:
        """The row ids it adds, methods first."""
        return tuple(spec.id for spec in (*self.methods, *self.detectors))


def _config_name(distribution: str) -> str:
    return re.sub(r"[-_.]+", "_", distribution).lower()


def installed_plugins() -> dict[str, list[importlib.metadata.EntryPoint]]:
    """Config name -> the entry points of each installed package that declares some."""
    found: dict[str, list[importlib.metadata.EntryPoint]] = {}
    for group in (METHOD_GROUP, DETECTOR_GROUP):
        for entry in importlib.metadata.entry_points(group=group):
            if entry.dist is None:
                continue
            found.setdefault(_config_name(entry.dist.name), []).append(entry)
    return found


def _load_entry(entry: importlib.metadata.EntryPoint, package: str) -> Any:
    try:
        row = entry.load()
    except Exception as error:  # a broken package: say which entry point and why
        raise PluginError(
            f"plugin package {package!r}: entry point {entry.group}:{entry.name} "
            f"({entry.value}) does not load: {error}"
        ) from error
    want = MethodSpec if entry.group == METHOD_GROUP else DetectorSpec
    if not isinstance(row, want):
        raise PluginError(
            f"plugin package {package!r}: entry point {entry.group}:{entry.name} is a "
            f"{type(row).__name__}, not a {want.__name__}"
        )
    if row.id != entry.name:
        raise PluginError(
            f"plugin package {package!r}: entry point {entry.name!r} names the row {row.id!r}; "
            "the two must be equal"
        )
    if not _ROW_ID.fullmatch(row.id):
        raise PluginError(
            f"plugin package {package!r}: id {row.id!r} must match {_ROW_ID.pattern} (it is a "
            "path and wildcard value)"
        )
    return row


def load_plugin(name: str) -> Plugin:
    """The rows of the installed package ``name`` (a config's ``plugins`` entry).

    Raises
    ------
    PluginError
        If no installed package of that name declares ``droc_bench`` entry points, or one
        of them does not load, is not a spec, or takes a built-in id.
    """
    installed = installed_plugins()
    entries = installed.get(_config_name(name))
    if not entries:
        known = ", ".join(sorted(installed)) or "none"
        raise PluginError(
            f"config key 'plugins': {name!r} is not an installed plugin package (installed "
            f"plugin packages: {known}); install it into this environment (pip install "
            f"<its folder or name>) and into the jobs' environment (docs/extending.md), or "
            "drop it from plugins"
        )
    distribution = entries[0].dist
    package, version = distribution.name, distribution.version
    rows = [_load_entry(entry, package) for entry in entries]
    methods = tuple(row for row in rows if isinstance(row, MethodSpec))
    detectors = tuple(row for row in rows if isinstance(row, DetectorSpec))
    for spec in methods:
        if spec.id in _BUILTIN_METHOD_IDS or spec.id in _BUILTIN_DETECTOR_IDS:
            raise PluginError(
                f"plugin package {package!r}: method {spec.id!r} takes a built-in id; "
                "rename it (plugin rows are never named after a built-in or paper method)"
            )
    for spec in detectors:
        if spec.id in _BUILTIN_DETECTOR_IDS or spec.id in _BUILTIN_METHOD_IDS:
            raise PluginError(
                f"plugin package {package!r}: detector {spec.id!r} takes a built-in id; rename it"
            )
    return Plugin(_config_name(name), package, version, methods, detectors)


#: Config name -> the plugin whose rows are in the tables now.
_ACTIVE: dict[str, Plugin] = {}
#: Plugin detector id -> its spec (the tables' detector defaults hold its parameters).
_DETECTORS: dict[str, DetectorSpec] = {}


def activate_plugins(names: Iterable[str]) -> tuple[Plugin, ...]:
    """Put exactly the rows of the packages ``names`` into the tables (and no other
    plugin's), so a config that names no plugin sees the built-in tables alone.

    Raises
    ------
    PluginError
        As :func:`load_plugin`, or when two rows of the named packages share an id.
    """
    names = [_config_name(name) for name in dict.fromkeys(names)]
    plugins = [_ACTIVE.get(name) or load_plugin(name) for name in names]
    owner: dict[str, str] = {}
    for plugin in plugins:
        for row in plugin.ids:
            if row in owner:
                raise PluginError(
                    f"config key 'plugins': {plugin.package!r} and {owner[row]!r} both add "
                    f"{row!r}; name only one of them"
                )
            owner[row] = plugin.package
    for name in [name for name in _ACTIVE if name not in names]:
        for row in _ACTIVE.pop(name).ids:
            METHOD_SPECS.pop(row, None)
            DETECTOR_DEFAULTS.pop(row, None)
            _DETECTORS.pop(row, None)
    for plugin in plugins:
        for spec in plugin.methods:
            METHOD_SPECS[spec.id] = spec
        for detector in plugin.detectors:
            DETECTOR_DEFAULTS[detector.id] = dict(detector.params)
            _DETECTORS[detector.id] = detector
        _ACTIVE[plugin.name] = plugin
    return tuple(plugins)


def active_plugins() -> tuple[Plugin, ...]:
    """The plugins whose rows are in the tables now."""
    return tuple(_ACTIVE.values())


def plugin_of(row: str) -> Plugin | None:
    """The active plugin that adds the method or detector ``row`` (None: a built-in row)."""
    return next((plugin for plugin in _ACTIVE.values() if row in plugin.ids), None)


def detector_spec(detector: str) -> DetectorSpec | None:
    """The spec of an active plugin detector (None for a built-in or unknown id)."""
    return _DETECTORS.get(detector)


def plugins_from_environment(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The plugin names a job's environment carries (:data:`PLUGINS_ENV`, comma-separated)."""
    return [name for name in environ.get(PLUGINS_ENV, "").split(",") if name]


def detector_job_params(detectors: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """A scoring job's ``detectors`` param: each plugin detector's parameters with its
    package's ``name==version`` as ``package`` (a new version re-runs its jobs, and the job
    refuses another installed version); built-in detectors' parameters as they are."""
    params = {name: dict(values or {}) for name, values in detectors.items()}
    for name in params:
        plugin = plugin_of(name)
        if plugin is not None:
            params[name]["package"] = plugin.provenance
    return params


def plugin_note() -> str:
    """One line per active plugin: which package (and version) provides which rows."""
    return "\n".join(
        f"plugin {plugin.name}: {plugin.provenance} provides "
        + ", ".join(
            [f"method {spec.id}" for spec in plugin.methods]
            + [f"detector {spec.id}" for spec in plugin.detectors]
        )
        for plugin in _ACTIVE.values()
    )


def plugin_hint(row: object) -> str:
    """``"; 'flip' is a row of the installed package ... add plugins: [...]"`` when an installed
    package that is not active declares ``row`` (by its entry point's name, nothing
    imported); ``""`` otherwise. Appended to an unknown method's or detector's message."""
    if not isinstance(row, str):
        return ""
    for name, entries in installed_plugins().items():
        if name not in _ACTIVE and any(entry.name == row for entry in entries):
            return (
                f"; {row!r} is a row of the installed package {entries[0].dist.name}: add "
                f"plugins: [{name}] to use it (docs/extending.md)"
            )
    return ""
