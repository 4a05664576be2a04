"""One-class classifiers on contrastive-DA representations (paper App. A.2.1, Table 5).

Linear OC-SVM, OC-SVM (RBF), KDE and GDE on the same representation across the data sets,
beside Table 5 (``performance_gaussian.csv``; its OC-SVM and KDE rows equal Table 7's).
Built on the main-table machinery (:func:`pipeline_lib.studies.main.main_like`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from pipeline_lib.paper.published import DATASET_DISPLAY
from pipeline_lib.studies.contract import StudyResult, check_options
from pipeline_lib.studies.display import label, pivot_display, sort_table
from pipeline_lib.studies.figures import hatch_incomplete, new_figure, palette, plot_paper
from pipeline_lib.studies.main import main_like
from pipeline_lib.studies.paper import deviation_rows
from pipeline_lib.studies.stats import common_notes, missing_note

__all__ = ["DEFAULT_DETECTORS", "KIND", "OPTIONS", "build"]

KIND = "classifiers"
#: Option keys this kind reads (besides ``decimals`` and ``ddof``).
OPTIONS: tuple[str, ...] = ("methods", "detectors", "space")
#: Table 5's classifiers, in its row order.
DEFAULT_DETECTORS: tuple[str, ...] = ("ocsvm_linear", "ocsvm", "kde", "gde")


def build(
    frame: pd.DataFrame,
    expected: pd.DataFrame,
    *,
    options: Mapping[str, Any],
    scores: Mapping | None = None,
) -> StudyResult:
    """AUC of each classifier on contrastive DA per data set (and the weighted mean).

    Options: ``methods`` (``["contrastive_da"]``), ``detectors`` (linear OC-SVM, OC-SVM,
    KDE, GDE), ``space`` (``"f"``), ``decimals``, ``ddof``. One-class jobs only. ``scores``
    unused.

    Returns
    -------
    StudyResult
        ``table``: one row per (method, detector, dataset) as the main study.

    Raises
    ------
    ValueError
        On unknown options or when the expected grid selects nothing.
    """
    check_options(options, OPTIONS, KIND)
    decimals, ddof = int(options.get("decimals", 1)), int(options.get("ddof", 0))
    methods = list(options.get("methods", ("contrastive_da",)))
    detectors = list(options.get("detectors", DEFAULT_DETECTORS))
    table, _ = main_like(
        frame,
        expected,
        {"ddof": ddof, "spaces": [options.get("space", "f")]},
        methods=methods,
        detectors=detectors,
    )
    datasets = [d for d in DATASET_DISPLAY if d in set(table["dataset"])]
    datasets += sorted(set(table["dataset"]) - set(datasets))
    table = sort_table(table, {"method": methods, "detector": detectors, "dataset": datasets})
    display = pivot_display(
        table,
        [
            ("method", "Representation", lambda v: label("method", v)),
            ("detector", "Classifier", lambda v: label("detector", v)),
        ],
        "dataset",
        lambda d: label("dataset", d),
        decimals=decimals,
    )
    notes = common_notes(ddof) + missing_note(table)
    notes.append("published: Table 5 (and Table 7, identical for OC-SVM and KDE)")
    return StudyResult(
        kind=KIND,
        table=table,
        figures={"auroc": _figure(table, detectors)},
        deviations=deviation_rows(
            table,
            lambda r: (
                f"classifiers: {label('dataset', r['dataset'])}: {label('method', r['method'])} / "
                f"{label('detector', r['detector'])}"
            ),
        ),
        notes=notes,
        display=display,
        caption="One-class classifiers on contrastive (DA) representations (App. A.2.1, Table 5)",
    )


def _figure(table: pd.DataFrame, detectors: list[str]):
    """Grouped bars: x = data set, one bar per classifier, the paper as diamonds."""
    methods = list(dict.fromkeys(table["method"]))
    present = [d for d in detectors if d in set(table["detector"])]
    colours = palette(present)
    fig, axes = new_figure(
        len(methods), width=max(5.0, 1.3 * table["dataset"].nunique() + 1.5), height=4.2
    )
    width = 0.8 / max(len(present), 1)
    for ax, method in zip(axes, methods, strict=True):
        rows = table[table["method"] == method]
        datasets = list(dict.fromkeys(rows["dataset"]))
        x = np.arange(len(datasets))
        for k, detector in enumerate(present):
            cells = rows[rows["detector"] == detector].set_index("dataset").reindex(datasets)
            xs = x + (k - (len(present) - 1) / 2) * width
            has = cells["mean"].notna().to_numpy()
            bars = ax.bar(
                xs[has],
                cells["mean"].to_numpy()[has],
                width=width,
                yerr=cells["std"].fillna(0.0).to_numpy()[has],
                capsize=2,
                color=colours[detector],
                label=label("detector", detector),
                gid="ours",
            )
            hatch_incomplete(bars, cells["n_missing"].to_numpy()[has] > 0)
            plot_paper(
                ax, xs, cells["paper_mean"].to_numpy(dtype=float), label_text="paper (Table 5)"
            )
        ax.set_xticks(x, [label("dataset", d) for d in datasets], rotation=20, ha="right")
        low = np.nanmin(
            np.concatenate([rows["mean"] - rows["std"].fillna(0), rows["paper_mean"], [100.0]])
        )
        ax.set_ylim(max(0.0, 5.0 * np.floor((low - 3.0) / 5.0)), 100.0)
        ax.set_ylabel("ROC AUC (x100)")
        ax.set_xlabel("data set")
        ax.set_title(f"{label('method', method)}: one-class classifiers")
    handles, labels = axes[0].get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    fig.legend(
        list(unique.values()), list(unique), fontsize="small", ncols=5, loc="outside lower center"
    )
    return fig
