"""Whether a reproduced number agrees with the paper's: one rule for every page and script.

Torch-free, so the page generator (:mod:`pipeline_lib.paper.reproduction`) and the offline
detector table (``benchmarks/fullcell_detectors.py``) share it without importing the models.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from pipeline_lib.paper.intervals import SEED_STD_DDOF
from pipeline_lib.paper.published import display_name

__all__ = [
    "VERDICTS",
    "count_line",
    "no_counterpart_line",
    "opening_line",
    "reproduction_verdict",
    "table_verdicts",
    "verdict_counts",
]

#: Every value :func:`reproduction_verdict` returns.
VERDICTS: tuple[str, ...] = ("within", "above", "below", "no paper value", "not comparable")


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def reproduction_verdict(
    ours_mean: float,
    paper_mean: float | None,
    paper_std: float | None,
    ours_std: float | None = None,
    comparable: bool = True,
) -> str:
    """Place our AUC against the paper's mean +- std.

    The rule: ours is ``within`` when ``|ours_mean - paper_mean| <= 2 * sqrt(ours_std**2 +
    paper_std**2)``, i.e. the difference of the two means lies within two standard
    deviations of that difference if the two runs are independent; otherwise ``above`` or
    ``below`` by the sign of ``ours_mean - paper_mean``. With one seed of ours there is no
    std of ours (``ours_std`` None counts as 0) and the rule becomes ``|ours - paper| <= 2
    paper_std``. A paper value printed without a std counts as std 0. Both stds are of the
    values (the paper's over its 5 runs), not of the means, so the rule is loose for many
    seeds and strict for one, on purpose: it asks whether our number could be one more
    run of the paper's.

    Parameters
    ----------
    ours_mean : float
        Our AUC x 100 (the mean over our seeds).
    paper_mean, paper_std : float or None
        The paper's AUC x 100 and its std; ``paper_mean`` None or NaN: the paper reports
        no such number.
    ours_std : float or None, default=None
        The std over our seeds; None or NaN with one seed.
    comparable : bool, default=True
        False when our row does not run the paper's experiment (another score, fewer
        epochs, a variant): then no verdict is given.

    Returns
    -------
    {"within", "above", "below", "no paper value", "not comparable"}
        ``no paper value`` takes precedence over ``not comparable``.

    Raises
    ------
    ValueError
        If ``ours_mean`` is not finite or a std is negative.
    """
    if not math.isfinite(ours_mean):
        raise ValueError(f"ours_mean must be a finite AUC, got {ours_mean}")
    if _missing(paper_mean):
        return "no paper value"
    if not comparable:
        return "not comparable"
    ours_std = 0.0 if _missing(ours_std) else float(ours_std)
    paper_std = 0.0 if _missing(paper_std) else float(paper_std)
    if ours_std < 0 or paper_std < 0:
        raise ValueError(f"stds must be >= 0, got ours {ours_std}, paper {paper_std}")
    difference = ours_mean - float(paper_mean)
    if abs(difference) <= 2.0 * math.hypot(ours_std, paper_std):
        return "within"
    return "above" if difference > 0 else "below"


def verdict_counts(verdicts: Iterable[str]) -> dict[str, int]:
    """How many cells got each verdict, every key of :data:`VERDICTS` present.

    Raises
    ------
    ValueError
        Naming a value that is not a verdict.
    """
    counts = dict.fromkeys(VERDICTS, 0)
    for verdict in verdicts:
        if verdict not in counts:
            raise ValueError(f"{verdict!r} is not a verdict; known: {VERDICTS}")
        counts[verdict] += 1
    return counts


def count_line(counts: Mapping[str, int], breaks: Iterable[str] = ()) -> str:
    """The sentence a summary opens with: ``"N of M published cells reproduced ..."``.

    ``M`` counts the cells with a published number; ``N`` those ``within``. ``breaks`` are
    the ways the run's protocol differs from the paper's that make its cells another
    experiment (fewer epochs, a class subset): then no count is given, the line says
    "not comparable" and why.
    """
    breaks = list(breaks)
    published = sum(counts[v] for v in VERDICTS if v != "no paper value")
    if breaks:
        return (
            f"Reproduction: not comparable. This run's protocol differs from the paper's "
            f"({'; '.join(breaks)}), so none of its {published} cells with a published "
            "number is counted as reproduced or not."
        )
    compared = counts["within"] + counts["above"] + counts["below"]
    text = f"{counts['within']} of {compared} published cells reproduced"
    text += f" (within 2 std of the paper's mean; {counts['above']} above, {counts['below']} below"
    if counts["not comparable"]:
        text += f"; {counts['not comparable']} more not comparable (incomplete or another score)"
    return text + ")."


def no_counterpart_line(cells: pd.DataFrame, published_datasets: Iterable[str]) -> str:
    """The sentence a summary opens with when no cell of the run has a published number.

    Parameters
    ----------
    cells : DataFrame
        The run's cells (e.g. :func:`table_verdicts`), with ``dataset``, ``method`` and
        ``detector`` columns.
    published_datasets : iterable of str
        The data sets the paper reports numbers for (``load_published()["dataset"]``).

    Returns
    -------
    str
        E.g. ``"Reproduction: nothing to compare. No cell of this run has a published
        counterpart: the paper reports no results on Digits."``, naming per data set why.
    """
    known = set(published_datasets)
    datasets = list(dict.fromkeys(str(d) for d in cells["dataset"] if str(d) != "mean"))
    absent = [display_name("dataset", d) for d in datasets if d not in known]
    present = [d for d in datasets if d in known]
    reasons = []
    if absent:
        reasons.append(f"the paper reports no results on {', '.join(absent)}")
    for dataset in present:
        rows = cells[cells["dataset"].astype(str) == dataset]
        methods = ", ".join(
            display_name("method", m) for m in dict.fromkeys(rows["method"].astype(str))
        )
        reasons.append(
            f"on {display_name('dataset', dataset)} it reports no number for this run's "
            f"representations ({methods}) with its detectors"
        )
    why = "; ".join(reasons) if reasons else "the run has no cell"
    return (
        f"Reproduction: nothing to compare. No cell of this run has a published counterpart: {why}."
    )


def opening_line(
    cells: pd.DataFrame, breaks: Iterable[str] = (), published_datasets: Iterable[str] = ()
) -> str:
    """The first line of a summary: :func:`no_counterpart_line` when no cell of ``cells``
    (:func:`table_verdicts`) has a published number, else :func:`count_line`."""
    counts = verdict_counts(cells["verdict"])
    if counts["no paper value"] == sum(counts.values()):
        return no_counterpart_line(cells, published_datasets)
    return count_line(counts, breaks)


def table_verdicts(
    long: pd.DataFrame, *, breaks: Sequence[str] = (), ddof: int = SEED_STD_DDOF
) -> pd.DataFrame:
    """Each data-set cell of a :func:`~pipeline_lib.paper.aggregate.main_table` or
    :func:`~pipeline_lib.paper.aggregate.per_class_table` frame, placed
    against the paper's number by :func:`reproduction_verdict`.

    Our std enters the verdict as the sample std over seeds (``ddof=1``, recomputed from the
    table's ``ddof``), the spread of values that the paper's std also is. A cell is not
    comparable when it misses results or when the run's protocol ``breaks`` the paper's
    (fewer epochs, a class subset: :func:`pipeline_lib.paper.protocol.protocol_breaks`).
    The class-weighted ``mean`` column is not a cell of its own and is left out.

    Returns
    -------
    DataFrame
        The frame's rows without ``dataset == "mean"`` (nor ``inlier == "mean"``), with a
        ``verdict`` column.
    """
    frame = long[long["dataset"] != "mean"]
    if "inlier" in frame.columns:
        frame = frame[frame["inlier"] != "mean"]
    verdicts = []
    for row in frame.itertuples(index=False):
        n = int(row.n_seeds)
        if not np.isfinite(row.mean):
            has_paper = np.isfinite(row.published_mean)
            verdicts.append("not comparable" if has_paper else "no paper value")
            continue
        ours_std = None
        if n > 1 and np.isfinite(row.std):
            ours_std = float(row.std) * float(np.sqrt((n - ddof) / (n - 1)))
        verdicts.append(
            reproduction_verdict(
                float(row.mean),
                row.published_mean,
                row.published_std,
                ours_std,
                comparable=bool(row.complete) and not list(breaks),
            )
        )
    return frame.assign(verdict=verdicts).reset_index(drop=True)
