"""The tidy results table of ``pipeline_lib.results.tidy_table``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pipeline_lib.config.keys import ResultKey
from pipeline_lib.results.tidy_table import (
    AUROC_COLUMNS,
    KEY_COLUMNS,
    load_result_records,
    load_results_csv,
    save_results_csv,
)
from pipeline_lib.runtime.io import save_json


def _record(inlier: str, seed: int, auroc: float, detector: str = "knn") -> dict:
    return {
        "dataset": "digits",
        "inlier": inlier,
        "contamination": 0.0,
        "seed": seed,
        "method": "raw",
        "fitset": "train",
        "detector": detector,
        "auroc": auroc,
        "n_fit": 60,
    }


def _write(root: Path, record: dict) -> Path:
    path = root / ResultKey.from_wildcards(record).path()
    save_json(path, record)
    return path


def test_load_result_records_builds_a_sorted_tidy_frame(tmp_path: Path) -> None:
    paths = [
        _write(tmp_path, _record("8", 1, 80.0)),
        _write(tmp_path, _record("0", 1, 90.0)),
        _write(tmp_path, _record("0", 0, 95.5, detector="gde")),
    ]
    frame = load_result_records(paths)
    assert list(frame.columns[: len(KEY_COLUMNS)]) == KEY_COLUMNS
    head = len(KEY_COLUMNS) + len(AUROC_COLUMNS)
    assert list(frame.columns[:head]) == [*KEY_COLUMNS, *AUROC_COLUMNS]
    assert set(frame.columns) == {*KEY_COLUMNS, *AUROC_COLUMNS, "n_fit", "result_key"}
    assert frame[["inlier", "seed", "detector"]].values.tolist() == [
        ["0", 0, "gde"],
        ["0", 1, "knn"],
        ["8", 1, "knn"],
    ]
    assert frame["auroc"].tolist() == [95.5, 90.0, 80.0]
    assert frame["result_key"].tolist() == [
        paths[2].parent.as_posix(),
        paths[1].parent.as_posix(),
        paths[0].parent.as_posix(),
    ]
    assert frame["result_key"].iloc[0].endswith("digits/0/contam0/seed0/raw/train/gde")


def test_load_result_records_with_no_files_has_the_columns() -> None:
    frame = load_result_records([])
    assert frame.empty
    assert list(frame.columns) == [*KEY_COLUMNS, *AUROC_COLUMNS, "result_key"]


def test_interval_columns_are_kept_and_missing_ones_are_nan(tmp_path: Path) -> None:
    with_interval = _record("0", 0, 90.0) | {"auroc_low": 88.5, "auroc_high": 91.25}
    paths = [_write(tmp_path, with_interval), _write(tmp_path, _record("1", 0, 80.0))]
    frame = load_result_records(paths)
    assert frame["auroc_low"].iloc[0] == 88.5
    assert frame["auroc_high"].iloc[0] == 91.25
    assert frame[["auroc_low", "auroc_high"]].iloc[1].isna().all()
    assert frame["auroc_se_delong"].isna().all()


def test_record_without_auroc_is_named(tmp_path: Path) -> None:
    good = _write(tmp_path, _record("0", 0, 90.0))
    record = _record("8", 0, 90.0)
    del record["auroc"]
    bad = _write(tmp_path, record)
    with pytest.raises(ValueError, match=r"lacks \['auroc'\]") as info:
        load_result_records([good, bad])
    assert str(bad) in str(info.value)
    assert "re-run" in str(info.value)


def test_record_without_identity_column_is_named(tmp_path: Path) -> None:
    record = _record("0", 0, 90.0)
    path = _write(tmp_path, record)
    del record["seed"]
    save_json(path, record)
    with pytest.raises(ValueError, match=r"lacks \['seed'\]"):
        load_result_records([path])


def test_record_of_another_job_than_its_folder_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, _record("0", 0, 90.0))
    save_json(path, _record("8", 0, 90.0))  # e.g. copied from class 8's folder
    with pytest.raises(ValueError, match=r"another job than its folder.*'inlier': \('8', '0'\)"):
        load_result_records([path])


def test_truncated_result_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text('{"dataset": "dig')
    with pytest.raises(ValueError, match="is not valid JSON") as info:
        load_result_records([path])
    assert str(path) in str(info.value)


def test_results_csv_keeps_class_names_as_strings(tmp_path: Path) -> None:
    paths = [
        _write(tmp_path / "r", _record("0", 0, 90.0)),
        _write(tmp_path / "r", _record("08", 0, 85.0)),
        _write(tmp_path / "r", _record("NA", 0, 70.0)),
    ]
    frame = load_result_records(paths)
    csv = tmp_path / "results.csv"
    save_results_csv(frame, csv)
    loaded = load_results_csv(csv)
    assert loaded["inlier"].tolist() == ["0", "08", "NA"]
    assert all(isinstance(value, str) for value in loaded["inlier"])
    assert loaded["seed"].tolist() == [0, 0, 0]
    assert loaded["contamination"].tolist() == [0.0, 0.0, 0.0]
    assert loaded["auroc"].tolist() == [90.0, 85.0, 70.0]
    pd.testing.assert_frame_equal(loaded, frame, check_dtype=False)
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["results.csv"]
