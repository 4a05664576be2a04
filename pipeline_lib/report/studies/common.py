"""Shared machinery of the study builders: the result contract, the join of results to the
expected grid, statistics over seeds that count what is missing, published look-ups,
display formatting, figure helpers, and writing / reading a study's files.

Every study works on two frames with the columns of :data:`KEY_COLUMNS`: ``frame`` (job
results, plus ``auroc`` and ``mmd``) and ``expected`` (every job the study's grid should
have). The expected grid, not the results, defines a study's cells, so a job that never ran
shows up as missing instead of silently shrinking an average.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from pipeline_lib.dag.keys import STUDY_KEY_COLUMNS, contamination_value
from pipeline_lib.registry import DEFAULT_DISTRIBUTIONS
from pipeline_lib.report.published import display_name, load_published
from pipeline_lib.report.study_frames import VARIANT_COLUMNS
from pipeline_lib.report.tables import _to_html, _to_latex, format_mean_std
from pipeline_lib.runtime.io import atomic_path

__all__ = [
    "DEFAULT_DA",
    "DEVIATION_COLUMNS",
    "DPI",
    "JOB_KEY",
    "KEY_COLUMNS",
    "PAPER_TABLE_NUMBERS",
    "STAT_COLUMNS",
    "StudyResult",
    "add_paper",
    "any_incomplete",
    "auc_axis",
    "cell_stats",
    "check_options",
    "common_notes",
    "concat_deviations",
    "deviation_rows",
    "draw_lines",
    "finish_legend",
    "format_cell",
    "format_paper",
    "format_value",
    "is_default_variant",
    "join_expected",
    "label",
    "load_study",
    "missing_note",
    "new_figure",
    "palette",
    "pivot_display",
    "plot_paper",
    "plot_series",
    "published_main",
    "sort_table",
    "study_files",
    "write_study",
]

DPI = 120

#: The columns that identify a job's result; the variant parameters follow from ``method``.
JOB_KEY: tuple[str, ...] = STUDY_KEY_COLUMNS

#: Columns of ``frame`` and ``expected`` that identify a job (``frame`` adds auroc, mmd):
#: the job key with ``base_method`` after ``method``, then the variant parameters.
_AFTER_METHOD = JOB_KEY.index("method") + 1
KEY_COLUMNS: tuple[str, ...] = (
    *JOB_KEY[:_AFTER_METHOD],
    "base_method",
    *JOB_KEY[_AFTER_METHOD:],
    *VARIANT_COLUMNS,
)

_STRING_COLUMNS = ("dataset", "inlier", "method", "base_method", "fitset", "detector", "space")
_FLOAT_PARAMS = ("batch_size", "head_depth", "train_size")
_REQUIRED = ("dataset", "inlier", "contamination", "seed", "method", "fitset", "detector")

#: Statistics columns of every study table (the other columns name the cell).
STAT_COLUMNS: tuple[str, ...] = (
    "mean",
    "std",
    "n_seeds",
    "n_expected_seeds",
    "n_results",
    "n_expected",
    "n_missing",
    "paper_mean",
    "paper_std",
    "paper_source",
    "deviation",
)

#: Columns of :attr:`StudyResult.deviations`; ``unit`` is ``"AUC"`` for AUC x 100.
DEVIATION_COLUMNS: tuple[str, ...] = ("item", "ours", "paper", "deviation", "n_missing", "unit")

#: Distribution augmentation of the paper's main table (the registry's, torch-free).
DEFAULT_DA: tuple[str, ...] = DEFAULT_DISTRIBUTIONS

#: Paper table labels -> their numbers in the paper, for readable sources.
PAPER_TABLE_NUMBERS: dict[str, int] = {
    "visual_results": 2,
    "visual_results_comparison": 3,
    "mvtec_results_summary": 4,
    "performance_gaussian": 5,
    "supp_ensemble": 6,
    "visual_results_full": 7,
}

# Tables with class-mean numbers per (method, detector, dataset), preferred first.
_MAIN_TABLES = ("visual_results_full", "visual_results", "performance_gaussian")
_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def _empty_deviations() -> pd.DataFrame:
    return pd.DataFrame({col: pd.Series(dtype=object) for col in DEVIATION_COLUMNS})


@dataclass
class StudyResult:
    """What a study builder returns and :func:`write_study` writes.

    Attributes
    ----------
    kind : str
        The study kind (a key of :data:`pipeline_lib.report.studies.STUDY_KINDS`).
    table : DataFrame
        Tidy: one row per cell, the cell's id columns then :data:`STAT_COLUMNS`
        (ours ``mean``/``std`` over seeds, counts, ``n_missing`` expected results without a
        result, the paper's ``paper_mean``/``paper_std``/``paper_source`` where known and
        ``deviation = mean - paper_mean``).
    figures : dict of str to Figure
        Figures by short name (``[A-Za-z0-9_]+``).
    deviations : DataFrame
        Columns :data:`DEVIATION_COLUMNS`, one row per number with a published counterpart.
    notes : list of str
        What the reader must know: detector choices, excluded points, missing inputs.
    display : DataFrame or None
        The human table (formatted strings) for Markdown / LaTeX / HTML; None uses
        ``table``.
    caption : str
        Caption of the human table.
    protocol : list of str
        Lines shown above the human table: how the run's protocol differs from the
        paper's (:func:`pipeline_lib.report.protocol.protocol_notes`); empty when not known.
    """

    kind: str
    table: pd.DataFrame
    figures: dict[str, Figure] = field(default_factory=dict)
    deviations: pd.DataFrame = field(default_factory=_empty_deviations)
    notes: list[str] = field(default_factory=list)
    display: pd.DataFrame | None = None
    caption: str = ""
    protocol: list[str] = field(default_factory=list)


def check_options(options: Mapping[str, Any], allowed: Iterable[str], kind: str) -> None:
    """Raise on an option key a study does not read, so a typo never goes unnoticed.

    Raises
    ------
    ValueError
        Naming the unknown keys and the allowed ones.
    """
    allowed = set(allowed) | {"decimals", "ddof"}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ValueError(
            f"study kind {kind!r}: unknown options {unknown}; allowed {sorted(allowed)}"
        )


def _canonical(df: pd.DataFrame, what: str) -> pd.DataFrame:
    """Fill optional key columns with their defaults and give every key column one dtype."""
    missing = [col for col in _REQUIRED if col not in df.columns]
    if missing:
        raise ValueError(f"{what} frame lacks columns {missing}; has {list(df.columns)}")
    out = df.copy()
    if "base_method" not in out.columns:
        out["base_method"] = out["method"]
    if "space" not in out.columns:
        out["space"] = "f"
    if "distributions" not in out.columns:
        out["distributions"] = ""
    for col in _FLOAT_PARAMS:
        if col not in out.columns:
            out[col] = np.nan
        out[col] = pd.to_numeric(out[col], errors="raise").astype(float)
    for col in _STRING_COLUMNS:
        out[col] = out[col].fillna("").astype(str)
    out["distributions"] = out["distributions"].fillna("").astype(str).map(_normalise_set_text)
    out["seed"] = out["seed"].astype(int)
    # Compared as the path writes it (the job's identity), not by an ad-hoc rounding.
    out["contamination"] = out["contamination"].map(contamination_value).astype(float)
    return out


def _normalise_set_text(text: str) -> str:
    """``" hflip, rot90"`` -> ``"hflip,rot90"``; order kept (the set is compared as a set)."""
    return ",".join(part.strip() for part in str(text).split(",") if part.strip())


def join_expected(frame: pd.DataFrame, expected: pd.DataFrame) -> pd.DataFrame:
    """Attach each expected job's result (``auroc``, ``mmd``; NaN when missing).

    Results are matched on :data:`JOB_KEY`; the variant parameters are taken from
    ``expected``. Results outside the expected grid are ignored, and a result row whose
    ``auroc`` is NaN counts as missing.

    Parameters
    ----------
    frame : DataFrame
        Job results: :data:`KEY_COLUMNS` (``base_method``, ``space``, the variant parameters
        may be absent: method, ``"f"``, NaN / ``""``), ``auroc`` and optionally ``mmd``.
    expected : DataFrame
        Every job of the study's grid, same key columns.

    Returns
    -------
    DataFrame
        One row per expected job: :data:`KEY_COLUMNS`, ``auroc``, ``mmd``.

    Raises
    ------
    ValueError
        If a column is missing, ``expected`` is empty or repeats a job, a job has two
        results, or an AUC lies outside [0, 100].
    """
    if "auroc" not in frame.columns:
        raise ValueError(f"results frame lacks column 'auroc'; has {list(frame.columns)}")
    exp = _canonical(expected, "expected")
    if exp.empty:
        raise ValueError("expected frame is empty: a study needs its grid of jobs")
    dup = exp.duplicated(list(JOB_KEY), keep=False)
    if dup.any():
        rows = exp.loc[dup, list(JOB_KEY)].head(3).to_dict("records")
        raise ValueError(f"expected frame lists jobs twice, e.g. {rows}")
    res = _canonical(frame, "results")
    res["auroc"] = pd.to_numeric(res["auroc"], errors="raise").astype(float)
    res["mmd"] = pd.to_numeric(res["mmd"], errors="raise").astype(float) if "mmd" in res else np.nan
    res = res[res["auroc"].notna()]
    bad = res[~res["auroc"].between(0.0, 100.0)]
    if len(bad):
        raise ValueError(
            f"AUCs must lie in [0, 100] (x100); bad rows {bad.head(3).to_dict('records')}"
        )
    dup = res.duplicated(list(JOB_KEY), keep=False)
    if dup.any():
        rows = res.loc[dup, list(JOB_KEY)].head(3).to_dict("records")
        raise ValueError(f"results frame has two results for jobs, e.g. {rows}")
    joined = exp[list(KEY_COLUMNS)].merge(
        res[[*JOB_KEY, "auroc", "mmd"]], on=list(JOB_KEY), how="left", validate="one_to_one"
    )
    return joined


def cell_stats(
    cells: pd.DataFrame,
    by: Sequence[str],
    *,
    value: str = "auroc",
    ddof: int = 0,
) -> pd.DataFrame:
    """Mean and std over seeds of the per-seed class mean, with counts of what is missing.

    As the paper's tables (Sec. 4.2): per seed the value is averaged over the inlier classes
    present; the cell is the mean and std (``ddof``, default 0 = population std, as
    :mod:`pipeline_lib.report.aggregate`) of those seed means. A seed with some classes missing
    still contributes, but the cell's ``n_missing`` says so and the formatted tables and
    the summary mark it.

    Parameters
    ----------
    cells : DataFrame
        Output of :func:`join_expected` (possibly filtered and with extra columns).
    by : sequence of str
        Columns naming a cell.
    value : str, default="auroc"
        Column to average (NaN = missing).
    ddof : int, default=0
        Delta degrees of freedom of the std over seeds.

    Returns
    -------
    DataFrame
        ``by`` columns then ``mean, std, n_seeds`` (seeds with a result),
        ``n_expected_seeds, n_results, n_expected, n_missing``; one row per group, in
        sorted order of ``by``.

    Raises
    ------
    ValueError
        If a cell holds the same (inlier, seed) twice: two variants were mapped onto one
        cell and would be averaged together.
    """
    by = list(by)
    columns = [
        *by,
        "mean",
        "std",
        "n_seeds",
        "n_expected_seeds",
        "n_results",
        "n_expected",
        "n_missing",
    ]
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
        rows.append(
            dict(zip(by, key, strict=True))
            | {
                "mean": mean,
                "std": std,
                "n_seeds": int(seed_means.size),
                "n_expected_seeds": int(group["seed"].nunique()),
                "n_results": int(len(present)),
                "n_expected": int(len(group)),
                "n_missing": int(len(group) - len(present)),
            }
        )
    return pd.DataFrame(rows, columns=columns)


def published_main() -> dict[tuple[str, str, str], tuple[float, float, str]]:
    """Map (method, detector, dataset) -> (mean, std, source) of the paper's class-mean tables.

    Table 7 (``visual_results_full``) is preferred, then Table 2 and Table 5; ``source``
    reads like ``"Table 7"``.
    """
    published = load_published()
    out: dict[tuple[str, str, str], tuple[float, float, str]] = {}
    for table in _MAIN_TABLES:
        rows = published[(published["table"] == table) & (published["inlier"] == "")]
        for r in rows.itertuples(index=False):
            key = (str(r.method), str(r.detector), str(r.dataset))
            out.setdefault(
                key, (float(r.mean), float(r.std), f"Table {PAPER_TABLE_NUMBERS[table]}")
            )
    return out


def is_default_variant(
    row: Mapping[str, Any] | pd.Series,
    *,
    ignore: Sequence[str] = (),
    defaults: Mapping[str, float] | None = None,
) -> bool:
    """True when a row's variant parameters are the paper's defaults (its main-table setting).

    ``NaN`` / ``""`` mean "the method's default"; ``defaults`` gives explicit default values
    that count as default too (e.g. ``{"batch_size": 32}``); columns in ``ignore`` are the
    study's own axis and are not checked. For ``contrastive_da`` the default distribution set
    is :data:`DEFAULT_DA`.
    """
    defaults = defaults or {}
    for col in _FLOAT_PARAMS:
        if col in ignore:
            continue
        value = float(row[col]) if col in row and row[col] is not None else np.nan
        if not (math.isnan(value) or (col in defaults and value == float(defaults[col]))):
            return False
    if "distributions" not in ignore:
        dist = str(row.get("distributions", "") or "")
        if dist and not (
            row.get("base_method") == "contrastive_da" and set(dist.split(",")) == set(DEFAULT_DA)
        ):
            return False
    return True


def add_paper(
    table: pd.DataFrame,
    lookup: Callable[[pd.Series], tuple[float, float, str] | None],
) -> pd.DataFrame:
    """Add ``paper_mean, paper_std, paper_source, deviation`` to a stats table.

    ``lookup(row)`` returns ``(mean, std, source)`` or None where the paper has no number.
    """
    values = [lookup(row) for _, row in table.iterrows()]
    table = table.copy()
    table["paper_mean"] = pd.Series(
        [v[0] if v else np.nan for v in values], index=table.index, dtype=float
    )
    table["paper_std"] = pd.Series(
        [v[1] if v else np.nan for v in values], index=table.index, dtype=float
    )
    table["paper_source"] = [v[2] if v else "" for v in values]
    table["deviation"] = table["mean"].astype(float) - table["paper_mean"]
    return table


def deviation_rows(
    table: pd.DataFrame, describe: Callable[[pd.Series], str], *, unit: str = "AUC"
) -> pd.DataFrame:
    """One :data:`DEVIATION_COLUMNS` row per table row with a published number."""
    rows = [
        {
            "item": describe(row),
            "ours": float(row["mean"]),
            "paper": float(row["paper_mean"]),
            "deviation": float(row["mean"]) - float(row["paper_mean"]),
            "n_missing": int(row["n_missing"]),
            "unit": unit,
        }
        for _, row in table.iterrows()
        if np.isfinite(float(row["paper_mean"]))
    ]
    return pd.DataFrame(rows, columns=list(DEVIATION_COLUMNS)) if rows else _empty_deviations()


def concat_deviations(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate deviation frames, skipping empty ones (keeps dtypes clean)."""
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else _empty_deviations()


def label(kind: str, ident: str) -> str:
    """Display name of a method / detector / dataset id (the id itself when unknown)."""
    return display_name(kind, str(ident))


def format_value(
    mean: float,
    std: float = np.nan,
    *,
    n_missing: int = 0,
    n_expected: int = 0,
    decimals: int = 1,
    n_seeds: int | None = None,
) -> str:
    """``"92.4 ± 0.6"``; ``"92.4 (n=1)"`` from one seed (a std of 0 would read as a measured
    zero spread); ``"—"`` without a value; ``" [missing 3/50]"`` when incomplete."""
    text = format_mean_std(mean, std, n_seeds=n_seeds, decimals=decimals)
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
    """A table cell with ours, the missing mark and the paper: ``"92.4 ± 0.6 (paper ...)"``."""
    text = format_value(
        row["mean"],
        row["std"],
        n_missing=row["n_missing"],
        n_expected=row["n_expected"],
        decimals=decimals,
        n_seeds=row.get("n_seeds"),
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


def palette(values: Sequence[Any]) -> dict[Any, tuple[float, float, float]]:
    """One tab10 (or husl, past 10) colour per value, stable across the panels of a figure."""
    values = list(dict.fromkeys(values))
    colours = sns.color_palette("tab10" if len(values) <= 10 else "husl", max(len(values), 1))
    return dict(zip(values, colours, strict=False))


def new_figure(
    n_panels: int, *, width: float = 4.4, height: float = 3.6, sharey: bool = True
) -> tuple[Figure, list[Axes]]:
    """A seaborn-styled :class:`Figure` (no pyplot registry) with ``n_panels`` side by side."""
    with sns.axes_style("whitegrid"):
        fig = Figure(figsize=(width * max(n_panels, 1), height), dpi=DPI, layout="constrained")
        axes = fig.subplots(1, max(n_panels, 1), sharey=sharey, squeeze=False)[0]
    return fig, list(axes)


def plot_series(
    ax: Axes,
    x: Sequence[float],
    stats: pd.DataFrame,
    *,
    colour: Any,
    name: str,
    linestyle: str = "-",
    marker: str = "o",
) -> None:
    """Mean ± std over seeds as a line with error bars; incomplete points drawn hollow.

    The line carries ``gid="ours"`` (tests and readers can find it); hollow markers over
    points whose cell misses results carry ``gid="incomplete"``.
    """
    x = np.asarray(x, dtype=float)
    y = stats["mean"].to_numpy(dtype=float)
    yerr = stats["std"].fillna(0.0).to_numpy(dtype=float)
    has = np.isfinite(y)
    if not has.any():
        return
    container = ax.errorbar(
        x[has],
        y[has],
        yerr=yerr[has],
        color=colour,
        linestyle=linestyle,
        marker=marker,
        markersize=5,
        capsize=2.5,
        linewidth=1.5,
        label=name,
    )
    container.lines[0].set_gid("ours")
    incomplete = has & (stats["n_missing"].to_numpy() > 0)
    if incomplete.any():
        ax.scatter(
            x[incomplete],
            y[incomplete],
            s=42,
            facecolor="white",
            edgecolor=colour,
            linewidth=1.5,
            zorder=4,
            marker=marker,
            gid="incomplete",
        )


def hatch_incomplete(bars: Sequence[Any], incomplete: Sequence[bool]) -> None:
    """Hatch and fade the bars of cells with missing results (never drawn like complete ones)."""
    for bar, missing in zip(bars, incomplete, strict=True):
        if missing:
            bar.set_hatch("//")
            bar.set_alpha(0.55)


def plot_paper(
    ax: Axes,
    x: Sequence[float],
    y: Sequence[float],
    *,
    colour: Any = "black",
    label_text: str | None = "paper",
) -> None:
    """Published values as diamonds with a black edge (``gid="paper"``)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    keep = np.isfinite(y)
    if keep.any():
        ax.scatter(
            x[keep],
            y[keep],
            marker="D",
            s=38,
            facecolor=colour,
            edgecolor="black",
            linewidth=1.0,
            zorder=5,
            label=label_text,
            gid="paper",
        )


def finish_legend(fig: Figure, axes: Sequence[Axes], *, incomplete: bool, ncols: int = 4) -> None:
    """One legend below the panels: unique labels, plus a note on hollow markers."""
    from matplotlib.lines import Line2D

    handles, labels = [], []
    for ax in axes:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            if text not in labels and not text.startswith("_"):
                handles.append(handle)
                labels.append(text)
    if incomplete:
        handles.append(
            Line2D(
                [], [], marker="o", linestyle="", markerfacecolor="white", markeredgecolor="grey"
            )
        )
        labels.append("hollow: results missing")
    if handles:
        fig.legend(
            handles,
            labels,
            fontsize="small",
            ncols=min(len(labels), ncols),
            loc="outside lower center",
        )


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


def _frame_to_csv(frame: pd.DataFrame, path: Path) -> Path:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, lineterminator="\n")
    return path


def _text_to_file(text: str, path: Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


def write_study(
    result: StudyResult,
    out_dir: Path,
    name: str,
    *,
    tables: Sequence[str | os.PathLike] | None = None,
) -> list[Path]:
    """Write a study's tables, deviations, notes and figures, each file atomically.

    Files: ``<name>.csv`` (the tidy table), ``<name>.md`` / ``.tex`` / ``.html`` (the
    human table, with the protocol line above it and the notes in the Markdown and HTML),
    ``<name>_deviations.csv``,
    ``<name>.json`` (kind, caption, notes, figure names; what :func:`load_study` reads) and
    ``<name>_<figure>.png`` per figure.

    Parameters
    ----------
    result : StudyResult
        A builder's output.
    out_dir : Path
        Destination folder, created if needed.
    name : str
        File stem, ``[A-Za-z0-9_]+``.
    tables : sequence of path, optional
        Human tables of this study written elsewhere (the main grid's are
        ``results/summary/main_table.*``, written once by ``make_tables``): the
        ``.md`` / ``.tex`` / ``.html`` are then not written again, and the manifest lists
        these paths (relative to ``out_dir``) under ``"tables"`` for the summary's links.
        ``<name>.csv`` is still written: it is the tidy table the summary ranks.

    Returns
    -------
    list of Path
        The files written: csv, md, tex, html (unless ``tables``), deviations csv, json,
        then the PNGs.

    Raises
    ------
    ValueError
        If ``name`` or a figure name is not ``[A-Za-z0-9_]+``.
    """
    if not _NAME.match(name):
        raise ValueError(f"name={name!r} must match [A-Za-z0-9_]+")
    bad = [key for key in result.figures if not _NAME.match(key)]
    if bad:
        raise ValueError(f"figure names {bad} must match [A-Za-z0-9_]+")
    out_dir = Path(out_dir)
    caption = result.caption or f"{result.kind} study"
    display = result.display if result.display is not None else result.table
    notes_md = "".join(f"- {note}\n" for note in result.notes)
    above = "".join(f"{line}\n\n" for line in result.protocol)
    markdown = f"{caption}\n\n{above}{display.to_markdown(index=False, floatfmt='.1f')}\n"
    if notes_md:
        markdown += f"\nNotes:\n\n{notes_md}"
    html = _to_html(display, caption, result.protocol)
    if result.notes:
        import html as html_lib

        items = "".join(f"<li>{html_lib.escape(note)}</li>" for note in result.notes)
        html = html.replace("</body>", f"<p>Notes:</p>\n<ul>{items}</ul>\n</body>")
    paths = [_frame_to_csv(result.table, out_dir / f"{name}.csv")]
    if tables is None:
        paths += [
            _text_to_file(markdown, out_dir / f"{name}.md"),
            _text_to_file(
                _to_latex(display, caption, f"tab:{name}", result.protocol),
                out_dir / f"{name}.tex",
            ),
            _text_to_file(html, out_dir / f"{name}.html"),
        ]
    paths.append(_frame_to_csv(result.deviations, out_dir / f"{name}_deviations.csv"))
    meta = {
        "kind": result.kind,
        "caption": caption,
        "notes": list(result.notes),
        "protocol": list(result.protocol),
        "figures": sorted(result.figures),
    }
    if tables is not None:
        meta["tables"] = [Path(os.path.relpath(path, out_dir)).as_posix() for path in tables]
    paths.append(_text_to_file(json.dumps(meta, indent=2) + "\n", out_dir / f"{name}.json"))
    for key, fig in result.figures.items():
        path = out_dir / f"{name}_{key}.png"
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=DPI)
        paths.append(path)
    return paths


def load_study(out_dir: Path, name: str) -> StudyResult | None:
    """Read back what :func:`write_study` wrote (without figures), or None if it is absent.

    A study counts as absent when its ``<name>.json`` or ``<name>.csv`` does not exist, which
    the summary page reports as "not run".

    Parameters
    ----------
    out_dir : Path
        Folder given to :func:`write_study`.
    name : str
        Its ``name``.

    Returns
    -------
    StudyResult or None
        ``figures`` is empty; ``display`` is None.
    """
    out_dir = Path(out_dir)
    meta_path, csv_path = out_dir / f"{name}.json", out_dir / f"{name}.csv"
    if not meta_path.exists() or not csv_path.exists():
        return None
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    table = pd.read_csv(csv_path, keep_default_na=True)
    dev_path = out_dir / f"{name}_deviations.csv"
    deviations = pd.read_csv(dev_path) if dev_path.exists() else _empty_deviations()
    if "unit" not in deviations.columns:
        deviations["unit"] = "AUC"
    return StudyResult(
        kind=str(meta["kind"]),
        table=table,
        deviations=deviations,
        notes=list(meta.get("notes", [])),
        caption=str(meta.get("caption", "")),
        protocol=list(meta.get("protocol", [])),
    )


def study_files(out_dir: Path, name: str) -> list[Path]:
    """The files of a written study the summary page links: tables first, then figures.

    Its own ``<name>.*`` files, the human tables written elsewhere that its manifest lists
    under ``"tables"`` (the main grid's ``results/summary/main_table.*``; they replace its
    own file of the same suffix, so the page shows one ``csv`` link), and the PNGs of
    ``<out_dir>/figures`` (where ``make_study`` moves them for the report's gallery).

    Parameters
    ----------
    out_dir : Path
        Folder given to :func:`write_study`.
    name : str
        Its ``name``.

    Returns
    -------
    list of Path
        Existing files; non-PNG files sorted by name before the PNGs.
    """
    out_dir = Path(out_dir)
    own = list(out_dir.glob(f"{name}.*"))
    meta_path = out_dir / f"{name}.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else {}
    elsewhere = [Path(os.path.normpath(out_dir / table)) for table in meta.get("tables", [])]
    replaced = {path.suffix for path in elsewhere}
    files = [path for path in own if path.suffix not in replaced] + elsewhere
    files += (out_dir / "figures").glob("*.png")
    return sorted(files, key=lambda path: (path.suffix == ".png", path.name))


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


def draw_lines(
    ax: Axes,
    stats: pd.DataFrame,
    *,
    x_col: str,
    hue_col: str,
    colours: Mapping[Any, Any],
    name: Callable[[Any], str],
    x_map: Callable[[Any], float] | None = None,
    dodge: float = 0.0,
    linestyle: str = "-",
    marker: str = "o",
    paper: bool = True,
) -> None:
    """One :func:`plot_series` per ``hue_col`` value, x sorted; the paper's values as diamonds.

    ``x_map`` turns ``x_col`` values into positions (categorical axes); ``dodge`` shifts the
    hue groups sideways so error bars do not overlap.
    """
    hues = [h for h in colours if h in set(stats[hue_col])]
    for i, hue in enumerate(hues):
        rows = stats[stats[hue_col] == hue]
        xs = rows[x_col].map(x_map) if x_map else rows[x_col].astype(float)
        rows = rows.assign(_x=np.asarray(xs, dtype=float)).sort_values("_x")
        xs = rows["_x"].to_numpy() + (i - (len(hues) - 1) / 2) * dodge
        plot_series(
            ax, xs, rows, colour=colours[hue], name=name(hue), linestyle=linestyle, marker=marker
        )
        if paper and "paper_mean" in rows:
            plot_paper(ax, xs, rows["paper_mean"].to_numpy(dtype=float), colour=colours[hue])


def auc_axis(ax: Axes, *values: Sequence[float] | pd.Series) -> None:
    """Y label and limits of an AUC axis: from a round number below the data to 100."""
    data = np.concatenate([np.asarray(v, dtype=float).ravel() for v in values] or [np.array([])])
    data = data[np.isfinite(data)]
    low = float(data.min()) if data.size else 50.0
    ax.set_ylim(max(0.0, 5.0 * math.floor((low - 2.0) / 5.0)), 100.0)
    ax.set_ylabel("ROC AUC (x100)")


def common_notes(ddof: int) -> list[str]:
    """The aggregation rule, stated once per study."""
    return [
        "AUC is ROC AUC x 100 with the outlier as the positive class; per seed it is averaged "
        f"over the inlier classes, then mean ± std (ddof={ddof}) over seeds, as the paper's "
        "tables"
    ]
