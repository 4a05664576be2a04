"""The three files of a run (results.csv, summary.json, README.md), written from the rows and
the summary, or rebuilt from the files themselves."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .lossless import LosslessDose
from .measure import Settings
from .readme import render_readme
from .rows import read_rows, write_rows
from .summary import build_summary


def write_outputs(out: Path, rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> None:
    """results.csv, summary.json and README.md in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    write_rows(out / "results.csv", rows)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=False) + "\n")
    (out / "README.md").write_text(render_readme(summary, rows))


def rebuild_report(out: Path) -> dict[str, Any]:
    """summary.json and README.md again from ``out``'s results.csv and summary.json.

    For a change of the report's wording or fit without measuring again: the doses, the
    lossless sources, the settings, the command, its wall time and the machine it ran on come
    from the old summary.
    """
    old = json.loads((out / "summary.json").read_text())
    rows = read_rows(out / "results.csv")
    settings = dict(old["settings"])
    seeds = settings.pop("seeds")
    summary = build_summary(
        rows,
        doses=old["doses"],
        qualities=old["qualities"],
        lossless={name: LosslessDose(**v) for name, v in old["q75_dose_sources"].items()},
        settings=Settings(**settings),
        seeds=seeds,
        command=old["command"],
        wall_s=old["wall_s"],
        machine=old["machine"],
    )
    write_outputs(out, rows, summary)
    return summary
