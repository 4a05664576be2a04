"""The long frames of the paper's tables: their columns, and the order their ids are shown in.

Shared by the aggregation (:mod:`pipeline_lib.paper.aggregate`) that builds the frames and the
display (:mod:`pipeline_lib.paper.display`) that formats them.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

__all__ = ["MAIN_COLUMNS", "PER_CLASS_COLUMNS", "RESULT_COLUMNS", "order_ids", "require_columns"]

#: Columns a results frame must have.
RESULT_COLUMNS: tuple[str, ...] = (
    "dataset",
    "inlier",
    "method",
    "seed",
    "contamination",
    "fitset",
    "detector",
    "auroc",
)

# A cell's value, interval and seed counts, in both tables.
_CELL_COLUMNS = (
    "mean",
    "std",
    "ci_low",
    "ci_high",
    "ci_over",
    "n_seeds",
    "expected_seeds",
)

#: Columns of :func:`~pipeline_lib.paper.aggregate.main_table`'s frame.
MAIN_COLUMNS: tuple[str, ...] = (
    "method",
    "detector",
    "dataset",
    *_CELL_COLUMNS,
    "n_classes",
    "expected_classes",
    "n_results",
    "expected_results",
    "complete",
    "published_mean",
    "published_std",
    "published_derived",
    "delta",
)

#: Columns of :func:`~pipeline_lib.paper.aggregate.per_class_table`'s frame.
PER_CLASS_COLUMNS: tuple[str, ...] = (
    "dataset",
    "inlier",
    "method",
    "detector",
    *_CELL_COLUMNS,
    "complete",
    "published_mean",
    "published_std",
    "delta",
)


def order_ids(values: Sequence[str], known: Sequence[str]) -> list[str]:
    """Known ids first in their order, then the rest sorted."""
    present = set(values)
    return [v for v in known if v in present] + sorted(present - set(known))


def require_columns(frame: pd.DataFrame, columns: Sequence[str], producer: str) -> None:
    """Raise ValueError naming the ``columns`` that ``frame`` lacks and its ``producer``."""
    missing = [col for col in columns if col not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks columns {missing}; expected the output of {producer}()")
