"""Synthetic study frames: every expected job, random AUCs from a seeded rng, some deleted.

The tests compute every expected number independently from these frames (groupby / numpy),
so no hard-coded number stands in for a computed one.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

VARIANT_DEFAULTS: dict[str, Any] = {
    "batch_size": np.nan,
    "head_depth": np.nan,
    "distributions": "",
    "train_size": np.nan,
}


def variant(method: str, base_method: str | None = None, **params: Any) -> dict[str, Any]:
    """A representation variant: its name, base method and parameters (defaults NaN / "")."""
    return {"method": method, "base_method": base_method or method, **VARIANT_DEFAULTS, **params}


def expected_grid(
    *,
    classes: Mapping[str, Sequence[str]],
    seeds: Sequence[int],
    variants: Sequence[Mapping[str, Any]],
    detectors: Sequence[str],
    contaminations: Sequence[float] = (0.0,),
    fitsets: Sequence[str] = ("train",),
    spaces: Sequence[str] = ("f",),
) -> pd.DataFrame:
    """The full product of the axes, one row per job, with the contract's key columns."""
    rows = []
    for dataset, names in classes.items():
        for inlier, seed, var, det, contam, fitset, space in itertools.product(
            names, seeds, variants, detectors, contaminations, fitsets, spaces
        ):
            rows.append(
                {
                    "dataset": dataset,
                    "inlier": inlier,
                    "contamination": float(contam),
                    "seed": int(seed),
                    "fitset": fitset,
                    "detector": det,
                    "space": space,
                    **var,
                }
            )
    return pd.DataFrame(rows)


def fake_results(
    expected: pd.DataFrame, *, seed: int = 0, drop: int = 0, low: float = 55.0, high: float = 99.0
) -> pd.DataFrame:
    """Every expected job with a random AUC and a per-model MMD, minus ``drop`` random rows."""
    rng = np.random.default_rng(seed)
    frame = expected.copy()
    frame["auroc"] = rng.uniform(low, high, size=len(frame))
    models = frame[["dataset", "inlier", "seed", "method"]].drop_duplicates()
    models = models.assign(mmd=rng.uniform(0.01, 0.5, size=len(models)))
    frame = frame.merge(models, on=["dataset", "inlier", "seed", "method"], how="left")
    if drop:
        frame = frame.drop(index=rng.choice(frame.index, size=drop, replace=False))
    return frame.reset_index(drop=True)


def class_seed_stats(rows: pd.DataFrame, value: str = "auroc") -> tuple[float, float]:
    """Oracle: per seed the mean over classes, then mean and sample std (ddof=1, every
    table's) over seeds; NaN std for one seed."""
    per_seed = rows.groupby("seed")[value].mean().to_numpy()
    std = float(per_seed.std(ddof=1)) if per_seed.size > 1 else float("nan")
    return float(per_seed.mean()), std
