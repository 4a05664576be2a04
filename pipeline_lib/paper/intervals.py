"""The spread and the 95 % interval every reported number carries, and which rule gave it.

A table cell is the mean over seeds of the per-seed class mean
(:mod:`pipeline_lib.paper.aggregate`). Every table family (the main and per-class tables,
the studies, MVTec AD) shows it as ``mean ± std [low, high]``:

- ``± std`` is the sample standard deviation over seeds, ``ddof=1``
  (:data:`SEED_STD_DDOF`); one seed has none and shows ``(n=1)``.
- ``[low, high]`` is a 95 % interval, from the first of these rules that applies:

  1. two seeds or more: the t-interval of the mean over seeds,
     ``mean ± t(0.975, n-1) · s / sqrt(n)`` (``s`` with ``ddof=1``), labelled ``"seeds"``;
  2. one seed of a class-averaged cell with :data:`MIN_CLASSES` classes or more: the
     t-interval over that seed's per-class values, labelled ``"classes"`` (how much the
     average depends on which classes were drawn). Below three classes a t-interval has one
     degree of freedom (t = 12.7) and says nothing;
  3. the test-set interval: each job's 95 % interval over its test set (a percentile
     bootstrap stratified by label, :mod:`pipeline_lib.detection.auroc_intervals`),
     averaged over the cell's jobs as the cell's value is (per seed over classes, then over
     seeds), labelled ``"test set"``. Averaging the ends bounds the interval of the mean
     whatever the jobs' test sets share: the standard error of a mean is at most the mean of
     the standard errors.

  An interval that would cover the whole range [0, 100] carries no information, nor does
  one of zero width (every value equal: nothing varied, e.g. raw pixels on a fixed split
  over seeds); either gives way to the next rule. A cell where no rule applies has no
  interval (``ci_over`` ``""``).
  Intervals are clipped to [0, 100] (a symmetric t-interval can pass the AUC's range).

  A job whose test split holds a single inlier or a single outlier has no interval over it
  and records why (:data:`~pipeline_lib.detection.auroc_intervals.INTERVAL_OMITTED`). Where
  rule 3 is reached and the average of the jobs' intervals cannot be formed because one of
  them or more recorded that, the cell has ``ci_over`` ``"omitted"`` and its table text says
  why (:data:`INTERVAL_LABELS`). One such job is enough, whether the cell's other jobs have
  their interval or not: the average needs every job's ends. Jobs missing an interval
  without a recorded reason (results written before intervals existed) leave the cell
  without one (``""``).

:func:`interval_note` is the line a table shows to say this, and how many of its cells each
rule gave.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from pipeline_lib.detection.auroc_intervals import (
    BOOTSTRAP_METHOD,
    BOOTSTRAP_RESAMPLES,
    CONFIDENCE,
    INTERVAL_OMITTED,
)

__all__ = [
    "AUC_RANGE",
    "INTERVAL_COLUMNS",
    "INTERVAL_LABELS",
    "JOB_INTERVAL_ENDS",
    "MIN_CLASSES",
    "SEED_STD_DDOF",
    "cell_interval",
    "interval_note",
    "jobs_test_set",
    "seed_std",
    "seed_test_set_ends",
    "t_interval",
]

#: Delta degrees of freedom of every ``± std`` over seeds in every table: the sample std.
SEED_STD_DDOF: int = 1

#: Fewest per-class values an interval over classes is computed from (rule 2).
MIN_CLASSES: int = 3

#: The range of an AUC x 100: intervals are clipped to it, and one covering it is dropped.
AUC_RANGE: tuple[float, float] = (0.0, 100.0)

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

#: A job's interval over its test set in a results table (the AUC's, x 100).
JOB_INTERVAL_ENDS: tuple[str, str] = ("auroc_low", "auroc_high")


def seed_std(values: Sequence[float] | np.ndarray) -> float:
    """The ``± std`` of a cell: sample std over its seeds (:data:`SEED_STD_DDOF`); NaN below
    two finite values."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.std(x, ddof=SEED_STD_DDOF)) if x.size > SEED_STD_DDOF else np.nan


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


def _informative(
    interval: tuple[float, float] | None, bounds: tuple[float, float]
) -> tuple[float, float] | None:
    """The interval clipped to ``bounds``; None when unknown, covering all of them or of
    zero width."""
    if interval is None or not np.all(np.isfinite(interval)):
        return None
    low, high = float(np.clip(interval[0], *bounds)), float(np.clip(interval[1], *bounds))
    if (low <= bounds[0] and high >= bounds[1]) or high <= low:
        return None
    return low, high


def cell_interval(
    seed_means: Sequence[float] | np.ndarray,
    class_values: Sequence[float] | np.ndarray = (),
    test_set: tuple[float, float] | None = None,
    bounds: tuple[float, float] = AUC_RANGE,
    *,
    test_set_omitted: bool = False,
) -> tuple[float, float, str]:
    """A cell's interval by the module's rules, clipped to ``bounds``.

    Parameters
    ----------
    seed_means : sequence of float
        The cell's value per seed (the class mean of each seed).
    class_values : sequence of float, default=()
        With one seed: the per-class values behind its class mean.
    test_set : (low, high) or None, default=None
        The cell's interval over the test set: its jobs' intervals averaged as the cell's
        value is (NaN or None: unknown).
    bounds : (float, float), default=AUC_RANGE
        The range of the value.
    test_set_omitted : bool, default=False
        The test-set interval could not be formed because a job of the cell recorded why
        its test split gives none (:func:`jobs_test_set`).

    Returns
    -------
    (low, high, over) : tuple
        ``over`` is ``"seeds"``, ``"classes"``, ``"test set"``, ``"omitted"`` (rule 3 was
        reached and ``test_set_omitted``) or ``""`` (no rule gave an informative interval:
        none covering less than all of ``bounds`` with a positive width). Without an
        interval the ends are NaN.
    """
    means = np.asarray(seed_means, dtype=float)
    means = means[np.isfinite(means)]
    classes = np.asarray(class_values, dtype=float)
    classes = classes[np.isfinite(classes)]
    candidates = []
    if means.size >= 2:
        candidates.append((t_interval(means), "seeds"))
    elif means.size == 1 and classes.size >= MIN_CLASSES:
        candidates.append((t_interval(classes), "classes"))
    if means.size >= 1:
        candidates.append((test_set, "test set"))
    for interval, over in candidates:
        kept = _informative(interval, bounds)
        if kept is not None:
            return kept[0], kept[1], over
    if means.size >= 1 and test_set_omitted:
        return np.nan, np.nan, "omitted"
    return np.nan, np.nan, ""


def _job_ends(rows: pd.DataFrame, ends: Sequence[str]) -> pd.DataFrame:
    """The jobs' interval ends as numbers: NaN where a job has none (a missing column: all)."""
    return pd.DataFrame(
        {end: pd.to_numeric(rows[end], errors="coerce") if end in rows else np.nan for end in ends},
        index=rows.index,
    )


def seed_test_set_ends(rows: pd.DataFrame, ends: Sequence[str] = JOB_INTERVAL_ENDS) -> pd.DataFrame:
    """Per seed, the mean over the seed's jobs of each end of their test-set intervals, as
    the cell's value averages its classes (index ``seed``, columns ``ends``); NaN where a job
    of the seed has none, or where ``rows`` lack the columns."""
    values = _job_ends(rows, ends)
    seeds = rows["seed"]
    unknown = values.isna().any(axis=1).groupby(seeds).any()
    return values.groupby(seeds).mean().where(~unknown, np.nan)


def _omitted(rows: pd.DataFrame) -> pd.Series:
    """Per job, whether it recorded why its test split gives no interval (a CSV read back
    holds NaN or ``""`` where it did not)."""
    if INTERVAL_OMITTED not in rows:
        return pd.Series(False, index=rows.index)
    return rows[INTERVAL_OMITTED].map(lambda reason: isinstance(reason, str) and bool(reason))


def jobs_test_set(rows: pd.DataFrame, ends: Sequence[str] = JOB_INTERVAL_ENDS) -> dict[str, Any]:
    """:func:`cell_interval`'s test-set arguments from a cell's jobs (rows with ``seed``,
    ``ends`` and, where recorded, :data:`~pipeline_lib.detection.auroc_intervals.INTERVAL_OMITTED`).

    Returns
    -------
    dict
        ``{"test_set": (low, high)}`` when every job has both ends: each end averaged per
        seed over the jobs, then over seeds, as the cell's value is; else
        ``{"test_set_omitted": True}`` when a job without them recorded why (a single
        inlier or outlier in its test split); else ``{}`` (no rows, or ends missing
        without a reason).
    """
    if rows.empty:
        return {}
    per_seed = seed_test_set_ends(rows, ends)
    if not per_seed.isna().any(axis=None):
        return {"test_set": (float(per_seed[ends[0]].mean()), float(per_seed[ends[1]].mean()))}
    lacking = _job_ends(rows, ends).isna().any(axis=1)
    if bool((lacking & _omitted(rows)).any()):
        return {"test_set_omitted": True}
    return {}


def _cells(count: int) -> str:
    return f"{count} cell{'s' if count != 1 else ''}"


def interval_note(over: Iterable[str] | None = None) -> str:
    """The line a table shows to say what its ``±`` and ``[low, high]`` are.

    Parameters
    ----------
    over : iterable of str or None, default=None
        The table's ``ci_over`` values: the line then ends with how many cells each rule
        gave (``"here: 8 cells over seeds, 2 over the test set"``).
    """
    note = (
        f"± is the sample std over seeds (ddof={SEED_STD_DDOF}); [low, high] is a "
        f"{CONFIDENCE:.0%} interval by the first rule that applies: over seeds (t-interval of "
        f"the mean) from two seeds on; with one seed, 'over classes' (t-interval over the "
        f"per-class values) from {MIN_CLASSES} classes on; else 'over the test set' (each "
        f"job's interval, {BOOTSTRAP_RESAMPLES:,} bootstrap resamples of its test set "
        f"stratified by label, {BOOTSTRAP_METHOD}; a mean over jobs averages their ends). "
        "An interval that would cover all of [0, 100], or have zero width (nothing varied), "
        "gives way to the next rule; where the test set's is reached and a job's test split "
        "has a single inlier or outlier (no interval over it), the cell says so"
    )
    if over is None:
        return note
    counts = {key: 0 for key in INTERVAL_LABELS}
    for value in over:
        counts[str(value) if str(value) in counts else ""] += 1
    phrases = {
        "seeds": "over seeds",
        "omitted": "omitted (a single inlier or outlier in a test set)",
        "": "without an interval",
    }
    parts = [
        f"{_cells(counts[key])} {phrases.get(key) or INTERVAL_LABELS[key]}"
        for key in ("seeds", "classes", "test set", "omitted", "")
        if counts[key]
    ]
    return note + (f"; here: {', '.join(parts)}" if parts else "")
