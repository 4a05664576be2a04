"""The paper's main table (Tables 2 / 7) as a study, so the summary ranks its deviations too.

Wraps :func:`pipeline_lib.paper.aggregate.main_table` and :func:`format_main_table` (class mean
per seed, mean ± std over seeds, the 5-dataset mean weighted by classes) and adds the
expected grid's missing cells, which ``main_table`` cannot know about.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pipeline_lib.config.keys import contamination_value
from pipeline_lib.paper.aggregate import MAIN_COLUMNS, format_main_table, main_table
from pipeline_lib.paper.published import load_published
from pipeline_lib.studies.contract import (
    STAT_COLUMNS,
    StudyResult,
    check_options,
    join_expected,
)
from pipeline_lib.studies.display import label
from pipeline_lib.studies.figures import new_figure, palette
from pipeline_lib.studies.paper import deviation_rows
from pipeline_lib.studies.stats import common_notes, missing_note

__all__ = ["DEFAULT_SPACES", "KIND", "OPTIONS", "build", "main_like"]

KIND = "main"
#: Option keys this kind reads (besides ``decimals`` and ``ddof``).
OPTIONS: tuple[str, ...] = ("methods", "detectors", "contamination", "fitset", "spaces")
#: Feature spaces of the main table: detectors on f, and the rotation classifier's own rows.
DEFAULT_SPACES: tuple[str, ...] = ("f", "rotation_classifier")


def main_like(
    frame: pd.DataFrame,
    expected: pd.DataFrame,
    options: Mapping[str, Any],
    *,
    methods: Sequence[str] | None = None,
    detectors: Sequence[str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Main-table cells of the expected grid: (tidy table, ``main_table``-shaped long frame).

    ``methods`` / ``detectors`` restrict the grid (None keeps all). The long frame has
    :data:`pipeline_lib.paper.aggregate.MAIN_COLUMNS` and includes the expected cells without any
    result (``mean`` NaN, ``complete`` False), ready for ``format_main_table``.
    """
    ddof = int(options.get("ddof", 0))
    contamination = float(options.get("contamination", 0.0))
    fitset = str(options.get("fitset", "train"))
    spaces = [str(s) for s in options.get("spaces", DEFAULT_SPACES)]
    cells = join_expected(frame, expected)
    mask = cells["contamination"] == contamination_value(contamination)
    mask &= cells["fitset"] == fitset
    mask &= cells["space"].isin(spaces)
    if methods is not None:
        mask &= cells["method"].isin(list(methods))
    if detectors is not None:
        mask &= cells["detector"].isin(list(detectors))
    cells = cells[mask]
    if cells.empty:
        raise ValueError(
            f"main table: the expected grid has no jobs with contamination={contamination}, "
            f"fitset={fitset!r}, spaces {spaces}, methods {methods}, detectors {detectors}"
        )
    seeds = sorted(cells["seed"].unique())
    class_counts = cells.groupby("dataset")["inlier"].nunique().to_dict()
    results = cells[cells["auroc"].notna()]
    if results.empty:
        long = pd.DataFrame({col: pd.Series(dtype=object) for col in MAIN_COLUMNS})
    else:
        long = main_table(
            results,
            load_published(),
            contamination=contamination,
            fitset=fitset,
            seeds=seeds,
            class_counts=class_counts,
            ddof=ddof,
        )
    counts = cells.groupby(["method", "detector", "dataset"]).agg(
        n_expected=("auroc", "size"), n_results=("auroc", "count")
    )
    totals = counts.groupby(level=["method", "detector"]).sum()
    present = set(zip(long["method"], long["detector"], long["dataset"], strict=True))
    extra = []
    for method, detector, dataset in counts.index:
        if (method, detector, dataset) not in present:
            n = int(counts.loc[(method, detector, dataset), "n_expected"])
            extra.append(
                {
                    "method": method,
                    "detector": detector,
                    "dataset": dataset,
                    "mean": np.nan,
                    "std": np.nan,
                    "ci_low": np.nan,
                    "ci_high": np.nan,
                    "ci_over": "",
                    "n_seeds": 0,
                    "expected_seeds": len(seeds),
                    "n_classes": 0,
                    "expected_classes": class_counts[dataset],
                    "n_results": 0,
                    "expected_results": n,
                    "complete": False,
                    "published_mean": np.nan,
                    "published_std": np.nan,
                    "published_derived": False,
                    "delta": np.nan,
                }
            )
    if extra:
        long = (
            pd.concat([long, pd.DataFrame(extra)], ignore_index=True)
            if len(long)
            else pd.DataFrame(extra)
        )
    long = long[list(MAIN_COLUMNS)]

    def expected_count(row) -> int:
        if row.dataset == "mean":
            return int(totals.loc[(row.method, row.detector), "n_expected"])
        return int(counts.loc[(row.method, row.detector, row.dataset), "n_expected"])

    n_expected = [expected_count(r) for r in long.itertuples(index=False)]
    table = pd.DataFrame(
        {
            "method": long["method"],
            "detector": long["detector"],
            "dataset": long["dataset"],
            "mean": long["mean"].astype(float),
            "std": long["std"].astype(float),
            "ci_low": long["ci_low"].astype(float),
            "ci_high": long["ci_high"].astype(float),
            "ci_over": long["ci_over"].astype(str),
            "n_seeds": long["n_seeds"].astype(int),
            "n_expected_seeds": long["expected_seeds"].astype(int),
            "n_results": long["n_results"].astype(int),
            "n_expected": n_expected,
            "n_missing": np.asarray(n_expected) - long["n_results"].astype(int).to_numpy(),
            "paper_mean": long["published_mean"].astype(float),
            "paper_std": long["published_std"].astype(float),
            "paper_source": [
                (
                    "derived: class-weighted mean of the paper's per-dataset values"
                    if d
                    else "Tables 2, 5, 7"
                )
                if np.isfinite(p)
                else ""
                for d, p in zip(
                    long["published_derived"], long["published_mean"].astype(float), strict=True
                )
            ],
            "deviation": long["delta"].astype(float),
        }
    )
    return table[["method", "detector", "dataset", *STAT_COLUMNS]], long


def _describe(row: pd.Series) -> str:
    return (
        f"{label('dataset', row['dataset'])}: {label('method', row['method'])} / "
        f"{label('detector', row['detector'])}"
    )


def build(
    frame: pd.DataFrame,
    expected: pd.DataFrame,
    *,
    options: Mapping[str, Any],
    scores: Mapping | None = None,
) -> StudyResult:
    """The main table beside the paper (Tables 2 and 7).

    Options: ``methods`` / ``detectors`` (restrict; default all in the grid),
    ``contamination`` (0.0), ``fitset`` (``"train"``), ``spaces`` (``["f",
    "rotation_classifier"]``: never g(f)), ``decimals``,
    ``ddof``. ``scores`` unused.

    Returns
    -------
    StudyResult
        ``table``: one row per (method, detector, dataset), ``dataset="mean"`` the
        class-weighted mean; ``display``: :func:`format_main_table`; figure ``ours_vs_paper``
        (only when some cell has a published counterpart).

    Raises
    ------
    ValueError
        On unknown options or when the expected grid selects nothing.
    """
    check_options(options, OPTIONS, KIND)
    table, long = main_like(
        frame, expected, options, methods=options.get("methods"), detectors=options.get("detectors")
    )
    decimals, ddof = int(options.get("decimals", 1)), int(options.get("ddof", 0))
    notes = common_notes(ddof) + missing_note(table)
    notes.append(
        "the 'Mean' column weights data sets by their number of classes (Sec. 4.2); where "
        "the grid does not hold the paper's five data sets, the published Mean is recomputed "
        "over the data sets shown ('derived')"
    )
    # The scatter needs a published counterpart; without one (e.g. sklearn digits) it would
    # be an empty chart, so it is left out and the notes say why.
    comparable = (table["dataset"] != "mean") & table["paper_mean"].notna() & table["mean"].notna()
    figures = {}
    if comparable.any():
        figures["ours_vs_paper"] = ours_vs_paper(table, "Main table: ours vs. the paper")
    else:
        notes.append(
            "no 'ours vs. the paper' chart: no cell of this grid has a published counterpart "
            f"(data sets: {', '.join(dict.fromkeys(table['dataset'].astype(str)))})"
        )
    return StudyResult(
        kind=KIND,
        table=table,
        figures=figures,
        deviations=deviation_rows(table, lambda r: "main: " + _describe(r)),
        notes=notes,
        display=format_main_table(long, decimals=decimals),
        caption="Main table: one-class AUC beside the paper (Tables 2 and 7)",
    )


def ours_vs_paper(table: pd.DataFrame, title: str):
    """Scatter of our mean (± std) against the published value; the diagonal is agreement."""
    rows = table[(table["dataset"] != "mean") & table["paper_mean"].notna()]
    colours = palette(list(dict.fromkeys(rows["method"])))
    fig, (ax,) = new_figure(1, width=5.6, height=5.2)
    for method, group in rows.groupby("method", sort=False):
        has = group["mean"].notna()
        ax.errorbar(
            group.loc[has, "paper_mean"],
            group.loc[has, "mean"],
            yerr=group.loc[has, "std"].fillna(0.0),
            linestyle="",
            marker="o",
            color=colours[method],
            capsize=2,
            label=label("method", method),
        )
        bad = group[has & (group["n_missing"] > 0)]
        if len(bad):
            ax.scatter(
                bad["paper_mean"],
                bad["mean"],
                facecolor="white",
                edgecolor=colours[method],
                s=40,
                zorder=4,
                gid="incomplete",
            )
    ax.plot(
        [0, 100],
        [0, 100],
        color="grey",
        linestyle="--",
        linewidth=1.0,
        gid="diagonal",
        label="ours = paper",
    )
    values = np.concatenate(
        [
            rows["paper_mean"].to_numpy(dtype=float),
            rows["mean"].dropna().to_numpy(dtype=float),
            [100.0],
        ]
    )
    low = max(0.0, 5.0 * np.floor((np.nanmin(values) - 3.0) / 5.0))
    ax.set_xlim(low, 100.0)
    ax.set_ylim(low, 100.0)
    ax.set_aspect("equal")
    ax.set_xlabel("paper: ROC AUC (x100)")
    ax.set_ylabel("ours: ROC AUC (x100), mean ± std over seeds")
    ax.set_title(title)
    ax.legend(fontsize="small", loc="best")
    return fig
