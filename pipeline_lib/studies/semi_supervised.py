"""Semi-supervised anomaly detection: representations learned on contaminated training sets,
detectors fit on a few clean inliers (paper Sec. 5.4, Fig. 5b-c, App. A.3 Fig. 9).

x = the detector's fit set: ``clean<n>`` (n = 50, 100, 500 clean inliers) and ``train`` (the
contaminated training set itself); one panel per contamination; one line per representation.
The paper's figures are blank in its LaTeX source: the only published numbers are the
one-class cells (contamination 0, fit set ``train``), from Tables 2, 5 and 7.

Options: ``detectors`` (default ``["ocsvm"]``, the paper's OC-SVM RBF; one figure per
dataset and detector), ``space`` (``"f"``), ``decimals``. The table has one row per
(dataset, method, detector, contamination, fitset), with ``n_clean`` (NaN for ``train``);
the deviations are the one-class cells the paper publishes.
"""

from __future__ import annotations

import re

import pandas as pd

from pipeline_lib.studies.contamination import (
    ORDERS,
    detectors_option,
    meta_lookup,
    method_meta,
    percent,
)
from pipeline_lib.studies.display import DATASET_ROW, label, named
from pipeline_lib.studies.figures import draw_lines, finish_auc_figure, new_figure, palette
from pipeline_lib.studies.spec import Deviations, Opt, Pivot, Run, StudySpec
from pipeline_lib.studies.stats import cell_stats

__all__ = ["SPEC", "clean_size", "fitset_label"]

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


def _cells(run: Run) -> pd.DataFrame:
    """Cells per (dataset, method, detector, contamination, fit set), with ``n_clean``."""
    run.state["meta"] = meta = method_meta(run.cells)
    run.state["fitsets"] = _fitset_order(run.cells["fitset"])
    by = ["dataset", "method", "detector", "contamination", "fitset"]
    stats = cell_stats(run.cells, by, ddof=run.ddof)
    stats.insert(2, "base_method", stats["method"].map(meta["base_method"]))
    stats.insert(6, "n_clean", stats["fitset"].map(clean_size))
    return stats


def _figures(run: Run, table: pd.DataFrame) -> dict:
    return {
        f"{dataset}_{detector}": _figure(group, run.state["fitsets"], dataset, detector)
        for (dataset, detector), group in table.groupby(["dataset", "detector"], sort=False)
    }


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
            x_map=position.get,
            dodge=0.06,
        )
        ax.set_xticks(range(len(present)), [fitset_label(f) for f in present])
        ax.set_xlim(-0.5, len(present) - 0.5)
        ax.set_xlabel("detector's fit set (inlier images)")
        ax.set_title(f"{percent(ratio)} outliers in training")
    fig.suptitle(f"{label('dataset', dataset)}: semi-supervised, {label('detector', detector)}")
    finish_auc_figure(fig, axes, table)
    return fig


SPEC = StudySpec(
    kind="semi_supervised",
    caption="Semi-supervised anomaly detection: detectors fit on a few clean inliers "
    "(Sec. 4.4, App. A.3)",
    defaults={"detectors": None, "space": "f"},
    select={"space": Opt("space")},
    prepare=detectors_option(("ocsvm",)),
    empty="{kind}: the expected grid has no jobs with space={space!r} and detectors {detectors}",
    cells=_cells,
    paper=meta_lookup,
    orders={
        **ORDERS,
        "fitset": lambda run, table: run.state["fitsets"],
    },
    deviations=[
        Deviations(
            lambda run, r: (
                f"{label('dataset', r['dataset'])}: {label('method', r['method'])} / "
                f"{label('detector', r['detector'])}, one-class (0 %, fit on train)"
            )
        )
    ],
    display=Pivot(
        [
            DATASET_ROW,
            named("detector", "Detector"),
            ("contamination", "Contamination", percent),
            named("method", "Representation"),
        ],
        "fitset",
        lambda f: f"detector fit on {fitset_label(f)}",
    ),
    figures=_figures,
    notes=lambda run, table: [
        "representations are trained on the contaminated training set; 'N clean' fits the "
        "detector on N clean inliers, 'train' on the contaminated training set; only the "
        "one-class cells have published numbers (the paper's figures are blank in its source)"
    ],
)
