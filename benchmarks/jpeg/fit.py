"""The dose-response fit: AUC changes from dose 0 against the dose, a line through the
origin per representation, detector and seed, and what it predicts for a given dose."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .doses import REFERENCE


def fit_through_origin(doses: Sequence[float], deltas: Sequence[float]) -> float:
    """Least-squares slope of ``deltas = slope * doses`` (a line through the origin).

    Raises
    ------
    ValueError
        If the lengths differ, or every dose is 0 (no slope to fit).
    """
    x = np.asarray(doses, dtype=np.float64)
    y = np.asarray(deltas, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"doses and deltas must be 1-D of one length, got {x.shape}, {y.shape}")
    if not np.any(x):
        raise ValueError("every dose is 0: no slope to fit")
    return float(x @ y / (x @ x))


def slopes_from_rows(
    rows: Sequence[Mapping[str, Any]], doses: Mapping[str, float]
) -> dict[str, dict[str, Any]]:
    """Per ``representation/detector``: the slope per seed, their mean and half range, and
    the RMS of the points about their seed's line (how far the AUC changes scatter).

    A seed's points are (dose, AUC - AUC at dose 0) for every dose it was measured at
    besides the reference; seeds without the reference or without another dose are skipped.
    """
    table: dict[str, dict[int, dict[str, float]]] = {}
    for row in rows:
        key = f"{row['representation']}/{row['detector']}"
        table.setdefault(key, {}).setdefault(int(row["seed"]), {})[row["dose_name"]] = float(
            row["auroc"]
        )
    slopes = {}
    for key, by_seed in table.items():
        per_seed, deltas, residuals = {}, {}, []
        for seed, by_dose in sorted(by_seed.items()):
            others = [name for name in by_dose if name != REFERENCE and doses.get(name, 0) > 0]
            if REFERENCE not in by_dose or not others:
                continue
            delta = {name: by_dose[name] - by_dose[REFERENCE] for name in others}
            per_seed[seed] = fit_through_origin([doses[n] for n in others], list(delta.values()))
            for name, value in delta.items():
                deltas.setdefault(name, []).append(value)
                residuals.append(value - per_seed[seed] * doses[name])
        if not per_seed:
            continue
        values = list(per_seed.values())
        slopes[key] = {
            "slope": float(np.mean(values)),
            "slope_seeds": {str(seed): value for seed, value in per_seed.items()},
            "slope_spread": float((max(values) - min(values)) / 2),
            "deltas": {name: float(np.mean(v)) for name, v in deltas.items()},
            "residual_rms": float(np.sqrt(np.mean(np.square(residuals)))),
        }
    return slopes


def predicted_changes(
    slopes: Mapping[str, Mapping[str, Any]], central: float, dose_range: Sequence[float]
) -> dict[str, dict[str, float]]:
    """AUC(lossless) - AUC(shared) = -slope x dose: central, and low/high over seeds x range."""
    predictions = {}
    for key, fit in slopes.items():
        products = [-slope * dose for slope in fit["slope_seeds"].values() for dose in dose_range]
        predictions[key] = {
            "central": -fit["slope"] * central,
            "low": float(min(products)),
            "high": float(max(products)),
        }
    return predictions


def mean_aurocs(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """'representation/detector' -> dose name -> AUC, mean over seeds."""
    collected: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        key = f"{row['representation']}/{row['detector']}"
        collected.setdefault(key, {}).setdefault(row["dose_name"], []).append(float(row["auroc"]))
    return {
        key: {name: float(np.mean(v)) for name, v in by_dose.items()}
        for key, by_dose in collected.items()
    }
