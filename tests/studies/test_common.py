"""Tests of the shared study machinery: the join to the expected grid, the statistics over
seeds with missing counts, formatting, and writing / reading a study's files."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pipeline_lib.studies import STUDY_KINDS, STUDY_OPTIONS, build_study
from pipeline_lib.studies.contract import (
    DEVIATION_COLUMNS,
    STAT_COLUMNS,
    StudyResult,
    join_expected,
)
from pipeline_lib.studies.display import format_cell, format_value
from pipeline_lib.studies.files import load_study, study_files, write_study
from pipeline_lib.studies.paper import is_default_variant
from pipeline_lib.studies.stats import cell_stats
from tests.studies.synth import class_seed_stats, expected_grid, fake_results, variant

CLASSES = {"cifar10": ["airplane", "automobile", "bird", "cat"]}


@pytest.fixture
def grid() -> pd.DataFrame:
    return expected_grid(
        classes=CLASSES,
        seeds=[0, 1, 2],
        variants=[variant("rotation"), variant("contrastive_da")],
        detectors=["ocsvm", "kde"],
    )


def test_join_marks_missing_jobs_and_ignores_results_outside_the_grid(grid) -> None:
    results = fake_results(grid, seed=3, drop=5)
    outside = results.iloc[:2].assign(dataset="fmnist")
    joined = join_expected(pd.concat([results, outside]), grid)
    assert len(joined) == len(grid)
    assert int(joined["auroc"].isna().sum()) == len(grid) - len(results)
    merged = joined.merge(results, on=["dataset", "inlier", "seed", "method", "detector"])
    assert np.allclose(merged["auroc_x"], merged["auroc_y"])


def test_join_counts_a_nan_auc_as_missing(grid) -> None:
    results = fake_results(grid, seed=3)
    results.loc[0, "auroc"] = np.nan
    assert int(join_expected(results, grid)["auroc"].isna().sum()) == 1


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r, e: (pd.concat([r, r.iloc[:1]]), e), "two results"),
        (lambda r, e: (r.assign(auroc=r["auroc"] + 100.0), e), r"\[0, 100\]"),
        (lambda r, e: (r, pd.concat([e, e.iloc[:1]])), "twice"),
        (lambda r, e: (r.drop(columns="seed"), e), "lacks columns"),
        (lambda r, e: (r, e.iloc[:0]), "empty"),
    ],
)
def test_join_rejects_bad_frames(grid, mutate, message) -> None:
    results, expected = mutate(fake_results(grid, seed=3), grid)
    with pytest.raises(ValueError, match=message):
        join_expected(results, expected)


def test_cell_stats_match_the_class_then_seed_oracle(grid) -> None:
    results = fake_results(grid, seed=4, drop=6)
    stats = cell_stats(join_expected(results, grid), ["method", "detector"])
    for row in stats.itertuples(index=False):
        rows = results[(results["method"] == row.method) & (results["detector"] == row.detector)]
        expected_rows = grid[(grid["method"] == row.method) & (grid["detector"] == row.detector)]
        mean, std = class_seed_stats(rows)
        assert row.mean == pytest.approx(mean)
        assert row.std == pytest.approx(std, nan_ok=True)
        assert row.n_results == len(rows)
        assert row.n_expected == len(expected_rows)
        assert row.n_missing == len(expected_rows) - len(rows)
        assert row.n_seeds == rows["seed"].nunique()
    assert int(stats["n_missing"].sum()) == len(grid) - len(results)


def test_cell_stats_refuse_two_variants_in_one_cell(grid) -> None:
    joined = join_expected(fake_results(grid, seed=4), grid)
    with pytest.raises(ValueError, match="holds \\(inlier, seed\\) twice"):
        cell_stats(joined, ["detector"])


def test_format_value_marks_missing_and_absent_values() -> None:
    assert format_value(92.44, 0.61) == "92.4 ± 0.6"
    assert format_value(92.44, np.nan, n_missing=3, n_expected=50) == "92.4 [missing 3/50]"
    assert format_value(np.nan, np.nan, n_missing=50, n_expected=50) == "— [missing 50/50]"


def test_one_seed_cell_shows_n1_not_a_zero_std(grid) -> None:
    one_seed = grid[grid["seed"] == 0]
    stats = cell_stats(
        join_expected(fake_results(one_seed, seed=4), one_seed), ["method", "detector"]
    )
    assert (stats["n_seeds"] == 1).all()
    for _, row in stats.iterrows():
        text = format_cell(row.to_dict() | {"paper_mean": np.nan})
        # one seed of several classes: the interval is over the classes' AUCs
        assert row["ci_over"] == "classes" and row["ci_low"] < row["mean"] < row["ci_high"]
        interval = f"[{row['ci_low']:.1f}, {row['ci_high']:.1f}]"
        assert text == f"{row['mean']:.1f} (n=1) {interval} over classes"
        assert "±" not in text
    assert format_value(92.44, 0.0, n_seeds=1) == "92.4 (n=1)"


def test_one_job_cell_without_an_interval_says_why(grid) -> None:
    job = grid[(grid["seed"] == 0) & (grid["inlier"] == "airplane")]
    results = fake_results(job, seed=4)
    results["auroc_interval_omitted"] = "the test split has 9 outlier(s) and 1 inlier(s); ..."
    stats = cell_stats(join_expected(results, job), ["method", "detector"])
    assert (stats["ci_over"] == "omitted").all() and stats["ci_low"].isna().all()
    for _, row in stats.iterrows():
        assert format_cell(row.to_dict() | {"paper_mean": np.nan}) == (
            f"{row['mean']:.1f} (n=1) [no interval: a single inlier or outlier in the test set]"
        )
    assert format_value(92.44, 0.61, n_seeds=2) == "92.4 ± 0.6"
    assert format_value(92.44, 0.61, n_seeds=2, interval=(91.0, 93.9), over="seeds") == (
        "92.4 ± 0.6 [91.0, 93.9]"
    )


def test_default_variant_rules() -> None:
    base = {"base_method": "contrastive_da", "batch_size": np.nan, "head_depth": np.nan}
    assert is_default_variant(base | {"distributions": "", "train_size": np.nan})
    assert is_default_variant(base | {"distributions": "rot270,rot90,rot180", "train_size": np.nan})
    assert not is_default_variant(base | {"distributions": "hflip", "train_size": np.nan})
    row = base | {"batch_size": 64.0, "distributions": "", "train_size": np.nan}
    assert not is_default_variant(row)
    assert is_default_variant(row, ignore=("batch_size",))


def test_registry_lists_every_kind_and_rejects_unknown_options(grid) -> None:
    assert set(STUDY_KINDS) == {
        "contamination",
        "semi_supervised",
        "uniformity",
        "head_depth",
        "distribution_sets",
        "ensembles",
        "data_efficiency",
        "rotated",
        "classifiers",
        "comparison",
        "main",
    }
    assert set(STUDY_OPTIONS) == set(STUDY_KINDS)
    with pytest.raises(ValueError, match="unknown options \\['detecter'\\]"):
        build_study("main", fake_results(grid), grid, options={"detecter": "kde"})
    with pytest.raises(ValueError, match="unknown study kind"):
        build_study("nope", fake_results(grid), grid)


def test_write_study_writes_every_file_and_load_study_reads_it_back(grid, tmp_path) -> None:
    result = build_study("main", fake_results(grid, seed=5, drop=2), grid)
    paths = write_study(result, tmp_path, "main_cifar")
    names = sorted(p.name for p in paths)
    assert names == sorted(
        [
            "main_cifar.csv",
            "main_cifar.md",
            "main_cifar.tex",
            "main_cifar.html",
            "main_cifar_deviations.csv",
            "main_cifar.json",
            *(f"main_cifar_{key}.png" for key in result.figures),
        ]
    )
    assert all(p.stat().st_size > 0 for p in paths)
    assert not list(tmp_path.glob(".*"))  # no temporary files left behind
    assert (tmp_path / "main_cifar_ours_vs_paper.png").read_bytes()[:4] == b"\x89PNG"
    # two jobs were dropped: format_main_table marks their cells "[n/N runs, ...]"
    assert "runs," in (tmp_path / "main_cifar.md").read_text()
    assert "\\begin{table}" in (tmp_path / "main_cifar.tex").read_text()
    meta = json.loads((tmp_path / "main_cifar.json").read_text())
    assert meta["kind"] == "main" and meta["figures"] == sorted(result.figures)
    loaded = load_study(tmp_path, "main_cifar")
    assert isinstance(loaded, StudyResult)
    assert list(loaded.table.columns) == list(result.table.columns)
    assert loaded.table["n_missing"].tolist() == result.table["n_missing"].tolist()
    assert np.allclose(loaded.table["mean"], result.table["mean"], equal_nan=True)
    assert list(loaded.deviations.columns) == list(DEVIATION_COLUMNS)
    assert len(loaded.deviations) == len(result.deviations)
    assert load_study(tmp_path, "absent") is None


def test_write_study_links_tables_written_elsewhere_instead_of_copying_them(grid, tmp_path) -> None:
    # The main grid's human tables are summary/main_table.*, written once.
    summary = tmp_path / "summary"
    summary.mkdir()
    tables = [summary / f"main_table{suffix}" for suffix in (".csv", ".md", ".tex", ".html")]
    for path in tables:
        path.write_text("table")
    result = build_study("main", fake_results(grid, seed=5), grid)
    out = tmp_path / "studies" / "main"
    paths = write_study(result, out, "main", tables=tables)
    assert sorted(p.name for p in paths if p.suffix != ".png") == [
        "main.csv",
        "main.json",
        "main_deviations.csv",
    ]
    meta = json.loads((out / "main.json").read_text())
    assert meta["tables"] == [f"../../summary/{path.name}" for path in tables]
    (out / "figures").mkdir()
    for path in paths:
        if path.suffix == ".png":
            path.replace(out / "figures" / path.name)
    files = study_files(out, "main")
    assert [p.name for p in files if p.suffix != ".png"] == [
        "main.json",
        "main_table.csv",
        "main_table.html",
        "main_table.md",
        "main_table.tex",
    ]
    assert all(path.is_file() for path in files)
    assert {p.name for p in files if p.suffix == ".png"} == {
        f"main_{key}.png" for key in result.figures
    }
    # The summary still reads the study back (its tidy table ranks the deviations).
    assert load_study(out, "main").table["mean"].notna().any()


def test_write_study_rejects_unsafe_names(grid, tmp_path) -> None:
    result = StudyResult(kind="main", table=pd.DataFrame({c: [] for c in STAT_COLUMNS}))
    with pytest.raises(ValueError, match="must match"):
        write_study(result, tmp_path, "bad name")
