"""The summary's one-paragraph conclusion, written from its numbers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .doses import REFERENCE
from .measure import TRAINED


def _slope_phrase(fit: Mapping[str, Any]) -> str:
    """'-0.143 +- 0.082 (seeds -0.060, -0.225)' or '-0.007' for one seed."""
    if len(fit["slope_seeds"]) == 1:
        return f"{fit['slope']:+.3f}"
    seeds = ", ".join(f"{value:+.3f}" for value in fit["slope_seeds"].values())
    return f"{fit['slope']:+.3f} +- {fit['slope_spread']:.3f} (seeds {seeds})"


def conclusion_text(summary: Mapping[str, Any]) -> str:
    """The one-paragraph conclusion, written from the numbers of ``summary``."""
    doses, slopes, settings = summary["doses"], summary["slopes"], summary["settings"]
    lo, hi = summary["q75_dose_range"]
    kde = summary["predicted_kde_change"]
    rotnet = slopes[f"{TRAINED}/kde"]
    dose_list = ", ".join(
        f"{name} {value:.2f}" for name, value in doses.items() if name != REFERENCE
    )
    others = [
        f"its {key.split('/')[1]} {_slope_phrase(slopes[key])}"
        for key in slopes
        if key.startswith(f"{TRAINED}/") and key != f"{TRAINED}/kde"
    ]
    frozen = [key for key in slopes if not key.startswith(f"{TRAINED}/")]
    frozen_part = ""
    if frozen:
        largest = max(abs(slopes[key]["slope"]) for key in frozen)
        levels = ", ".join(
            f"{key} {summary['auroc'][key][REFERENCE]:.1f}"
            for key in frozen
            if REFERENCE in summary["auroc"].get(key, {})
        )
        frozen_part = (
            f" The frozen representations ({levels} at dose 0) move by at most "
            f"{largest:.3f} points per grey level."
        )
    within = ""
    if hi <= max(doses.values()):
        within = (
            ", so the shared copy's distance from the lossless originals lies within the "
            "measured doses"
        )
    cell = summary["full_cell"]
    gap = cell.get("gap")
    if summary["can_move_kde_half_point"]:
        verdict = "the data can plausibly move the full cell's KDE by half a point or more"
        if kde["central"] > 0:
            verdict += ", towards the paper"
        if gap is not None and kde["high"] < gap:
            verdict += (
                f", but even the highest estimate is below the full cell's {gap:.1f}-point gap "
                f"({cell['measured_kde']:.1f} against the paper's {cell['paper_kde']:.1f}), "
                "so it does not explain the whole gap alone"
            )
        elif gap is not None:
            verdict += (
                f"; the full cell's gap is {gap:.1f} points ({cell['measured_kde']:.1f} "
                f"against the paper's {cell['paper_kde']:.1f})"
            )
    else:
        verdict = "the data alone is unlikely to move the full cell's KDE by half a point"
        if gap is not None:
            verdict += f" (the full cell's gap to the paper is {gap:.1f} points)"
    return (
        f"Re-encoding the shared q75 copy changes its pixels by {dose_list} grey levels (mean "
        f"absolute change), and q75 4:2:0 JPEG changes lossless 32x32 images by "
        f"{summary['q75_dose_estimate']:.2f} (MVTec bottle; {lo:.2f} to {hi:.2f} over bottle, "
        f"scikit-learn's sample photographs and their compressibility-calibrated values){within}"
        f". The small RotNet (width {settings['rotnet_width']}, first "
        f"{settings['n_train']:,} training inliers, {settings['epochs']} epochs; KDE "
        f"{summary['auroc'][f'{TRAINED}/kde'][REFERENCE]:.1f} at dose 0, mean over seeds) "
        f"changes its KDE AUC by {_slope_phrase(rotnet)} points per grey level, the AUC "
        f"changes scattering by {rotnet['residual_rms']:.2f} points (RMS) about each seed's "
        f"line; {', '.join(others)}.{frozen_part} Extrapolated, the RotNet KDE on lossless "
        f"images would differ by {kde['central']:+.2f} points ({kde['low']:+.2f} to "
        f"{kde['high']:+.2f} over seeds and doses): {verdict}. Limits: the slope comes from "
        "compressing already-compressed images further and is applied to the first "
        "compression; the dose is a mean absolute change measured on other photographs than "
        f"CIFAR's; {len(rotnet['slope_seeds'])} seeds of a small, briefly trained RotNet, "
        "whereas the full cell is width 64 at 2,048 epochs and may depend on fine detail more "
        "or less."
    )
