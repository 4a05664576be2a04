"""Which rows of a table differ: paired Wilcoxon signed-rank tests blocked on inlier classes.

Within one data set every row (a representation with its detector) is scored on the same
inlier classes, so rows are compared class by class: per class the AUC is averaged over
seeds (one block per class), and :func:`scipy.stats.wilcoxon` tests the paired differences
(two-sided). The p-values of all pairs of rows within a data set are adjusted together by
Holm's step-down method (``statsmodels.stats.multitest.multipletests``), which controls
the family-wise error rate.

With ``n`` blocks the smallest two-sided p-value an exact signed-rank test can give is
``2 / 2**n`` (every difference of one sign): below 6 blocks (``2 / 32 = 0.0625``) no pair can
reach 0.05, whatever the AUCs, and the tables say so.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests

from pipeline_lib.report.aggregate import select_results
from pipeline_lib.report.published import DATASET_DISPLAY, display_name

__all__ = [
    "PAIRED_COLUMNS",
    "class_blocks",
    "comparisons_markdown",
    "holm",
    "main_table_comparisons",
    "min_attainable_p",
    "p_value_matrix",
    "paired_tests",
    "power_sentence",
]

#: Columns of :func:`paired_tests`.
PAIRED_COLUMNS: tuple[str, ...] = ("a", "b", "n_blocks", "median_diff", "statistic", "p", "p_holm")


def min_attainable_p(n_blocks: int) -> float:
    """The smallest two-sided p-value of an exact signed-rank test on ``n_blocks`` pairs."""
    if n_blocks < 1:
        return 1.0
    return min(1.0, 2.0 / 2.0**n_blocks)


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values (NaN entries stay NaN and are not counted in the family)."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    finite = np.isfinite(p)
    if finite.any():
        out[finite] = multipletests(p[finite], method="holm")[1]
    return out


def class_blocks(selected: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """One row per inlier class, one column per row of the table: the AUC averaged over seeds.

    Parameters
    ----------
    selected : DataFrame
        Job results of one data set with ``inlier``, ``seed``, ``auroc`` and ``columns``.
    columns : sequence of str
        The columns naming a table row (e.g. ``method, detector``); the blocks' columns are
        their values joined by ``" / "``.
    """
    key = selected[list(columns)].astype(str).agg(" / ".join, axis=1)
    frame = selected.assign(_row=key)
    return frame.groupby(["inlier", "_row"], sort=False)["auroc"].mean().unstack("_row")


def paired_tests(blocks: pd.DataFrame) -> pd.DataFrame:
    """Wilcoxon signed-rank test of every pair of columns of ``blocks``, Holm-adjusted.

    A pair is tested on the blocks (classes) both have; with no nonzero difference the
    test is undefined and ``p`` is 1.

    Returns
    -------
    DataFrame
        Columns :data:`PAIRED_COLUMNS`: the two rows, blocks used, median of ``a - b``,
        the signed-rank statistic, the raw two-sided p-value and the Holm-adjusted one
        (over every pair of this frame). Empty with fewer than two columns.
    """
    rows = []
    for a, b in itertools.combinations(blocks.columns, 2):
        both = blocks[[a, b]].dropna()
        diff = (both[a] - both[b]).to_numpy()
        if len(diff) == 0:
            statistic, p = np.nan, np.nan
        elif not np.any(diff != 0):
            statistic, p = 0.0, 1.0
        else:
            test = stats.wilcoxon(both[a], both[b], alternative="two-sided")
            statistic, p = float(test.statistic), float(test.pvalue)
        rows.append(
            {
                "a": a,
                "b": b,
                "n_blocks": len(diff),
                "median_diff": float(np.median(diff)) if len(diff) else np.nan,
                "statistic": statistic,
                "p": p,
            }
        )
    table = pd.DataFrame(rows, columns=list(PAIRED_COLUMNS[:-1]))
    table["p_holm"] = holm(table["p"]) if len(table) else pd.Series(dtype=float)
    return table[list(PAIRED_COLUMNS)]


def power_sentence(n_blocks: int, alpha: float = 0.05) -> str:
    """What the test can show with ``n_blocks`` classes: a sentence, or ``""``."""
    floor = min_attainable_p(n_blocks)
    if floor < alpha:
        return ""
    return (
        f"With {n_blocks} class{'es' if n_blocks != 1 else ''} per comparison the smallest "
        f"p-value a two-sided signed-rank test can give is 2/2^{n_blocks} = {floor:.3g} "
        f">= {alpha}: no difference can be significant at this size (6 classes or more are "
        "needed)."
    )


def p_value_matrix(tests: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """Holm-adjusted p-values as a square table: cell (row, column) ``"0.031 (+2.4)"``.

    The number in brackets is the median over classes of row minus column (AUC points);
    the diagonal and untested pairs show ``"—"``.
    """
    cells = {(a, b): "—" for a in names for b in names}
    for r in tests.itertuples(index=False):
        if not np.isfinite(r.p_holm):
            continue
        cells[(r.a, r.b)] = f"{r.p_holm:.3g} ({r.median_diff:+.1f})"
        cells[(r.b, r.a)] = f"{r.p_holm:.3g} ({-r.median_diff:+.1f})"
    frame = pd.DataFrame([[cells[(a, b)] for b in names] for a in names], columns=list(names))
    frame.insert(0, "", list(names))
    return frame


def comparisons_markdown(
    selected: pd.DataFrame, columns: Sequence[str], *, title: str, datasets: Sequence[str]
) -> str:
    """Per data set: the Holm-adjusted p-value matrix and, below 6 classes, the power line."""
    lines = [
        title,
        "",
        "Two-sided Wilcoxon signed-rank tests between the rows of the table, paired on inlier "
        "classes (per class the AUC averaged over seeds), p-values Holm-adjusted over all pairs "
        "of a data set. Cell: adjusted p (median over classes of row minus column, AUC "
        "points).",
        "",
    ]
    for dataset in datasets:
        part = selected[selected["dataset"] == dataset]
        blocks = class_blocks(part, columns)
        lines += [f"## {display_name('dataset', dataset)}", ""]
        if blocks.shape[1] < 2:
            lines += ["Fewer than two rows: nothing to compare.", ""]
            continue
        tests = paired_tests(blocks)
        matrix = p_value_matrix(tests, list(blocks.columns))
        lines += [matrix.to_markdown(index=False), ""]
        n_blocks = int(tests["n_blocks"].max())
        sentence = power_sentence(n_blocks)
        if sentence:
            lines += [sentence, ""]
    return "\n".join(lines)


def main_table_comparisons(
    results: pd.DataFrame, *, contamination: float = 0.0, fitset: str = "train"
) -> str:
    """The main table's paired comparisons as Markdown (``main_table_wilcoxon.md``).

    Rows are (representation, detector) pairs under their display names, as in the main
    table; data sets in the paper's order.
    """
    selected = select_results(results, contamination=contamination, fitset=fitset)
    named = selected.assign(
        method=selected["method"].map(lambda m: display_name("method", m)),
        detector=selected["detector"].map(lambda d: display_name("detector", d)),
    )
    present = list(dict.fromkeys(selected["dataset"]))
    datasets = [d for d in DATASET_DISPLAY if d in present] + sorted(
        set(present) - set(DATASET_DISPLAY)
    )
    text = comparisons_markdown(
        named,
        ["method", "detector"],
        title="Paired comparisons of the main table's rows",
        datasets=datasets,
    )
    return text + "\n" + "\n".join(rank_lines(named, ["method", "detector"], datasets))


def rank_lines(selected: pd.DataFrame, columns: Sequence[str], datasets: Sequence[str]) -> list:
    """Mean rank of each row across data sets (rank 1 = highest class-mean AUC), or why not.

    Ranks across data sets only mean something with three data sets or more; rows without
    a result on some data set are left out.
    """
    lines = ["## Ranks across data sets", ""]
    if len(datasets) < 3:
        return lines + [
            f"Not shown: ranks across data sets need 3 data sets or more; this table has "
            f"{len(datasets)}.",
            "",
        ]
    key = selected[list(columns)].astype(str).agg(" / ".join, axis=1)
    # per data set, per row: mean over seeds of the class mean of each seed
    per_seed = selected.assign(_row=key).groupby(["dataset", "_row", "seed"])["auroc"].mean()
    means = per_seed.groupby(level=["dataset", "_row"]).mean().unstack("dataset")
    means = means[list(datasets)].dropna()
    ranks = means.rank(axis=0, ascending=False)
    table = ranks.assign(mean_rank=ranks.mean(axis=1)).sort_values("mean_rank")
    table.columns = [*(display_name("dataset", d) for d in datasets), "Mean rank"]
    return lines + [table.rename_axis("Row").to_markdown(floatfmt=".1f"), ""]
