"""The tidy table of job results: one row per (data set, class, split, seed, method, fit set,
detector), read from the small ``result.json`` files the detection jobs leave."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from pipeline_lib.config.keys import KEY_COLUMNS as _KEY_COLUMNS
from pipeline_lib.config.keys import ResultKey
from pipeline_lib.detection.auroc_intervals import INTERVAL_FIELDS, INTERVAL_OMITTED
from pipeline_lib.runtime.io import atomic_path, load_json

#: Columns that identify a job (the wildcards), in display order: the tidy table's first
#: columns, as :data:`pipeline_lib.config.keys.KEY_COLUMNS` states them.
KEY_COLUMNS: list[str] = list(_KEY_COLUMNS)

#: The AUC and its uncertainty over the test set (95 % stratified bootstrap interval, DeLong
#: standard error; :mod:`pipeline_lib.detection.auroc_intervals`): every tidy table has
#: them after the key columns, NaN for a record written before jobs kept them or whose test
#: split gave none; then why a job has none (``auroc_interval_omitted``, ``""`` otherwise).
AUROC_COLUMNS: list[str] = ["auroc", *INTERVAL_FIELDS, INTERVAL_OMITTED]


def load_result_records(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """Read result files into a tidy frame; ``result_key`` is each file's folder.

    Columns: :data:`KEY_COLUMNS`, :data:`AUROC_COLUMNS`, then the records' other fields.

    Raises
    ------
    ValueError
        Naming a result file that lacks an identity column or the AUC, or whose record
        names another job than its folder (a file copied or moved by hand): the table
        would otherwise file its AUC under the wrong job.
    """
    rows = []
    for path in paths:
        record = load_json(path)
        missing = [column for column in [*KEY_COLUMNS, "auroc"] if column not in record]
        if missing:
            raise ValueError(f"{path} lacks {missing}: delete it and re-run its job")
        _check_identity(path, record)
        rows.append({**record, "result_key": Path(path).parent.as_posix()})
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=[*KEY_COLUMNS, *AUROC_COLUMNS, "result_key"])
    for column in INTERVAL_FIELDS:
        if column not in frame.columns:
            frame[column] = float("nan")
    frame[INTERVAL_OMITTED] = interval_omissions(frame)
    head = KEY_COLUMNS + AUROC_COLUMNS
    other = [column for column in frame.columns if column not in head]
    return frame[head + other].sort_values(KEY_COLUMNS, ignore_index=True)


def _check_identity(path: str | os.PathLike, record: dict) -> None:
    """Raise if a result file in the results layout records another job than its folder."""
    try:
        folder = ResultKey.from_path(path).record()
    except ValueError:
        return  # not in the results layout (e.g. a copy outside it): nothing to compare
    recorded = ResultKey.from_wildcards(record).record()
    differ = {
        name: (recorded[name], folder[name])
        for name in KEY_COLUMNS
        if recorded[name] != folder[name]
    }
    if differ:
        raise ValueError(
            f"{path} records another job than its folder (record, folder): {differ}; "
            "delete it and re-run its job"
        )


def save_results_csv(frame: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write the tidy table atomically."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)


def load_results_csv(path: str | os.PathLike) -> pd.DataFrame:
    """Read the tidy table back with the identity columns' types (class names stay strings;
    an interval's omission stays ``""`` where there is none)."""
    frame = pd.read_csv(
        path,
        dtype={"dataset": str, "inlier": str, "method": str, "fitset": str, "detector": str},
        keep_default_na=False,
        na_values=[""],
    )
    if INTERVAL_OMITTED in frame.columns:
        frame[INTERVAL_OMITTED] = interval_omissions(frame)
    return frame


def interval_omissions(frame: pd.DataFrame) -> pd.Series:
    """Why each job of ``frame`` has no AUC interval (``auroc_interval_omitted``): ``""``
    where it has one, where the column is empty (a CSV's NaN) or where ``frame`` lacks it."""
    if INTERVAL_OMITTED not in frame.columns:
        return pd.Series("", index=frame.index, dtype=object)
    return frame[INTERVAL_OMITTED].astype(object).fillna("").astype(str)
