"""summary.json: the fit, the dose estimates, the predictions, the full cell for context and
the conclusion, under documented keys."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .conclusion import conclusion_text
from .fit import mean_aurocs, predicted_changes, slopes_from_rows
from .lossless import CALIBRATION_QUALITY, LosslessDose, q75_dose_estimates
from .measure import TRAINED, Settings

FULLCELL = Path(__file__).resolve().parents[1] / "fullcell"
HALF_POINT = 0.5

#: The keys of summary.json, documented in the generated README (kept stable: other pages
#: read them).
SUMMARY_KEYS = {
    "schema_version": "1: this layout",
    "command": "the command line that wrote the files",
    "wall_s": "wall time of that command (seconds; the machine was shared with other jobs)",
    "machine": "processor and torch threads per worker",
    "inlier": "CIFAR-10 inlier class",
    "settings": "RotNet width, epochs and training images; frozen width; seeds",
    "doses": "dose name -> mean absolute pixel change from the shared copy (grey levels)",
    "qualities": "dose name -> JPEG quality of the re-encoding (null: the shared copy)",
    "auroc": "'representation/detector' -> dose name -> AUC x 100, mean over seeds",
    "slopes": (
        "'representation/detector' -> {slope (AUC points per grey level, mean over seeds), "
        "slope_seeds (seed -> slope), slope_spread (half the range over seeds), deltas "
        "(dose name -> AUC change from dose 0, mean over seeds), residual_rms (RMS of the "
        "AUC changes about their seed's line, points)}"
    ),
    "q75_dose_estimates": (
        "source -> mean absolute change that q75 4:2:0 JPEG makes to lossless 32x32 images "
        "(grey levels): bottle, bottle_calibrated, photos, photos_calibrated"
    ),
    "q75_dose_estimate": "the central estimate (bottle, as measured)",
    "q75_dose_range": "[lowest, highest] of q75_dose_estimates",
    "predicted_change": (
        "'representation/detector' -> {central, low, high}: predicted AUC(lossless) - "
        "AUC(shared copy), AUC points (-slope x dose; low/high over seeds and dose range)"
    ),
    "predicted_kde_change": "predicted_change of rotnet/kde: {central, low, high}",
    "full_cell": "the measured full-protocol cell's KDE and the paper's (mean, std) and gap",
    "can_move_kde_half_point": (
        "true when the largest magnitude of rotnet/kde's predicted change (over seeds and "
        "the dose range) reaches 0.5 points"
    ),
    "conclusion": "one paragraph",
}


def full_cell_reference(inlier: str) -> dict[str, Any]:
    """The measured full-protocol cell's KDE (benchmarks/fullcell) and the paper's value."""
    from pipeline_lib.paper.published import load_published

    published = load_published("per_class_aucs_cifar10")
    paper = published[
        (published["inlier"] == inlier)
        & (published["method"] == TRAINED)
        & (published["detector"] == "kde")
    ]
    measured = []
    for path in sorted(FULLCELL.glob("*.json")):
        for result in json.loads(path.read_text())["results"]:
            if result["inlier"] == inlier and result["method"] == TRAINED:
                measured.append((path.name, result["auroc"]["kde"]))
    reference: dict[str, Any] = {"measured_kde": None, "paper_kde": None}
    if measured:
        reference["measured_kde"], reference["measured_in"] = measured[-1][1], measured[-1][0]
    if len(paper):
        reference["paper_kde"] = float(paper["mean"].iloc[0])
        reference["paper_kde_std"] = float(paper["std"].iloc[0])
    if reference["measured_kde"] is not None and reference["paper_kde"] is not None:
        reference["gap"] = reference["paper_kde"] - reference["measured_kde"]
    return reference


def processor_name() -> str:
    """The CPU's model name and logical CPU count (Linux), else the machine type."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} CPUs)"
    return platform.machine()


def build_summary(
    rows: Sequence[Mapping[str, Any]],
    *,
    doses: Mapping[str, float],
    qualities: Mapping[str, int | None],
    lossless: Mapping[str, LosslessDose],
    settings: Settings,
    seeds: Sequence[int],
    command: str,
    wall_s: float,
    machine: str | None = None,
) -> dict[str, Any]:
    """summary.json: the fit, the dose estimates, the predictions and the conclusion.

    ``machine`` is where the rows were measured: this machine unless given (a rebuilt report
    keeps the one of its measurements, as it keeps their wall time).
    """
    slopes = slopes_from_rows(rows, doses)
    further = doses.get(f"q{CALIBRATION_QUALITY}")
    estimates = q75_dose_estimates(lossless, further)
    central = estimates.get("bottle", next(iter(estimates.values())))
    dose_range = [min(estimates.values()), max(estimates.values())]
    predictions = predicted_changes(slopes, central, dose_range)
    kde_key = f"{TRAINED}/kde"
    kde = predictions.get(kde_key)  # None until RotNet has a dose besides the reference
    can_move = kde is not None and max(abs(kde["low"]), abs(kde["high"])) >= HALF_POINT
    summary: dict[str, Any] = {
        "schema_version": 1,
        "command": command,
        "wall_s": round(wall_s, 1),
        "machine": machine or f"{processor_name()}, 1 torch thread per worker",
        "inlier": settings.inlier,
        "settings": {**asdict(settings), "seeds": list(seeds)},
        "doses": dict(doses),
        "qualities": dict(qualities),
        "auroc": mean_aurocs(rows),
        "slopes": slopes,
        "q75_dose_sources": {name: asdict(source) for name, source in lossless.items()},
        "q75_dose_estimates": estimates,
        "q75_dose_estimate": central,
        "q75_dose_range": dose_range,
        "predicted_change": predictions,
        "predicted_kde_change": kde,
        "full_cell": full_cell_reference(settings.inlier),
        "can_move_kde_half_point": can_move,
    }
    summary["conclusion"] = conclusion_text(summary) if kde is not None else ""
    return summary
