"""Data efficiency of self-supervised representations (paper App. A.2.3, Fig. 10).

x = images the representation is trained on (50 ... 5000, log scale; the detector is always
fit on the full inlier training set); one line per representation; the frozen baselines
(random-weights ResNet-18, ImageNet ResNet-50: rows whose ``base_method`` is one of
``reference``) are horizontal reference lines. The figure is blank in the LaTeX
source; the paper's text says DA contrastive matches ImageNet ResNet-50 with 100 images,
rotation prediction with 250 and vanilla contrastive with 1000, which we compare with the
smallest training size at which our mean reaches our ImageNet mean ("crossover").

Options: ``detector`` (``"ocsvm"``), ``space`` (``"f"``), ``full_train_size`` (5000: what a
NaN ``train_size`` means, CIFAR-10's images per class), ``reference``
(``["resnet18_random", "resnet50_imagenet"]``), ``match`` (``"resnet50_imagenet"``: the
baseline of the crossover), ``decimals``. One-class jobs only. The table has rows
with ``role`` ``curve`` (per dataset, base_method, train_size), ``reference`` (per dataset,
baseline) and ``crossover`` (``mean`` = training images needed to reach the ``match``
baseline).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline_lib.paper.published.text_values import text_value
from pipeline_lib.studies.contract import STAT_COLUMNS
from pipeline_lib.studies.display import DATASET_ROW, label, named, pivot_display
from pipeline_lib.studies.figures import draw_lines, finish_whole_number_axis, new_figure, palette
from pipeline_lib.studies.paper import is_default_variant, published_main
from pipeline_lib.studies.spec import ONE_CLASS, PAPER_ORDER, SORTED, Deviations, Run, StudySpec
from pipeline_lib.studies.stats import cell_stats

__all__ = ["SPEC", "crossover"]


def crossover(curve: pd.DataFrame, target: float) -> tuple[float, int]:
    """Smallest ``train_size`` whose mean reaches ``target``, and the results missing up to it.

    Parameters
    ----------
    curve : DataFrame
        Rows of one representation with ``train_size``, ``mean``, ``n_missing``.
    target : float
        The AUC to reach (our ImageNet ResNet-50 mean).

    Returns
    -------
    size : float
        NaN if the curve never reaches ``target`` (or ``target`` is NaN).
    n_missing : int
        Missing results of the cells up to and including the crossing (all cells if none).
    """
    curve = curve.sort_values("train_size")
    missing = 0
    for row in curve.itertuples(index=False):
        missing += int(row.n_missing)
        if np.isfinite(target) and np.isfinite(row.mean) and row.mean >= target:
            return float(row.train_size), missing
    return float("nan"), missing


def _cells(run: Run) -> pd.DataFrame:
    """Curve cells per (dataset, base method, train size), reference cells per baseline."""
    cells = run.cells
    is_ref = cells["base_method"].isin(run["reference"])
    curves = cell_stats(cells[~is_ref], ["dataset", "base_method", "train_size"], ddof=run.ddof)
    curves.insert(1, "role", "curve")
    refs = cell_stats(cells[is_ref], ["dataset", "base_method"], ddof=run.ddof)
    refs.insert(1, "role", "reference")
    refs.insert(3, "train_size", np.nan)
    run.state.update(curves=curves, refs=refs)
    return pd.concat([curves, refs], ignore_index=True)


def _lookup(run: Run):
    """The main table's number of default variants, for references and the full size."""
    published = published_main()
    defaults = {
        m: all(is_default_variant(r, ignore=("train_size",)) for _, r in g.iterrows())
        for m, g in run.cells.groupby("base_method")
    }

    def lookup(row: pd.Series):
        if row["role"] == "curve" and row["train_size"] != run["full_train_size"]:
            return None
        if not defaults.get(row["base_method"], False):
            return None
        return published.get((row["base_method"], run["detector"], row["dataset"]))

    return lookup


def _crossovers(run: Run, table: pd.DataFrame) -> pd.DataFrame:
    """Rows ``role="crossover"``: training images each curve needs to match ``match``."""
    refs, cross = run.state["refs"], []
    for (dataset, base), curve in run.state["curves"].groupby(
        ["dataset", "base_method"], sort=False
    ):
        target_rows = refs[(refs["dataset"] == dataset) & (refs["base_method"] == run["match"])]
        target = float(target_rows["mean"].iloc[0]) if len(target_rows) else np.nan
        size, missing = crossover(curve, target)
        paper = text_value("train_size_to_match_imagenet", base, dataset=dataset)
        cross.append(
            {
                "dataset": dataset,
                "role": "crossover",
                "base_method": base,
                "train_size": np.nan,
                "mean": size,
                "std": np.nan,
                "n_seeds": int(curve["n_seeds"].min()),
                "n_expected_seeds": int(curve["n_expected_seeds"].max()),
                "n_results": int(curve["n_results"].sum()),
                "n_expected": int(curve["n_expected"].sum()),
                "n_missing": missing + int(target_rows["n_missing"].sum()),
                "paper_mean": paper,
                "paper_std": np.nan,
                "paper_source": "App. A.2.3 text" if np.isfinite(paper) else "",
                "deviation": size - paper,
            }
        )
    return pd.concat([table, pd.DataFrame(cross)], ignore_index=True) if cross else table


def _is_cross(table: pd.DataFrame) -> pd.Series:
    return table["role"] == "crossover"


def _display(run: Run, table: pd.DataFrame) -> pd.DataFrame:
    decimals = run.decimals
    rows = [DATASET_ROW, named("base_method", "Representation", "method")]
    curve = pivot_display(
        table[table["role"] == "curve"],
        rows,
        "train_size",
        lambda n: f"{int(n)} images",
        decimals=decimals,
    )
    refs = table[table["role"] == "reference"].assign(train_size="any")
    ref = pivot_display(refs, rows, "train_size", lambda _: "frozen (any size)", decimals=decimals)
    cross = table[table["role"] == "crossover"].assign(train_size="x")
    cross_display = pivot_display(
        cross, rows, "train_size", lambda _: "images to match ImageNet", decimals=0
    )
    out = curve
    for part in (ref, cross_display):
        if len(part):
            out = (
                part
                if out.empty
                else out.merge(part, on=["Dataset", "Representation"], how="outer")
            )
    return out.fillna("")


#: The baselines' lines: column, line style, width, gid, whose value.
_REFERENCE_LINES = (
    ("mean", "-", 1.2, "reference", "ours"),
    ("paper_mean", ":", 1.5, "paper_reference", "paper"),
)


def _figure(table: pd.DataFrame, dataset: str, detector: str, full: float):
    curves = table[table["role"] == "curve"]
    refs = table[table["role"] == "reference"]
    colours = palette(list(dict.fromkeys(curves["base_method"])))
    ref_colours = dict(zip(refs["base_method"], ["#555555", "#999999", "#bbbbbb"], strict=False))
    fig, (ax,) = new_figure(1, width=6.4, height=4.4)
    draw_lines(
        ax,
        curves,
        x_col="train_size",
        hue_col="base_method",
        colours=colours,
    )
    for _, row in refs.iterrows():
        colour = ref_colours.get(row["base_method"], "black")
        for column, style, width, gid, whose in _REFERENCE_LINES:
            if np.isfinite(row[column]):
                ax.axhline(
                    row[column],
                    color=colour,
                    linestyle=style,
                    linewidth=width,
                    gid=gid,
                    label=f"{label('method', row['base_method'])} ({whose})",
                )
    ax.set_xscale("log")
    ax.minorticks_off()
    finish_whole_number_axis(
        fig,
        ax,
        table,
        ticks=curves["train_size"],
        xlabel=f"images the representation is trained on (log scale; detector on {int(full)})",
        title=f"{label('dataset', dataset)}: data efficiency, {label('detector', detector)}",
        ncols=3,
    )
    return fig


SPEC = StudySpec(
    kind="data_efficiency",
    caption="Data efficiency: AUC against the representation's training-set size (App. A.2.3)",
    defaults={
        "detector": "ocsvm",
        "space": "f",
        "full_train_size": 5000.0,
        "reference": ("resnet18_random", "resnet50_imagenet"),
        "match": "resnet50_imagenet",
    },
    select=ONE_CLASS,
    empty="{kind}: the expected grid has no one-class jobs with detector {detector!r}",
    fill={"train_size": "full_train_size"},
    cells=_cells,
    paper=_lookup,
    extend=_crossovers,
    orders={
        "dataset": PAPER_ORDER,
        "role": ["curve", "reference", "crossover"],
        "base_method": PAPER_ORDER,
        "train_size": SORTED,
    },
    columns=["dataset", "role", "base_method", "train_size", *STAT_COLUMNS],
    deviations=[
        Deviations(
            lambda run, r: (
                f"{label('dataset', r['dataset'])}: {label('method', r['base_method'])} / "
                f"{label('detector', run['detector'])}"
                + (f", trained on {int(r['train_size'])} images" if r["role"] == "curve" else "")
            ),
            where=lambda table: ~_is_cross(table),
        ),
        Deviations(
            lambda run, r: (
                f"{label('dataset', r['dataset'])}: training images for "
                f"{label('method', r['base_method'])} to match {label('method', run['match'])}"
            ),
            where=_is_cross,
            unit="train images",
        ),
    ],
    display=_display,
    figures=lambda run, table: {
        str(d): _figure(g, d, run["detector"], run["full_train_size"])
        for d, g in table[~_is_cross(table)].groupby("dataset", sort=False)
    },
    missing=lambda table: table[~_is_cross(table)],
    notes=lambda run, table: [
        f"{label('detector', run['detector'])} fit on the full inlier training set for every "
        f"size; a NaN train size is the full set ({int(run['full_train_size'])}); crossover = "
        f"smallest size whose mean AUC reaches our {label('method', run['match'])} mean (NaN: "
        "never)"
    ],
)
