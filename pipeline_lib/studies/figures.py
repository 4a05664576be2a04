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
from matplotlib.patches import Patch

from pipeline_lib.paper.plots import mean_std_bars
from pipeline_lib.studies.display import label

__all__ = [
    "DPI",
    "SPACE_NAMES",
    "auc_axis",
    "bar_auc_axis",
    "bar_panel",
    "draw_lines",
    "finish_auc_figure",
    "finish_legend",
    "hatch_incomplete",
    "legend_below",
    "new_figure",
    "ours_bars",
    "palette",
    "plot_paper",
    "plot_series",
    "space_lines",
]

DPI = 120
#: Display names of the feature spaces: the encoder's f and the projection head's g(f).
SPACE_NAMES = {"f": "f", "g": "g(f)"}
#: Line style and marker of the AUC of f (solid) and of g(f) (dashed).
_SPACE_STYLES = (("f", "-", "o"), ("g", "--", "s"))


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
    name: Callable[[Any], str] | None = None,
    x_map: Callable[[Any], float] | None = None,
    dodge: float = 0.0,
    linestyle: str = "-",
    marker: str = "o",
    paper: bool = True,
) -> None:
    """One :func:`plot_series` per ``hue_col`` value, x sorted; the paper's values as diamonds.

    ``name`` labels a hue value (default: its method's display name); ``x_map`` turns
    ``x_col`` values into positions (categorical axes); ``dodge`` shifts the hue groups
    sideways so error bars do not overlap.
    """
    name = name or (lambda hue: label("method", hue))
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


def ours_bars(
    ax: Axes,
    x: np.ndarray,
    rows: pd.DataFrame,
    *,
    colour: Any,
    label_text: str,
    paper_label: str = "paper",
    capsize: float = 3,
    width: float = 0.8,
) -> None:
    """Our means ± std as bars (``gid="ours"``) where a cell has a mean, hatched where it
    misses results, and the paper's values as diamonds over the same ``x``.

    ``colour`` is one colour, or a list with one per row of ``rows``.
    """
    has = rows["mean"].notna().to_numpy()
    if isinstance(colour, list):
        colour = [c for c, keep in zip(colour, has, strict=True) if keep]
    bars = mean_std_bars(
        ax, x, rows, width=width, capsize=capsize, color=colour, label=label_text, gid="ours"
    )
    hatch_incomplete(bars, rows["n_missing"].to_numpy()[has] > 0)
    plot_paper(ax, x, rows["paper_mean"].to_numpy(dtype=float), label_text=paper_label)


def bar_auc_axis(ax: Axes, rows: pd.DataFrame) -> None:
    """Y limits and label of a bar chart's AUC axis: from a round number below the bars
    (mean - std) and the paper's values to 100."""
    low = np.nanmin(
        np.concatenate([rows["mean"] - rows["std"].fillna(0), rows["paper_mean"], [100.0]])
    )
    ax.set_ylim(max(0.0, 5.0 * np.floor((low - 3.0) / 5.0)), 100.0)
    ax.set_ylabel("ROC AUC (x100)")


def legend_below(fig: Figure, ax: Axes, *, ncols: int, hatched: bool = False) -> None:
    """One legend below the panels from ``ax``'s unique labels; ``hatched`` adds the key of
    hatched (incomplete) bars."""
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    if hatched:
        unique["hatched: results missing"] = Patch(facecolor="white", edgecolor="grey", hatch="//")
    fig.legend(
        list(unique.values()),
        list(unique),
        fontsize="small",
        ncols=ncols,
        loc="outside lower center",
    )


def space_lines(
    ax: Axes,
    rows_of: Callable[[str], pd.DataFrame],
    *,
    x_col: str,
    colours: Mapping[Any, Any],
    dodge: float = 0.0,
) -> None:
    """The AUC of f (solid) and of g(f) (dashed) per base method; ``rows_of(space)`` gives
    a space's rows."""
    for space, style, marker in _SPACE_STYLES:
        draw_lines(
            ax,
            rows_of(space),
            x_col=x_col,
            hue_col="base_method",
            colours=colours,
            name=lambda m, s=space: f"{label('method', m)}, {SPACE_NAMES[s]}",
            linestyle=style,
            marker=marker,
            dodge=dodge,
        )


def finish_auc_figure(
    fig: Figure, axes: Sequence[Axes], table: pd.DataFrame, *, ncols: int = 4
) -> None:
    """The first panel's AUC axis from the table's mean - std and the paper's values, and
    one legend below the panels (:func:`finish_legend`)."""
    auc_axis(axes[0], table["mean"] - table["std"].fillna(0.0), table["paper_mean"])
    incomplete = bool(len(table)) and bool((table["n_missing"] > 0).any())
    finish_legend(fig, axes, incomplete=incomplete, ncols=ncols)


def finish_whole_number_axis(
    fig: Figure,
    ax: Axes,
    table: pd.DataFrame,
    *,
    ticks: pd.Series,
    xlabel: str,
    title: str,
    ncols: int,
) -> None:
    """A tick at every distinct value of ``ticks`` labelled as an integer (sizes and depths
    are whole numbers the tables hold as floats), the x label and title, then
    :func:`finish_auc_figure`."""
    values = sorted(ticks.unique())
    ax.set_xticks(values, [str(int(v)) for v in values])
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    finish_auc_figure(fig, [ax], table, ncols=ncols)


def bar_panel(
    ax: Axes,
    x: np.ndarray,
    ticks: Sequence[str],
    rows: pd.DataFrame,
    *,
    xlabel: str,
    title: str,
    rotation: float = 30,
) -> None:
    """A bar panel's slanted x ticks and label, its AUC axis (:func:`bar_auc_axis`) and title."""
    ax.set_xticks(x, ticks, rotation=rotation, ha="right")
    ax.set_xlabel(xlabel)
    bar_auc_axis(ax, rows)
    ax.set_title(title)
