"""Data efficiency of self-supervised representations (paper App. A.2.3, Fig. 10).

x = images the representation is trained on (50 ... 5000, log scale; the detector is always
fit on the full inlier training set); one line per representation; the frozen baselines
(random-weights ResNet-18, ImageNet ResNet-50: rows whose ``base_method`` is one of
``reference``) are horizontal reference lines. The figure is blank in the LaTeX
source; the paper's text says DA contrastive matches ImageNet ResNet-50 with 100 images,
rotation prediction with 250 and vanilla contrastive with 1000, which we compare with the
smallest training size at which our mean reaches our ImageNet mean ("crossover").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from pipeline_lib.paper.published import DATASET_DISPLAY, METHOD_DISPLAY
from pipeline_lib.paper.published.text_values import text_value
from pipeline_lib.studies.contract import (
    STAT_COLUMNS,
    StudyResult,
    check_options,
    join_expected,
)
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
    concat_deviations,
    deviation_rows,
    is_default_variant,
    published_main,
)
from pipeline_lib.studies.stats import any_incomplete, cell_stats, common_notes, missing_note

__all__ = ["KIND", "OPTIONS", "build", "crossover"]

KIND = "data_efficiency"
#: Option keys this kind reads (besides ``decimals`` and ``ddof``).
OPTIONS: tuple[str, ...] = ("detector", "space", "full_train_size", "reference", "match")


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


def build(
    frame: pd.DataFrame,
    expected: pd.DataFrame,
    *,
    options: Mapping[str, Any],
    scores: Mapping | None = None,
) -> StudyResult:
    """AUC against the representation's training-set size, with baseline reference lines.

    Options: ``detector`` (``"ocsvm"``), ``space`` (``"f"``), ``full_train_size`` (5000:
    what a NaN ``train_size`` means, CIFAR-10's images per class), ``reference``
    (``["resnet18_random", "resnet50_imagenet"]``), ``match`` (``"resnet50_imagenet"``: the
    baseline of the crossover), ``decimals``, ``ddof``. One-class jobs only. ``scores``
    unused.

    Returns
    -------
    StudyResult
        ``table``: rows with ``role`` ``curve`` (per dataset, base_method, train_size),
        ``reference`` (per dataset, baseline) and ``crossover`` (``mean`` = training images
        needed to reach the ``match`` baseline).

    Raises
    ------
    ValueError
        On unknown options or when the expected grid selects nothing.
    """
    check_options(options, OPTIONS, KIND)
    decimals, ddof = int(options.get("decimals", 1)), int(options.get("ddof", 0))
    detector, space = str(options.get("detector", "ocsvm")), str(options.get("space", "f"))
    full = float(options.get("full_train_size", 5000))
    references = list(options.get("reference", ("resnet18_random", "resnet50_imagenet")))
    match = str(options.get("match", "resnet50_imagenet"))
    cells = join_expected(frame, expected)
    cells = cells[
        (cells["detector"] == detector)
        & (cells["space"] == space)
        & (cells["fitset"] == "train")
        & (cells["contamination"] == 0.0)
    ].copy()
    if cells.empty:
        raise ValueError(
            f"{KIND}: the expected grid has no one-class jobs with detector {detector!r}"
        )
    cells["train_size"] = cells["train_size"].fillna(full)
    is_ref = cells["base_method"].isin(references)
    published = published_main()
    defaults = {
        m: all(is_default_variant(r, ignore=("train_size",)) for _, r in g.iterrows())
        for m, g in cells.groupby("base_method")
    }

    def lookup(row: pd.Series):
        if row["role"] == "curve" and row["train_size"] != full:
            return None
        if not defaults.get(row["base_method"], False):
            return None
        return published.get((row["base_method"], detector, row["dataset"]))

    curves = cell_stats(cells[~is_ref], ["dataset", "base_method", "train_size"], ddof=ddof)
    curves.insert(1, "role", "curve")
    refs = cell_stats(cells[is_ref], ["dataset", "base_method"], ddof=ddof)
    refs.insert(1, "role", "reference")
    refs.insert(3, "train_size", np.nan)
    table = add_paper(pd.concat([curves, refs], ignore_index=True), lookup)
    cross = []
    for (dataset, base), curve in curves.groupby(["dataset", "base_method"], sort=False):
        target_rows = refs[(refs["dataset"] == dataset) & (refs["base_method"] == match)]
        target = float(target_rows["mean"].iloc[0]) if len(target_rows) else np.nan
        target_missing = int(target_rows["n_missing"].sum())
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
                "n_missing": missing + target_missing,
                "paper_mean": paper,
                "paper_std": np.nan,
                "paper_source": "App. A.2.3 text" if np.isfinite(paper) else "",
                "deviation": size - paper,
            }
        )
    if cross:
        table = pd.concat([table, pd.DataFrame(cross)], ignore_index=True)
    table = sort_table(
        table,
        {
            "dataset": list(DATASET_DISPLAY),
            "role": ["curve", "reference", "crossover"],
            "base_method": list(METHOD_DISPLAY),
            "train_size": sorted(table["train_size"].dropna().unique()),
        },
    )
    table = table[["dataset", "role", "base_method", "train_size", *STAT_COLUMNS]]
    auc_rows = table[table["role"] != "crossover"]
    deviations = concat_deviations(
        [
            deviation_rows(
                auc_rows,
                lambda r: (
                    f"{label('dataset', r['dataset'])}: {label('method', r['base_method'])} / "
                    f"{label('detector', detector)}"
                    + (
                        f", trained on {int(r['train_size'])} images"
                        if r["role"] == "curve"
                        else ""
                    )
                ),
            ),
            deviation_rows(
                table[table["role"] == "crossover"],
                lambda r: (
                    f"{label('dataset', r['dataset'])}: training images for "
                    f"{label('method', r['base_method'])} to match {label('method', match)}"
                ),
                unit="train images",
            ),
        ]
    )
    display = _display(table, decimals)
    figures = {
        str(d): _figure(g, d, detector, full) for d, g in auc_rows.groupby("dataset", sort=False)
    }
    notes = common_notes(ddof) + missing_note(auc_rows)
    notes.append(
        f"{label('detector', detector)} fit on the full inlier training set for every size; a NaN "
        f"train size is the full set ({int(full)}); crossover = smallest size whose mean AUC "
        f"reaches our {label('method', match)} mean (NaN: never)"
    )
    return StudyResult(
        kind=KIND,
        table=table,
        figures=figures,
        deviations=deviations,
        notes=notes,
        display=display,
        caption="Data efficiency: AUC against the representation's training-set size (App. A.2.3)",
    )


def _display(table: pd.DataFrame, decimals: int) -> pd.DataFrame:
    rows = [
        ("dataset", "Dataset", lambda v: label("dataset", v)),
        ("base_method", "Representation", lambda v: label("method", v)),
    ]
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
        name=lambda m: label("method", m),
    )
    for _, row in refs.iterrows():
        colour = ref_colours.get(row["base_method"], "black")
        if np.isfinite(row["mean"]):
            ax.axhline(
                row["mean"],
                color=colour,
                linestyle="-",
                linewidth=1.2,
                gid="reference",
                label=f"{label('method', row['base_method'])} (ours)",
            )
        if np.isfinite(row["paper_mean"]):
            ax.axhline(
                row["paper_mean"],
                color=colour,
                linestyle=":",
                linewidth=1.5,
                gid="paper_reference",
                label=f"{label('method', row['base_method'])} (paper)",
            )
    ax.set_xscale("log")
    sizes = sorted(curves["train_size"].unique())
    ax.set_xticks(sizes, [f"{int(s)}" for s in sizes])
    ax.minorticks_off()
    ax.set_xlabel(f"images the representation is trained on (log scale; detector on {int(full)})")
    auc_axis(ax, table["mean"] - table["std"].fillna(0.0), table["paper_mean"])
    ax.set_title(f"{label('dataset', dataset)}: data efficiency, {label('detector', detector)}")
    finish_legend(fig, [ax], incomplete=any_incomplete(table), ncols=3)
    return fig
