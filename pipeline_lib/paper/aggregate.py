"""Aggregate per-job AUCs into the paper's tables, next to the published numbers.

The input of every function is a tidy frame of job results, one row per job, with columns
``dataset, inlier, method, seed, contamination, fitset, detector, auroc`` (``auroc`` is the
ROC AUC x 100, outlier = positive class). Aggregation follows the paper (Section 4.2,
Table 2): for each seed, the AUC is averaged over the inlier classes of a data set; the table
shows the mean and standard deviation of those class means over seeds. The ``mean`` column is
the mean over data sets weighted by their number of classes, computed per seed first.

Standard deviations are sample standard deviations over seeds
(:data:`~pipeline_lib.paper.intervals.SEED_STD_DDOF`, as every table family); a single seed
has none (NaN), and the display tables show ``"(n=1)"``.

Every cell also carries a 95 % interval (``ci_low``, ``ci_high``) and what it is over
(``ci_over``): over seeds, over classes or over the test set, by the rules of
:mod:`pipeline_lib.paper.intervals`; ``"omitted"`` where the test set's was reached and a
job's test split, holding a single inlier or outlier, gave none.

Missing jobs are never hidden: every cell carries ``n_seeds``, ``n_results`` and their
expected counts, and ``complete`` is False when any (class, seed) result is missing.

The display tables (:mod:`pipeline_lib.paper.display`) and the cells' verdicts
(:func:`pipeline_lib.paper.verdict.table_verdicts`) are importable from here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from pipeline_lib.config.keys import KEY_COLUMNS
from pipeline_lib.detection.auroc_intervals import INTERVAL_OMITTED
from pipeline_lib.paper.display import format_main_table, format_per_class_table
from pipeline_lib.paper.intervals import (
    JOB_INTERVAL_ENDS,
    SEED_STD_DDOF,
    cell_interval,
    jobs_test_set,
    seed_test_set_ends,
)
from pipeline_lib.paper.long_frames import (
    MAIN_COLUMNS,
    PER_CLASS_COLUMNS,
    RESULT_COLUMNS,
    order_ids,
)
from pipeline_lib.paper.published import (
    CLASS_NAMES,
    DATASET_DISPLAY,
    DETECTOR_DISPLAY,
    METHOD_DISPLAY,
    PAPER_DATASET_CLASSES,
)
from pipeline_lib.paper.verdict import table_verdicts
from pipeline_lib.results.tidy_table import interval_omissions

__all__ = [
    "MAIN_COLUMNS",
    "PER_CLASS_COLUMNS",
    "RESULT_COLUMNS",
    "format_main_table",
    "format_per_class_table",
    "main_table",
    "per_class_table",
    "select_results",
    "table_verdicts",
]


# Tables holding class-mean numbers, in the order they are preferred for a lookup.
_MAIN_TABLES = ("visual_results_full", "visual_results", "performance_gaussian")
# A result's key once the contamination and fit set are chosen.
_KEY = [column for column in KEY_COLUMNS if column not in ("contamination", "fitset")]
# A job's interval over the test set, in the tidy results table.
_JOB_INTERVAL = JOB_INTERVAL_ENDS


def _interval(group: pd.DataFrame, seed_means: pd.Series) -> tuple[float, float, str]:
    """The interval of a cell from its jobs (:func:`pipeline_lib.paper.intervals.cell_interval`;
    the test set's from :func:`~pipeline_lib.paper.intervals.jobs_test_set`)."""
    return cell_interval(seed_means.to_numpy(), group["auroc"].to_numpy(), **jobs_test_set(group))


def select_results(
    results: pd.DataFrame,
    *,
    contamination: float = 0.0,
    fitset: str = "train",
    seeds: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Check a results frame and keep the rows of one setting.

    Parameters
    ----------
    results : DataFrame
        Job results with columns :data:`RESULT_COLUMNS` (extra columns are dropped).
    contamination : float, default=0.0
        Training-set contamination to keep (compared with ``np.isclose``).
    fitset : str, default="train"
        Detector fit set to keep: ``"train"`` or ``"clean<n>"``.
    seeds : sequence of int or None, default=None
        Seeds to keep; None keeps all.

    Returns
    -------
    DataFrame
        The selected rows, columns ``dataset, inlier, method, detector, seed, auroc,
        auroc_low, auroc_high`` (the job's interval over the test set; NaN when the
        results do not have it) and ``auroc_interval_omitted`` (why a job has none; ``""``
        when it has one or the results do not say), with string ids, int seeds and float
        AUCs.

    Raises
    ------
    ValueError
        If a column is missing, an AUC is not finite or outside [0, 100], or a job
        (dataset, inlier, method, detector, seed) appears twice.
    """
    missing = [col for col in RESULT_COLUMNS if col not in results.columns]
    if missing:
        raise ValueError(f"results frame lacks columns {missing}; has {list(results.columns)}")
    mask = np.isclose(results["contamination"].astype(float), contamination)
    mask &= results["fitset"].astype(str).to_numpy() == fitset
    intervals = [col for col in (*_JOB_INTERVAL, INTERVAL_OMITTED) if col in results.columns]
    selected = results.loc[mask, [*_KEY, "auroc", *intervals]].copy()
    for col in _JOB_INTERVAL:
        selected[col] = selected[col].astype(float) if col in intervals else np.nan
    selected[INTERVAL_OMITTED] = interval_omissions(selected)
    for col in ("dataset", "inlier", "method", "detector"):
        selected[col] = selected[col].astype(str)
    selected["seed"] = selected["seed"].astype(int)
    selected["auroc"] = selected["auroc"].astype(float)
    if seeds is not None:
        selected = selected[selected["seed"].isin([int(s) for s in seeds])]
    bad = selected[~np.isfinite(selected["auroc"]) | ~selected["auroc"].between(0.0, 100.0)]
    if len(bad):
        raise ValueError(
            f"AUCs must be finite and in [0, 100] (x100); bad rows: {bad.to_dict('records')[:5]}"
        )
    duplicated = selected.duplicated(_KEY, keep=False)
    if duplicated.any():
        rows = selected.loc[duplicated, _KEY].drop_duplicates().to_dict("records")
        raise ValueError(f"duplicate results for jobs {rows[:5]}")
    return selected.reset_index(drop=True)


def _expected_class_counts(
    selected: pd.DataFrame, class_counts: Mapping[str, int] | None
) -> dict[str, int]:
    counts = {**PAPER_DATASET_CLASSES, **(class_counts or {})}
    present = selected.groupby("dataset")["inlier"].nunique().to_dict()
    return {dataset: int(counts.get(dataset, n)) for dataset, n in present.items()}


def _seed_stats(values: pd.Series, ddof: int) -> tuple[float, float]:
    """Mean and std over seeds; std is NaN when there are too few seeds for ``ddof``
    (one seed has no sample std)."""
    if len(values) == 0:
        return np.nan, np.nan
    std = float(np.std(values.to_numpy(), ddof=ddof)) if len(values) > ddof else np.nan
    return float(values.mean()), std


def _published_main(published: pd.DataFrame | None) -> dict[tuple[str, str, str], tuple]:
    """Map (method, detector, dataset) -> (mean, std) from class-mean published rows."""
    if published is None:
        return {}
    required = {"dataset", "method", "detector", "mean"}
    if not required <= set(published.columns):
        raise ValueError(
            f"published frame lacks columns {sorted(required - set(published.columns))}"
        )
    frame = published.copy()
    if "std" not in frame.columns:
        frame["std"] = np.nan
    if "metric" in frame.columns:
        frame = frame[frame["metric"] == "auroc"]
    if "inlier" in frame.columns:
        frame = frame[frame["inlier"].fillna("").astype(str) == ""]
    if "table" in frame.columns:
        frame = frame[frame["table"].isin(_MAIN_TABLES)]
        frame = frame.assign(_rank=frame["table"].map(_MAIN_TABLES.index)).sort_values("_rank")
    frame = frame.drop_duplicates(["method", "detector", "dataset"], keep="first")
    return {
        (str(r.method), str(r.detector), str(r.dataset)): (float(r.mean), float(r.std))
        for r in frame.itertuples(index=False)
    }


def main_table(
    results: pd.DataFrame,
    published: pd.DataFrame | None = None,
    *,
    contamination: float = 0.0,
    fitset: str = "train",
    seeds: Sequence[int] | None = None,
    class_counts: Mapping[str, int] | None = None,
    ddof: int = SEED_STD_DDOF,
) -> pd.DataFrame:
    """Build the paper's main table (Table 2) as a tidy long frame.

    For every (method, detector, dataset) and seed the AUC is averaged over the classes
    present; the cell is the mean and std (``ddof``, default the sample std of every table)
    of these class means over seeds. The ``mean`` dataset (added when there are two or more data
    sets) is, per seed, the mean of the per-dataset class means weighted by each data set's
    expected class count, then mean and std over seeds.

    Parameters
    ----------
    results : DataFrame
        Job results with columns :data:`RESULT_COLUMNS`.
    published : DataFrame or None, default=None
        Published numbers in the format of :func:`pipeline_lib.paper.published.load_published`
        (at least ``dataset, method, detector, mean``; ``std``, ``inlier``, ``metric``,
        ``table`` are used when present). None leaves the published columns NaN.
    contamination : float, default=0.0
        Setting to tabulate: training-set contamination.
    fitset : str, default="train"
        Setting to tabulate: detector fit set.
    seeds : sequence of int or None, default=None
        Expected seeds; None expects every seed found in the selected results.
    class_counts : mapping of str to int or None, default=None
        Expected classes per dataset (the weights of the ``mean``); defaults to
        :data:`~pipeline_lib.paper.published.PAPER_DATASET_CLASSES` for the paper's data sets and
        to the number of classes present otherwise.
    ddof : int, default=SEED_STD_DDOF
        Delta degrees of freedom of the std over seeds.

    Returns
    -------
    DataFrame
        One row per (method, detector, dataset), columns :data:`MAIN_COLUMNS`:
        ``n_seeds`` seeds with at least one result, ``n_classes`` distinct classes,
        ``n_results`` (class, seed) results and their ``expected_*`` counts; ``complete`` is
        True only if every expected (class, seed) result is there (for ``mean``: every
        data set complete). ``published_derived`` is True where the published ``mean`` is
        not the paper's own Mean column but the class-weighted mean of the published
        per-dataset values over the same data sets. ``delta = mean - published_mean``.

    Raises
    ------
    ValueError
        If the results are malformed (see :func:`select_results`) or no rows match the
        setting.
    """
    selected = select_results(results, contamination=contamination, fitset=fitset, seeds=seeds)
    if selected.empty:
        raise ValueError(f"no results with contamination={contamination!r} and fitset={fitset!r}")
    expected_seeds = sorted({int(s) for s in seeds} if seeds is not None else set(selected["seed"]))
    weights = _expected_class_counts(selected, class_counts)
    lookup = _published_main(published)
    datasets = order_ids(selected["dataset"].unique(), list(DATASET_DISPLAY))
    records = []
    pairs = selected[["method", "detector"]].drop_duplicates()
    for method, detector in _ordered_pairs(pairs):
        pair = selected[(selected["method"] == method) & (selected["detector"] == detector)]
        rows = [
            {"method": method, "detector": detector, "dataset": dataset}
            | _dataset_row(pair[pair["dataset"] == dataset], weights[dataset], expected_seeds, ddof)
            for dataset in datasets
        ]
        if len(datasets) > 1:
            rows.append(_weighted_mean_row(method, detector, rows, weights, expected_seeds, ddof))
        records.extend(rows)
    table = pd.DataFrame.from_records(records).drop(
        columns=["_seed_means", "_class_values", "_seed_ends", "_test_set_omitted"]
    )
    return _add_published(table, lookup, weights, datasets)


def _dataset_row(
    group: pd.DataFrame, expected_classes: int, expected_seeds: Sequence[int], ddof: int
) -> dict:
    """A (method, detector, dataset) cell of :func:`main_table` from its jobs, less its key."""
    # class mean and number of classes per seed, index seed
    seed_means = group.groupby("seed")["auroc"].agg(["mean", "count"])
    mean, std = _seed_stats(seed_means["mean"], ddof)
    low, high, over = _interval(group, seed_means["mean"])
    counts = seed_means["count"].reindex(expected_seeds, fill_value=0)
    return {
        "mean": mean,
        "std": std,
        "ci_low": low,
        "ci_high": high,
        "ci_over": over,
        "n_seeds": int(len(seed_means)),
        "expected_seeds": len(expected_seeds),
        "n_classes": int(group["inlier"].nunique()),
        "expected_classes": expected_classes,
        "n_results": int(len(group)),
        "expected_results": expected_classes * len(expected_seeds),
        "complete": bool((counts == expected_classes).all()),
        "_seed_means": seed_means["mean"],
        "_class_values": group["auroc"].to_numpy(),
        "_seed_ends": seed_test_set_ends(group),
        "_test_set_omitted": "test_set_omitted" in jobs_test_set(group),
    }


def _ordered_pairs(pairs: pd.DataFrame) -> list[tuple[str, str]]:
    methods = order_ids(pairs["method"].unique(), list(METHOD_DISPLAY))
    detectors = order_ids(pairs["detector"].unique(), list(DETECTOR_DISPLAY))
    present = set(map(tuple, pairs.to_numpy()))
    return [(m, d) for m in methods for d in detectors if (m, d) in present]


def _weighted_mean_row(
    method: str,
    detector: str,
    rows: Sequence[dict],
    weights: Mapping[str, int],
    expected_seeds: Sequence[int],
    ddof: int,
) -> dict:
    """Per seed, the class-count-weighted mean over the data sets present; then over seeds.

    With one seed the interval is over every class of every data set; the test-set
    interval weights the data sets' ends as their values (:mod:`pipeline_lib.paper.intervals`),
    and is omitted where a data set's jobs could not give theirs for a recorded reason.
    """
    by_dataset = pd.DataFrame({row["dataset"]: row["_seed_means"] for row in rows})
    w = pd.Series({row["dataset"]: weights[row["dataset"]] for row in rows})
    present = by_dataset.notna()
    seeds = present.any(axis=1)

    def weighted(frame: pd.DataFrame) -> pd.Series:
        """Per seed, the weighted mean over the data sets with a value that seed."""
        frame = frame.reindex(index=by_dataset.index, columns=by_dataset.columns)
        values = (frame.where(present).fillna(0.0) * w).sum(axis=1) / (present * w).sum(axis=1)
        return values[seeds]

    per_seed = weighted(by_dataset)
    mean, std = _seed_stats(per_seed, ddof)
    classes = np.concatenate([row["_class_values"] for row in rows])
    ends = {
        end: pd.DataFrame({row["dataset"]: row["_seed_ends"][end] for row in rows}).reindex(
            index=by_dataset.index, columns=by_dataset.columns
        )
        for end in _JOB_INTERVAL
    }
    known = not any(bool((frame.isna() & present).any(axis=None)) for frame in ends.values())
    test_set = tuple(float(weighted(ends[end]).mean()) for end in _JOB_INTERVAL) if known else None
    omitted = not known and any(row["_test_set_omitted"] for row in rows)
    low, high, over = cell_interval(
        per_seed.to_numpy(), classes, test_set, test_set_omitted=omitted
    )
    return {
        "method": method,
        "detector": detector,
        "dataset": "mean",
        "mean": mean,
        "std": std,
        "ci_low": low,
        "ci_high": high,
        "ci_over": over,
        "n_seeds": int(len(per_seed)),
        "expected_seeds": len(expected_seeds),
        "n_classes": int(sum(row["n_classes"] for row in rows)),
        "expected_classes": int(w.sum()),
        "n_results": int(sum(row["n_results"] for row in rows)),
        "expected_results": int(w.sum()) * len(expected_seeds),
        "complete": all(row["complete"] for row in rows),
        "_seed_means": per_seed,
        "_class_values": classes,
        "_seed_ends": None,
        "_test_set_omitted": omitted,
    }


def _add_published(
    table: pd.DataFrame,
    lookup: Mapping[tuple[str, str, str], tuple],
    weights: Mapping[str, int],
    datasets: Sequence[str],
) -> pd.DataFrame:
    paper_set = set(datasets) == set(PAPER_DATASET_CLASSES)
    pub_mean, pub_std, derived = [], [], []
    for row in table.itertuples(index=False):
        key = (row.method, row.detector, row.dataset)
        value, is_derived = lookup.get(key, (np.nan, np.nan)), False
        if row.dataset == "mean" and not (paper_set and key in lookup):
            parts = [lookup.get((row.method, row.detector, d)) for d in datasets]
            if all(p is not None for p in parts):
                total = sum(weights[d] * p[0] for d, p in zip(datasets, parts, strict=True))
                value, is_derived = (total / sum(weights[d] for d in datasets), np.nan), True
            else:
                value = (np.nan, np.nan)
        pub_mean.append(value[0])
        pub_std.append(value[1])
        derived.append(is_derived)
    table["published_mean"] = pd.Series(pub_mean, index=table.index, dtype=float)
    table["published_std"] = pd.Series(pub_std, index=table.index, dtype=float)
    table["published_derived"] = derived
    table["delta"] = table["mean"] - table["published_mean"]
    return table[list(MAIN_COLUMNS)]


def per_class_table(
    results: pd.DataFrame,
    dataset: str,
    published: pd.DataFrame | None = None,
    *,
    contamination: float = 0.0,
    fitset: str = "train",
    seeds: Sequence[int] | None = None,
    class_names: Sequence[str] | None = None,
    ddof: int = SEED_STD_DDOF,
) -> pd.DataFrame:
    """Per-class AUCs of one data set (Tables 8-11 of the paper) as a tidy long frame.

    Parameters
    ----------
    results : DataFrame
        Job results with columns :data:`RESULT_COLUMNS`.
    dataset : str
        Dataset id, e.g. ``"cifar10"``.
    published : DataFrame or None, default=None
        Published numbers (see :func:`main_table`); per-class rows are those with a
        non-empty ``inlier``. The ``mean`` row falls back to the class-mean tables.
    contamination, fitset, seeds, ddof
        As in :func:`main_table`.
    class_names : sequence of str or None, default=None
        Class order and the classes expected in the ``mean`` row; defaults to
        :data:`~pipeline_lib.paper.published.CLASS_NAMES` of the paper's data sets, else the
        classes present, sorted. Classes present but not listed are appended.

    Returns
    -------
    DataFrame
        Columns :data:`PER_CLASS_COLUMNS`, one row per (class, method, detector) over the
        union of classes found (a class without results for a pair has NaN and
        ``n_seeds = 0``), plus an ``inlier = "mean"`` row per pair: per seed the mean over
        classes, then mean and std over seeds, ``complete`` only if every expected class
        has every expected seed.

    Raises
    ------
    ValueError
        If the results are malformed or hold no rows of ``dataset`` in this setting.
    """
    selected = select_results(results, contamination=contamination, fitset=fitset, seeds=seeds)
    selected = selected[selected["dataset"] == dataset]
    if selected.empty:
        raise ValueError(
            f"no results for dataset={dataset!r} with contamination={contamination!r} "
            f"and fitset={fitset!r}"
        )
    expected_seeds = sorted({int(s) for s in seeds} if seeds is not None else set(selected["seed"]))
    known = list(class_names) if class_names is not None else list(CLASS_NAMES.get(dataset, ()))
    expected_classes = known or sorted(selected["inlier"].unique())
    classes = order_ids(selected["inlier"].unique(), known) if known else expected_classes
    lookup = _published_per_class(published, dataset)
    main_lookup = _published_main(published)
    records = []
    for method, detector in _ordered_pairs(selected[["method", "detector"]].drop_duplicates()):
        pair = selected[(selected["method"] == method) & (selected["detector"] == detector)]
        for inlier in classes:
            jobs = pair[pair["inlier"] == inlier]
            values, seeds_present = jobs["auroc"], jobs["seed"]
            mean, std = _seed_stats(values, ddof)
            pub = lookup.get((method, detector, inlier), (np.nan, np.nan))
            records.append(
                _class_record(dataset, inlier, method, detector, mean, std, pub)
                | _interval_record(*_interval(jobs, values))
                | {
                    "n_seeds": int(len(values)),
                    "expected_seeds": len(expected_seeds),
                    "complete": set(expected_seeds) <= set(seeds_present),
                }
            )
        class_means = pair.groupby("seed")["auroc"].mean()
        counts = pair.groupby("seed")["inlier"].nunique().reindex(expected_seeds, fill_value=0)
        mean, std = _seed_stats(class_means, ddof)
        interval = _interval(pair, class_means)
        pub = lookup.get(
            (method, detector, "mean"),
            main_lookup.get((method, detector, dataset), (np.nan, np.nan)),
        )
        complete = bool((counts == len(expected_classes)).all()) and set(pair["inlier"]) >= set(
            expected_classes
        )
        records.append(
            _class_record(dataset, "mean", method, detector, mean, std, pub)
            | _interval_record(*interval)
            | {
                "n_seeds": int(len(class_means)),
                "expected_seeds": len(expected_seeds),
                "complete": complete,
            }
        )
    table = pd.DataFrame.from_records(records)
    table["delta"] = table["mean"] - table["published_mean"]
    return table[list(PER_CLASS_COLUMNS)]


def _interval_record(low: float, high: float, over: str) -> dict:
    return {"ci_low": low, "ci_high": high, "ci_over": over}


def _class_record(
    dataset: str, inlier: str, method: str, detector: str, mean: float, std: float, pub: tuple
) -> dict:
    return {
        "dataset": dataset,
        "inlier": inlier,
        "method": method,
        "detector": detector,
        "mean": mean,
        "std": std,
        "published_mean": float(pub[0]),
        "published_std": float(pub[1]),
    }


def _published_per_class(
    published: pd.DataFrame | None, dataset: str
) -> dict[tuple[str, str, str], tuple]:
    """Map (method, detector, inlier) -> (mean, std) from per-class published rows."""
    if published is None or "inlier" not in published.columns:
        return {}
    frame = published[
        (published["dataset"] == dataset) & (published["inlier"].fillna("").astype(str) != "")
    ]
    if "metric" in frame.columns:
        frame = frame[frame["metric"] == "auroc"]
    std = frame["std"] if "std" in frame.columns else pd.Series(np.nan, index=frame.index)
    return {
        (str(m), str(d), str(i)): (float(v), float(s))
        for m, d, i, v, s in zip(
            frame["method"], frame["detector"], frame["inlier"], frame["mean"], std, strict=True
        )
    }
