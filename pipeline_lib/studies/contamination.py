"""Unsupervised anomaly detection: representations and detectors trained on contaminated
training sets (paper Sec. 4.4 / 5.4, App. A.3, Fig. 5a and Fig. 8).

x = contamination of the training set (0.5 ... 10 % outliers, size unchanged); one panel per
detector (OC-SVM RBF, linear OC-SVM, GDE); one line per representation; the one-class (0 %)
result of each representation is its dashed reference line. The paper's figures are blank in
its LaTeX source, so the only published numbers are the 0 % ones (Tables 2, 5 and 7).

Options: ``detectors`` (default ocsvm, ocsvm_linear, gde: those present), ``fitset``
(default ``"train"``: the detector sees the contaminated set), ``space`` (``"f"``),
``decimals`` (1). The table has one row per (dataset, method, detector,
contamination); one figure per dataset, one panel per detector; the deviations are the 0 %
cells the paper publishes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from pipeline_lib.studies.display import DATASET_ROW, label, named
from pipeline_lib.studies.figures import (
    draw_lines,
    finish_auc_figure,
    new_figure,
    palette,
    plot_paper,
)
from pipeline_lib.studies.paper import is_default_variant, published_main
from pipeline_lib.studies.spec import PAPER_ORDER, SORTED, Deviations, Opt, Pivot, Run, StudySpec
from pipeline_lib.studies.stats import cell_stats

__all__ = ["DEFAULT_DETECTORS", "SPEC", "percent"]

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


def _cells(run: Run) -> pd.DataFrame:
    """Cells per (dataset, method, detector, contamination), with base method and fit set."""
    run.state["meta"] = meta = method_meta(run.cells)
    by = ["dataset", "method", "detector", "contamination"]
    stats = cell_stats(run.cells, by, ddof=run.ddof)
    stats.insert(2, "base_method", stats["method"].map(meta["base_method"]))
    stats.insert(len(stats.columns) - 7, "fitset", run["fitset"])
    return stats


def detectors_option(default: tuple[str, ...]) -> Callable[[Run, pd.DataFrame], pd.DataFrame]:
    """A ``prepare`` step keeping the options' ``detectors``, else those of ``default``
    present, else all; the choice replaces the option in the run."""

    def prepare(run: Run, cells: pd.DataFrame) -> pd.DataFrame:
        run.options["detectors"] = pick(cells["detector"], run["detectors"], default)
        return cells[cells["detector"].isin(run["detectors"])]

    return prepare


def meta_lookup(run: Run):
    """:func:`main_lookup` of the variants the cells step kept in the run."""
    return main_lookup(run.state["meta"])


#: Sort rules of the table (see :attr:`~pipeline_lib.studies.spec.StudySpec.orders`).
ORDERS = {
    "dataset": PAPER_ORDER,
    "method": PAPER_ORDER,
    "detector": Opt("detectors"),
    "contamination": SORTED,
}


def _figures(run: Run, table: pd.DataFrame) -> dict:
    return {
        str(dataset): _figure(group, run["detectors"], dataset)
        for dataset, group in table.groupby("dataset", sort=False)
    }


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
    fig.suptitle(
        f"{label('dataset', dataset)}: AUC vs. training-set contamination (dashed: 0 %, one-class)"
    )
    finish_auc_figure(fig, axes, table)
    return fig


SPEC = StudySpec(
    kind="contamination",
    caption="Unsupervised anomaly detection: AUC against training-set contamination "
    "(Sec. 4.4, App. A.3)",
    defaults={"detectors": None, "fitset": "train", "space": "f"},
    select={"fitset": Opt("fitset"), "space": Opt("space")},
    prepare=detectors_option(DEFAULT_DETECTORS),
    empty="{kind}: the expected grid has no jobs with fitset={fitset!r}, space={space!r} "
    "and detectors {detectors}",
    cells=_cells,
    paper=meta_lookup,
    orders=ORDERS,
    deviations=[
        Deviations(
            lambda run, r: (
                f"{label('dataset', r['dataset'])}: {label('method', r['method'])} / "
                f"{label('detector', r['detector'])}, contamination 0 % (one-class)"
            )
        )
    ],
    display=Pivot(
        [DATASET_ROW, named("method", "Representation"), named("detector", "Detector")],
        "contamination",
        lambda c: f"contamination {percent(c)}",
    ),
    figures=_figures,
    notes=lambda run, table: [
        f"detector fit on the '{run['fitset']}' set of each job (the contaminated training set "
        "when 'train'); the paper's figures for this study are blank in its LaTeX source, so "
        "only the 0 % (one-class) cells have published numbers"
    ],
)
