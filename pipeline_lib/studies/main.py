"""The paper's main table (Tables 2 / 7) as a study, so the summary ranks its deviations too.

Wraps :func:`pipeline_lib.paper.aggregate.main_table` and :func:`format_main_table` (class mean
per seed, mean ± std over seeds, the 5-dataset mean weighted by classes) and adds the
expected grid's missing cells, which ``main_table`` cannot know about.

Options: ``methods`` / ``detectors`` (restrict; default all in the grid), ``contamination``
(0.0), ``fitset`` (``"train"``), ``spaces`` (``["f", "rotation_classifier"]``: never g(f)),
``decimals``. The table has one row per (method, detector, dataset),
``dataset="mean"`` the class-weighted mean; the human table is :func:`format_main_table`;
the figure ``ours_vs_paper`` is drawn only when some cell has a published counterpart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipeline_lib.paper.aggregate import MAIN_COLUMNS, format_main_table, main_table
from pipeline_lib.paper.published import load_published
from pipeline_lib.studies.contract import STAT_COLUMNS
from pipeline_lib.studies.display import label
from pipeline_lib.studies.figures import new_figure, palette
from pipeline_lib.studies.spec import Deviations, Opt, Run, StudySpec

__all__ = ["DEFAULT_SPACES", "MAIN_SELECT", "SPEC", "main_cells", "ours_vs_paper"]

#: Feature spaces of the main table: detectors on f, and the rotation classifier's own rows.
DEFAULT_SPACES: tuple[str, ...] = ("f", "rotation_classifier")
#: ``main_table``'s columns -> the study table's, where only the name differs.
_RENAMED = {
    "expected_seeds": "n_expected_seeds",
    "published_mean": "paper_mean",
    "published_std": "paper_std",
    "delta": "deviation",
}


def _unfilled(method: str, detector: str, dataset: str, n: int, seeds: int, classes: int):
    """A ``main_table`` row of an expected cell without any result."""
    return {
        "method": method,
        "detector": detector,
        "dataset": dataset,
        "mean": np.nan,
        "std": np.nan,
        "ci_low": np.nan,
        "ci_high": np.nan,
        "ci_over": "",
        "n_seeds": 0,
        "expected_seeds": seeds,
        "n_classes": 0,
        "expected_classes": classes,
        "n_results": 0,
        "expected_results": n,
        "complete": False,
        "published_mean": np.nan,
        "published_std": np.nan,
        "published_derived": False,
        "delta": np.nan,
    }


def _long(run: Run, counts: pd.DataFrame) -> pd.DataFrame:
    """``main_table`` of the found results plus a row per expected cell without any."""
    cells = run.cells
    seeds = sorted(cells["seed"].unique())
    class_counts = cells.groupby("dataset")["inlier"].nunique().to_dict()
    results = cells[cells["auroc"].notna()]
    if results.empty:
        long = pd.DataFrame({col: pd.Series(dtype=object) for col in MAIN_COLUMNS})
    else:
        long = main_table(
            results,
            load_published(),
            contamination=float(run.options.get("contamination", 0.0)),
            fitset=str(run.options.get("fitset", "train")),
            seeds=seeds,
            class_counts=class_counts,
            ddof=run.ddof,
        )
    present = set(zip(long["method"], long["detector"], long["dataset"], strict=True))
    extra = [
        _unfilled(*key, int(n), len(seeds), class_counts[key[2]])
        for key, n in counts["n_expected"].items()
        if key not in present
    ]
    if extra:
        long = (
            pd.concat([long, pd.DataFrame(extra)], ignore_index=True)
            if len(long)
            else pd.DataFrame(extra)
        )
    return long[list(MAIN_COLUMNS)]


def main_cells(run: Run) -> pd.DataFrame:
    """Main-table cells of the selected grid: one row per (method, detector, dataset), with
    ``dataset="mean"`` the class-weighted mean; ``run.state["long"]`` is the
    ``main_table``-shaped frame (:data:`pipeline_lib.paper.aggregate.MAIN_COLUMNS`, expected
    cells without any result included) for ``format_main_table``."""
    counts = run.cells.groupby(["method", "detector", "dataset"]).agg(
        n_expected=("auroc", "size"), n_results=("auroc", "count")
    )
    totals = counts.groupby(level=["method", "detector"]).sum()
    run.state["long"] = long = _long(run, counts)
    n_expected = [
        int(totals.loc[(r.method, r.detector), "n_expected"])
        if r.dataset == "mean"
        else int(counts.loc[(r.method, r.detector, r.dataset), "n_expected"])
        for r in long.itertuples(index=False)
    ]
    table = long.rename(columns=_RENAMED).astype(
        {col: float for col in ("mean", "std", "ci_low", "ci_high", "paper_mean", "paper_std")}
        | {"ci_over": str, "n_seeds": int, "n_expected_seeds": int, "n_results": int}
        | {"deviation": float}
    )
    table["n_expected"] = n_expected
    table["n_missing"] = np.asarray(n_expected) - table["n_results"].to_numpy()
    table["paper_source"] = [
        (
            "derived: class-weighted mean of the paper's per-dataset values"
            if d
            else "Tables 2, 5, 7"
        )
        if np.isfinite(p)
        else ""
        for d, p in zip(long["published_derived"], table["paper_mean"], strict=True)
    ]
    return table[["method", "detector", "dataset", *STAT_COLUMNS]].reset_index(drop=True)


def _describe(run: Run, row: pd.Series) -> str:
    return (
        f"main: {label('dataset', row['dataset'])}: {label('method', row['method'])} / "
        f"{label('detector', row['detector'])}"
    )


def _comparable(table: pd.DataFrame) -> pd.Series:
    """Cells with both our mean and a published one (what the scatter can show)."""
    return (table["dataset"] != "mean") & table["paper_mean"].notna() & table["mean"].notna()


def _notes(run: Run, table: pd.DataFrame) -> list[str]:
    notes = [
        "the 'Mean' column weights data sets by their number of classes (Sec. 4.2); where "
        "the grid does not hold the paper's five data sets, the published Mean is recomputed "
        "over the data sets shown ('derived')"
    ]
    # The scatter needs a published counterpart; without one (e.g. sklearn digits) it would
    # be an empty chart, so it is left out and the notes say why.
    if not _comparable(table).any():
        notes.append(
            "no 'ours vs. the paper' chart: no cell of this grid has a published counterpart "
            f"(data sets: {', '.join(dict.fromkeys(table['dataset'].astype(str)))})"
        )
    return notes


#: The main grid's rows: the options' contamination, fit set, spaces, methods, detectors.
MAIN_SELECT = {
    "contamination": Opt("contamination"),
    "fitset": Opt("fitset"),
    "space": Opt("spaces"),
    "method": Opt("methods"),
    "detector": Opt("detectors"),
}


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


SPEC = StudySpec(
    kind="main",
    caption="Main table: one-class AUC beside the paper (Tables 2 and 7)",
    defaults={
        "methods": None,
        "detectors": None,
        "contamination": 0.0,
        "fitset": "train",
        "spaces": DEFAULT_SPACES,
    },
    select=MAIN_SELECT,
    empty="main table: the expected grid has no jobs with contamination={contamination}, "
    "fitset={fitset!r}, spaces {spaces}, methods {methods}, detectors {detectors}",
    cells=main_cells,
    deviations=[Deviations(_describe)],
    display=lambda run, table: format_main_table(run.state["long"], decimals=run.decimals),
    figures=lambda run, table: (
        {"ours_vs_paper": ours_vs_paper(table, "Main table: ours vs. the paper")}
        if _comparable(table).any()
        else {}
    ),
    notes=_notes,
)
