"""Display formatting of study tables: names, ``"92.4 ± 0.6 [missing 1/4] (paper ...)"``
cells, the pivoted human table and a row order."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from pipeline_lib.paper.intervals import INTERVAL_LABELS
from pipeline_lib.paper.published import display_name
from pipeline_lib.results.table_files import format_mean_std

__all__ = [
    "DATASET_ROW",
    "format_cell",
    "format_paper",
    "format_value",
    "label",
    "named",
    "pivot_display",
    "sort_table",
]


def label(kind: str, ident: str) -> str:
    """Display name of a method / detector / dataset id (the id itself when unknown)."""
    return display_name(kind, str(ident))


def named(column: str, header: str, kind: str | None = None) -> tuple[str, str, Callable]:
    """A row key of :func:`pivot_display`: ``column`` under ``header``, its values shown by
    their display names of ``kind`` (default: the column's name)."""
    return (column, header, partial(label, kind or column))


#: The data set as the first row key of a human table.
DATASET_ROW = named("dataset", "Dataset")


def format_value(
    mean: float,
    std: float = np.nan,
    *,
    n_missing: int = 0,
    n_expected: int = 0,
    decimals: int = 1,
    n_seeds: int | None = None,
    interval: tuple[float, float] | None = None,
    over: str = "",
) -> str:
    """``"92.4 ± 0.6 [91.8, 93.0]"``; ``"92.4 (n=1)"`` from one seed (a std of 0 would read
    as a measured zero spread); ``"—"`` without a value; ``" [missing 3/50]"`` when
    incomplete. ``interval`` and ``over`` are a cell's ``ci_low, ci_high`` and ``ci_over``
    (:mod:`pipeline_lib.paper.intervals`)."""
    text = format_mean_std(
        mean,
        std,
        n_seeds=n_seeds,
        decimals=decimals,
        interval=interval,
        interval_label=INTERVAL_LABELS.get(str(over), ""),
    )
    if n_missing:
        text += f" [missing {int(n_missing)}/{int(n_expected)}]"
    return text


def format_paper(paper_mean: float, paper_std: float, deviation: float, decimals: int = 1) -> str:
    """``"paper 92.5 ± 0.6, Δ -0.1"``, or ``""`` without a published number."""
    if paper_mean is None or not np.isfinite(paper_mean):
        return ""
    text = "paper " + format_value(paper_mean, paper_std, decimals=decimals)
    if deviation is not None and np.isfinite(deviation):
        # adding 0.0 turns a rounded -0.0 into 0.0
        text += f", Δ {round(deviation, decimals) + 0.0:+.{decimals}f}"
    return text


def format_cell(row: Mapping[str, Any] | pd.Series, decimals: int = 1) -> str:
    """A table cell with ours, its interval, the missing mark and the paper:
    ``"92.4 ± 0.6 [91.8, 93.0] (paper ...)"``."""
    text = format_value(
        row["mean"],
        row["std"],
        n_missing=row["n_missing"],
        n_expected=row["n_expected"],
        decimals=decimals,
        n_seeds=row.get("n_seeds"),
        interval=(row.get("ci_low", np.nan), row.get("ci_high", np.nan)),
        over=row.get("ci_over", ""),
    )
    paper = format_paper(
        row.get("paper_mean", np.nan),
        row.get("paper_std", np.nan),
        row.get("deviation", np.nan),
        decimals,
    )
    return f"{text} ({paper})" if paper else text


def pivot_display(
    table: pd.DataFrame,
    rows: Sequence[tuple[str, str, Callable[[Any], str]]],
    column: str,
    column_label: Callable[[Any], str],
    *,
    decimals: int = 1,
) -> pd.DataFrame:
    """Human table: one row per combination of ``rows`` columns, one column per ``column``.

    ``rows`` is a list of ``(table column, header, formatter)``. Cells are
    :func:`format_cell` strings; a combination without a cell shows ``"—"``.
    """
    keys = [col for col, _, _ in rows]
    col_values = list(dict.fromkeys(table[column].tolist()))
    out = []
    for key, group in table.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        record = {header: fmt(value) for (_, header, fmt), value in zip(rows, key, strict=True)}
        indexed = {v: r for v, (_, r) in zip(group[column], group.iterrows(), strict=True)}
        for value in col_values:
            record[column_label(value)] = (
                format_cell(indexed[value], decimals) if value in indexed else "—"
            )
        out.append(record)
    return pd.DataFrame(out)


def sort_table(table: pd.DataFrame, orders: Mapping[str, Sequence[Any]]) -> pd.DataFrame:
    """Sort rows by the given column orders (known values first, in order; then the rest).

    Columns not in ``orders`` keep their sorted order (stable sort).
    """
    if table.empty:
        return table
    keys = []
    for col, order in orders.items():
        rank = {value: i for i, value in enumerate(order)}
        keys.append(table[col].map(lambda v, r=rank: (r.get(v, len(r)), str(v))))
    frame = table.assign(**{f"_k{i}": k for i, k in enumerate(keys)})
    frame = frame.sort_values([f"_k{i}" for i in range(len(keys))], kind="stable")
    return frame.drop(columns=[f"_k{i}" for i in range(len(keys))]).reset_index(drop=True)
