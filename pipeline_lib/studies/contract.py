"""The study result contract: the columns that identify a job, the columns of every study
table, what a study builder returns, and the join of job results to the expected grid.

Every study works on two frames with the columns of :data:`KEY_COLUMNS`: ``frame`` (job
results, plus ``auroc`` and ``mmd``) and ``expected`` (every job the study's grid should
have). The expected grid, not the results, defines a study's cells, so a job that never ran
shows up as missing instead of silently shrinking an average.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pipeline_lib.config.keys import STUDY_KEY_COLUMNS, contamination_value
from pipeline_lib.detection.auroc_intervals import INTERVAL_OMITTED
from pipeline_lib.results.study_frames import VARIANT_COLUMNS
from pipeline_lib.results.tidy_table import interval_omissions
from pipeline_lib.studies.stats import SEED_STAT_COLUMNS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "DEVIATION_COLUMNS",
    "FLOAT_PARAMS",
    "JOB_KEY",
    "KEY_COLUMNS",
    "STAT_COLUMNS",
    "StudyResult",
    "check_options",
    "empty_deviations",
    "join_expected",
]

#: The columns that identify a job's result; the variant parameters follow from ``method``.
JOB_KEY: tuple[str, ...] = STUDY_KEY_COLUMNS

#: Columns of ``frame`` and ``expected`` that identify a job (``frame`` adds auroc, mmd):
#: the job key with ``base_method`` after ``method``, then the variant parameters.
_AFTER_METHOD = JOB_KEY.index("method") + 1
KEY_COLUMNS: tuple[str, ...] = (
    *JOB_KEY[:_AFTER_METHOD],
    "base_method",
    *JOB_KEY[_AFTER_METHOD:],
    *VARIANT_COLUMNS,
)

# A job's AUC interval over the test set (the tidy results table's columns), carried along.
_JOB_INTERVAL = ("auroc_low", "auroc_high")
_STRING_COLUMNS = ("dataset", "inlier", "method", "base_method", "fitset", "detector", "space")
#: Variant parameters held as floats (NaN = the method's default), in :data:`KEY_COLUMNS`.
FLOAT_PARAMS: tuple[str, ...] = ("batch_size", "head_depth", "train_size")
_REQUIRED = ("dataset", "inlier", "contamination", "seed", "method", "fitset", "detector")

#: Statistics columns of every study table (the other columns name the cell).
STAT_COLUMNS: tuple[str, ...] = (
    *SEED_STAT_COLUMNS,
    "paper_mean",
    "paper_std",
    "paper_source",
    "deviation",
)

#: Columns of :attr:`StudyResult.deviations`; ``unit`` is ``"AUC"`` for AUC x 100.
DEVIATION_COLUMNS: tuple[str, ...] = ("item", "ours", "paper", "deviation", "n_missing", "unit")


def empty_deviations() -> pd.DataFrame:
    """A deviations frame without rows: the columns of :data:`DEVIATION_COLUMNS`."""
    return pd.DataFrame({col: pd.Series(dtype=object) for col in DEVIATION_COLUMNS})


@dataclass
class StudyResult:
    """What a study builder returns and :func:`pipeline_lib.studies.files.write_study`
    writes.

    Attributes
    ----------
    kind : str
        The study kind (a key of :data:`pipeline_lib.studies.STUDY_KINDS`).
    table : DataFrame
        Tidy: one row per cell, the cell's id columns then :data:`STAT_COLUMNS`
        (ours ``mean``/``std`` over seeds, counts, ``n_missing`` expected results without a
        result, the paper's ``paper_mean``/``paper_std``/``paper_source`` where known and
        ``deviation = mean - paper_mean``).
    figures : dict of str to Figure
        Figures by short name (``[A-Za-z0-9_]+``).
    deviations : DataFrame
        Columns :data:`DEVIATION_COLUMNS`, one row per number with a published counterpart.
    notes : list of str
        What the reader must know: detector choices, excluded points, missing inputs.
    display : DataFrame or None
        The human table (formatted strings) for Markdown / LaTeX / HTML; None uses
        ``table``.
    caption : str
        Caption of the human table.
    protocol : list of str
        Lines shown above the human table: how the run's protocol differs from the
        paper's (:func:`pipeline_lib.paper.protocol.protocol_notes`); empty when not known.
    """

    kind: str
    table: pd.DataFrame
    figures: dict[str, Figure] = field(default_factory=dict)
    deviations: pd.DataFrame = field(default_factory=empty_deviations)
    notes: list[str] = field(default_factory=list)
    display: pd.DataFrame | None = None
    caption: str = ""
    protocol: list[str] = field(default_factory=list)


def check_options(options: Mapping[str, Any], allowed: Iterable[str], kind: str) -> None:
    """Raise on an option key a study does not read, so a typo never goes unnoticed.

    Raises
    ------
    ValueError
        Naming the unknown keys and the allowed ones.
    """
    allowed = set(allowed) | {"decimals"}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ValueError(
            f"study kind {kind!r}: unknown options {unknown}; allowed {sorted(allowed)}"
        )


def _canonical(df: pd.DataFrame, what: str) -> pd.DataFrame:
    """Fill optional key columns with their defaults and give every key column one dtype."""
    missing = [col for col in _REQUIRED if col not in df.columns]
    if missing:
        raise ValueError(f"{what} frame lacks columns {missing}; has {list(df.columns)}")
    out = df.copy()
    if "base_method" not in out.columns:
        out["base_method"] = out["method"]
    if "space" not in out.columns:
        out["space"] = "f"
    if "distributions" not in out.columns:
        out["distributions"] = ""
    for col in FLOAT_PARAMS:
        if col not in out.columns:
            out[col] = np.nan
        out[col] = pd.to_numeric(out[col], errors="raise").astype(float)
    for col in _STRING_COLUMNS:
        out[col] = out[col].fillna("").astype(str)
    out["distributions"] = out["distributions"].fillna("").astype(str).map(_normalise_set_text)
    out["seed"] = out["seed"].astype(int)
    # Compared as the path writes it (the job's identity), not by an ad-hoc rounding.
    out["contamination"] = out["contamination"].map(contamination_value).astype(float)
    return out


def _normalise_set_text(text: str) -> str:
    """``" hflip, rot90"`` -> ``"hflip,rot90"``; order kept (the set is compared as a set)."""
    return ",".join(part.strip() for part in str(text).split(",") if part.strip())


def join_expected(frame: pd.DataFrame, expected: pd.DataFrame) -> pd.DataFrame:
    """Attach each expected job's result (``auroc``, ``mmd``, the AUC's interval over the test
    set ``auroc_low`` / ``auroc_high``; NaN when missing; ``auroc_interval_omitted``, why a
    job has none, ``""`` otherwise).

    Results are matched on :data:`JOB_KEY`; the variant parameters are taken from
    ``expected``. Results outside the expected grid are ignored, and a result row whose
    ``auroc`` is NaN counts as missing.

    Parameters
    ----------
    frame : DataFrame
        Job results: :data:`KEY_COLUMNS` (``base_method``, ``space``, the variant parameters
        may be absent: method, ``"f"``, NaN / ``""``), ``auroc`` and optionally ``mmd``.
    expected : DataFrame
        Every job of the study's grid, same key columns.

    Returns
    -------
    DataFrame
        One row per expected job: :data:`KEY_COLUMNS`, ``auroc``, ``mmd``, ``auroc_low``,
        ``auroc_high``, ``auroc_interval_omitted``.

    Raises
    ------
    ValueError
        If a column is missing, ``expected`` is empty or repeats a job, a job has two
        results, or an AUC lies outside [0, 100].
    """
    if "auroc" not in frame.columns:
        raise ValueError(f"results frame lacks column 'auroc'; has {list(frame.columns)}")
    exp = _canonical(expected, "expected")
    if exp.empty:
        raise ValueError("expected frame is empty: a study needs its grid of jobs")
    dup = exp.duplicated(list(JOB_KEY), keep=False)
    if dup.any():
        rows = exp.loc[dup, list(JOB_KEY)].head(3).to_dict("records")
        raise ValueError(f"expected frame lists jobs twice, e.g. {rows}")
    res = _canonical(frame, "results")
    res["auroc"] = pd.to_numeric(res["auroc"], errors="raise").astype(float)
    for col in ("mmd", *_JOB_INTERVAL):
        res[col] = pd.to_numeric(res[col], errors="raise").astype(float) if col in res else np.nan
    res[INTERVAL_OMITTED] = interval_omissions(res)
    res = res[res["auroc"].notna()]
    bad = res[~res["auroc"].between(0.0, 100.0)]
    if len(bad):
        raise ValueError(
            f"AUCs must lie in [0, 100] (x100); bad rows {bad.head(3).to_dict('records')}"
        )
    dup = res.duplicated(list(JOB_KEY), keep=False)
    if dup.any():
        rows = res.loc[dup, list(JOB_KEY)].head(3).to_dict("records")
        raise ValueError(f"results frame has two results for jobs, e.g. {rows}")
    joined = exp[list(KEY_COLUMNS)].merge(
        res[[*JOB_KEY, "auroc", "mmd", *_JOB_INTERVAL, INTERVAL_OMITTED]],
        on=list(JOB_KEY),
        how="left",
        validate="one_to_one",
    )
    return joined
