"""Figure helpers of the studies: seaborn-styled figures without pyplot, mean ± std lines
with incomplete points hollow, hatched bars, the paper's values as diamonds, one legend."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = [
    "DPI",
    "auc_axis",
    "draw_lines",
    "finish_legend",
    "hatch_incomplete",
    "new_figure",
    "palette",
    "plot_paper",
    "plot_series",
]

DPI = 120


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
