"""One-class SVMs: RBF kernel on L2-normalised features and linear kernel on raw features.

Paper, Appendix A.1 ("Formulations of One-Class Classifiers") and Sec. 3.2; released code
``deep_representation_one_class/util/train.py`` (``BaseTrain.eval_embed``).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.svm import OneClassSVM
from sklearn.utils.validation import check_is_fitted

from pipeline_lib.detection.detectors._common import (
    check_bool,
    check_gamma,
    check_positive,
    fitted_gamma,
    maybe_normalize,
    validate_features,
)
from pipeline_lib.registry import DETECTOR_DEFAULTS

# Defaults come from the registry, where the config check reads them too: one statement of
# each value (tests/detectors/test_registry.py checks that the two agree).
_RBF = DETECTOR_DEFAULTS["ocsvm"]
_LINEAR = DETECTOR_DEFAULTS["ocsvm_linear"]


def _check_svm_params(nu: Any, tol: Any, cache_size: Any, max_iter: Any) -> None:
    """Raise ``ValueError`` naming the first invalid libsvm hyper-parameter."""
    if isinstance(nu, bool) or not isinstance(nu, numbers.Real) or not 0.0 < nu <= 1.0:
        raise ValueError(f"nu must be a number in (0, 1], got {nu!r}")
    check_positive("tol", tol)
    check_positive("cache_size", cache_size)
    if (
        isinstance(max_iter, bool)
        or not isinstance(max_iter, numbers.Integral)
        or not (max_iter == -1 or max_iter > 0)
    ):
        raise ValueError(f"max_iter must be a positive integer or -1 (no limit), got {max_iter!r}")


class RBFOneClassSVM(BaseEstimator):
    """One-class SVM with an RBF kernel and the paper's kernel width.

    Fits :class:`sklearn.svm.OneClassSVM` (``kernel="rbf"``) on L2-normalised features with
    ``gamma = gamma_scale / (d * Var(X_fit))``, the variance taken over all entries of the
    normalised fit features (10x scikit-learn's ``gamma="scale"``). The normality score is
    scikit-learn's ``score_samples``, ``sum_i alpha_i k(x_i, x)`` (paper Appendix A.1 without
    the constant ``rho``), exactly what the released code negates for its AUC.

    Parameters
    ----------
    nu : float, default=0.5
        Upper bound on the fraction of training errors (scikit-learn's default).
    gamma : float or None, default=None
        Kernel parameter of ``exp(-gamma ||x - y||^2)``. None derives it from the fit features
        as above.
    gamma_scale : float, default=:data:`~pipeline_lib.registry.GAMMA_SCALE`
        Multiplier in ``gamma = gamma_scale / (d * Var(X_fit))``; ignored when ``gamma`` is
        given.
    normalize : bool, default=True
        L2-normalise every row (fit and score) before anything else, as in the paper.
    tol : float, default=1e-3
        Stopping tolerance of libsvm.
    cache_size : float, default=200
        Kernel cache in MB.
    max_iter : int, default=-1
        Iteration limit of libsvm, -1 for none.

    Attributes
    ----------
    gamma_ : float
        The kernel parameter used.
    svm_ : sklearn.svm.OneClassSVM
        The fitted SVM (on the normalised features when ``normalize``).
    n_features_in_ : int
        Number of feature columns seen in ``fit``.
    """

    def __init__(
        self,
        *,
        nu: float = _RBF["nu"],
        gamma: float | None = _RBF["gamma"],
        gamma_scale: float = _RBF["gamma_scale"],
        normalize: bool = _RBF["normalize"],
        tol: float = _RBF["tol"],
        cache_size: float = _RBF["cache_size"],
        max_iter: int = _RBF["max_iter"],
    ) -> None:
        self.nu = nu
        self.gamma = gamma
        self.gamma_scale = gamma_scale
        self.normalize = normalize
        self.tol = tol
        self.cache_size = cache_size
        self.max_iter = max_iter

    def _check_params(self) -> None:
        """Raise ``ValueError`` naming the first invalid hyper-parameter."""
        _check_svm_params(self.nu, self.tol, self.cache_size, self.max_iter)
        check_gamma(self.gamma, self.gamma_scale)
        check_bool("normalize", self.normalize)

    def fit(self, X: Any, y: Any = None) -> RBFOneClassSVM:
        """Fit the SVM on inlier features.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inlier features; finite.
        y : None
            Ignored.

        Returns
        -------
        self : RBFOneClassSVM
            The fitted detector.

        Raises
        ------
        ValueError
            If a hyper-parameter is invalid, ``X`` is not a finite 2-D array, or ``gamma`` is
            None and ``X`` has zero variance.
        """
        self._check_params()
        X = validate_features(self, X, reset=True)
        X = maybe_normalize(X, self.normalize)
        self.gamma_ = fitted_gamma(self.gamma, X, gamma_scale=self.gamma_scale)
        self.svm_ = OneClassSVM(
            kernel="rbf",
            nu=self.nu,
            gamma=self.gamma_,
            tol=self.tol,
            cache_size=self.cache_size,
            max_iter=self.max_iter,
        ).fit(X)
        return self

    def score_samples(self, X: Any) -> np.ndarray:
        """Normality scores; higher = more normal.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features to score.

        Returns
        -------
        scores : ndarray of shape (n_samples,)
            ``sum_i alpha_i exp(-gamma_ ||x_i - x||^2)`` over the support vectors.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before ``fit``.
        ValueError
            If ``X`` is not finite, not 2-D or has a different number of columns.
        """
        check_is_fitted(self, "svm_")
        X = validate_features(self, X, reset=False)
        return np.asarray(self.svm_.score_samples(maybe_normalize(X, self.normalize)), np.float64)


class LinearOneClassSVM(BaseEstimator):
    """One-class SVM with a linear kernel, on raw features by default.

    Fits :class:`sklearn.svm.OneClassSVM` (``kernel="linear"``, default ``nu``). As in the
    released code (``OneClassSVM(kernel='linear').fit(feats_tr)`` on un-normalised features)
    the rows are NOT L2-normalised by default; that is what reproduces the paper's ~50 AUC for
    random weights. The normality score is ``sum_i alpha_i <x_i, x>`` (scikit-learn's
    ``score_samples``).

    Parameters
    ----------
    nu : float, default=0.5
        Upper bound on the fraction of training errors.
    normalize : bool, default=False
        L2-normalise every row (fit and score) first.
    tol : float, default=1e-3
        Stopping tolerance of libsvm.
    cache_size : float, default=200
        Kernel cache in MB.
    max_iter : int, default=-1
        Iteration limit of libsvm, -1 for none.

    Attributes
    ----------
    svm_ : sklearn.svm.OneClassSVM
        The fitted SVM.
    n_features_in_ : int
        Number of feature columns seen in ``fit``.
    """

    def __init__(
        self,
        *,
        nu: float = _LINEAR["nu"],
        normalize: bool = _LINEAR["normalize"],
        tol: float = _LINEAR["tol"],
        cache_size: float = _LINEAR["cache_size"],
        max_iter: int = _LINEAR["max_iter"],
    ) -> None:
        self.nu = nu
        self.normalize = normalize
        self.tol = tol
        self.cache_size = cache_size
        self.max_iter = max_iter

    def _check_params(self) -> None:
        """Raise ``ValueError`` naming the first invalid hyper-parameter."""
        _check_svm_params(self.nu, self.tol, self.cache_size, self.max_iter)
        check_bool("normalize", self.normalize)

    def fit(self, X: Any, y: Any = None) -> LinearOneClassSVM:
        """Fit the SVM on inlier features.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inlier features; finite.
        y : None
            Ignored.

        Returns
        -------
        self : LinearOneClassSVM
            The fitted detector.

        Raises
        ------
        ValueError
            If a hyper-parameter is invalid or ``X`` is not a finite 2-D array.
        """
        self._check_params()
        X = validate_features(self, X, reset=True)
        self.svm_ = OneClassSVM(
            kernel="linear",
            nu=self.nu,
            tol=self.tol,
            cache_size=self.cache_size,
            max_iter=self.max_iter,
        ).fit(maybe_normalize(X, self.normalize))
        return self

    def score_samples(self, X: Any) -> np.ndarray:
        """Normality scores; higher = more normal.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features to score.

        Returns
        -------
        scores : ndarray of shape (n_samples,)
            ``sum_i alpha_i <x_i, x>`` over the support vectors.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before ``fit``.
        ValueError
            If ``X`` is not finite, not 2-D or has a different number of columns.
        """
        check_is_fitted(self, "svm_")
        X = validate_features(self, X, reset=False)
        return np.asarray(self.svm_.score_samples(maybe_normalize(X, self.normalize)), np.float64)
