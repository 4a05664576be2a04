"""The CSV files benchmark scripts append their measurements to, one run after another (a
sibling module: the scripts import it as ``bench_tables``, run from benchmarks/ or its
parent)."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


def append_csv(path: Path, rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> None:
    """Append ``rows`` to the CSV at ``path``, writing the header into a new (or empty) file:
    one file keeps the rows of several runs.

    Raises
    ------
    ValueError
        If an existing file has other columns (rows of another version of the script),
        before anything is written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    if not new:
        with path.open(newline="") as existing:
            header = next(csv.reader(existing), [])
        if tuple(header) != tuple(columns):
            raise ValueError(
                f"{path} has columns {header}, not {list(columns)}: write to a new file"
            )
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        if new:
            writer.writeheader()
        writer.writerows(rows)
