"""Randomly rotated CIFAR-10 (paper App. A.2.2, "Relation to Outlier Exposure").

Every image of the data set is rotated at random, so rotation is no longer a cue. The paper
(text only) reports rotation prediction dropping to 60.7 AUC while rotation-augmented
contrastive keeps 92.4; it does not name the detector. This study tabulates our rotation and
contrastive-DA rows on the rotated data for every detector in the grid, compares the chosen
``detector`` with those two numbers, and shows the paper's unrotated main-table value of the
same detector for context.

Options: ``detector`` (``"ocsvm"``: the one compared with the paper), ``space`` (``"f"``),
``base_methods`` (``["rotation", "contrastive_da"]``), ``paper_dataset`` (``"cifar10"``:
whose unrotated main-table numbers are shown beside ours; the grid's own dataset id may
differ, e.g. a rotated copy), ``decimals``. One-class jobs only; the table has one
row per (dataset, base_method, detector), with ``paper_unrotated``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline_lib.paper.published import DETECTOR_DISPLAY, METHOD_DISPLAY
from pipeline_lib.paper.published.text_values import text_value
from pipeline_lib.studies.display import label, named, pivot_display
from pipeline_lib.studies.figures import legend_below, new_figure, ours_bars, palette
from pipeline_lib.studies.paper import published_main
from pipeline_lib.studies.spec import ONE_CLASS, PAPER_ORDER, Deviations, Opt, Run, StudySpec
from pipeline_lib.studies.stats import cell_stats

__all__ = ["SPEC"]


def _cells(run: Run) -> pd.DataFrame:
    """Cells per (dataset, base method, detector) with the paper's unrotated value."""
    stats = cell_stats(run.cells, ["dataset", "base_method", "detector"], ddof=run.ddof)
    published = published_main()
    stats["paper_unrotated"] = [
        published.get((m, d, run["paper_dataset"]), (np.nan,))[0]
        for m, d in zip(stats["base_method"], stats["detector"], strict=True)
    ]
    return stats


def _lookup(run: Run):
    """The paper's text value on rotated data, for the chosen detector's rows."""

    def lookup(row: pd.Series):
        if row["detector"] != run["detector"]:
            return None
        value = text_value("auroc", row["base_method"], dataset=run["paper_dataset"])
        return (value, np.nan, "App. A.2.2 text") if np.isfinite(value) else None

    return lookup


def _display(run: Run, table: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, representation), a column per detector and the unrotated paper."""
    detector, paper_dataset = run["detector"], run["paper_dataset"]
    display = pivot_display(
        table,
        [
            named("dataset", "Dataset (rotated)"),
            named("base_method", "Representation", "method"),
        ],
        "detector",
        lambda d: label("detector", d),
        decimals=run.decimals,
    )
    # pivot_display keeps the first-appearance order of (dataset, base_method)
    keys = table[["dataset", "base_method"]].drop_duplicates()
    chosen = table[table["detector"] == detector].set_index(["dataset", "base_method"])[
        "paper_unrotated"
    ]
    display[
        f"paper, unrotated {label('dataset', paper_dataset)} ({label('detector', detector)})"
    ] = [
        _fmt(chosen.get((ds, m), np.nan), run.decimals)
        for ds, m in zip(keys["dataset"], keys["base_method"], strict=True)
    ]
    return display


def _fmt(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}" if np.isfinite(value) else ""


def _figure(table: pd.DataFrame, detector: str, paper_dataset: str):
    rows_all = table[table["detector"] == detector]
    datasets = list(dict.fromkeys(rows_all["dataset"])) or list(dict.fromkeys(table["dataset"]))
    methods = list(dict.fromkeys(table["base_method"]))
    colours = palette(methods)
    fig, axes = new_figure(len(datasets), width=4.6, height=4.2)
    for ax, dataset in zip(axes, datasets, strict=True):
        rows = rows_all[rows_all["dataset"] == dataset].set_index("base_method").reindex(methods)
        x = np.arange(len(methods))
        colour = [colours[m] for m in methods]
        ours_bars(
            ax,
            x,
            rows,
            colour=colour,
            label_text="ours, rotated (mean ± std)",
            paper_label="paper, rotated",
        )
        unrot = rows["paper_unrotated"].to_numpy(dtype=float)
        keep = np.isfinite(unrot)
        ax.scatter(
            x[keep],
            unrot[keep],
            marker="_",
            s=400,
            color="black",
            linewidth=2,
            zorder=5,
            label=f"paper, unrotated {label('dataset', paper_dataset)}",
            gid="paper_unrotated",
        )
        ax.set_xticks(x, [label("method", m) for m in methods])
        ax.set_ylim(0.0, 100.0)
        ax.axhline(50.0, color="grey", linestyle=":", linewidth=1.0, label="chance (50)")
        ax.set_ylabel("ROC AUC (x100)")
        ax.set_xlabel("representation")
        ax.set_title(
            f"{label('dataset', dataset)}, randomly rotated, {label('detector', detector)}"
        )
    legend_below(fig, axes[0], ncols=2)
    return fig


SPEC = StudySpec(
    kind="rotated",
    caption="Randomly rotated CIFAR-10: rotation prediction vs. contrastive DA (App. A.2.2)",
    defaults={
        "detector": "ocsvm",
        "space": "f",
        "base_methods": ("rotation", "contrastive_da"),
        "paper_dataset": "cifar10",
    },
    select={**ONE_CLASS, "detector": None, "base_method": Opt("base_methods")},
    empty="{kind}: the expected grid has no one-class jobs of {base_methods}",
    cells=_cells,
    paper=_lookup,
    orders={
        "dataset": PAPER_ORDER,
        "base_method": lambda run, table: [
            *(m for m in METHOD_DISPLAY if m in run["base_methods"]),
            *run["base_methods"],
        ],
        "detector": lambda run, table: [run["detector"], *DETECTOR_DISPLAY],
    },
    deviations=[
        Deviations(
            lambda run, r: (
                f"{label('dataset', r['dataset'])} randomly rotated: "
                f"{label('method', r['base_method'])} / {label('detector', r['detector'])}"
            )
        )
    ],
    display=_display,
    figures=lambda run, table: {"auroc": _figure(table, run["detector"], run["paper_dataset"])},
    notes=lambda run, table: [
        "the paper quotes rotation prediction 60.7 and contrastive DA 92.4 on randomly rotated "
        f"CIFAR-10 without naming the detector; compared with our "
        f"{label('detector', run['detector'])}"
    ],
)
