"""The loggers' one function: a benchmark's sweep and studies into the MLflow store."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline_lib.tracking.mlflow_store import (
    code_version,
    default_tracking_uri,
    log_sweep,
    read_histories,
)


def log_benchmark(
    records: Sequence[Mapping[str, Any]],
    *,
    store_dir: str | os.PathLike,
    experiment: str,
    sweep: str,
    timeout_s: float,
    code_dir: str | os.PathLike,
    history_paths: Sequence[str | os.PathLike] = (),
    artifacts: Sequence[str | os.PathLike] = (),
    tags: Mapping[str, str] | None = None,
    studies: Mapping[str, tuple[Sequence[Mapping[str, Any]], Sequence[Path]]] | None = None,
) -> dict[str, Any]:
    """Log one benchmark's sweep, and its studies, to the store of ``store_dir``.

    The loggers' one function (image benchmarks and MVTec AD; each reads its own records):
    the sweep's job runs, a training run per ``train_history.json`` of ``history_paths``
    (with ``train.eval_every``'s figure where its training job wrote one) and the sweep's
    tables and plots on its parent run (:func:`log_sweep`); then a parent run per study
    (``studies``: name -> its records and files). Runs are tagged with the workflow's git
    commit (``code_dir``) and ``tags``.

    Returns
    -------
    dict
        :func:`log_sweep`'s summary, with ``studies`` (name -> summary) when given.
    """
    from pipeline_lib.detection.epoch_eval import EVAL_CURVE_FILE

    store_dir = Path(store_dir)
    store = dict(
        uri=default_tracking_uri(store_dir),
        experiment=experiment,
        artifact_dir=store_dir / "artifacts",
        lock_path=store_dir / "writer.lock",
        timeout_s=timeout_s,
    )
    commit = {"git_commit": code_version(code_dir)}
    histories = read_histories(history_paths)
    figures = {  # train.eval_every's figure, written beside a history by its training job
        key: [Path(key) / EVAL_CURVE_FILE]
        for key in histories
        if (Path(key) / EVAL_CURVE_FILE).exists()
    }
    summary = log_sweep(
        records,
        sweep=sweep,
        artifacts=artifacts,
        tags=commit | dict(tags or {}),
        histories=histories,
        history_artifacts=figures,
        **store,
    )
    if studies is not None:
        summary["studies"] = {
            name: log_sweep(
                study,
                sweep=f"{sweep}-{name}",
                artifacts=files,
                tags=commit | {"study": name},
                **store,
            )
            for name, (study, files) in studies.items()
        }
    return summary
