"""A study's tidy frame: the results its grid expects, whichever of them exist.

The study builders (:mod:`pipeline_lib.studies`) get two frames: ``frame``, one row per
result found, and ``expected``, one row per result the grid asks for. Keeping both lets a
table say "missing 3/50" instead of averaging silently over fewer seeds when some jobs of a
large sweep failed or have not run yet.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline_lib.config.grids import base_method, variant_train_size
from pipeline_lib.config.keys import STUDY_KEY_COLUMNS, ResultKey
from pipeline_lib.results.tidy_table import load_result_records
from pipeline_lib.runtime.io import atomic_path, load_json, load_npz

#: Columns naming one result, in display order (the job key with its feature space).
KEY_COLUMNS: tuple[str, ...] = STUDY_KEY_COLUMNS

#: Variant parameters the study figures put on their x axes.
VARIANT_COLUMNS: tuple[str, ...] = ("batch_size", "head_depth", "distributions", "train_size")


def variant_columns(method: str, variants: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Base method and the parameters that make ``method`` a variant (NaN / "" = default)."""
    train = (variants.get(method) or {}).get("train") or {}
    size = variant_train_size(method, variants)
    distributions = train.get("distributions")
    return {
        "base_method": base_method(method, variants),
        "batch_size": float(train["batch_size"]) if "batch_size" in train else np.nan,
        "head_depth": float(train["head_depth"]) if "head_depth" in train else np.nan,
        "distributions": ",".join(distributions) if distributions else "",
        "train_size": float(size) if size is not None else np.nan,
    }


def collect_study(
    expected: Sequence[tuple[Mapping[str, Any], str | os.PathLike]],
    variants: Mapping[str, Mapping[str, Any]],
    uniformity: Mapping[str, str | os.PathLike] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read the results a study expects; return ``(frame, expected)``.

    The found results are read by :func:`pipeline_lib.results.tidy_table.load_result_records`,
    the reader of the tidy table ``summary/results.csv``: a study row is that
    table's row of the same result (every column of its ``result.json`` and
    ``result_key``), plus the study's columns ``base_method``, the variant parameters
    (:data:`VARIANT_COLUMNS`) and ``mmd``.

    Parameters
    ----------
    expected : sequence of (key, path)
        Each result the grid asks for: its key (the columns of :data:`KEY_COLUMNS`) and
        the path of its ``result.json``. Paths that do not exist are missing results.
    variants : mapping
        The config's variant registry (adds ``base_method`` and the variant parameters).
    uniformity : mapping of model folder -> uniformity.json path, optional
        Adds ``mmd`` to every row of that model (``NaN`` where absent). Folders are named
        as :meth:`~pipeline_lib.config.keys.ResultKey.model_folder` writes them (the rules'
        relative form).

    Returns
    -------
    frame : DataFrame
        One row per found result, in the order of ``expected``.
    expected : DataFrame
        One row per expected result: :data:`KEY_COLUMNS`, ``base_method``,
        :data:`VARIANT_COLUMNS`, ``result_key``.

    Raises
    ------
    ValueError
        As :func:`~pipeline_lib.results.tidy_table.load_result_records`: naming a result file
        without its identity or ``auroc`` (a half-written or foreign file), or one that
        records another job than its folder.
    """
    mmd = {}
    for folder, path in (uniformity or {}).items():
        if Path(path).is_file():
            mmd[Path(folder).as_posix()] = float(load_json(path)["mmd"])
    wanted, found = [], []
    for key, path in expected:
        row = ResultKey.from_wildcards(key).record() | variant_columns(key["method"], variants)
        row["result_key"] = Path(path).parent.as_posix()
        wanted.append(row)
        if Path(path).is_file():
            found.append(path)
    columns = [*KEY_COLUMNS, "base_method", *VARIANT_COLUMNS, "result_key"]
    wanted_frame = pd.DataFrame(wanted, columns=columns)
    records = load_result_records(found)
    _check_study_keys(records, wanted_frame)
    study_columns = ["result_key", "base_method", *VARIANT_COLUMNS]
    # The expected rows' order and study columns, the records' values.
    frame = wanted_frame[study_columns].merge(records, on="result_key", validate="one_to_one")
    frame["mmd"] = [
        mmd.get(ResultKey.from_path(key).model_folder(), np.nan) for key in frame["result_key"]
    ]
    record_columns = [column for column in records.columns if column != "result_key"]
    frame = frame[[*record_columns, "result_key", *study_columns[1:], "mmd"]]
    return frame, wanted_frame


def _check_study_keys(records: pd.DataFrame, wanted: pd.DataFrame) -> None:
    """Raise unless each record names the job (feature space included) it was expected as."""
    by_key = wanted.drop_duplicates("result_key").set_index("result_key")
    for record in records.to_dict("records"):
        path = f"{record['result_key']}/result.json"
        if not isinstance(record.get("space"), str):
            raise ValueError(f"{path} lacks 'space': delete it and re-run its job")
        got = ResultKey.from_wildcards(record)
        want = ResultKey.from_wildcards(by_key.loc[record["result_key"]].to_dict())
        if got != want:
            raise ValueError(
                f"{path} records {got}, but the study expects {want} there: delete it and "
                "re-run its job"
            )


def load_scores(frame: pd.DataFrame) -> dict[tuple, list[tuple[int, np.ndarray, np.ndarray]]]:
    """Test scores of every found result, grouped over seeds for ensembles.

    Returns
    -------
    dict
        ``(dataset, inlier, contamination, method, fitset, detector, space)`` -> list of
        ``(seed, anomaly_score, is_outlier)``, seeds in increasing order.
    """
    grouped: dict[tuple, list[tuple[int, np.ndarray, np.ndarray]]] = {}
    group_columns = [c for c in KEY_COLUMNS if c != "seed"]
    for row in frame.sort_values("seed").itertuples(index=False):
        scores = load_npz(Path(row.result_key) / "scores.npz")
        key = tuple(getattr(row, column) for column in group_columns)
        grouped.setdefault(key, []).append(
            (int(row.seed), scores["anomaly_score"], scores["is_outlier"].astype(bool))
        )
    return grouped


def save_frames(frame: pd.DataFrame, expected: pd.DataFrame, folder: str | os.PathLike) -> None:
    """Write ``results.csv`` and ``expected.csv`` atomically."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    for name, table in (("results.csv", frame), ("expected.csv", expected)):
        with atomic_path(Path(folder) / name) as tmp:
            table.to_csv(tmp, index=False)


def read_frames(paths: Iterable[str | os.PathLike]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read back ``(results.csv, expected.csv)`` with the key dtypes restored."""
    frame, expected = (
        pd.read_csv(
            p, dtype={"inlier": str, "distributions": str}, keep_default_na=False, na_values=[""]
        )
        for p in paths
    )
    for table in (frame, expected):
        table["distributions"] = table["distributions"].fillna("")
    return frame, expected


def study_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """A study's results.csv as MLflow records: keys and numbers, without empty cells."""
    frame, _ = read_frames([path, path])
    records = []
    for row in frame.to_dict("records"):
        records.append(
            {
                key: value
                for key, value in row.items()
                if not (isinstance(value, float) and np.isnan(value)) and value != ""
            }
        )
    return records
