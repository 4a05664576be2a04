"""Where a run lives: ``results/<experiment>/``, one folder per config.

Every path of the workflow is relative to its working directory (every result, the summary,
``logs/``, the ``benchmark:`` timings, the MLflow store, Snakemake's ``.snakemake/``): the
layout Snakemake's standardized workflows use. Two configs run in one folder would therefore
share all of it, and the second would rebuild the first one's summary from both sweeps. So
the Snakefile makes the folder of the config's ``experiment`` (its MLflow experiment name
too) under ``results/`` the working directory, Snakemake's own ``workdir:``; the rules write
directly into it (no second ``results/`` inside), so a run's summary is
``results/<experiment>/summary/index.html``. An explicit ``--directory`` wins, as
Snakemake's command line always does: the outputs then lie directly in that folder. The cost
planner reads the same folder's timings.

Torch-free: the Snakefile imports this at parse time.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from pipeline_lib.config.errors import ConfigError
from pipeline_lib.runtime.io import atomic_path

__all__ = [
    "CONFIG_RECORD",
    "DEFAULT_EXPERIMENT",
    "EXPERIMENTS",
    "RUN_FOLDER_ENV",
    "anchor_paths",
    "claim_folder",
    "default_experiment",
    "experiment_folder",
    "run_folder",
]

#: The folder, relative to where Snakemake starts, that holds one folder per experiment: the
#: checkout's one output folder.
EXPERIMENTS = "results"
#: The name of a run whose config came from no file (only ``--config`` values).
DEFAULT_EXPERIMENT = "droc-bench"
#: In an experiment's folder: the config files whose runs it holds, one a line.
CONFIG_RECORD = "config_files.txt"
#: The run's working directory, absolute, as the main Snakemake process chose it; its jobs'
#: own Snakemake processes inherit it (:func:`run_folder`).
RUN_FOLDER_ENV = "DROC_RUN_FOLDER"

_NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def default_experiment(configfiles: Sequence[str | os.PathLike]) -> str:
    """The experiment of a config without an ``experiment`` key: its file's name.

    ``config/my_data.yaml`` -> ``my_data``; of several config files the last (the one that
    overrides the others). Characters a folder or MLflow name should not hold become ``-``.
    """
    if not configfiles:
        return DEFAULT_EXPERIMENT
    name = _NOT_IN_A_NAME.sub("-", Path(configfiles[-1]).stem).strip("-.")
    return name or DEFAULT_EXPERIMENT


def experiment_folder(experiment: str) -> Path:
    """The working directory of ``experiment``'s runs, relative to where Snakemake starts."""
    return Path(EXPERIMENTS) / experiment


def run_folder(
    experiment: str,
    *,
    directory_given: bool,
    main_process: bool,
    environ: MutableMapping[str, str] = os.environ,
) -> Path | None:
    """The folder this Snakemake process moves into (relative to where it starts), or None
    when it works where it is; the main process records its choice in ``environ``.

    None when ``--directory`` chose the working directory (``directory_given``). A job's own
    Snakemake process (a SLURM job step, ``main_process`` false) starts where the run
    started and is not told about ``--directory`` on a shared file system: it moves as the
    run did, unless it already starts in the run's working directory, which the main
    process recorded in :data:`RUN_FOLDER_ENV` (a run given ``--directory``).
    """
    folder = None if directory_given else experiment_folder(experiment)
    here = Path.cwd().resolve()
    if main_process:
        environ[RUN_FOLDER_ENV] = str(here / folder if folder is not None else here)
    elif folder is not None and environ.get(RUN_FOLDER_ENV) == str(here):
        folder = None
    return folder


def _rebased(path: str | None, folder: Path) -> str | None:
    """``path`` as seen from ``folder`` (both relative to the current directory)."""
    if path is None or str(path) == "" or Path(path).expanduser().is_absolute():
        return path
    return os.path.relpath(path, folder)


def anchor_paths(config: Mapping[str, Any], folder: str | os.PathLike) -> dict[str, Any]:
    """``config`` with its relative file paths made relative to ``folder``.

    A user writes paths relative to the folder Snakemake starts in; the jobs run in the
    experiment's folder. Rebased rather than made absolute, so a checkout moved as a whole
    re-runs nothing: the data root, an image folder's ``options.path`` (at the top level and
    in every included study), ``embed.imagenet_weights``, ``mvtec.root`` and
    ``mvtec.paths``. Study files are read before the move; absolute paths stay as they are.
    """
    folder = Path(folder)
    anchored = dict(config)
    for section, key in (("data", "root"), ("embed", "imagenet_weights")):
        if isinstance(anchored.get(section), Mapping) and key in anchored[section]:
            anchored[section] = {
                **anchored[section],
                key: _rebased(anchored[section][key], folder),
            }
    if "datasets" in anchored:
        anchored["datasets"] = _anchored_datasets(anchored["datasets"], folder)
    if isinstance(anchored.get("studies"), list):
        anchored["studies"] = [
            {**study, "datasets": _anchored_datasets(study["datasets"], folder)}
            if isinstance(study, Mapping) and "datasets" in study
            else study
            for study in anchored["studies"]
        ]
    mvtec = anchored.get("mvtec")
    if isinstance(mvtec, Mapping):
        anchored["mvtec"] = {
            **mvtec,
            "root": _rebased(mvtec.get("root"), folder),
            "paths": {
                name: _rebased(path, folder) for name, path in (mvtec.get("paths") or {}).items()
            },
        }
    return anchored


def _anchored_datasets(datasets: Any, folder: Path) -> Any:
    if not isinstance(datasets, Mapping):
        return datasets
    anchored = {}
    for name, settings in datasets.items():
        options = (settings or {}).get("options") if isinstance(settings, Mapping) else None
        if isinstance(options, Mapping) and "path" in options:
            settings = {
                **settings,
                "options": {**options, "path": _rebased(options["path"], folder)},
            }
        anchored[name] = settings
    return anchored


def _record_lines(configfiles: Sequence[str | os.PathLike]) -> list[str]:
    """The config files as the record writes them: relative to the current directory when
    inside it (a checkout moved as a whole keeps its record), else absolute."""
    lines = []
    for configfile in configfiles:
        path = Path(configfile).absolute()
        try:
            lines.append(path.relative_to(Path.cwd()).as_posix())
        except ValueError:
            lines.append(path.as_posix())
    return lines


def claim_folder(
    folder: str | os.PathLike, experiment: str, configfiles: Sequence[str | os.PathLike]
) -> None:
    """Record which config files run in ``folder``; refuse a run of other files there.

    Two configs with one ``experiment`` name (a copy of a shipped config that kept its
    name) would otherwise share a folder again, and each would re-run and overwrite the
    other's results of the same jobs.

    Raises
    ------
    ConfigError
        When ``folder``'s record names other config files, naming both and what to do.
    """
    record = Path(folder) / CONFIG_RECORD
    lines = _record_lines(configfiles)
    if record.is_file():
        recorded = record.read_text().split("\n")
        recorded = [line for line in recorded if line]
        if recorded != lines:
            raise ConfigError(
                f"config key 'experiment': {folder}/ holds the runs of "
                f"{', '.join(recorded) or 'no config file'}, and this run of "
                f"{', '.join(lines) or 'no config file'} has the same experiment name "
                f"{experiment!r}. Give this config an `experiment:` of its own (or run with "
                f"--config experiment=NAME) to keep the two apart; to let it take over the "
                f"folder, delete {record}"
            )
        return
    with atomic_path(record) as partial:
        partial.write_text("".join(f"{line}\n" for line in lines))
