"""Local outlier factor as a droc-bench detector (scikit-learn conventions)."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.neighbors import LocalOutlierFactor
from sklearn.utils.validation import check_array, check_is_fitted

__all__ = ["LocalOutlierFactorScore"]


class LocalOutlierFactorScore(BaseEstimator):
    """scikit-learn's ``LocalOutlierFactor(novelty=True)`` on (optionally L2-normalised)
    features: ``score_samples`` is minus the local outlier factor, higher = more normal.

    Parameters
    ----------
    n_neighbors : int, default=20
        Neighbours of the local density; capped at the fit set's size minus one.
    normalize : bool, default=True
        L2-normalise every feature vector first, as the benchmark's other detectors on
        learned features do.
    """

    def __init__(self, *, n_neighbors: int = 20, normalize: bool = True) -> None:
        self.n_neighbors = n_neighbors
        self.normalize = normalize

    def _prepare(self, X) -> np.ndarray:
        X = check_array(X, dtype=np.float64)
        if self.normalize:
            X = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
        return X

    def fit(self, X, y=None) -> LocalOutlierFactorScore:
        """Fit the neighbourhoods on inlier features ``X`` of shape (n_samples, n_features)."""
        if self.n_neighbors < 1:
            raise ValueError(f"n_neighbors must be >= 1, got {self.n_neighbors}")
        X = self._prepare(X)
        if len(X) < 2:
            raise ValueError(f"LocalOutlierFactorScore needs at least 2 samples, got {len(X)}")
        neighbors = min(self.n_neighbors, len(X) - 1)
        self.lof_ = LocalOutlierFactor(n_neighbors=neighbors, novelty=True).fit(X)
        self.n_features_in_ = X.shape[1]
        return self

    def score_samples(self, X) -> np.ndarray:
        """Minus the local outlier factor of each row, shape (n_samples,)."""
        check_is_fitted(self, "lof_")
        return self.lof_.score_samples(self._prepare(X))
