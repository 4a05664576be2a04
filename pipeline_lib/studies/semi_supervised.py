"""Semi-supervised anomaly detection: representations learned on contaminated training sets,
detectors fit on a few clean inliers (paper Sec. 5.4, Fig. 5b-c, App. A.3 Fig. 9).

x = the detector's fit set: ``clean<n>`` (n = 50, 100, 500 clean inliers) and ``train`` (the
contaminated training set itself); one panel per contamination; one line per representation.
The paper's figures are blank in its LaTeX source: the only published numbers are the
one-class cells (contamination 0, fit set ``train``), from Tables 2, 5 and 7.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from pipeline_lib.paper.published import DATASET_DISPLAY, METHOD_DISPLAY
from pipeline_lib.studies.contamination import main_lookup, method_meta, percent, pick
from pipeline_lib.studies.contract import StudyResult, check_options, join_expected
from pipeline_lib.studies.display import label, pivot_display, sort_table
from pipeline_lib.studies.figures import (
    auc_axis,
    draw_lines,
    finish_legend,
    new_figure,
    palette,
)
from pipeline_lib.studies.paper import add_paper, deviation_rows
from pipeline_lib.studies.stats import any_incomplete, cell_stats, common_notes, missing_note

__all__ = ["KIND", "OPTIONS", "build", "clean_size", "fitset_label"]

KIND = "semi_supervised"
#: Option keys this kind reads (besides ``decimals`` and ``ddof``).
OPTIONS: tuple[str, ...] = ("detectors", "space")
_CLEAN = re.compile(r"^clean(\d+)$")


def clean_size(fitset: str) -> float:
    """``"clean50"`` -> 50.0; ``"train"`` -> NaN (the whole, possibly contaminated, set)."""
    match = _CLEAN.match(str(fitset))
    return float(match.group(1)) if match else float("nan")


def fitset_label(fitset: str) -> str:
    """Axis / column label of a fit set."""
    match = _CLEAN.match(str(fitset))
    return f"{match.group(1)} clean" if match else f"{fitset} (all)"


def _fitset_order(fitsets: pd.Series) -> list[str]:
    """``clean<n>`` by n, then the others (``train``) sorted."""
    present = set(fitsets)
    clean = sorted((f for f in present if _CLEAN.match(f)), key=clean_size)
    return clean + sorted(present - set(clean))


def build(
    frame: pd.DataFrame,
    expected: pd.DataFrame,
    *,
    options: Mapping[str, Any],
    scores: Mapping | None = None,
) -> StudyResult:
    """AUC against the detector's fit set (clean inliers or the training set), per ratio.

    Options: ``detectors`` (default ``["ocsvm"]``, the paper's OC-SVM RBF; one figure per
    dataset and detector), ``space`` (``"f"``), ``decimals``, ``ddof``. ``scores`` unused.

    Returns
    -------
    StudyResult
        ``table``: one row per (dataset, method, detector, contamination, fitset), with
        ``n_clean`` (NaN for ``train``); deviations: the one-class cells the paper publishes.

    Raises
    ------
    ValueError
        On unknown options or when the expected grid selects nothing.
    """
    check_options(options, OPTIONS, KIND)
    decimals, ddof = int(options.get("decimals", 1)), int(options.get("ddof", 0))
    space = str(options.get("space", "f"))
    cells = join_expected(frame, expected)
    cells = cells[cells["space"] == space]
    detectors = pick(cells["detector"], options.get("detectors"), ("ocsvm",))
    cells = cells[cells["detector"].isin(detectors)]
    if cells.empty:
        raise ValueError(
            f"{KIND}: the expected grid has no jobs with space={space!r} and detectors {detectors}"
        )
    meta = method_meta(cells)
    fitsets = _fitset_order(cells["fitset"])
    stats = cell_stats(
        cells, ["dataset", "method", "detector", "contamination", "fitset"], ddof=ddof
    )
    stats.insert(2, "base_method", stats["method"].map(meta["base_method"]))
    stats.insert(6, "n_clean", stats["fitset"].map(clean_size))
    table = add_paper(stats, main_lookup(meta))
    table = sort_table(
        table,
        {
            "dataset": list(DATASET_DISPLAY),
            "method": list(METHOD_DISPLAY),
            "detector": detectors,
            "contamination": sorted(table["contamination"].unique()),
            "fitset": fitsets,
        },
    )
    deviations = deviation_rows(
        table,
        lambda r: (
            f"{label('dataset', r['dataset'])}: {label('method', r['method'])} / "
            f"{label('detector', r['detector'])}, one-class (0 %, fit on train)"
        ),
    )
    display = pivot_display(
        table,
        [
            ("dataset", "Dataset", lambda v: label("dataset", v)),
            ("detector", "Detector", lambda v: label("detector", v)),
            ("contamination", "Contamination", percent),
            ("method", "Representation", lambda v: label("method", v)),
        ],
        "fitset",
        lambda f: f"detector fit on {fitset_label(f)}",
        decimals=decimals,
    )
    figures = {}
    for (dataset, detector), group in table.groupby(["dataset", "detector"], sort=False):
        figures[f"{dataset}_{detector}"] = _figure(group, fitsets, dataset, detector)
    notes = common_notes(ddof) + missing_note(table)
    notes.append(
        "representations are trained on the contaminated training set; 'N clean' fits the "
        "detector on N clean inliers, 'train' on the contaminated training set; only the "
        "one-class cells have published numbers (the paper's figures are blank in its source)"
    )
    return StudyResult(
        kind=KIND,
        table=table,
        figures=figures,
        deviations=deviations,
        notes=notes,
        display=display,
        caption="Semi-supervised anomaly detection: detectors fit on a few clean inliers "
        "(Sec. 4.4, App. A.3)",
    )


def _figure(table: pd.DataFrame, fitsets: list[str], dataset: str, detector: str):
    """One panel per contamination; x = fit set (categorical: n clean, then train)."""
    ratios = sorted(table["contamination"].unique())
    present = [f for f in fitsets if f in set(table["fitset"])]
    position = {f: i for i, f in enumerate(present)}
    colours = palette(list(dict.fromkeys(table["method"])))
    fig, axes = new_figure(len(ratios))
    for ax, ratio in zip(axes, ratios, strict=True):
        rows = table[table["contamination"] == ratio]
        draw_lines(
            ax,
            rows,
            x_col="fitset",
            hue_col="method",
            colours=colours,
            name=lambda m: label("method", m),
            x_map=position.get,
            dodge=0.06,
        )
        ax.set_xticks(range(len(present)), [fitset_label(f) for f in present])
        ax.set_xlim(-0.5, len(present) - 0.5)
        ax.set_xlabel("detector's fit set (inlier images)")
        ax.set_title(f"{percent(ratio)} outliers in training")
    auc_axis(axes[0], table["mean"] - table["std"].fillna(0.0), table["paper_mean"])
    fig.suptitle(f"{label('dataset', dataset)}: semi-supervised, {label('detector', detector)}")
    finish_legend(fig, axes, incomplete=any_incomplete(table))
    return fig
