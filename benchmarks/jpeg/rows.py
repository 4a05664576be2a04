"""results.csv: one row per dose x representation x seed x detector."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CSV_COLUMNS = (
    "dose_name",
    "quality",
    "dose",
    "representation",
    "width",
    "epochs",
    "n_train",
    "seed",
    "detector",
    "auroc",
    "last_loss",
    "train_s",
    "embed_s",
    "detect_s",
    "wall_s",
)


def write_rows(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """results.csv, the columns of CSV_COLUMNS, floats rounded for reading."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            out = {}
            for column in CSV_COLUMNS:
                value = row.get(column)
                if isinstance(value, float):
                    value = "" if math.isnan(value) else round(value, 4)
                out[column] = "" if value is None else value
            writer.writerow(out)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """results.csv back as dicts (numbers parsed; empty cells None)."""
    rows = []
    with path.open(newline="") as handle:
        for raw in csv.DictReader(handle):
            row: dict[str, Any] = {}
            for key, value in raw.items():
                if value == "":
                    row[key] = None
                elif key in ("quality", "width", "epochs", "n_train", "seed"):
                    row[key] = int(value)
                elif key in ("dose_name", "representation", "detector"):
                    row[key] = value
                else:
                    row[key] = float(value)
            rows.append(row)
    return rows
