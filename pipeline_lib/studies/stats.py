"""Statistics of a study's cells over seeds, counting what is missing: the paper's aggregation
rule (per seed the mean over inlier classes, then mean and std over seeds) and the notes
that state it and the incomplete cells."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pipeline_lib.paper.intervals import (
    INTERVAL_COLUMNS,
    SEED_STD_DDOF,
    cell_interval,
    interval_note,
    jobs_test_set,
)

#: What :func:`cell_stats` adds to a cell's ``by`` columns (the head of a study table's
#: statistics, :data:`~pipeline_lib.studies.contract.STAT_COLUMNS`).
SEED_STAT_COLUMNS: tuple[str, ...] = (
    "mean",
    "std",
    *INTERVAL_COLUMNS,
    "n_seeds",
    "n_expected_seeds",
    "n_results",
    "n_expected",
    "n_missing",
)

__all__ = [
    "any_incomplete",
    "cell_stats",
    "common_notes",
    "missing_note",
]


def cell_stats(
    cells: pd.DataFrame,
    by: Sequence[str],
    *,
    value: str = "auroc",
    ddof: int = SEED_STD_DDOF,
) -> pd.DataFrame:
    """Mean and std over seeds of the per-seed class mean, with counts of what is missing.

    As the paper's tables (Sec. 4.2): per seed the value is averaged over the inlier classes
    present; the cell is the mean and std (``ddof``, default the sample std of every table,
    as :mod:`pipeline_lib.paper.aggregate`) of those seed means, with a 95 % interval
    (``ci_low``, ``ci_high``, ``ci_over``: over seeds, classes or the test set by the rules
    of :func:`pipeline_lib.paper.intervals.cell_interval`; the jobs' own intervals are read
    from ``auroc_low`` / ``auroc_high`` when ``cells`` has them, and a job's reason for
    having none from ``auroc_interval_omitted``: ``ci_over`` ``"omitted"``). A seed
    with some classes missing
    still contributes, but the cell's ``n_missing`` says so and the formatted tables and
    the summary mark it.

    Parameters
    ----------
    cells : DataFrame
        Output of :func:`~pipeline_lib.studies.contract.join_expected` (possibly
        filtered and with extra columns).
    by : sequence of str
        Columns naming a cell.
    value : str, default="auroc"
        Column to average (NaN = missing).
    ddof : int, default=SEED_STD_DDOF
        Delta degrees of freedom of the std over seeds.

    Returns
    -------
    DataFrame
        ``by`` columns then ``mean, std, ci_low, ci_high, ci_over, n_seeds`` (seeds with a
        result),
        ``n_expected_seeds, n_results, n_expected, n_missing``; one row per group, in
        sorted order of ``by``.

    Raises
    ------
    ValueError
        If a cell holds the same (inlier, seed) twice: two variants were mapped onto one
        cell and would be averaged together.
    """
    by = list(by)
    columns = [*by, *SEED_STAT_COLUMNS]
    if cells.empty:
        return pd.DataFrame({col: pd.Series(dtype=object) for col in columns})
    rows = []
    for key, group in cells.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        dup = group.duplicated(["inlier", "seed"], keep=False)
        if dup.any():
            methods = sorted(group.loc[dup, "method"].unique())
            raise ValueError(
                f"cell {dict(zip(by, key, strict=True))} holds (inlier, seed) twice, from "
                f"methods {methods}; give the study options that tell them apart"
            )
        present = group[group[value].notna()]
        seed_means = present.groupby("seed")[value].mean().to_numpy()
        mean = float(seed_means.mean()) if seed_means.size else np.nan
        std = float(np.std(seed_means, ddof=ddof)) if seed_means.size > ddof else np.nan
        test_set = jobs_test_set(present) if value == "auroc" else {}
        low, high, over = cell_interval(seed_means, present[value].to_numpy(), **test_set)
        rows.append(
            dict(zip(by, key, strict=True))
            | {
                "mean": mean,
                "std": std,
                "ci_low": low,
                "ci_high": high,
                "ci_over": over,
                "n_seeds": int(seed_means.size),
                "n_expected_seeds": int(group["seed"].nunique()),
                "n_results": int(len(present)),
                "n_expected": int(len(group)),
                "n_missing": int(len(group) - len(present)),
            }
        )
    return pd.DataFrame(rows, columns=columns)


def any_incomplete(*tables: pd.DataFrame) -> bool:
    """True if any cell of the tables misses results."""
    return any(bool((t["n_missing"] > 0).any()) for t in tables if len(t))


def missing_note(table: pd.DataFrame, what: str = "cells") -> list[str]:
    """A note counting incomplete cells, or nothing."""
    if not len(table):
        return [f"no {what}: the expected grid selected nothing"]
    bad = table[table["n_missing"] > 0]
    if bad.empty:
        return []
    return [
        f"{len(bad)} of {len(table)} {what} miss results ({int(bad['n_missing'].sum())} of "
        f"{int(bad['n_expected'].sum())} expected results); they are marked in the tables ("
        "[missing k/n]) and figures (hollow markers, hatched bars) and left out of the "
        "summary's ranking"
    ]


def common_notes(table: pd.DataFrame | None = None) -> list[str]:
    """The aggregation rule and the interval rules, stated once per study; with the study's
    ``table``, how many of its cells each interval rule gave."""
    over = table["ci_over"] if table is not None and "ci_over" in table.columns else None
    return [
        "AUC is ROC AUC x 100 with the outlier as the positive class; per seed it is averaged "
        "over the inlier classes, then taken as mean ± std over seeds (Sec. 4.2)",
        interval_note(over),
    ]
