"""MVTec AD result tables: per category, and the paper's object / texture / all summary.

Input is the tidy frame of every MVTec job (:data:`RESULT_COLUMNS`, one row per category x
method x detector x seed). Following the paper (App. E.3, Table 6), a group's number is the
mean over its categories, computed per seed, then reported as mean +- std over seeds; the
published value of the same (group, representation, detector, metric) sits beside it only
when the run's group holds exactly the paper's categories (all 10 objects, all 5 textures,
all 15): a mean over a subset, or over a user's own categories (``mvtec.paths``), is not the
paper's quantity, so those groups are compared per category only
(:func:`paper_comparison_notes` says why in a line above the table).

Spreads and intervals follow the rules of every table family
(:mod:`pipeline_lib.paper.intervals`): ``± std`` is the sample std over seeds; with one seed
the interval is over the group's categories (three or more) or over the test set, from each
job's own bootstrap interval of its metric (``auroc_low`` / ``auroc_high`` for the image AUC,
``pixel_auroc_low`` ... ``aupro_high`` for localisation: :mod:`pipeline_lib.mvtec.pixel_intervals`).
A job whose test set holds a single good or defective image has none of them and says why
(``auroc_interval_omitted``); a cell that needs its interval says so too (``ci_over``
``"omitted"``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pipeline_lib.data.mvtec import MVTEC_CATEGORIES, MVTEC_OBJECTS, MVTEC_TEXTURES
from pipeline_lib.paper.intervals import (
    INTERVAL_COLUMNS,
    INTERVAL_LABELS,
    cell_interval,
    jobs_test_set,
    seed_std,
)
from pipeline_lib.paper.published import METHOD_DISPLAY, display_name, load_published
from pipeline_lib.results.table_files import format_mean_std

__all__ = [
    "GROUPS",
    "INTERVAL_FIELDS",
    "METRICS",
    "RESULT_COLUMNS",
    "format_per_category",
    "format_summary",
    "group_summary",
    "mvtec_result_records",
    "mvtec_results_frame",
    "paper_comparison_notes",
    "per_category_table",
]

#: Columns every MVTec job record must have (metrics may be NaN without masks).
RESULT_COLUMNS: tuple[str, ...] = (
    "category",
    "group",
    "method",
    "detector",
    "seed",
    "image_auroc",
    "pixel_auroc",
    "aupro",
)
#: Metric id -> (display name, id in the published tables or None).
METRICS: Mapping[str, tuple[str, str | None]] = {
    "image_auroc": ("Detection", "auroc"),
    "pixel_auroc": ("Localization", "pixel_auroc"),
    "aupro": ("AUPRO (FPR <= 30%)", None),
}
#: Summary groups in table order ("all" is every category).
GROUPS: tuple[str, ...] = ("object", "texture", "other", "all")
#: The categories behind each of the paper's group means (Table 6).
PAPER_GROUPS: Mapping[str, tuple[str, ...]] = {
    "object": MVTEC_OBJECTS,
    "texture": MVTEC_TEXTURES,
    "all": MVTEC_CATEGORIES,
}

_DETECTOR_ORDER = ("rotation_classifier", "kde", "gde", "knn", "ocsvm", "ocsvm_linear")
# Representation order of the tables; from the display names, so no torch import is needed.
_METHOD_ORDER = tuple(METHOD_DISPLAY)


def mvtec_results_frame(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Tidy frame of MVTec job records, sorted (categories in MVTec order, then by id).

    Raises
    ------
    ValueError
        If there is no record or one lacks a column of :data:`RESULT_COLUMNS`.
    """
    if not records:
        raise ValueError("no MVTec results")
    frame = pd.DataFrame.from_records(records)
    missing = [c for c in RESULT_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"MVTec results lack column(s) {missing}")
    for metric in METRICS:
        frame[metric] = pd.to_numeric(frame[metric], errors="coerce")
    frame["seed"] = frame["seed"].astype(int)
    frame["_category"] = frame["category"].map(_category_rank)
    frame["_method"] = frame["method"].map(_method_rank)
    frame["_detector"] = frame["detector"].map(_detector_rank)
    frame = frame.sort_values(["_category", "category", "_method", "_detector", "seed"])
    frame = frame.drop(columns=["_category", "_method", "_detector"]).reset_index(drop=True)
    ordered = [*RESULT_COLUMNS, *[c for c in frame.columns if c not in RESULT_COLUMNS]]
    return frame[ordered]


def mvtec_result_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The jobs of the tidy CSV (``make_mvtec_tables``'s ``results.csv``) as records, each
    without its missing values: a category without masks has no pixel metrics, and MLflow
    gets the metrics that were measured, not NaN in their place. Names stay strings (a
    category called ``007`` is not the number 7)."""
    names = ("dataset", "inlier", "category", "method", "fitset", "detector")
    frame = pd.read_csv(path, dtype=dict.fromkeys(names, str))
    return [
        {key: value for key, value in record.items() if not pd.isna(value)}
        for record in frame.to_dict("records")
    ]


def _category_rank(name: str) -> int:
    return MVTEC_CATEGORIES.index(name) if name in MVTEC_CATEGORIES else len(MVTEC_CATEGORIES)


def _method_rank(name: str) -> int:
    return _METHOD_ORDER.index(name) if name in _METHOD_ORDER else len(_METHOD_ORDER)


def _detector_rank(name: str) -> int:
    return _DETECTOR_ORDER.index(name) if name in _DETECTOR_ORDER else len(_DETECTOR_ORDER)


def _pairs(results: pd.DataFrame) -> list[tuple[str, str]]:
    pairs = results[["method", "detector"]].drop_duplicates()
    return sorted(
        map(tuple, pairs.to_numpy()), key=lambda p: (_method_rank(p[0]), _detector_rank(p[1]))
    )


def _label(method: str, detector: str) -> str:
    return f"{display_name('method', method)} + {display_name('detector', detector)}"


#: Metric -> the columns of a job's record holding its interval over the test set.
INTERVAL_FIELDS: Mapping[str, tuple[str, str]] = {
    "image_auroc": ("auroc_low", "auroc_high"),
    "pixel_auroc": ("pixel_auroc_low", "pixel_auroc_high"),
    "aupro": ("aupro_low", "aupro_high"),
}


def _test_set(rows: pd.DataFrame, metric: str) -> dict[str, Any]:
    """:func:`cell_interval`'s test-set arguments: the jobs' intervals of ``metric`` over
    their test sets, averaged as the cell's value is (per seed over categories, then over
    seeds), or their omission (:func:`pipeline_lib.paper.intervals.jobs_test_set`).

    A job's ``auroc_interval_omitted`` (a single good or defective test image) holds for
    every metric: the pixel AUC's and AUPRO's intervals resample the same test images,
    stratified the same way, and are NaN then too."""
    return jobs_test_set(rows, INTERVAL_FIELDS[metric])


def per_category_table(results: pd.DataFrame, *, metric: str) -> pd.DataFrame:
    """Mean and std over seeds of one metric per (category, method, detector), with its
    95 % interval (:func:`pipeline_lib.paper.intervals.cell_interval`).

    The interval is over seeds from two seeds on; with one seed, the job's own interval of
    the metric over the test set (where its record has one: :data:`INTERVAL_FIELDS`), or
    ``"omitted"`` where the job recorded why it has none.

    Returns
    -------
    DataFrame
        Columns ``category, group, method, detector, mean, std, n_seeds`` and
        :data:`~pipeline_lib.paper.intervals.INTERVAL_COLUMNS` (std NaN with one seed;
        rows whose metric is NaN in every seed, e.g. no masks, are kept as NaN).
    """
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r} is not one of {list(METRICS)}")
    keys = ["category", "group", "method", "detector"]
    rows = []
    for key, one in results.groupby(keys, sort=False):
        values = pd.to_numeric(one[metric], errors="coerce")
        finite = values.dropna()
        low, high, over = cell_interval(finite.to_numpy(), **_test_set(one[values.notna()], metric))
        rows.append(
            dict(zip(keys, key, strict=True))
            | {
                "mean": float(finite.mean()) if len(finite) else np.nan,
                "std": seed_std(finite.to_numpy()),
                "n_seeds": int(one["seed"].nunique()),
                "ci_low": low,
                "ci_high": high,
                "ci_over": over,
            }
        )
    return pd.DataFrame(rows, columns=[*keys, "mean", "std", "n_seeds", *INTERVAL_COLUMNS])


def _group_members(results: pd.DataFrame, group: str) -> pd.DataFrame:
    return results if group == "all" else results[results["group"] == group]


def _paper_mismatch(
    categories: Sequence[str], group: str, own_categories: Sequence[str]
) -> str | None:
    """Why ``categories`` (a group of the run) cannot stand beside the paper's group mean;
    None when they are exactly the paper's."""
    if group not in PAPER_GROUPS:
        return "the paper has no such group"
    ran = set(categories)
    own = sorted(ran & set(own_categories)) + sorted(ran - set(MVTEC_CATEGORIES))
    own = list(dict.fromkeys(own))
    expected = PAPER_GROUPS[group]
    missing = [name for name in expected if name not in ran - set(own)]
    if not own and not missing:
        return None
    reasons = []
    if own:
        reasons.append(f"your own categor{'y' if len(own) == 1 else 'ies'} {', '.join(own)}")
    if len(missing) == len(expected):
        reasons.append("none of the paper's")
    elif missing:
        reasons.append(
            f"{len(expected) - len(missing)} of the paper's {len(expected)} categories "
            f"(missing: {', '.join(missing)})"
        )
    return " and ".join(reasons)


def paper_comparison_notes(
    results: pd.DataFrame, *, own_categories: Sequence[str] = ()
) -> list[str]:
    """Lines saying which group means are left without the paper's number, and why.

    Parameters
    ----------
    results : DataFrame
        :func:`mvtec_results_frame`.
    own_categories : sequence of str, default=()
        Categories read from ``mvtec.paths`` (a user's own data, even when named like an
        MVTec category).

    Returns
    -------
    list of str
        One line per group whose categories are not the paper's; empty when every group
        that ran matches.
    """
    notes = []
    for group in GROUPS:
        members = _group_members(results, group)
        if members.empty:
            continue
        why = _paper_mismatch(members["category"].unique(), group, own_categories)
        if why is not None and group in PAPER_GROUPS:
            notes.append(
                f"No paper number beside '{group}': the paper's mean averages all "
                f"{len(PAPER_GROUPS[group])} MVTec AD "
                f"{'categories' if group == 'all' else group + ' categories'}, this run has "
                f"{why}; compare per category (per_category_* tables) instead."
            )
    return notes


def group_summary(
    results: pd.DataFrame,
    *,
    published: pd.DataFrame | None = None,
    own_categories: Sequence[str] = (),
) -> pd.DataFrame:
    """The paper's summary: per metric and group, mean over categories, then over seeds.

    Parameters
    ----------
    results : DataFrame
        :func:`mvtec_results_frame`.
    published : DataFrame or None, default=None
        ``load_published("mvtec_results")``; None loads it.
    own_categories : sequence of str, default=()
        Categories from ``mvtec.paths``: never the paper's, whatever their name. A group
        gets the paper's number only when it holds exactly the paper's categories
        (:func:`paper_comparison_notes` lists the others and why).

    Returns
    -------
    DataFrame
        Columns ``metric, group, method, detector, mean, std, n_categories, n_seeds,
        paper_mean, paper_std`` and the 95 % interval of ``mean``
        (:data:`~pipeline_lib.paper.intervals.INTERVAL_COLUMNS`: over seeds; with one
        seed over the group's categories from three on, else the jobs' intervals over their
        test sets). Groups without a category are left out; ``all`` covers
        every category. Metrics that are NaN everywhere (no masks) are left out.
        ``paper_mean`` / ``paper_std`` are NaN where the group's categories differ from
        the paper's.
    """
    if published is None:
        published = load_published("mvtec_results")
    paper = {
        (row.metric, row.inlier, row.method, row.detector): (row.mean, row.std)
        for row in published.itertuples()
    }
    rows = []
    for metric, (_, published_metric) in METRICS.items():
        if results[metric].notna().sum() == 0:
            continue
        for group in GROUPS:
            members = _group_members(results, group)
            if members.empty:
                continue
            comparable = (
                _paper_mismatch(members["category"].unique(), group, own_categories) is None
            )
            for method, detector in _pairs(members):
                one = members[(members["method"] == method) & (members["detector"] == detector)]
                per_seed = one.groupby("seed")[metric].mean().dropna()
                if per_seed.empty:
                    continue
                # with one seed, the interval over that seed's categories, or over the
                # test set (pipeline_lib.paper.intervals)
                present = one[one[metric].notna()]
                first = present[present["seed"] == per_seed.index[0]]
                low, high, over = cell_interval(
                    per_seed.to_numpy(),
                    first[metric].to_numpy(),
                    **_test_set(present, metric),
                )
                ref = (
                    paper.get((published_metric, group, method, detector), (np.nan, np.nan))
                    if comparable
                    else (np.nan, np.nan)
                )
                rows.append(
                    {
                        "metric": metric,
                        "group": group,
                        "method": method,
                        "detector": detector,
                        "mean": float(per_seed.mean()),
                        "std": seed_std(per_seed.to_numpy()),
                        "n_categories": int(one["category"].nunique()),
                        "n_seeds": int(len(per_seed)),
                        "paper_mean": ref[0],
                        "paper_std": ref[1],
                        "ci_low": low,
                        "ci_high": high,
                        "ci_over": over,
                    }
                )
    return pd.DataFrame(
        rows,
        columns=[
            "metric",
            "group",
            "method",
            "detector",
            "mean",
            "std",
            "n_categories",
            "n_seeds",
            "paper_mean",
            "paper_std",
            *INTERVAL_COLUMNS,
        ],
    )


def _fmt(
    mean: float, std: float, decimals: int, n_seeds: int | None = None, row: Any = None
) -> str:
    """A cell as the main tables write it: ``mean ± std [low, high] <over what>``."""
    interval, label = None, ""
    if row is not None and getattr(row, "ci_over", ""):
        interval = (row.ci_low, row.ci_high)
        label = INTERVAL_LABELS.get(row.ci_over, "")
    return format_mean_std(
        mean,
        std,
        n_seeds=n_seeds,
        decimals=decimals,
        missing="n/a",
        interval=interval,
        interval_label=label,
    )


def format_per_category(long: pd.DataFrame, *, decimals: int = 1) -> pd.DataFrame:
    """Display form of :func:`per_category_table`: one row per category, one column per
    representation + detector, ``mean ± std``."""
    wide: dict[str, dict[str, str]] = {}
    for row in long.itertuples():
        label = f"{row.category} ({row.group})"
        wide.setdefault(label, {})[_label(row.method, row.detector)] = _fmt(
            row.mean, row.std, decimals, row.n_seeds, row
        )
    columns = [_label(m, d) for m, d in _pairs(long)]
    frame = pd.DataFrame.from_dict(wide, orient="index").reindex(columns=columns).fillna("")
    frame.index.name = "Category"
    return frame


def format_summary(long: pd.DataFrame, *, decimals: int = 1) -> pd.DataFrame:
    """Display form of :func:`group_summary` in the paper's shape (Table 6): rows
    "Detection on object" ..., two columns per representation + detector (ours, paper).

    A group without a comparable published number (:func:`paper_comparison_notes`) has an
    empty paper cell; without any, the paper columns are left out."""
    pairs = _pairs(long) if not long.empty else []
    rows: dict[str, dict[str, str]] = {}
    for row in long.itertuples():
        label = f"{METRICS[row.metric][0]} on {row.group}"
        cells = rows.setdefault(label, {})
        name = _label(row.method, row.detector)
        cells[name] = _fmt(row.mean, row.std, decimals, row.n_seeds, row)
        if np.isfinite(row.paper_mean):
            cells[f"{name} (paper)"] = _fmt(row.paper_mean, row.paper_std, decimals)
    # Paper columns only where some group stands beside a published number.
    has_paper = bool(long["paper_mean"].notna().any()) if not long.empty else False
    suffixes = ("", " (paper)") if has_paper else ("",)
    columns = [f"{_label(m, d)}{suffix}" for m, d in pairs for suffix in suffixes]
    frame = pd.DataFrame.from_dict(rows, orient="index").reindex(columns=columns).fillna("")
    frame.index.name = "AUC"
    return frame
