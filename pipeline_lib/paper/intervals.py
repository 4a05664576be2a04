"""The 95 % interval every reported AUC carries, and which spread it measures.

A table cell is the mean over seeds of the per-seed class mean (the paper's rule,
:mod:`pipeline_lib.paper.aggregate`). Its interval depends on what varies behind it:

- two or more seeds: the t-interval of that mean over seeds, ``mean ± t(0.975, n-1) ·
  s / sqrt(n)`` with ``s`` the sample std (``ddof=1``), labelled ``"seeds"``. The paper-style
  ``± std`` beside it keeps the tables' own ``ddof`` (0 by default: the population std over
  seeds, as the paper's Table 2 is read), so the two spreads are different numbers;
- one seed and several classes (a class-averaged cell): the t-interval over the per-class
  AUCs of that seed, labelled ``"classes"``: how much the average depends on which classes
  were drawn. For the 5-dataset ``mean`` the classes of every data set enter, so the
  interval's centre is the unweighted class mean, which is the class-count-weighted mean
  the table shows when every class is present;
- one seed of one class: the job's own 95 % interval over the test set, a percentile
  bootstrap stratified by label (:mod:`pipeline_lib.detection.auroc_intervals`), labelled
  ``"test set"``.

A cell with neither (one value and no job interval) has no interval (``ci_over`` ``""``);
one whose job recorded why it has none (a test split with a single inlier or outlier,
:data:`~pipeline_lib.detection.auroc_intervals.INTERVAL_OMITTED`) has ``ci_over``
``"omitted"``, and its table cell says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from pipeline_lib.detection.auroc_intervals import (
    BOOTSTRAP_METHOD,
    BOOTSTRAP_RESAMPLES,
    CONFIDENCE,
    INTERVAL_OMITTED,
)

__all__ = [
    "INTERVAL_COLUMNS",
    "INTERVAL_LABELS",
    "cell_interval",
    "interval_note",
    "single_job_interval",
    "t_interval",
]

#: Columns a table gains for each cell's interval: its ends and what it is over.
INTERVAL_COLUMNS: tuple[str, ...] = ("ci_low", "ci_high", "ci_over")

#: ``ci_over`` value -> the words a table shows after the interval ("" for seeds, the usual).
INTERVAL_LABELS: dict[str, str] = {
    "seeds": "",
    "classes": "over classes",
    "test set": "over the test set",
    "omitted": "no interval: a single inlier or outlier in the test set",
    "": "",
}


def t_interval(values: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE) -> tuple:
    """The t-interval of the mean of ``values`` (sample std, ``ddof=1``).

    Returns
    -------
    (low, high) : tuple of float
        ``mean ∓ t.ppf((1 + confidence) / 2, n - 1) · std(ddof=1) / sqrt(n)``; NaN, NaN with
        fewer than two finite values.
    """
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size < 2:
        return np.nan, np.nan
    half = stats.t.ppf((1.0 + confidence) / 2.0, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
    return float(x.mean() - half), float(x.mean() + half)


def cell_interval(
    seed_means: Sequence[float] | np.ndarray,
    class_values: Sequence[float] | np.ndarray = (),
    job_interval: tuple[float, float] | None = None,
    bounds: tuple[float, float] = (0.0, 100.0),
    *,
    job_interval_omitted: bool = False,
) -> tuple[float, float, str]:
    """A cell's interval by the module's rule, clipped to ``bounds``.

    A t-interval is symmetric and can pass the AUC's range (two classes at 60 and 70
    give about [5, 125]); the clipped interval says the same without impossible values.

    Parameters
    ----------
    seed_means : sequence of float
        The cell's value per seed (the class mean of each seed).
    class_values : sequence of float, default=()
        With one seed: the per-class AUCs behind its class mean.
    job_interval : (low, high) or None, default=None
        With one seed of one class: that job's interval over the test set (NaN: unknown).
    bounds : (float, float), default=(0.0, 100.0)
        The range of the value (AUC x 100).
    job_interval_omitted : bool, default=False
        With one seed of one class: that job recorded why its test split gives no interval.

    Returns
    -------
    (low, high, over) : tuple
        ``over`` is ``"seeds"``, ``"classes"``, ``"test set"``, ``"omitted"`` (the job's
        test split gave none) or ``""`` (no interval); without an interval the ends are NaN.
    """
    means = np.asarray(seed_means, dtype=float)
    means = means[np.isfinite(means)]
    classes = np.asarray(class_values, dtype=float)
    classes = classes[np.isfinite(classes)]
    if means.size >= 2:
        (low, high), over = t_interval(means), "seeds"
    elif means.size == 1 and classes.size >= 2:
        (low, high), over = t_interval(classes), "classes"
    elif means.size == 1 and job_interval is not None and np.all(np.isfinite(job_interval)):
        (low, high), over = job_interval, "test set"
    elif means.size == 1 and job_interval_omitted:
        return np.nan, np.nan, "omitted"
    else:
        return np.nan, np.nan, ""
    return float(np.clip(low, *bounds)), float(np.clip(high, *bounds)), over


def single_job_interval(rows: Any) -> dict[str, Any]:
    """:func:`cell_interval`'s job arguments from a cell's rows of a results table.

    A cell of one row (one seed of one class) passes its job's interval over the test set
    (``auroc_low``, ``auroc_high``) or, where the job recorded why it has none
    (:data:`~pipeline_lib.detection.auroc_intervals.INTERVAL_OMITTED`), that it was
    omitted; any other cell, or a table without those columns, passes nothing.
    """
    if len(rows) != 1:
        return {}
    row = rows.iloc[0]
    reason = row.get(INTERVAL_OMITTED)
    if isinstance(reason, str) and reason:
        return {"job_interval_omitted": True}
    if "auroc_low" not in rows.columns:
        return {}
    return {"job_interval": (float(row["auroc_low"]), float(row["auroc_high"]))}


def interval_note(ddof: int) -> str:
    """The line a table shows to say what its ``±`` and ``[low, high]`` are."""
    return (
        f"± is the std over seeds (ddof={ddof}, as the paper's tables); [low, high] is a "
        f"{CONFIDENCE:.0%} interval: over seeds (t-interval of the mean, ddof=1) from two seeds "
        "on; with one seed ('(n=1)'), 'over classes' is the t-interval over the per-class AUCs "
        "of a class-averaged cell and 'over the test set' the job's own interval "
        f"({BOOTSTRAP_RESAMPLES:,} bootstrap resamples of the test set, stratified by label, "
        f"{BOOTSTRAP_METHOD})"
    )
