"""The paper's numbers beside ours: published class means, which variant is the paper's
default setting, the ``paper_*`` and ``deviation`` columns and the deviation rows."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pipeline_lib.paper.published import load_published
from pipeline_lib.registry import DEFAULT_DISTRIBUTIONS
from pipeline_lib.studies.contract import DEVIATION_COLUMNS, FLOAT_PARAMS, empty_deviations

__all__ = [
    "PAPER_TABLE_NUMBERS",
    "add_paper",
    "concat_deviations",
    "default_cells",
    "deviation_rows",
    "is_default_variant",
    "published_main",
]

#: Paper table labels -> their numbers in the paper, for readable sources.
PAPER_TABLE_NUMBERS: dict[str, int] = {
    "visual_results": 2,
    "visual_results_comparison": 3,
    "mvtec_results_summary": 4,
    "performance_gaussian": 5,
    "supp_ensemble": 6,
    "visual_results_full": 7,
}

# Tables with class-mean numbers per (method, detector, dataset), preferred first.
_MAIN_TABLES = ("visual_results_full", "visual_results", "performance_gaussian")


def published_main() -> dict[tuple[str, str, str], tuple[float, float, str]]:
    """Map (method, detector, dataset) -> (mean, std, source) of the paper's class-mean tables.

    Table 7 (``visual_results_full``) is preferred, then Table 2 and Table 5; ``source``
    reads like ``"Table 7"``.
    """
    published = load_published()
    out: dict[tuple[str, str, str], tuple[float, float, str]] = {}
    for table in _MAIN_TABLES:
        rows = published[(published["table"] == table) & (published["inlier"] == "")]
        for r in rows.itertuples(index=False):
            key = (str(r.method), str(r.detector), str(r.dataset))
            out.setdefault(
                key, (float(r.mean), float(r.std), f"Table {PAPER_TABLE_NUMBERS[table]}")
            )
    return out


def is_default_variant(
    row: Mapping[str, Any] | pd.Series,
    *,
    ignore: Sequence[str] = (),
    defaults: Mapping[str, float] | None = None,
) -> bool:
    """True when a row's variant parameters are the paper's defaults (its main-table setting).

    ``NaN`` / ``""`` mean "the method's default"; ``defaults`` gives explicit default values
    that count as default too (e.g. ``{"batch_size": 32}``); columns in ``ignore`` are the
    study's own axis and are not checked. For ``contrastive_da`` the default distribution set
    is the registry's
    :data:`~pipeline_lib.registry.DEFAULT_DISTRIBUTIONS`.
    """
    defaults = defaults or {}
    for col in FLOAT_PARAMS:
        if col in ignore:
            continue
        value = float(row[col]) if col in row and row[col] is not None else np.nan
        if not (math.isnan(value) or (col in defaults and value == float(defaults[col]))):
            return False
    if "distributions" not in ignore:
        dist = str(row.get("distributions", "") or "")
        if dist and not (
            row.get("base_method") == "contrastive_da"
            and set(dist.split(",")) == set(DEFAULT_DISTRIBUTIONS)
        ):
            return False
    return True


def default_cells(cells: pd.DataFrame, by: Sequence[str], axis: str) -> pd.Series:
    """Per cell of ``by``: True when every row is a default variant but for the study's own
    ``axis`` (:func:`is_default_variant`), i.e. where the main table's number applies."""
    flags = [is_default_variant(r, ignore=(axis,)) for _, r in cells.iterrows()]
    return cells.assign(_default=flags).groupby(list(by))["_default"].all()


def add_paper(
    table: pd.DataFrame,
    lookup: Callable[[pd.Series], tuple[float, float, str] | None],
) -> pd.DataFrame:
    """Add ``paper_mean, paper_std, paper_source, deviation`` to a stats table.

    ``lookup(row)`` returns ``(mean, std, source)`` or None where the paper has no number.
    """
    values = [lookup(row) for _, row in table.iterrows()]
    table = table.copy()
    table["paper_mean"] = pd.Series(
        [v[0] if v else np.nan for v in values], index=table.index, dtype=float
    )
    table["paper_std"] = pd.Series(
        [v[1] if v else np.nan for v in values], index=table.index, dtype=float
    )
    table["paper_source"] = [v[2] if v else "" for v in values]
    table["deviation"] = table["mean"].astype(float) - table["paper_mean"]
    return table


def deviation_rows(
    table: pd.DataFrame, describe: Callable[[pd.Series], str], *, unit: str = "AUC"
) -> pd.DataFrame:
    """One :data:`DEVIATION_COLUMNS` row per table row with a published number."""
    rows = [
        {
            "item": describe(row),
            "ours": float(row["mean"]),
            "paper": float(row["paper_mean"]),
            "deviation": float(row["mean"]) - float(row["paper_mean"]),
            "n_missing": int(row["n_missing"]),
            "unit": unit,
        }
        for _, row in table.iterrows()
        if np.isfinite(float(row["paper_mean"]))
    ]
    return pd.DataFrame(rows, columns=list(DEVIATION_COLUMNS)) if rows else empty_deviations()


def concat_deviations(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate deviation frames, skipping empty ones (keeps dtypes clean)."""
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else empty_deviations()
