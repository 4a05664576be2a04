"""Figures of the benchmark: per-class AUC bars, ROC curves and test-split AUC during training
(matplotlib Agg + seaborn).

Figures are created as :class:`matplotlib.figure.Figure` objects, not through pyplot, so no
global figure registry fills up in long runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from pipeline_lib.config.keys import ResultKey
from pipeline_lib.paper.aggregate import per_class_table
from pipeline_lib.paper.paired import friedman_p, main_table_ranks
from pipeline_lib.paper.published import display_name
from pipeline_lib.runtime.io import atomic_path

__all__ = [
    "mean_std_bars",
    "plot_eval_curves",
    "plot_mean_ranks",
    "plot_per_class_auc",
    "plot_roc_curves",
    "roc_title",
    "save_figure",
    "write_rank_plot",
]

DPI = 120

#: What every AUC-during-training figure says under its title.
EVAL_CAPTION = "AUC on the TEST split: a diagnostic of training, not a way to pick epochs"


def mean_std_bars(ax: Any, x: np.ndarray, rows: pd.DataFrame, **style: Any) -> Any:
    """Bars of ``rows["mean"]`` with ``rows["std"]`` as error bars (0 where it is missing),
    at the ``x`` of the rows that have a mean (a cell without results draws no bar); ``style``
    goes to ``ax.bar``. Returns its bars."""
    has = rows["mean"].notna().to_numpy()
    return ax.bar(
        x[has], rows["mean"].to_numpy()[has], yerr=rows["std"].fillna(0.0).to_numpy()[has], **style
    )


def plot_per_class_auc(
    results: pd.DataFrame,
    dataset: str,
    published: pd.DataFrame | None = None,
    **selection: Any,
) -> Figure:
    """Bar chart of per-class AUCs of one data set, one bar colour per method x detector.

    Bars show the mean over seeds with the sample std over seeds as error bars, one
    group per inlier class plus a final ``mean`` group (class mean per seed, then over
    seeds), as computed by :func:`pipeline_lib.paper.aggregate.per_class_table`. Published
    per-class values, where present, are drawn as black diamonds on the matching bars.

    Parameters
    ----------
    results : DataFrame
        Job results (see :data:`pipeline_lib.paper.aggregate.RESULT_COLUMNS`).
    dataset : str
        Dataset id.
    published : DataFrame or None, default=None
        Published numbers, e.g. ``load_published()``.
    **selection
        ``contamination``, ``fitset``, ``seeds``, ``class_names``: passed to
        :func:`~pipeline_lib.paper.aggregate.per_class_table` (their defaults are its).

    Returns
    -------
    Figure
        One axes; ``ax.patches`` holds one bar per (class, pair) with a result, and the
        published markers, when any exist, are one scatter (a ``PathCollection``) labelled
        ``"paper"``.

    Raises
    ------
    ValueError
        If there are no results for ``dataset`` in this setting.
    """
    table = per_class_table(results, dataset, published, **selection)
    classes = list(dict.fromkeys(table["inlier"]))
    pairs = list(dict.fromkeys(zip(table["method"], table["detector"], strict=True)))
    palette = sns.color_palette("tab10" if len(pairs) <= 10 else "husl", len(pairs))
    width = 0.8 / len(pairs)
    pub_x, pub_y = [], []
    with sns.axes_style("whitegrid"):
        fig = Figure(
            figsize=(min(6.0 + 0.12 * len(classes) * len(pairs), 40.0), 5.0),
            dpi=DPI,
            layout="constrained",
        )
        ax = fig.add_subplot()
        for k, ((method, detector), colour) in enumerate(zip(pairs, palette, strict=True)):
            rows = table[(table["method"] == method) & (table["detector"] == detector)]
            rows = rows.set_index("inlier").reindex(classes)
            x = np.arange(len(classes)) + (k - (len(pairs) - 1) / 2) * width
            label = f"{display_name('method', method)} / {display_name('detector', detector)}"
            mean_std_bars(
                ax,
                x,
                rows,
                width=width,
                color=colour,
                label=label,
                error_kw={"elinewidth": 0.8, "capsize": 1.5},
            )
            pub = rows["published_mean"].notna().to_numpy()
            pub_x.extend(x[pub])
            pub_y.extend(rows["published_mean"].to_numpy()[pub])
    if pub_x:
        ax.scatter(pub_x, pub_y, marker="D", s=14, color="black", zorder=3, label="paper")
    low = np.nanmin(np.concatenate([table["mean"] - table["std"].fillna(0.0), pub_y or [100.0]]))
    ax.set_ylim(max(0.0, 5.0 * np.floor((low - 2.0) / 5.0)), 100.0)
    ax.set_xticks(np.arange(len(classes)), classes, rotation=45, ha="right")
    ax.set_ylabel("ROC AUC (x100)")
    ax.set_title(f"{display_name('dataset', dataset)}: per-class AUC, mean ± std over seeds")
    ax.grid(axis="y", alpha=0.4)
    fig.legend(fontsize="small", ncols=min(len(pairs) + bool(pub_x), 4), loc="outside lower center")
    return fig


def roc_title(key: ResultKey) -> str:
    """What a ROC figure shows, as its title and its caption on the summary page: the data
    set, the inlier class, the seed and the contamination of the jobs it draws (``key``:
    any one of them)."""
    return (
        f"ROC curves on {display_name('dataset', key.dataset)}: class {key.inlier} as "
        f"inliers, seed {key.seed}, contamination {key.contamination:g}"
    )


def plot_roc_curves(curves: Sequence[Mapping[str, Any]], *, title: str | None = None) -> Figure:
    """Plot ROC curves, one line each, plus the chance diagonal.

    Parameters
    ----------
    curves : sequence of mapping
        Each with ``label`` (str), ``fpr`` and ``tpr`` (array-likes of equal length, values
        in [0, 1]) and ``auc`` (float, ROC AUC x 100, shown in the legend).
    title : str or None, default=None
        Axes title.

    Returns
    -------
    Figure
        One axes with ``len(curves) + 1`` lines (the last is the diagonal).

    Raises
    ------
    ValueError
        If ``curves`` is empty, a key is missing, or ``fpr`` / ``tpr`` are malformed.
    """
    if not curves:
        raise ValueError("curves is empty; need at least one ROC curve")
    with sns.axes_style("whitegrid"):
        fig = Figure(figsize=(5.0, 5.0), dpi=DPI)
        ax = fig.add_subplot()
    palette = sns.color_palette("tab10" if len(curves) <= 10 else "husl", len(curves))
    for curve, colour in zip(curves, palette, strict=True):
        missing = {"label", "fpr", "tpr", "auc"} - set(curve)
        if missing:
            raise ValueError(f"curve {curve.get('label')!r} lacks keys {sorted(missing)}")
        fpr = np.asarray(curve["fpr"], dtype=float)
        tpr = np.asarray(curve["tpr"], dtype=float)
        if fpr.ndim != 1 or fpr.shape != tpr.shape or fpr.size < 2:
            raise ValueError(
                f"curve {curve['label']!r}: fpr {fpr.shape} and tpr {tpr.shape} must be equal "
                "1-d arrays of at least 2 points"
            )
        if np.any((fpr < 0) | (fpr > 1) | (tpr < 0) | (tpr > 1)):
            raise ValueError(f"curve {curve['label']!r}: fpr and tpr must lie in [0, 1]")
        ax.plot(fpr, tpr, color=colour, label=f"{curve['label']} (AUC {curve['auc']:.1f})")
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=0.8, label="chance")
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_aspect("equal")
    ax.set_xlabel("False positive rate (inliers flagged)")
    ax.set_ylabel("True positive rate (outliers flagged)")
    if title:
        ax.set_title(title, fontsize="small")
    ax.grid(alpha=0.4)
    ax.legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    return fig


def plot_eval_curves(history: Sequence[Mapping[str, Any]], *, title: str | None = None) -> Figure:
    """AUC against epoch, one line per detector, from the ``eval`` of a training history.

    The AUCs are the test split's (``train.eval_every``,
    :mod:`pipeline_lib.detection.epoch_eval`); the figure says so under its title, since
    picking the epoch with the best of them would tune on the test set.

    Parameters
    ----------
    history : sequence of mapping
        ``train_history.json``'s ``history``: per-epoch records, those that were
        evaluated holding ``eval`` (detector -> AUC x 100).
    title : str or None, default=None
        What was trained (class, method, seed); the caption line is always added.

    Returns
    -------
    Figure
        One axes, one line per detector (in the order the records first name them).

    Raises
    ------
    ValueError
        If no record holds ``eval``.
    """
    evaluated = [record for record in history if record.get("eval")]
    if not evaluated:
        raise ValueError("no epoch of the history holds 'eval': train with train.eval_every")
    detectors = list(dict.fromkeys(name for record in evaluated for name in record["eval"]))
    with sns.axes_style("whitegrid"):
        fig = Figure(figsize=(6.0, 4.0), dpi=DPI)
        ax = fig.add_subplot()
    palette = sns.color_palette("tab10" if len(detectors) <= 10 else "husl", len(detectors))
    for detector, colour in zip(detectors, palette, strict=True):
        points = [
            (int(record["epoch"]), float(record["eval"][detector]))
            for record in evaluated
            if detector in record["eval"]
        ]
        epochs, aurocs = zip(*points, strict=True)
        ax.plot(epochs, aurocs, marker="o", color=colour, label=display_name("detector", detector))
    ax.set_xlabel("epoch")
    ax.set_ylabel("test-split AUC x 100")
    heading = f"{title}\n{EVAL_CAPTION}" if title else EVAL_CAPTION
    ax.set_title(heading, fontsize="small")
    ax.grid(alpha=0.4)
    ax.legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    return fig


def plot_mean_ranks(ranks: pd.DataFrame, *, friedman: float = float("nan")) -> Figure:
    """Mean-rank dot plot: each row's rank on every data set and its mean, best on top.

    Parameters
    ----------
    ranks : DataFrame
        :func:`pipeline_lib.paper.paired.mean_ranks`: index the rows, one column per data
        set (id), then ``mean_rank``.
    friedman : float, default=NaN
        Friedman's p-value (:func:`pipeline_lib.paper.paired.friedman_p`), put in the title
        where finite.

    Returns
    -------
    Figure
        Small markers: the rank on one data set (one colour per data set); a black bar: the
        mean rank. Rank 1 (highest AUC) on the left.

    Raises
    ------
    ValueError
        If ``ranks`` has no row or no ``mean_rank`` column.
    """
    if "mean_rank" not in ranks.columns or ranks.empty:
        raise ValueError(f"ranks needs rows and a mean_rank column; has {list(ranks.columns)}")
    datasets = [c for c in ranks.columns if c != "mean_rank"]
    n_rows = len(ranks)
    fig = Figure(figsize=(6.5, 1.2 + 0.35 * n_rows), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(n_rows)[::-1]  # best row on top
    palette = sns.color_palette("colorblind", len(datasets))
    for k, (dataset, colour) in enumerate(zip(datasets, palette, strict=True)):
        # a small vertical offset per data set keeps tied ranks visible
        offset = (k - (len(datasets) - 1) / 2) * 0.08
        ax.scatter(
            ranks[dataset], y + offset, s=18, color=colour, label=display_name("dataset", dataset)
        )
    ax.scatter(ranks["mean_rank"], y, marker="|", s=300, color="black", label="mean rank")
    ax.set_yticks(y, [str(name) for name in ranks.index])
    ax.set_xlim(0.5, n_rows + 0.5)
    ax.set_xlabel("rank on a data set (1 = highest mean AUC)")
    title = f"Ranks across {len(datasets)} data sets"
    if np.isfinite(friedman):
        title += f" (Friedman p = {friedman:.3g})"
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return fig


def write_rank_plot(results: pd.DataFrame, path: str | os.PathLike) -> Path | None:
    """Write the main table's mean-rank plot to ``path``; None (nothing written) below 3
    data sets, where ranks across data sets mean nothing.

    Parameters
    ----------
    results : DataFrame
        Job results (the tidy ``results.csv``).
    path : path
        The PNG to write.

    Returns
    -------
    Path or None
        ``path``, or None when the results hold fewer than
        :data:`pipeline_lib.paper.paired.MIN_RANK_DATASETS` data sets.
    """
    ranks = main_table_ranks(results)
    if ranks is None:
        return None
    return save_figure(plot_mean_ranks(ranks, friedman=friedman_p(ranks)), path)


def save_figure(fig: Figure, path: str | os.PathLike) -> Path:
    """Save ``fig`` as a PNG (dpi 120) atomically.

    Parameters
    ----------
    fig : Figure
        The figure.
    path : str or PathLike
        Destination ending in ``.png``; the parent folder is created if needed.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ValueError
        If ``path`` does not end in ``.png``.
    """
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"path={str(path)!r} must end in .png")
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI)
    return path
