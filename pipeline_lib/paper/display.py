"""Display tables of the paper's long frames: mean ± std, interval, completeness, paper value.

Formats the frames of :func:`~pipeline_lib.paper.aggregate.main_table` and
:func:`~pipeline_lib.paper.aggregate.per_class_table` for the written tables and pages.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline_lib.paper.intervals import INTERVAL_LABELS
from pipeline_lib.paper.long_frames import (
    MAIN_COLUMNS,
    PER_CLASS_COLUMNS,
    order_ids,
    require_columns,
)
from pipeline_lib.paper.published import DATASET_DISPLAY, display_name
from pipeline_lib.results.table_files import format_mean_std

__all__ = ["format_main_table", "format_per_class_table"]


def _fmt(mean: float, std: float, decimals: int, n_seeds: int | None = None) -> str:
    return format_mean_std(mean, std, n_seeds=n_seeds, decimals=decimals)


def _fmt_cell(cell: pd.Series, decimals: int) -> str:
    """Ours with its interval: ``"92.4 ± 0.6 [91.8, 93.0]"``, ``"92.4 (n=1) [...] over ..."``."""
    return format_mean_std(
        cell["mean"],
        cell["std"],
        n_seeds=cell["n_seeds"],
        decimals=decimals,
        interval=(float(cell["ci_low"]), float(cell["ci_high"])),
        interval_label=INTERVAL_LABELS.get(str(cell["ci_over"]), ""),
    )


def _fmt_published(
    pub_mean: float, pub_std: float, delta: float, decimals: int, derived: bool = False
) -> str:
    if not np.isfinite(pub_mean):
        return ""
    value = _fmt(pub_mean, pub_std, decimals) + (" (derived)" if derived else "")
    if np.isfinite(delta):
        # adding 0.0 turns a rounded -0.0 into 0.0, so it prints as "+0.0"
        value += f", Δ {round(delta, decimals) + 0.0:+.{decimals}f}"
    return value


def format_main_table(long: pd.DataFrame, *, decimals: int = 1) -> pd.DataFrame:
    """Format :func:`~pipeline_lib.paper.aggregate.main_table`'s long frame for display.

    One row per method x detector.

    Parameters
    ----------
    long : DataFrame
        Output of :func:`~pipeline_lib.paper.aggregate.main_table`.
    decimals : int, default=1
        Decimals shown.

    Returns
    -------
    DataFrame
        Columns ``Representation``, ``Detector``, then per data set ``<Dataset>``
        (``"92.4 ± 0.6 [91.8, 93.0]"``: mean ± std [95 % interval over seeds];
        ``"92.4 (n=1) [90.1, 94.7] over classes"`` for one seed (or ``over the test set``),
        with ``" [45/50 runs, 4/5 seeds]"``
        appended when incomplete,
        ``"—"`` when there is no result) and, when any published number is present,
        ``<Dataset> paper`` (``"92.5 ± 0.6, Δ -0.1"``; ``(derived)`` marks a published
        mean recomputed over the data sets shown).

    Raises
    ------
    ValueError
        If ``long`` lacks a column of :data:`MAIN_COLUMNS`.
    """
    require_columns(long, MAIN_COLUMNS, "main_table")
    has_published = bool(long["published_mean"].notna().any())
    datasets = order_ids(long["dataset"].unique(), [*DATASET_DISPLAY, "mean"])
    datasets = [d for d in datasets if d != "mean"] + (["mean"] if "mean" in datasets else [])
    rows = []
    for (method, detector), group in long.groupby(["method", "detector"], sort=False):
        row = {
            "Representation": display_name("method", method),
            "Detector": display_name("detector", detector),
        }
        cells = group.set_index("dataset")
        for dataset in datasets:
            name = display_name("dataset", dataset)
            if dataset not in cells.index:
                row[name] = "—"
                if has_published:
                    row[f"{name} paper"] = ""
                continue
            cell = cells.loc[dataset]
            text = _fmt_cell(cell, decimals)
            if not cell["complete"]:
                text += (
                    f" [{cell['n_results']}/{cell['expected_results']} runs, "
                    f"{cell['n_seeds']}/{cell['expected_seeds']} seeds]"
                )
            row[name] = text
            if has_published:
                row[f"{name} paper"] = _fmt_published(
                    cell["published_mean"],
                    cell["published_std"],
                    cell["delta"],
                    decimals,
                    bool(cell["published_derived"]),
                )
        rows.append(row)
    return pd.DataFrame(rows)


def format_per_class_table(long: pd.DataFrame, *, decimals: int = 1) -> pd.DataFrame:
    """Format :func:`~pipeline_lib.paper.aggregate.per_class_table`'s long frame.

    Rows are classes, columns method / detector; ``decimals`` is as in
    :func:`format_main_table`.

    Returns
    -------
    DataFrame
        A ``Class`` column, then one column ``"<Representation> / <Detector>"`` per pair with
        cells ``"90.9 ± 0.5 [90.3, 91.5] (paper 90.9 ± 0.5, Δ +0.0)"`` (``"90.9 (n=1)
        [90.2, 91.6] over the test set (paper ...)"`` for one seed); incomplete cells end with
        ``" [3/5 seeds]"`` and the ``mean`` row with ``" [incomplete]"``.

    Raises
    ------
    ValueError
        If ``long`` lacks a column of :data:`PER_CLASS_COLUMNS`.
    """
    require_columns(long, PER_CLASS_COLUMNS, "per_class_table")
    classes = list(dict.fromkeys(long["inlier"]))
    frame = pd.DataFrame({"Class": classes})
    for (method, detector), group in long.groupby(["method", "detector"], sort=False):
        column = f"{display_name('method', method)} / {display_name('detector', detector)}"
        cells = group.set_index("inlier")
        texts = []
        for inlier in classes:
            cell = cells.loc[inlier]
            text = _fmt_cell(cell, decimals)
            published = _fmt_published(
                cell["published_mean"], cell["published_std"], cell["delta"], decimals
            )
            if published:
                text += f" (paper {published})"
            if not cell["complete"]:
                text += (
                    " [incomplete]"
                    if inlier == "mean"
                    else f" [{cell['n_seeds']}/{cell['expected_seeds']} seeds]"
                )
            texts.append(text)
        frame[column] = texts
    return frame
