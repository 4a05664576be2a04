"""What earlier runs in a working directory measured: training rates (train histories), job
wall times (``benchmark:`` files) and output sizes; each replaces a default of the plan.
"""

from __future__ import annotations

import csv
import json
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path

from pipeline_lib.planning.jobs import Job
from pipeline_lib.registry import is_trained


def measured_images_per_s(
    workdir: Path, *, device: str | None = None, width: int | None = None
) -> dict[str, list[float]]:
    """Per-epoch training rates (epochs after the first) of earlier runs in ``workdir``, per
    method.

    With ``device`` / ``width``, only runs on that device type and at that network width
    count (a CPU smoke run at width 8 says nothing about a GPU plan at width 64); histories
    that do not record them are left out then.
    """
    rates: dict[str, list[float]] = {}
    for path in _output_files(workdir, "**/train_history.json"):
        try:
            record = json.loads(path.read_text())
            if device is not None and record.get("device") != device:
                continue
            if width is not None and record.get("width") != width:
                continue
            # A fused model's rate is its share of a group's time, not a separate job's rate.
            if record.get("fused"):
                continue
            # Histories record the base method (train_representation.py), never a variant.
            method = str(record["method"])
            history = record["history"][1:] or record["history"]
            values = [float(epoch["images_per_s"]) for epoch in history]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if is_trained(method):
            rates.setdefault(method, []).extend(value for value in values if value > 0)
    return rates


def _output_files(workdir: Path, pattern: str) -> Iterable[Path]:
    """Files matching ``pattern`` in ``workdir``'s folders, hidden ones left out: Snakemake's
    ``.snakemake/`` there holds its records and conda environments, not outputs."""
    folders = sorted(workdir.iterdir()) if workdir.is_dir() else []
    for folder in folders:
        if folder.is_dir() and not folder.name.startswith("."):
            yield from folder.glob(pattern)


def measured_job_seconds(benchmarks: Path) -> dict[str, list[float]]:
    """Wall seconds (column ``s``) of every ``benchmark:`` file, per rule (first folder)."""
    seconds: dict[str, list[float]] = {}
    for path in benchmarks.glob("*/**/*.tsv"):
        rule = path.relative_to(benchmarks).parts[0]
        try:
            with open(path, newline="") as handle:
                rows = list(csv.DictReader(handle, delimiter="\t"))
            seconds.setdefault(rule, []).extend(float(row["s"]) for row in rows)
        except (OSError, ValueError, KeyError):
            continue
    return seconds


def measured_output_bytes(workdir: Path, jobs: Iterable[Job]) -> dict[str, list[int]]:
    """Sizes of the planned outputs that already exist (an earlier run), per rule."""
    sizes: dict[str, list[int]] = {}
    for job in jobs:
        existing = [workdir / path for path in job.outputs if (workdir / path).is_file()]
        if existing and len(existing) == len(job.outputs):
            sizes.setdefault(job.rule, []).append(sum(path.stat().st_size for path in existing))
    return sizes


def median(values: Sequence[float]) -> float:
    """The median of ``values`` as a float (several measurements of one rule or rate)."""
    return float(statistics.median(values))
