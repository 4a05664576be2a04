"""A study's tidy frame from the results tree: found rows, expected rows, MMD per model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline_lib.results.study_frames import collect_study, read_frames, save_frames, study_records
from pipeline_lib.results.tidy_table import load_result_records

VARIANTS = {"contrastive_bs8": {"method": "contrastive", "train": {"batch_size": 8}}}


def key(method: str, space: str, detector: str = "ocsvm") -> dict:
    return {
        "dataset": "digits",
        "inlier": "0",
        "contamination": "0",
        "seed": "1",
        "method": method,
        "fitset": "train",
        "detector": detector,
        "space": space,
    }


def result_path(root: Path, k: dict) -> Path:
    model = root / "digits/0/contam0/seed1" / k["method"]
    middle = ["train", "g"] if k["space"] == "g" else ["train"]
    return model.joinpath(*middle, k["detector"], "result.json")


def write_result(root: Path, k: dict, auroc: float) -> Path:
    """A result.json as the detection jobs write it: the job's identity, the AUC, counts."""
    path = result_path(root, k)
    path.parent.mkdir(parents=True)
    record = k | {"contamination": 0.0, "seed": 1, "auroc": auroc, "n_fit": 48, "n_test": 120}
    path.write_text(json.dumps(record))
    return path


def test_rows_found_missing_and_mmd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    keys = [key("contrastive_bs8", "f"), key("contrastive_bs8", "g"), key("rotnet", "f")]
    for k, auroc in zip(keys[:2], (70.0, 80.0), strict=True):
        write_result(Path("."), k, auroc)
    model = "digits/0/contam0/seed1/contrastive_bs8"
    Path(model, "uniformity.json").write_text(json.dumps({"mmd": 0.25}))
    expected_rows = [(k, str(result_path(Path("."), k))) for k in keys]
    frame, expected = collect_study(
        expected_rows, VARIANTS, uniformity={model: f"{model}/uniformity.json"}
    )
    assert len(expected) == 3 and len(frame) == 2  # rotnet's result is missing
    assert frame["mmd"].tolist() == [0.25, 0.25]  # f and g rows of the same model
    assert frame.set_index("space")["auroc"].to_dict() == {"f": 70.0, "g": 80.0}
    assert frame["base_method"].unique().tolist() == ["contrastive"]
    assert frame["batch_size"].unique().tolist() == [8.0]
    assert np.isnan(expected.set_index("method").loc["rotnet", "batch_size"])
    save_frames(frame, expected, tmp_path / "study")
    again, expected_again = read_frames(
        [tmp_path / "study/results.csv", tmp_path / "study/expected.csv"]
    )
    assert again["inlier"].tolist() == ["0", "0"] and again["distributions"].tolist() == ["", ""]
    assert len(expected_again) == 3
    records = study_records(tmp_path / "study/results.csv")
    assert all("head_depth" not in record for record in records)  # NaN cells dropped
    assert records[0]["auroc"] == 70.0


def test_a_study_row_is_the_tidy_table_row_of_the_same_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One reader: the study adds its variant columns and mmd to the tidy table's record.
    monkeypatch.chdir(tmp_path)
    keys = [key("contrastive_bs8", "f"), key("rotnet", "f"), key("rotnet", "f", "kde")]
    paths = [write_result(Path("."), k, 60.0 + i) for i, k in enumerate(keys)]
    tidy = load_result_records(paths)
    frame, _ = collect_study(list(zip(keys, map(str, paths), strict=True)), VARIANTS)
    assert list(frame.columns[: len(tidy.columns)]) == list(tidy.columns)
    assert list(frame.columns[len(tidy.columns) :]) == [
        "base_method",
        "batch_size",
        "head_depth",
        "distributions",
        "train_size",
        "mmd",
    ]
    ours = frame[list(tidy.columns)].set_index("result_key").loc[tidy["result_key"]]
    pd.testing.assert_frame_equal(ours, tidy.set_index("result_key"))
    assert frame["result_key"].tolist() == [p.parent.as_posix() for p in paths]  # grid order


def test_result_without_auroc_is_named(tmp_path: Path) -> None:
    k = key("rotnet", "f")
    path = result_path(tmp_path, k)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(k | {"n_fit": 3}))
    with pytest.raises(ValueError, match=r"result.json lacks \['auroc'\]"):
        collect_study([(k, str(path))], {})


def test_result_of_another_space_is_named(tmp_path: Path) -> None:
    # load_result_records checks the job against its folder; the study checks the space too.
    k = key("rotnet", "f")
    path = result_path(tmp_path, k)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(k | {"space": "g", "contamination": 0.0, "seed": 1, "auroc": 70.0}))
    with pytest.raises(ValueError, match="the study expects"):
        collect_study([(k, str(path))], {})
