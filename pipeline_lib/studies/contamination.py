"""Unsupervised anomaly detection: representations and detectors trained on contaminated
training sets (paper Sec. 4.4 / 5.4, App. A.3, Fig. 5a and Fig. 8).

x = contamination of the training set (0.5 ... 10 % outliers, size unchanged); one panel per
detector (OC-SVM RBF, linear OC-SVM, GDE); one line per representation; the one-class (0 %)
result of each representation is its dashed reference line. The paper's figures are blank in
its LaTeX source, so the only published numbers are the 0 % ones (Tables 2, 5 and 7).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from pipeline_lib.paper.published import DATASET_DISPLAY, METHOD_DISPLAY
from pipeline_lib.studies.contract import StudyResult, check_options, join_expected
from pipeline_lib.studies.display import label, pivot_display, sort_table
from pipeline_lib.studies.figures import (
    auc_axis,
    draw_lines,
    finish_legend,
    new_figure,
    palette,
    plot_paper,
)
from pipeline_lib.studies.paper import (
    add_paper,
    deviation_rows,
    is_default_variant,
    published_main,
)
from pipeline_lib.studies.stats import any_incomplete, cell_stats, common_notes, missing_note

__all__ = ["DEFAULT_DETECTORS", "KIND", "OPTIONS", "build", "percent"]

KIND = "contamination"
#: Option keys this kind reads (besides ``decimals`` and ``ddof``).
OPTIONS: tuple[str, ...] = ("detectors", "fitset", "space")
#: Detectors of the paper's Fig. 8, in panel order.
DEFAULT_DETECTORS: tuple[str, ...] = ("ocsvm", "ocsvm_linear", "gde")


def percent(ratio: float) -> str:
    """``0.005`` -> ``"0.5 %"``."""
    return f"{100.0 * float(ratio):g} %"


def pick(values: pd.Series, wanted: Any, default: tuple[str, ...]) -> list[str]:
    """Explicit ``wanted`` values, else the defaults present, else every value present."""
    present = list(dict.fromkeys(values))
    if wanted is not None:
        return [str(v) for v in ([wanted] if isinstance(wanted, str) else wanted)]
    chosen = [d for d in default if d in present]
    return chosen or sorted(present)


def method_meta(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per method (variant) with its base method and parameters."""
    return cells.drop_duplicates("method").set_index("method")


def main_lookup(meta: pd.DataFrame, *, zero_only: bool = True):
    """Look-up for :func:`add_paper`: the main-table number of a default variant at 0 %."""
    published = published_main()

    def lookup(row: pd.Series):
        if zero_only and float(row.get("contamination", 0.0)) != 0.0:
            return None
        if row.get("fitset", "train") != "train":
            return None
        variant = meta.loc[row["method"]]
        if not is_default_variant(variant):
            return None
        return published.get((variant["base_method"], row["detector"], row["dataset"]))

    return lookup


def build(
    frame: pd.DataFrame,
    expected: pd.DataFrame,
    *,
    options: Mapping[str, Any],
    scores: Mapping | None = None,
) -> StudyResult:
    """AUC against training-set contamination, per detector and representation.

    Options: ``detectors`` (default ocsvm, ocsvm_linear, gde: those present), ``fitset``
    (default ``"train"``: the detector sees the contaminated set), ``space`` (``"f"``),
    ``decimals`` (1), ``ddof`` (0). ``scores`` is not used.

    Returns
    -------
    StudyResult
        ``table``: one row per (dataset, method, detector, contamination); figures: one per
        dataset, one panel per detector; deviations: the 0 % cells the paper publishes.

    Raises
    ------
    ValueError
        On unknown options or when the expected grid selects nothing.
    """
    check_options(options, OPTIONS, KIND)
    decimals, ddof = int(options.get("decimals", 1)), int(options.get("ddof", 0))
    fitset, space = str(options.get("fitset", "train")), str(options.get("space", "f"))
    cells = join_expected(frame, expected)
    cells = cells[(cells["fitset"] == fitset) & (cells["space"] == space)]
    detectors = pick(cells["detector"], options.get("detectors"), DEFAULT_DETECTORS)
    cells = cells[cells["detector"].isin(detectors)]
    if cells.empty:
        raise ValueError(
            f"{KIND}: the expected grid has no jobs with fitset={fitset!r}, space={space!r} "
            f"and detectors {detectors}"
        )
    meta = method_meta(cells)
    stats = cell_stats(cells, ["dataset", "method", "detector", "contamination"], ddof=ddof)
    stats.insert(2, "base_method", stats["method"].map(meta["base_method"]))
    stats.insert(len(stats.columns) - 7, "fitset", fitset)
    table = add_paper(stats, main_lookup(meta))
    table = sort_table(
        table,
        {
            "dataset": list(DATASET_DISPLAY),
            "method": list(METHOD_DISPLAY),
            "detector": detectors,
            "contamination": sorted(table["contamination"].unique()),
        },
    )
    deviations = deviation_rows(
        table,
        lambda r: (
            f"{label('dataset', r['dataset'])}: {label('method', r['method'])} / "
            f"{label('detector', r['detector'])}, contamination 0 % (one-class)"
        ),
    )
    display = pivot_display(
        table,
        [
            ("dataset", "Dataset", lambda v: label("dataset", v)),
            ("method", "Representation", lambda v: label("method", v)),
            ("detector", "Detector", lambda v: label("detector", v)),
        ],
        "contamination",
        lambda c: f"contamination {percent(c)}",
        decimals=decimals,
    )
    figures = {
        str(dataset): _figure(group, detectors, dataset)
        for dataset, group in table.groupby("dataset", sort=False)
    }
    notes = common_notes(ddof) + missing_note(table)
    notes.append(
        f"detector fit on the '{fitset}' set of each job (the contaminated training set when "
        "'train'); the paper's figures for this study are blank in its LaTeX source, so only "
        "the 0 % (one-class) cells have published numbers"
    )
    return StudyResult(
        kind=KIND,
        table=table,
        figures=figures,
        deviations=deviations,
        notes=notes,
        display=display,
        caption="Unsupervised anomaly detection: AUC against training-set contamination "
        "(Sec. 4.4, App. A.3)",
    )


def _figure(table: pd.DataFrame, detectors: list[str], dataset: str):
    """One panel per detector; x = contamination (categorical), 0 % as dashed lines."""
    present = [d for d in detectors if d in set(table["detector"])]
    methods = [m for m in dict.fromkeys(table["method"])]
    colours = palette(methods)
    ratios = sorted(r for r in table["contamination"].unique() if r > 0)
    position = {r: i for i, r in enumerate(ratios)}
    fig, axes = new_figure(len(present))
    for ax, detector in zip(axes, present, strict=True):
        rows = table[table["detector"] == detector]
        curve = rows[rows["contamination"] > 0]
        draw_lines(
            ax,
            curve,
            x_col="contamination",
            hue_col="method",
            colours=colours,
            name=lambda m: label("method", m),
            x_map=position.get,
            dodge=0.06,
            paper=False,
        )
        zero = rows[rows["contamination"] == 0]
        for _, row in zero.iterrows():
            if np.isfinite(row["mean"]):
                ax.axhline(
                    row["mean"],
                    color=colours[row["method"]],
                    linestyle="--",
                    linewidth=1.0,
                    gid="reference",
                    label="_0 %",
                )
        for _, row in zero.iterrows():
            plot_paper(
                ax,
                [-0.6],
                [row["paper_mean"]],
                colour=colours[row["method"]],
                label_text="paper (0 %)",
            )
        ax.set_xticks(range(len(ratios)), [percent(r) for r in ratios])
        ax.set_xlim(-0.9, max(len(ratios) - 0.5, 0.5))
        ax.set_xlabel("outliers in the training set (%)")
        ax.set_title(label("detector", detector))
    auc_axis(axes[0], table["mean"] - table["std"].fillna(0.0), table["paper_mean"])
    fig.suptitle(
        f"{label('dataset', dataset)}: AUC vs. training-set contamination (dashed: 0 %, one-class)"
    )
    finish_legend(fig, axes, incomplete=any_incomplete(table))
    return fig
