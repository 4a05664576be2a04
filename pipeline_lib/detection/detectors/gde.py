"""Gaussian density estimator: one full-covariance Gaussian fitted to the inlier features.

Paper, appendix "Details of Experimental Setting" (one-component scikit-learn Gaussian
mixture, no tuned hyper-parameters) and the released code
``deep_representation_one_class/util/train.py``: ``GaussianMixture(n_components=1,
init_params='kmeans', covariance_type='full')`` on L2-normalised features.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from sklearn.mixture import GaussianMixture

from pipeline_lib.detection.detectors.base import (
    Detector,
    check_bool,
    check_positive,
    maybe_normalize,
)
from pipeline_lib.detection.detectors.kernels import gaussian_score, gaussian_state
from pipeline_lib.registry import DETECTOR_DEFAULTS

# Defaults come from the registry, where the config check reads them too (one statement of
# each value; tests/detectors/test_registry.py checks that the two agree).
_DEFAULTS = DETECTOR_DEFAULTS["gde"]


class GaussianDensity(Detector):
    """Log-density of a single full-covariance Gaussian fitted to the inlier features.

    With one component, EM reduces to the maximum-likelihood estimate: the sample mean and
    the biased sample covariance plus ``reg_covar`` on the diagonal. The score is the log of
    that Gaussian's density, :meth:`sklearn.mixture.GaussianMixture.score_samples`, computed
    by :func:`~pipeline_lib.detection.detectors.kernels.gaussian_score` (torch, float64, the
    kernel the exported graph also runs) from the fitted precision's Cholesky factor.

    Parameters
    ----------
    normalize : bool, default=True
        L2-normalise every row (fit and score) first, as in the paper.
    reg_covar : float, default=1e-6
        Added to the covariance diagonal (scikit-learn's default); keeps the covariance
        invertible when ``n_samples <= n_features`` or features are collinear.
    random_state : int or None, default=0
        Seed of scikit-learn's initialisation. With one component the fit does not depend on
        it; fixed so that the estimator is deterministic by construction.

    Attributes
    ----------
    gmm_ : sklearn.mixture.GaussianMixture
        The fitted one-component mixture.
    n_features_in_ : int
        Number of feature columns seen in ``fit``.
    """

    def __init__(
        self,
        *,
        normalize: bool = _DEFAULTS["normalize"],
        reg_covar: float = _DEFAULTS["reg_covar"],
        random_state: int | None = _DEFAULTS["random_state"],
    ) -> None:
        self.normalize = normalize
        self.reg_covar = reg_covar
        self.random_state = random_state

    _fitted_attribute = "gmm_"

    def _check_params(self) -> None:
        """Raise ``ValueError`` naming the first invalid hyper-parameter."""
        check_bool("normalize", self.normalize)
        check_positive("reg_covar", self.reg_covar)
        if self.random_state is not None and (
            isinstance(self.random_state, bool)
            or not isinstance(self.random_state, numbers.Integral)
        ):
            raise ValueError(f"random_state must be an int or None, got {self.random_state!r}")

    def _fit(self, X: np.ndarray) -> None:
        """Fit the one-component mixture (ValueError if ``X`` has fewer than two rows)."""
        if X.shape[0] < 2:
            raise ValueError(f"GaussianDensity needs >= 2 fit rows, got n_samples={X.shape[0]}")
        self.gmm_ = GaussianMixture(
            n_components=1,
            covariance_type="full",
            reg_covar=self.reg_covar,
            random_state=self.random_state,
        ).fit(maybe_normalize(X, self.normalize))

    def _score(self, X: np.ndarray) -> np.ndarray:
        """``log N(x; mean, cov + reg_covar I)``, by the float64 torch kernel."""
        state = gaussian_state(
            self.gmm_.means_[0], self.gmm_.precisions_cholesky_[0], self.gmm_.weights_[0]
        )
        x = torch.from_numpy(np.asarray(maybe_normalize(X, self.normalize), np.float64))
        with torch.inference_mode():
            return gaussian_score(x, state).numpy()
