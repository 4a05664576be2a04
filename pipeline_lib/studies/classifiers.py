"""One-class classifiers on contrastive-DA representations (paper App. A.2.1, Table 5).

Linear OC-SVM, OC-SVM (RBF), KDE and GDE on the same representation across the data sets,
beside Table 5 (``performance_gaussian.csv``; its OC-SVM and KDE rows equal Table 7's).
Built on the main-table machinery (:func:`pipeline_lib.studies.main.main_cells`).

Options: ``methods`` (``["contrastive_da"]``), ``detectors`` (linear OC-SVM, OC-SVM, KDE,
GDE), ``space`` (``"f"``), ``decimals``. One-class jobs only; the table has one row
per (method, detector, dataset) as the main study.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline_lib.paper.published import DATASET_DISPLAY
from pipeline_lib.studies.display import label, named
from pipeline_lib.studies.figures import bar_panel, legend_below, new_figure, ours_bars, palette
from pipeline_lib.studies.main import MAIN_SELECT, main_cells
from pipeline_lib.studies.spec import Deviations, Opt, Pivot, Run, StudySpec

__all__ = ["DEFAULT_DETECTORS", "SPEC"]

#: Table 5's classifiers, in its row order.
DEFAULT_DETECTORS: tuple[str, ...] = ("ocsvm_linear", "ocsvm", "kde", "gde")


def _datasets(run: Run, table: pd.DataFrame) -> list[str]:
    """The paper's data sets present, then the others sorted."""
    datasets = [d for d in DATASET_DISPLAY if d in set(table["dataset"])]
    return datasets + sorted(set(table["dataset"]) - set(datasets))


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
            ours_bars(
                ax,
                xs,
                cells,
                colour=colours[detector],
                label_text=label("detector", detector),
                paper_label="paper (Table 5)",
                capsize=2,
                width=width,
            )
        ticks = [label("dataset", d) for d in datasets]
        title = f"{label('method', method)}: one-class classifiers"
        bar_panel(ax, x, ticks, rows, xlabel="data set", title=title, rotation=20)
    legend_below(fig, axes[0], ncols=5)
    return fig


SPEC = StudySpec(
    kind="classifiers",
    caption="One-class classifiers on contrastive (DA) representations (App. A.2.1, Table 5)",
    defaults={
        "methods": ("contrastive_da",),
        "detectors": DEFAULT_DETECTORS,
        "space": "f",
    },
    select={**MAIN_SELECT, "contamination": 0.0, "fitset": "train", "space": Opt("space")},
    empty="main table: the expected grid has no jobs with contamination=0.0, "
    "fitset='train', spaces [{space!r}], methods {methods}, detectors {detectors}",
    cells=main_cells,
    orders={"method": Opt("methods"), "detector": Opt("detectors"), "dataset": _datasets},
    deviations=[
        Deviations(
            lambda run, r: (
                f"classifiers: {label('dataset', r['dataset'])}: {label('method', r['method'])}"
                f" / {label('detector', r['detector'])}"
            )
        )
    ],
    display=Pivot(
        [named("method", "Representation"), named("detector", "Classifier")],
        "dataset",
        lambda d: label("dataset", d),
    ),
    figures=lambda run, table: {"auroc": _figure(table, run["detectors"])},
    notes=lambda run, table: ["published: Table 5 (and Table 7, identical for OC-SVM and KDE)"],
)
