"""MLP projection-head depth (paper Sec. 5.1 "MLP Projection Head", Fig. 3c).

x = head depth 0..8 (0 = identity head); the AUC of f (solid) and of g(f) (dashed), one
colour per representation. The paper's figure is blank in its LaTeX source; its text says
the AUC of f rises with depth while g(f) falls. The only published numbers are the
main-table AUCs of f at the default depth (8).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
)
from pipeline_lib.studies.paper import (
    add_paper,
    deviation_rows,
    is_default_variant,
    published_main,
)
from pipeline_lib.studies.stats import any_incomplete, cell_stats, common_notes, missing_note

__all__ = ["KIND", "OPTIONS", "build"]

KIND = "head_depth"
#: Option keys this kind reads (besides ``decimals`` and ``ddof``).
OPTIONS: tuple[str, ...] = ("base_methods", "detector", "default_head_depth")
_SPACE_NAME = {"f": "f", "g": "g(f)"}


def build(
    frame: pd.DataFrame,
    expected: pd.DataFrame,
    *,
    options: Mapping[str, Any],
    scores: Mapping | None = None,
) -> StudyResult:
    """AUC of f and of g(f) against the MLP head depth, per representation.

    Options: ``base_methods`` (default: every base method in the grid), ``detector``
    (``"ocsvm"``), ``default_head_depth`` (8: what a NaN ``head_depth`` means),
    ``decimals``, ``ddof``. One-class jobs only (contamination 0, fit set ``train``).
    ``scores`` unused.

    Returns
    -------
    StudyResult
        ``table``: one row per (dataset, base_method, head_depth, space).

    Raises
    ------
    ValueError
        On unknown options or when the expected grid selects nothing.
    """
    check_options(options, OPTIONS, KIND)
    decimals, ddof = int(options.get("decimals", 1)), int(options.get("ddof", 0))
    detector = str(options.get("detector", "ocsvm"))
    default_depth = float(options.get("default_head_depth", 8))
    cells = join_expected(frame, expected)
    mask = (
        (cells["detector"] == detector)
        & (cells["fitset"] == "train")
        & (cells["contamination"] == 0.0)
        & cells["space"].isin(["f", "g"])
    )
    if options.get("base_methods") is not None:
        mask &= cells["base_method"].isin(list(options["base_methods"]))
    cells = cells[mask].copy()
    if cells.empty:
        raise ValueError(
            f"{KIND}: the expected grid has no one-class jobs with detector {detector!r}"
        )
    cells["head_depth"] = cells["head_depth"].fillna(default_depth)
    by = ["dataset", "base_method", "head_depth", "space"]
    default_cells = (
        cells.assign(
            _default=[is_default_variant(r, ignore=("head_depth",)) for _, r in cells.iterrows()]
        )
        .groupby(by)["_default"]
        .all()
    )
    published = published_main()

    def lookup(row: pd.Series):
        if row["space"] != "f" or row["head_depth"] != default_depth:
            return None
        if not default_cells.get(tuple(row[c] for c in by), False):
            return None
        return published.get((row["base_method"], detector, row["dataset"]))

    table = add_paper(cell_stats(cells, by, ddof=ddof), lookup)
    table = sort_table(
        table,
        {
            "dataset": list(DATASET_DISPLAY),
            "base_method": list(METHOD_DISPLAY),
            "space": ["f", "g"],
            "head_depth": sorted(table["head_depth"].unique()),
        },
    )
    deviations = deviation_rows(
        table,
        lambda r: (
            f"{label('dataset', r['dataset'])}: {label('method', r['base_method'])} / "
            f"{label('detector', detector)}, AUC of f at head depth {int(r['head_depth'])}"
        ),
    )
    display = pivot_display(
        table,
        [
            ("dataset", "Dataset", lambda v: label("dataset", v)),
            ("base_method", "Representation", lambda v: label("method", v)),
            ("space", "Features", lambda v: _SPACE_NAME.get(v, v)),
        ],
        "head_depth",
        lambda d: f"depth {int(d)}",
        decimals=decimals,
    )
    figures = {str(d): _figure(g, d, detector) for d, g in table.groupby("dataset", sort=False)}
    notes = common_notes(ddof) + missing_note(table)
    notes.append(
        f"{label('detector', detector)} on f (solid) and on g(f) (dashed); a NaN head depth is "
        f"the default {int(default_depth)}; the paper's Fig. 3c is blank in its source, so only "
        "the default depth has a published number (the main table)"
    )
    return StudyResult(
        kind=KIND,
        table=table,
        figures=figures,
        deviations=deviations,
        notes=notes,
        display=display,
        caption="MLP projection-head depth: AUC of f and of g(f) (Sec. 5.1, Fig. 3c)",
    )


def _figure(table: pd.DataFrame, dataset: str, detector: str):
    colours = palette(list(dict.fromkeys(table["base_method"])))
    fig, (ax,) = new_figure(1, width=6.0, height=4.2)
    for space, style, marker in (("f", "-", "o"), ("g", "--", "s")):
        draw_lines(
            ax,
            table[table["space"] == space],
            x_col="head_depth",
            hue_col="base_method",
            colours=colours,
            name=lambda m, s=space: f"{label('method', m)}, {_SPACE_NAME[s]}",
            linestyle=style,
            marker=marker,
            dodge=0.08,
        )
    depths = sorted(table["head_depth"].unique())
    ax.set_xticks(depths, [str(int(d)) for d in depths])
    ax.set_xlabel("MLP head depth (hidden layers; 0 = identity)")
    auc_axis(ax, table["mean"] - table["std"].fillna(0.0), table["paper_mean"])
    ax.set_title(f"{label('dataset', dataset)}: AUC vs. head depth, {label('detector', detector)}")
    finish_legend(fig, [ax], incomplete=any_incomplete(table), ncols=2)
    return fig
