"""Independent reference computations (oracles) for the detector tests."""

from __future__ import annotations

import numpy as np


def unit_rows(X: np.ndarray) -> np.ndarray:
    """Independent L2 normalisation used as the oracle in the tests."""
    return X / np.sqrt((X**2).sum(axis=1, keepdims=True))


def paper_gamma(X: np.ndarray, scale: float = 10.0) -> float:
    """Independent gamma = scale / (d * Var(all entries))."""
    flat = X.ravel()
    variance = ((flat - flat.mean()) ** 2).sum() / flat.size
    return scale / (X.shape[1] * variance)
