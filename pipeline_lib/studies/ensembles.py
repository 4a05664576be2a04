"""Ensembles of contrastive-DA models (paper App. A.2.2, Table 6).

For each distribution set (Table 6's columns), "single model" is the usual mean ± std over
seeds of the class-mean AUC, and "ensemble of 5 models" combines the test scores of the
seeds' models of that set into one score per test image, then averages the AUC over classes.
The last column ("Ensemble of 5") combines the five sets: its single-model row ensembles, per
seed, the five sets' models of that seed (mean ± std over seeds); its ensemble row combines
all 5 x 5 = 25 models (paper: 94.6).

How scores are combined (:func:`ensemble_auroc`): each member's test anomaly scores are
standardised over the test split, then averaged. The default is the z-score: members are
models of one detector on representations of one family, so their score distributions
differ mostly in location and scale, which the z-score removes, while it keeps how far
beyond the bulk a member puts an image (a confident member weighs more, which is what
averaging scores is for). ``how="rank"`` (rank / n, the average rank for ties) is offered
for members whose score scales are not comparable (different detectors): it is invariant to
any increasing transform of a member's scores, at the price of discarding those margins.
Either way the standardisation uses only the unlabelled test scores of that member.

Options: ``detector`` (``"ocsvm"``), ``space`` (``"f"``: the scores mapping holds f
detectors), ``sets`` (default :data:`ENSEMBLE_SETS`), ``how`` (``"zscore"`` or ``"rank"``),
``contamination`` (0.0), ``fitset`` (``"train"``), ``decimals``. ``scores`` maps
``(dataset, inlier, contamination, method, fitset, detector)`` to a list of ``(seed,
anomaly_scores, is_outlier)``; keys may carry ``space`` as a 7th entry (only the option's
space is used then); without it the ensemble cells are all missing. The table has one row per
(dataset, set, aggregation), aggregation ``single_model`` or ``seed_ensemble``; set
``"ensemble of sets"`` is the cross-set column.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from pipeline_lib.config.keys import contamination_value
from pipeline_lib.detection.metrics import auroc
from pipeline_lib.paper.intervals import cell_interval
from pipeline_lib.paper.published import load_published
from pipeline_lib.studies.contract import STAT_COLUMNS
from pipeline_lib.studies.display import DATASET_ROW, label
from pipeline_lib.studies.distribution_sets import ACCUMULATED_SETS, SUPP_ENSEMBLE_IDS, sets_option
from pipeline_lib.studies.figures import bar_panel, legend_below, new_figure, ours_bars
from pipeline_lib.studies.paper import PAPER_TABLE_NUMBERS
from pipeline_lib.studies.spec import ONE_CLASS, PAPER_ORDER, Deviations, Opt, Pivot, Run, StudySpec
from pipeline_lib.studies.stats import cell_stats

__all__ = ["ENSEMBLE_SETS", "HOW", "SPEC", "ensemble_auroc", "standardise"]
#: Score standardisations :func:`ensemble_auroc` accepts.
HOW: tuple[str, ...] = ("zscore", "rank")
#: Table 6's five distribution sets (names of :data:`ACCUMULATED_SETS`).
ENSEMBLE_SETS: dict[str, tuple[str, ...]] = {
    name: ACCUMULATED_SETS[name]
    for name in ("+rot90", "+rot90,hflip", "+rot180", "+rot180,hflip", "+rot270")
}
ALL_SETS = "ensemble of sets"
_AGGREGATIONS = {"single_model": "single model", "seed_ensemble": "ensemble of the seeds' models"}
_PAPER_ROWS = {"single_model": "single_model", "seed_ensemble": "ensemble_of_5"}


def standardise(scores: np.ndarray, how: str = "zscore") -> np.ndarray:
    """Put one member's anomaly scores on a common scale (see the module docstring).

    Parameters
    ----------
    scores : ndarray of shape (n_test,)
        Finite anomaly scores of one model on the test split.
    how : {"zscore", "rank"}, default="zscore"
        ``zscore``: ``(s - mean) / std`` over the test split; ``rank``: ranks / n in
        (0, 1], ties get their average rank.

    Returns
    -------
    ndarray of shape (n_test,)

    Raises
    ------
    ValueError
        If ``how`` is unknown, or for ``zscore`` when the scores are constant.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if how == "zscore":
        std = float(scores.std())
        if std == 0.0:
            raise ValueError("a member's anomaly scores are constant: cannot z-score them")
        return (scores - scores.mean()) / std
    if how == "rank":
        return rankdata(scores, method="average") / scores.size
    raise ValueError(f"how={how!r} is not one of {HOW}")


def ensemble_auroc(
    score_arrays: list[np.ndarray], is_outlier: np.ndarray, how: str = "zscore"
) -> float:
    """ROC AUC x 100 of the mean of the members' standardised anomaly scores.

    Parameters
    ----------
    score_arrays : list of ndarray of shape (n_test,)
        Each member's anomaly scores (higher = more anomalous) on the same test images, in
        the same order.
    is_outlier : ndarray of shape (n_test,)
        1 for outliers, 0 for inliers (both present).
    how : {"zscore", "rank"}, default="zscore"
        Standardisation of each member before averaging (:func:`standardise`).

    Returns
    -------
    float
        AUC in [0, 100], outlier = positive class.

    Raises
    ------
    ValueError
        If there is no member, a member is not 1-D, not finite or of another length than
        ``is_outlier``, or as :func:`standardise` and :func:`pipeline_lib.detection.metrics.auroc`.
    """
    if not score_arrays:
        raise ValueError("score_arrays is empty: an ensemble needs at least one member")
    labels = np.asarray(is_outlier)
    members = []
    for k, scores in enumerate(score_arrays):
        scores = np.asarray(scores, dtype=np.float64)
        if scores.ndim != 1 or scores.shape != labels.shape:
            raise ValueError(f"member {k} has shape {scores.shape}; is_outlier has {labels.shape}")
        if not np.all(np.isfinite(scores)):
            raise ValueError(f"member {k} has non-finite anomaly scores")
        members.append(standardise(scores, how))
    return auroc(np.mean(members, axis=0), labels)


def _score_index(
    scores: Mapping | None, space: str
) -> dict[tuple, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Normalise the mapping's keys (contamination rounded) and its lists to seed -> arrays.

    Keys are ``(dataset, inlier, contamination, method, fitset, detector)``, or the same
    with ``space`` appended (then only keys of ``space`` are kept).
    """
    index: dict[tuple, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
    for key, members in (scores or {}).items():
        if len(key) == 7:
            if str(key[6]) != space:
                continue
            key = key[:6]
        if len(key) != 6:
            raise ValueError(
                f"score key {key!r} must be (dataset, inlier, contamination, method, fitset, "
                "detector[, space])"
            )
        dataset, inlier, contamination, method, fitset, detector = key
        norm = (
            str(dataset),
            str(inlier),
            contamination_value(contamination),
            str(method),
            str(fitset),
            str(detector),
        )
        index[norm] = {int(seed): (np.asarray(s), np.asarray(y)) for seed, s, y in members}
    return index


def _combine(members: list[tuple[np.ndarray, np.ndarray]], how: str, where: str) -> float:
    labels = members[0][1]
    for _, other in members[1:]:
        if other.shape != labels.shape or not np.array_equal(other, labels):
            raise ValueError(
                f"{where}: members were scored on different test labels; cannot ensemble"
            )
    return ensemble_auroc([s for s, _ in members], labels, how=how)


def _stats_row(
    key: dict,
    values: Sequence[float],
    n_expected: int,
    n_missing: int,
    n_expected_seeds: int,
    ddof: int | None,
    n_seeds: int | None = None,
) -> dict:
    """A stats row from per-seed values (``ddof`` int) or one ensemble value (``ddof`` None)."""
    values = np.asarray([v for v in values if np.isfinite(v)], dtype=float)
    spread = ddof is not None and values.size > ddof
    # per-seed values: the t-interval over seeds; one ensemble value has none
    low, high, over = cell_interval(values) if ddof is not None else (np.nan, np.nan, "")
    return key | {
        "mean": float(values.mean()) if values.size else np.nan,
        "std": float(np.std(values, ddof=ddof)) if spread else np.nan,
        "ci_low": low,
        "ci_high": high,
        "ci_over": over,
        "n_seeds": int(values.size) if n_seeds is None else n_seeds,
        "n_expected_seeds": n_expected_seeds,
        "n_results": n_expected - n_missing,
        "n_expected": n_expected,
        "n_missing": n_missing,
    }


def _class_ensembles(
    group: pd.DataFrame, found_of: Callable, how: str, where: str
) -> tuple[list[float], int, set[int]]:
    """Per inlier class, the AUC of the ensemble of the group's members that have scores.

    Returns the class AUCs, the members without scores and the seeds of those with.
    """
    aucs, missing, used = [], 0, set()
    dataset = str(group["dataset"].iloc[0])
    for inlier, members in group.groupby("inlier", sort=True):
        rows = list(members.itertuples(index=False))
        found = [found_of(r) for r in rows]
        present = [f for f in found if f is not None]
        used |= {int(r.seed) for r, f in zip(rows, found, strict=True) if f is not None}
        missing += len(found) - len(present)
        if present:
            aucs.append(_combine(present, how, f"{dataset}/{inlier}/{where}"))
    return aucs, missing, used


def _cells(run: Run) -> pd.DataFrame:
    """Single-model cells per (dataset, set), the seed ensembles, and the cross-set column."""
    cells, how = run.cells, run["how"]
    index = run.state["index"] = _score_index(run.scores, run["space"])
    key = (run["contamination"], run["fitset"], run["detector"])

    def found_of(row) -> tuple[np.ndarray, np.ndarray] | None:
        contamination, fitset, detector = key
        return index.get(
            (row.dataset, row.inlier, contamination, row.method, fitset, detector), {}
        ).get(int(row.seed))

    single = cell_stats(cells, ["dataset", "set"], ddof=run.ddof)
    single.insert(2, "aggregation", "single_model")
    rows = []
    for (dataset, set_name), group in cells.groupby(["dataset", "set"], sort=False):
        aucs, missing, used = _class_ensembles(group, found_of, how, set_name)
        rows.append(
            _stats_row(
                {"dataset": dataset, "set": set_name, "aggregation": "seed_ensemble"},
                [float(np.mean(aucs))] if aucs else [],
                len(group),
                missing,
                int(group["seed"].nunique()),
                None,
                n_seeds=len(used),
            )
        )
    for _, group in cells.groupby("dataset", sort=False):
        rows.extend(_across_sets(group, found_of, how, run.ddof))
    return pd.concat([single, pd.DataFrame(rows)], ignore_index=True)


def _across_sets(group: pd.DataFrame, found_of: Callable, how: str, ddof: int) -> list[dict]:
    """The cross-set column: per seed one model per set (single_model), and all models."""
    per_seed, missing_single = [], 0
    seeds = sorted(group["seed"].unique())
    for seed in seeds:
        aucs, missing, _ = _class_ensembles(
            group[group["seed"] == seed], found_of, how, f"seed {seed}"
        )
        missing_single += missing
        per_seed.append(float(np.mean(aucs)) if aucs else np.nan)
    aucs, missing_all, used = _class_ensembles(group, found_of, how, "all sets")
    key = {"dataset": str(group["dataset"].iloc[0]), "set": ALL_SETS}
    return [
        _stats_row(
            key | {"aggregation": "single_model"},
            per_seed,
            len(group),
            missing_single,
            len(seeds),
            ddof,
        ),
        _stats_row(
            key | {"aggregation": "seed_ensemble"},
            [float(np.mean(aucs))] if aucs else [],
            len(group),
            missing_all,
            len(seeds),
            None,
            n_seeds=len(used),
        ),
    ]


def _prepare(run: Run, cells: pd.DataFrame) -> pd.DataFrame:
    """Check ``how``, name each row's distribution set and keep the study's sets."""
    if run["how"] not in HOW:
        raise ValueError(f"{run.spec.kind}: option how={run['how']!r} is not one of {HOW}")
    run.options["contamination"] = contamination_value(run["contamination"])
    cells = sets_option(run, cells)
    return cells[cells["set"].isin(list(run["sets"]))]


def _notes(run: Run, table: pd.DataFrame) -> list[str]:
    how = run["how"]
    notes = [
        f"ensembles average the members' test anomaly scores after standardising each member "
        f"({how}: {'z-score over the test split' if how == 'zscore' else 'rank / n'}); an "
        "ensemble's AUC is computed per class, then averaged over classes; 'ensemble of sets' "
        "combines one model per set (single-model row, per seed) or all sets x seeds"
    ]
    if not run.state["index"]:
        notes.append("no test scores were given: every ensemble cell is missing")
    notes.append(
        f"the paper does not name the detector of Table 6; compared with our "
        f"{label('detector', run['detector'])} on {run['space']}"
    )
    return notes


def _paper(row: pd.Series, sets: Mapping[str, Sequence[str]]) -> tuple[float, float, str] | None:
    """Table 6's number for a (set, aggregation) cell, on CIFAR-10 only."""
    if row["dataset"] != "cifar10":
        return None
    name = row["set"]
    if name == ALL_SETS and set(sets) != set(ENSEMBLE_SETS):
        return None  # the paper's cross-set numbers combine exactly its five sets
    supp = load_published("supp_ensemble")
    hit = supp[
        (supp["method"] == SUPP_ENSEMBLE_IDS.get(name, ""))
        & (supp["detector"] == _PAPER_ROWS[row["aggregation"]])
    ]
    if hit.empty:
        return None
    return (
        float(hit["mean"].iloc[0]),
        float(hit["std"].iloc[0]),
        f"Table {PAPER_TABLE_NUMBERS['supp_ensemble']}",
    )


def _figure(table: pd.DataFrame, order: list[str], detector: str):
    datasets = list(dict.fromkeys(table["dataset"]))
    sets = [s for s in order if s in set(table["set"])]
    fig, axes = new_figure(len(datasets), width=max(5.0, 0.9 * len(sets) + 1.5), height=4.2)
    colours = {"single_model": "#4c72b0", "seed_ensemble": "#dd8452"}
    width = 0.38
    for ax, dataset in zip(axes, datasets, strict=True):
        rows = table[table["dataset"] == dataset]
        x = np.arange(len(sets))
        for k, aggregation in enumerate(("single_model", "seed_ensemble")):
            cells = rows[rows["aggregation"] == aggregation].set_index("set").reindex(sets)
            xs = x + (k - 0.5) * width
            ours_bars(
                ax,
                xs,
                cells,
                colour=colours[aggregation],
                label_text=_AGGREGATIONS[aggregation],
                paper_label="paper (Table 6)",
                width=width,
            )
        title = f"{label('dataset', dataset)}, {label('detector', detector)}"
        bar_panel(ax, x, sets, rows, xlabel="distribution set", title=title)
    legend_below(fig, axes[0], ncols=4, hatched=bool((table["n_missing"] > 0).any()))
    fig.suptitle("Contrastive (DA): single models vs. ensembles")
    return fig


SPEC = StudySpec(
    kind="ensembles",
    caption="Ensembles of contrastive-DA models: single model vs. ensemble (App. A.2.2, Table 6)",
    defaults={
        "detector": "ocsvm",
        "space": "f",
        "sets": ENSEMBLE_SETS,
        "how": "zscore",
        "contamination": 0.0,
        "fitset": "train",
    },
    select={**ONE_CLASS, "fitset": Opt("fitset"), "contamination": Opt("contamination")},
    prepare=_prepare,
    empty=lambda run: (
        f"{run.spec.kind}: the expected grid has no contrastive-DA jobs of the sets "
        f"{list(run['sets'])}"
    ),
    cells=_cells,
    paper=lambda run: lambda r: _paper(r, run["sets"]),
    orders={
        "dataset": PAPER_ORDER,
        "aggregation": list(_AGGREGATIONS),
        "set": lambda run, table: [*run["sets"], ALL_SETS],
    },
    columns=["dataset", "set", "aggregation", *STAT_COLUMNS],
    deviations=[
        Deviations(
            lambda run, r: (
                f"{label('dataset', r['dataset'])}: Contrastive (DA) {r['set']}, "
                f"{_AGGREGATIONS[r['aggregation']]} / {label('detector', run['detector'])}"
            )
        )
    ],
    display=Pivot(
        [DATASET_ROW, ("aggregation", "Aggregation", lambda v: _AGGREGATIONS[v])], "set", str
    ),
    figures=lambda run, table: {"auroc": _figure(table, [*run["sets"], ALL_SETS], run["detector"])},
    notes=_notes,
)
