"""Uniformity and batch size (paper Sec. 5.1 / Fig. 3a-b, App. A.2.2 / Fig. 7).

Contrastive and contrastive-DA representations trained with batch sizes 2^3..2^9: the AUC of
f and of g(f), and the MMD of normalize(g(f)) of the training features to the uniform
distribution on the sphere (``mmd``, one value per model). The paper's Fig. 7 scatters
log(MMD) against AUC for batch sizes 32..512 (5 seeds each, vanilla and DA pooled) and
quotes Pearson's r = 0.914 (AUC of g(f)) and 0.774 (AUC of f); we compute r from our points.

A point of the scatter is one (variant, seed): its AUC averaged over the inlier classes and
its MMD averaged over the classes' models, as the paper's "5 models with different random
seeds" per configuration. Points with a missing result are left out of r and drawn hollow.
The figures of Fig. 3 are blank in the LaTeX source; the only published AUCs are the
main-table ones at the default batch size (32).

Options: ``base_methods`` (default contrastive, contrastive_da), ``detector`` (``"ocsvm"``:
the paper's Fig. 3b uses kernel OC-SVMs), ``default_batch_size`` (32: what a NaN
``batch_size`` means), ``correlation_batch_sizes`` (32..512 as the paper's Fig. 7),
``paper_r`` (``{"g": 0.914, "f": 0.774}`` from the paper's text), ``decimals``.
Only one-class jobs (contamination 0, fit set ``train``) are used. The table has one row per
(dataset, base_method, batch_size, quantity) with quantity ``auroc_f``, ``auroc_g``, ``mmd``,
plus per dataset the rows ``pearson_r_g`` / ``pearson_r_f`` (``mean`` = r, ``n_seeds`` =
points used, ``batch_size`` NaN).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from pipeline_lib.paper.published.text_values import text_value
from pipeline_lib.studies.display import DATASET_ROW, label, named, pivot_display
from pipeline_lib.studies.figures import (
    SPACE_NAMES,
    auc_axis,
    draw_lines,
    finish_legend,
    new_figure,
    palette,
    space_lines,
)
from pipeline_lib.studies.paper import default_cells, published_main
from pipeline_lib.studies.spec import PAPER_ORDER, SORTED, Deviations, Opt, Run, StudySpec
from pipeline_lib.studies.stats import any_incomplete, cell_stats

__all__ = ["PAPER_R", "SPEC", "correlation_points", "pearson_r"]

#: Pearson's r the paper quotes (App. A.2.2), parsed from its text: space -> r.
PAPER_R: dict[str, float] = {
    "g": text_value("pearson_r_g", "contrastive+contrastive_da"),
    "f": text_value("pearson_r_f", "contrastive+contrastive_da"),
}
_SPACE_NAME = SPACE_NAMES


def pearson_r(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Pearson's r and its two-sided p-value; NaN with fewer than 3 points or a constant axis."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    result = sps.pearsonr(x, y)
    return float(result.statistic), float(result.pvalue)


def _models(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per trained model with its MMD (first non-NaN over the model's rows)."""
    keys = ["dataset", "inlier", "seed", "method", "base_method", "batch_size"]
    return cells.groupby(keys, sort=True, dropna=False)["mmd"].first().reset_index()


def correlation_points(cells: pd.DataFrame, sizes: Sequence[float]) -> pd.DataFrame:
    """The scatter's points: one per (dataset, variant, seed) at the batch sizes ``sizes``.

    Returns
    -------
    DataFrame
        ``dataset, base_method, method, batch_size, seed``, then per space ``s`` in f, g:
        ``auroc_s`` (mean over classes present), ``missing_s`` (expected results without
        one), and ``mmd`` (mean over the classes' models), ``missing_mmd``, ``log_mmd``
        (natural log; NaN when the MMD is missing or not positive).
    """
    cells = cells[cells["batch_size"].isin([float(b) for b in sizes])]
    keys = ["dataset", "base_method", "method", "batch_size", "seed"]
    points = cells[keys].drop_duplicates().sort_values(keys).reset_index(drop=True)
    for space in ("f", "g"):
        rows = cells[cells["space"] == space].groupby(keys)["auroc"]
        stats = pd.DataFrame(
            {f"auroc_{space}": rows.mean(), f"missing_{space}": rows.size() - rows.count()}
        )
        points = points.merge(stats.reset_index(), on=keys, how="left")
        points[f"missing_{space}"] = points[f"missing_{space}"].fillna(0).astype(int)
    models = _models(cells).groupby(keys)["mmd"]
    mmd = pd.DataFrame({"mmd": models.mean(), "missing_mmd": models.size() - models.count()})
    points = points.merge(mmd.reset_index(), on=keys, how="left")
    with np.errstate(divide="ignore", invalid="ignore"):
        points["log_mmd"] = np.where(points["mmd"] > 0, np.log(points["mmd"]), np.nan)
    return points


_BY = ["dataset", "base_method", "batch_size"]


def _cells(run: Run) -> pd.DataFrame:
    """AUC cells per (dataset, base method, batch size, space) and MMD cells per model."""
    auc = cell_stats(run.cells, [*_BY, "space"], ddof=run.ddof)
    auc.insert(3, "quantity", "auroc_" + auc.pop("space"))
    mmd = cell_stats(_models(run.cells), _BY, value="mmd", ddof=run.ddof)
    mmd.insert(3, "quantity", "mmd")
    return pd.concat([auc, mmd], ignore_index=True)


def _lookup(run: Run):
    """The main table's AUC of f at the default batch size, for default variants."""
    default_bs = run["default_batch_size"]
    defaults = default_cells(run.cells, _BY, "batch_size")
    published = published_main()

    def lookup(row: pd.Series):
        if row["quantity"] != "auroc_f" or row["batch_size"] != default_bs:
            return None
        if not defaults.get((row["dataset"], row["base_method"], row["batch_size"]), False):
            return None
        return published.get((row["base_method"], run["detector"], row["dataset"]))

    return lookup


def _r_row(group: pd.DataFrame, space: str, paper: float) -> tuple[dict, str]:
    """Pearson's r of one data set's points as a table row, and its note."""
    use = group[(group[f"missing_{space}"] == 0) & (group["missing_mmd"] == 0)]
    use = use[np.isfinite(use["log_mmd"]) & np.isfinite(use[f"auroc_{space}"])]
    r, p = pearson_r(use["log_mmd"], use[f"auroc_{space}"])
    dropped = len(group) - len(use)
    dataset = group["dataset"].iloc[0]
    row = {
        "dataset": dataset,
        "base_method": "+".join(sorted(group["base_method"].unique())),
        "batch_size": np.nan,
        "quantity": f"pearson_r_{space}",
        "mean": r,
        "std": np.nan,
        "n_seeds": len(use),
        "n_expected_seeds": len(group),
        "n_results": len(use),
        "n_expected": len(group),
        "n_missing": int(group[f"missing_{space}"].sum() + group["missing_mmd"].sum()),
        "paper_mean": paper,
        "paper_std": np.nan,
        "paper_source": "App. A.2.2 text",
        "deviation": r - paper,
    }
    note = (
        f"{label('dataset', dataset)}: Pearson r of log MMD(g(f)) with the AUC of "
        f"{_SPACE_NAME[space]} = {r:.3f} (p = {p:.2g}) over {len(use)} (variant, seed) "
        f"points at batch sizes {sorted(int(b) for b in group['batch_size'].unique())}; "
        f"paper {paper:.3f}"
        + (f"; {dropped} points with missing results left out" if dropped else "")
    )
    return row, note


def _with_r(run: Run, table: pd.DataFrame) -> pd.DataFrame:
    """Add per data set the rows ``pearson_r_g`` / ``pearson_r_f`` (notes in the run)."""
    paper_r = {**PAPER_R, **dict(run["paper_r"])}
    run.state["points"] = points = correlation_points(run.cells, run["correlation_batch_sizes"])
    rows, run.state["notes"] = [], []
    for _, group in points.groupby("dataset", sort=False):
        for space in ("g", "f"):
            row, note = _r_row(group, space, paper_r.get(space, np.nan))
            rows.append(row)
            run.state["notes"].append(note)
    return pd.concat([table, pd.DataFrame(rows)], ignore_index=True) if rows else table


def _is_r(table: pd.DataFrame) -> pd.Series:
    return table["quantity"].str.startswith("pearson")


def _figures(run: Run, table: pd.DataFrame) -> dict:
    figures, points = {}, run.state["points"]
    for dataset, group in table.groupby("dataset", sort=False):
        figures[f"{dataset}_batch_size"] = _batch_figure(group, dataset, run["detector"])
        figures[f"{dataset}_correlation"] = _scatter_figure(
            points[points["dataset"] == dataset], group, dataset
        )
    return figures


def _display(run: Run, table: pd.DataFrame) -> pd.DataFrame:
    decimals = run.decimals
    quantity = {"auroc_f": "AUC of f", "auroc_g": "AUC of g(f)", "mmd": "MMD of g(f)"}
    rows = [
        DATASET_ROW,
        named("base_method", "Representation", "method"),
        ("quantity", "Quantity", lambda v: quantity.get(v, v)),
    ]

    def column(b):
        return f"batch {int(b)}"

    parts = [
        pivot_display(
            table[table["quantity"].str.startswith("auroc")],
            rows,
            "batch_size",
            column,
            decimals=decimals,
        ),
        pivot_display(table[table["quantity"] == "mmd"], rows, "batch_size", column, decimals=4),
    ]
    return pd.concat([p for p in parts if len(p)], ignore_index=True).fillna("—")


def _batch_figure(table: pd.DataFrame, dataset: str, detector: str):
    """(a) MMD of g(f) vs batch size; (b) AUC of f (solid) and g(f) (dashed) vs batch size."""
    table = table[~table["quantity"].str.startswith("pearson")]
    colours = palette(list(dict.fromkeys(table["base_method"])))
    fig, (ax_mmd, ax_auc) = new_figure(2, sharey=False)
    draw_lines(
        ax_mmd,
        table[table["quantity"] == "mmd"],
        x_col="batch_size",
        hue_col="base_method",
        colours=colours,
        name=lambda m: f"{label('method', m)}, MMD",
        paper=False,
        marker="^",
    )
    ax_mmd.set_yscale("log")
    ax_mmd.set_ylabel("MMD of g(f) to uniform (log scale)")
    ax_mmd.set_title("(a) uniformity")
    space_lines(
        ax_auc,
        lambda s: table[table["quantity"] == f"auroc_{s}"],
        x_col="batch_size",
        colours=colours,
    )
    aucs = table[table["quantity"].str.startswith("auroc")]
    auc_axis(ax_auc, aucs["mean"] - aucs["std"].fillna(0.0), aucs["paper_mean"])
    ax_auc.set_title(f"(b) AUC, {label('detector', detector)}")
    for ax in (ax_mmd, ax_auc):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size (images, log2 scale)")
    fig.suptitle(f"{label('dataset', dataset)}: contrastive representations vs. batch size")
    finish_legend(fig, [ax_mmd, ax_auc], incomplete=any_incomplete(table), ncols=3)
    return fig


def _scatter_figure(points: pd.DataFrame, table: pd.DataFrame, dataset: str):
    """log(MMD of g(f)) against AUC of g(f) (left) and of f (right), r in the titles."""
    colours = palette(list(dict.fromkeys(points["base_method"])))
    fig, axes = new_figure(2, sharey=False)
    for ax, space in zip(axes, ("g", "f"), strict=True):
        complete = (points[f"missing_{space}"] == 0) & (points["missing_mmd"] == 0)
        for base, group in points.groupby("base_method", sort=False):
            ok = group[complete.loc[group.index]]
            bad = group[~complete.loc[group.index]]
            ax.scatter(
                ok["log_mmd"],
                ok[f"auroc_{space}"],
                color=colours[base],
                s=22,
                label=label("method", base),
                gid="point",
            )
            if len(bad):
                ax.scatter(
                    bad["log_mmd"],
                    bad[f"auroc_{space}"],
                    facecolor="white",
                    edgecolor=colours[base],
                    s=26,
                    gid="incomplete",
                )
        use = points[
            complete & np.isfinite(points["log_mmd"]) & np.isfinite(points[f"auroc_{space}"])
        ]
        if len(use) >= 2 and np.ptp(use["log_mmd"]) > 0:
            slope, intercept = np.polyfit(use["log_mmd"], use[f"auroc_{space}"], 1)
            xs = np.linspace(use["log_mmd"].min(), use["log_mmd"].max(), 2)
            ax.plot(
                xs, slope * xs + intercept, color="grey", linestyle="--", linewidth=1.0, gid="fit"
            )
        row = table[table["quantity"] == f"pearson_r_{space}"]
        r = float(row["mean"].iloc[0]) if len(row) else np.nan
        paper = float(row["paper_mean"].iloc[0]) if len(row) else np.nan
        ax.set_title(
            f"AUC of {_SPACE_NAME[space]}: r = {r:.3f} (paper {paper:.3f}), n = {len(use)}"
        )
        ax.set_xlabel("log MMD of g(f) (natural log)")
        ax.set_ylabel(f"ROC AUC of {_SPACE_NAME[space]} (x100)")
    fig.suptitle(
        f"{label('dataset', dataset)}: uniformity vs. one-class AUC "
        "(one point per variant and seed)"
    )
    finish_legend(
        fig,
        axes,
        incomplete=bool((points[["missing_f", "missing_g", "missing_mmd"]] > 0).any().any()),
    )
    return fig


SPEC = StudySpec(
    kind="uniformity",
    caption="Uniformity and batch size: AUC of f and g(f) and MMD of g(f) to the uniform "
    "distribution (Sec. 5.1, App. A.2.2)",
    defaults={
        "base_methods": ("contrastive", "contrastive_da"),
        "detector": "ocsvm",
        "default_batch_size": 32.0,
        "correlation_batch_sizes": (32, 64, 128, 256, 512),
        "paper_r": {},
    },
    select={
        "base_method": Opt("base_methods"),
        "detector": Opt("detector"),
        "fitset": "train",
        "contamination": 0.0,
        "space": ["f", "g"],
    },
    empty="{kind}: the expected grid has no one-class jobs of {base_methods} with detector "
    "{detector!r} in spaces f / g",
    fill={"batch_size": "default_batch_size"},
    cells=_cells,
    paper=_lookup,
    extend=_with_r,
    orders={
        "dataset": PAPER_ORDER,
        "base_method": PAPER_ORDER,
        "quantity": ["auroc_f", "auroc_g", "mmd", "pearson_r_g", "pearson_r_f"],
        "batch_size": SORTED,
    },
    deviations=[
        Deviations(
            lambda run, r: (
                f"{label('dataset', r['dataset'])}: {label('method', r['base_method'])} / "
                f"{label('detector', run['detector'])}, AUC of f at batch size "
                f"{int(r['batch_size'])}"
            ),
            where=lambda table: table["quantity"].isin(["auroc_f", "auroc_g"]),
        ),
        Deviations(
            lambda run, r: (
                f"{label('dataset', r['dataset'])}: Pearson r, log MMD(g(f)) vs AUC of "
                f"{_SPACE_NAME[r['quantity'][-1]]}"
            ),
            where=_is_r,
            unit="r",
        ),
    ],
    display=_display,
    figures=_figures,
    missing=lambda table: table[~_is_r(table)],
    notes=lambda run, table: [
        *run.state["notes"],
        f"AUCs with {label('detector', run['detector'])} on f and on g(f); MMD of "
        "normalize(g(f)) of the training features to the uniform distribution on the sphere "
        "(pipeline_lib.detection.metrics."
        f"uniformity_mmd); a NaN batch size is the default {int(run['default_batch_size'])}",
    ],
)
