"""Which rows of a table differ: paired Wilcoxon signed-rank tests blocked on inlier classes.

Within one data set every row (a representation with its detector) is scored on the same
inlier classes, so rows are compared class by class: per class the AUC is averaged over
seeds (one block per class), and :func:`scipy.stats.wilcoxon` tests the paired differences
(two-sided). The p-values of all pairs of rows within a data set (the main table) or within
a study (:func:`study_comparisons`) are adjusted together by Holm's step-down method
(``statsmodels.stats.multitest.multipletests``), which controls the family-wise error rate.
A study varying several things (say outlier rate and detector) compares rows that differ in
one of them only: those pairs answer its question, and a smaller family keeps the power that
testing every pair would spend on comparisons nobody asked for.

The test ranks the non-zero differences only (``zero_method="wilcox"``: a class on which
both rows have the same AUC is dropped). With ``n`` of them the smallest two-sided p-value an
exact signed-rank test can give is ``2 / 2**n`` (every difference of one sign): below 6
(``2 / 32 = 0.0625``) a pair cannot reach 0.05, whatever the AUCs, and the tables say so.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests

from pipeline_lib.paper.aggregate import select_results
from pipeline_lib.paper.published import DATASET_DISPLAY, display_name

__all__ = [
    "MIN_RANK_DATASETS",
    "PAIRED_COLUMNS",
    "STUDY_ROW_COLUMNS",
    "ZERO_METHOD",
    "class_blocks",
    "compared_columns",
    "comparisons_markdown",
    "dataset_tests",
    "differing_columns",
    "friedman_p",
    "holm",
    "main_table_comparisons",
    "main_table_ranks",
    "mean_ranks",
    "min_attainable_p",
    "p_value_matrix",
    "paired_tests",
    "power_sentence",
    "study_comparisons",
    "study_comparisons_markdown",
]

#: Columns of a study frame that can tell its compared rows apart (the variant parameters
#: follow from ``method``; ``inlier`` and ``seed`` are the blocks and the replicates).
STUDY_ROW_COLUMNS: tuple[str, ...] = ("method", "contamination", "fitset", "detector", "space")

#: Columns of :func:`paired_tests`.
PAIRED_COLUMNS: tuple[str, ...] = (
    "a",
    "b",
    "n_blocks",
    "n_nonzero",
    "median_diff",
    "statistic",
    "p",
    "p_holm",
)

#: :func:`scipy.stats.wilcoxon`'s ``zero_method``: Wilcoxon's own, which drops the zero
#: differences before ranking, so ``n_nonzero`` is the sample size the test sees.
ZERO_METHOD: str = "wilcox"


def min_attainable_p(n_blocks: int) -> float:
    """The smallest two-sided p-value of an exact signed-rank test on ``n_blocks`` pairs
    whose differences are not zero (the test drops the others, :data:`ZERO_METHOD`)."""
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
        Columns :data:`PAIRED_COLUMNS`: the two rows, blocks used, how many of them differ
        (the test drops the others, :data:`ZERO_METHOD`), median of ``a - b``, the
        signed-rank statistic, the raw two-sided p-value and the Holm-adjusted one (over
        every pair of this frame). Empty with fewer than two columns.
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
            test = stats.wilcoxon(
                both[a], both[b], zero_method=ZERO_METHOD, alternative="two-sided"
            )
            statistic, p = float(test.statistic), float(test.pvalue)
        rows.append(
            {
                "a": a,
                "b": b,
                "n_blocks": len(diff),
                "n_nonzero": int(np.count_nonzero(diff)),
                "median_diff": float(np.median(diff)) if len(diff) else np.nan,
                "statistic": statistic,
                "p": p,
            }
        )
    table = pd.DataFrame(rows, columns=list(PAIRED_COLUMNS[:-1]))
    table["p_holm"] = holm(table["p"]) if len(table) else pd.Series(dtype=float)
    return table[list(PAIRED_COLUMNS)]


def power_sentence(n_nonzero: int | Sequence[int], alpha: float = 0.05) -> str:
    """What the tests can show: a sentence, or ``""`` when every comparison can reach ``alpha``.

    ``n_nonzero`` is, per comparison, its number of classes whose difference is not zero:
    the sample the signed-rank test ranks (:data:`ZERO_METHOD` drops the others), so the
    floor ``2 / 2**n`` of :func:`min_attainable_p` is over those.
    """
    counts = [int(n) for n in np.atleast_1d(n_nonzero)]
    weak = [n for n in counts if min_attainable_p(n) >= alpha]
    if not weak:
        return ""
    needed = next(n for n in itertools.count(1) if min_attainable_p(n) < alpha)
    most = max(weak)
    differences = f"{most} non-zero class difference{'s' if most != 1 else ''}"
    dropped = "(classes where both rows have the same AUC are dropped)"
    floor = f"2/2^{most} = {min_attainable_p(most):.3g} >= {alpha}"
    more = f"({needed} non-zero differences or more are needed)"
    if len(weak) == len(counts):
        return (
            f"With at most {differences} per comparison {dropped}, the smallest p-value a "
            f"two-sided signed-rank test can give is {floor}: no difference can be "
            f"significant at this size {more}."
        )
    return (
        f"{len(weak)} of {len(counts)} comparisons have at most {differences} {dropped}: "
        f"their smallest attainable p-value is {floor}, so they cannot be significant {more}."
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


def dataset_tests(
    selected: pd.DataFrame,
    columns: Sequence[str],
    datasets: Sequence[str],
    *,
    family: str = "dataset",
) -> pd.DataFrame:
    """:func:`paired_tests` per data set, in one frame with a leading ``dataset`` column.

    Parameters
    ----------
    selected : DataFrame
        Job results with ``dataset``, ``inlier``, ``seed``, ``auroc`` and ``columns``.
    columns : sequence of str
        The columns naming a compared row (see :func:`class_blocks`).
    datasets : sequence of str
        The data sets, in display order; one without two rows adds no test.
    family : {"dataset", "all"}, default="dataset"
        Which p-values Holm adjusts together: each data set's pairs (the main table), or
        every pair of the frame (a study: one family per study).

    Raises
    ------
    ValueError
        If ``family`` is neither.
    """
    if family not in ("dataset", "all"):
        raise ValueError(f"family={family!r} must be 'dataset' or 'all'")
    parts = []
    for dataset in datasets:
        blocks = class_blocks(selected[selected["dataset"] == dataset], columns)
        if blocks.shape[1] >= 2:
            parts.append(paired_tests(blocks).assign(dataset=dataset))
    if not parts:
        return pd.DataFrame(columns=["dataset", *PAIRED_COLUMNS])
    tests = pd.concat(parts, ignore_index=True)[["dataset", *PAIRED_COLUMNS]]
    if family == "all":
        tests["p_holm"] = holm(tests["p"])
    return tests


def _matrices_markdown(
    tests: pd.DataFrame, selected: pd.DataFrame, columns: Sequence[str], datasets: Sequence[str]
) -> list[str]:
    """Per data set: its p-value matrix and, where a pair has fewer than 6 non-zero class
    differences, the power sentence."""
    lines: list[str] = []
    for dataset in datasets:
        part = tests[tests["dataset"] == dataset]
        lines += [f"## {display_name('dataset', dataset)}", ""]
        if not len(part):
            lines += ["Fewer than two rows: nothing to compare.", ""]
            continue
        names = list(class_blocks(selected[selected["dataset"] == dataset], columns).columns)
        lines += [p_value_matrix(part, names).to_markdown(index=False), ""]
        sentence = power_sentence(part["n_nonzero"])
        if sentence:
            lines += [sentence, ""]
    return lines


def comparisons_markdown(
    selected: pd.DataFrame, columns: Sequence[str], *, title: str, datasets: Sequence[str]
) -> str:
    """Per data set: the Holm-adjusted p-value matrix and, where a pair has fewer than 6
    non-zero class differences, the power line."""
    lines = [
        title,
        "",
        "Two-sided Wilcoxon signed-rank tests between the rows of the table, paired on inlier "
        "classes (per class the AUC averaged over seeds), p-values Holm-adjusted over all pairs "
        "of a data set. Cell: adjusted p (median over classes of row minus column, AUC "
        "points).",
        "",
    ]
    tests = dataset_tests(selected, columns, datasets)
    return "\n".join(lines + _matrices_markdown(tests, selected, columns, datasets))


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
    datasets = _datasets(selected)
    text = comparisons_markdown(
        named,
        ["method", "detector"],
        title="Paired comparisons of the main table's rows",
        datasets=datasets,
    )
    return text + "\n" + "\n".join(rank_lines(named, ["method", "detector"], datasets))


#: Data sets needed before ranks across them are shown (table and plot).
MIN_RANK_DATASETS = 3


def mean_ranks(
    selected: pd.DataFrame, columns: Sequence[str], datasets: Sequence[str]
) -> pd.DataFrame:
    """Rank of each row on each data set (1 = highest AUC) and the mean rank, best first.

    Per data set a row's AUC is its mean over seeds of the class mean of each seed, as in
    the main table; rows without a result on some data set are left out.

    Returns
    -------
    DataFrame
        Index: the rows (``columns`` joined by ``" / "``); one column per data set (its
        id), then ``mean_rank``; sorted by ``mean_rank``.
    """
    key = selected[list(columns)].astype(str).agg(" / ".join, axis=1)
    per_seed = selected.assign(_row=key).groupby(["dataset", "_row", "seed"])["auroc"].mean()
    means = per_seed.groupby(level=["dataset", "_row"]).mean().unstack("dataset")
    means = means[list(datasets)].dropna()
    ranks = means.rank(axis=0, ascending=False)
    return ranks.assign(mean_rank=ranks.mean(axis=1)).sort_values("mean_rank")


def friedman_p(ranks: pd.DataFrame) -> float:
    """Friedman's test that all rows rank alike across data sets (NaN below 3 rows).

    ``ranks`` is :func:`mean_ranks`'s frame; data sets are the blocks, rows the treatments
    (:func:`scipy.stats.friedmanchisquare` on the per-data-set ranks, which it re-ranks
    identically).
    """
    per_dataset = ranks.drop(columns="mean_rank")
    if len(per_dataset) < 3 or per_dataset.shape[1] < 2:
        return float("nan")
    return float(stats.friedmanchisquare(*per_dataset.to_numpy()).pvalue)


def main_table_ranks(
    results: pd.DataFrame, *, contamination: float = 0.0, fitset: str = "train"
) -> pd.DataFrame | None:
    """:func:`mean_ranks` of the main table's rows (display names), or None below 3 data sets."""
    selected = select_results(results, contamination=contamination, fitset=fitset)
    datasets = _datasets(selected)
    if len(datasets) < MIN_RANK_DATASETS:
        return None
    named = selected.assign(
        method=selected["method"].map(lambda m: display_name("method", m)),
        detector=selected["detector"].map(lambda d: display_name("detector", d)),
    )
    return mean_ranks(named, ["method", "detector"], datasets)


def rank_lines(selected: pd.DataFrame, columns: Sequence[str], datasets: Sequence[str]) -> list:
    """Mean rank of each row across data sets (rank 1 = highest class-mean AUC), or why not.

    Ranks across data sets only mean something with three data sets or more; rows without
    a result on some data set are left out.
    """
    lines = ["## Ranks across data sets", ""]
    if len(datasets) < MIN_RANK_DATASETS:
        return lines + [
            f"Not shown: ranks across data sets need {MIN_RANK_DATASETS} data sets or more; "
            f"this table has {len(datasets)}.",
            "",
        ]
    table = mean_ranks(selected, columns, datasets)
    table.columns = [*(display_name("dataset", d) for d in datasets), "Mean rank"]
    return lines + [table.rename_axis("Row").to_markdown(floatfmt=".1f"), ""]


def compared_columns(frame: pd.DataFrame) -> list[str]:
    """The columns of :data:`STUDY_ROW_COLUMNS` that vary in ``frame``: what a study compares.

    A study varying none of them (one row per data set) compares nothing; then the list is
    empty.
    """
    return [c for c in STUDY_ROW_COLUMNS if c in frame.columns and frame[c].nunique() > 1]


def _study_rows(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """``frame`` with the compared columns as display text (names, outlier rates)."""
    out = frame.copy()
    for kind in ("method", "detector"):
        if kind in columns:
            out[kind] = out[kind].map(lambda v, k=kind: display_name(k, str(v)))
    if "contamination" in columns:
        out["contamination"] = out["contamination"].map(lambda v: f"{100 * float(v):g} % outliers")
    return out


def _datasets(frame: pd.DataFrame) -> list[str]:
    """The data sets of ``frame`` in the paper's order, then the others sorted."""
    present = list(dict.fromkeys(frame["dataset"]))
    return [d for d in DATASET_DISPLAY if d in present] + sorted(
        set(present) - set(DATASET_DISPLAY)
    )


def differing_columns(a: str, b: str, columns: Sequence[str]) -> list[str]:
    """Which of ``columns`` tell the rows ``a`` and ``b`` (values joined by ``" / "``) apart;
    all of them when a name does not split into one value per column."""
    parts_a, parts_b = a.split(" / "), b.split(" / ")
    if len(parts_a) != len(columns) or len(parts_b) != len(columns):
        return list(columns)
    return [c for c, x, y in zip(columns, parts_a, parts_b, strict=True) if x != y]


def study_comparisons(frame: pd.DataFrame) -> pd.DataFrame:
    """Paired tests between the compared rows of a study that differ in one thing, per data set.

    The rows are the values of :func:`compared_columns` (display names joined by
    ``" / "``); a pair is tested when its rows differ in exactly one of those columns (all
    pairs when the study varies one), on the inlier classes both have (per class the AUC
    averaged over seeds), and the p-values of those pairs, all data sets together, are
    Holm-adjusted as one family.

    Parameters
    ----------
    frame : DataFrame
        A study's found results (its ``results.csv``): ``dataset``, ``inlier``, ``seed``,
        ``auroc`` and the columns of :data:`STUDY_ROW_COLUMNS` it has.

    Returns
    -------
    DataFrame
        Columns ``dataset`` then :data:`PAIRED_COLUMNS`; empty when nothing is compared.
    """
    columns = compared_columns(frame)
    frame = frame[frame["auroc"].notna()]
    if not columns or frame.empty:
        return pd.DataFrame(columns=["dataset", *PAIRED_COLUMNS])
    tests = dataset_tests(_study_rows(frame, columns), columns, _datasets(frame))
    one = [
        len(differing_columns(a, b, columns)) == 1
        for a, b in zip(tests["a"], tests["b"], strict=True)
    ]
    tests = tests[np.asarray(one, dtype=bool)].reset_index(drop=True)
    tests["p_holm"] = holm(tests["p"]) if len(tests) else pd.Series(dtype=float)
    return tests


def study_comparisons_markdown(frame: pd.DataFrame, tests: pd.DataFrame, *, name: str) -> str:
    """A study's paired comparisons (``<name>_wilcoxon.md``) from :func:`study_comparisons`."""
    columns = compared_columns(frame)
    lines = [f"# Paired comparisons of the rows of study {name}", ""]
    if not len(tests):
        what = " / ".join(columns) if columns else "no method, detector or setting"
        return "\n".join(
            lines
            + [
                f"Nothing to compare: the study varies {what} with fewer than two rows "
                "on every data set.",
                "",
            ]
        )
    lines += [
        f"Rows: {' / '.join(columns)}. Two-sided Wilcoxon signed-rank tests between the rows "
        "of a data set that differ in one of these only, paired on inlier classes (per class "
        f"the AUC averaged over seeds); the p-values of all {len(tests)} pairs of the study are "
        "Holm-adjusted together. Non-zero: the classes whose difference the test ranks (it "
        "drops ties). Median: over classes of row A minus row B, AUC points.",
        "",
    ]
    for dataset in _datasets(tests):
        part = tests[tests["dataset"] == dataset]
        table = pd.DataFrame(
            {
                "row A": part["a"],
                "row B": part["b"],
                "differ in": [
                    differing_columns(a, b, columns)[0]
                    for a, b in zip(part["a"], part["b"], strict=True)
                ],
                "classes": part["n_blocks"],
                "non-zero": part["n_nonzero"],
                "median A - B": part["median_diff"].map(lambda v: f"{v:+.1f}"),
                "p": part["p"].map(lambda v: f"{v:.3g}"),
                "Holm p": part["p_holm"].map(lambda v: f"{v:.3g}"),
            }
        )
        lines += [
            f"## {display_name('dataset', dataset)}",
            "",
            table.to_markdown(index=False, disable_numparse=True),
            "",
        ]
        sentence = power_sentence(part["n_nonzero"])
        if sentence:
            lines += [sentence, ""]
    return "\n".join(lines)
