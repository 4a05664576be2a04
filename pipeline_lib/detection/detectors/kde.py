"""Kernel density score with an RBF kernel, computed in blocks with PyTorch.

Paper, Appendix A.1, ``KDE_gamma(x) = (1/gamma) log sum_y exp(-gamma ||x - y||^2)``, with y
over the (L2-normalised) fit features and gamma = GAMMA_SCALE / (d * Var(X_fit)),
GAMMA_SCALE = 10 (:data:`pipeline_lib.registry.GAMMA_SCALE`) (Sec. 3.2 and the
appendix "Details of Experimental Setting").
"""

from __future__ import annotations

import numpy as np
import torch

from pipeline_lib.detection.detectors.base import (
    TorchDetector,
    check_bool,
    check_gamma,
    fitted_gamma,
    maybe_normalize,
)
from pipeline_lib.detection.detectors.kernels import KDEState, kde_score, kde_state
from pipeline_lib.registry import DETECTOR_DEFAULTS

# Defaults come from the registry, where the config check reads them too (one statement of
# each value; tests/detectors/test_registry.py checks that the two agree).
_DEFAULTS = DETECTOR_DEFAULTS["kde"]


class KernelDensityScore(TorchDetector):
    """Kernel density normality score (paper Appendix A.1), exact, blocked, in PyTorch.

    ``score(x) = (1/gamma) * log sum_y exp(-gamma ||x - y||^2)`` with ``y`` over the fit
    features. Up to the additive constant ``(log N + (d/2) log(pi/gamma)) / gamma`` and the
    factor ``1/gamma`` this is the log of a Gaussian KDE with bandwidth
    ``h = 1/sqrt(2 gamma)``, i.e. ``sklearn.neighbors.KernelDensity(bandwidth=h)``:
    ``score = (sklearn_log_density + log N + (d/2) log(2 pi h^2)) / gamma``.

    Released code: ``util/train.py`` computes ``-logsumexp(2 gamma <x, y>) / gamma`` on
    normalised features, which for unit vectors differs from this score only by the constant
    ``-2`` (``||x - y||^2 = 2 - 2 <x, y>``), so the ranking and the AUC are identical.

    Computation: :func:`~pipeline_lib.detection.detectors.kernels.kde_score`, the kernel the
    explanations and the exported graph also run: squared distances as
    ``||x||^2 + ||y||^2 - 2 x.y`` (matrix products, clamped at 0) and ``torch.logsumexp``,
    chunked over test rows and over fit rows (streaming log-sum-exp). Both feature sets are
    first centred on the fit mean, which leaves distances unchanged but shrinks the norms,
    and so the float32 cancellation error.

    Memory bound: the fit features (``n_fit * d`` values) live on ``device``, plus per block
    one ``(chunk_size, d)`` test slice and about three ``(chunk_size, chunk_size)``
    temporaries: with ``chunk_size=2048`` and float32 that is under 64 MiB beyond the fit
    features, whatever the number of test rows.

    Accuracy: with ``dtype="float32"`` each squared distance carries an absolute rounding
    error of about ``1e-7 * (||x - m||^2 + ||y - m||^2)`` (``m`` the fit mean), so the score
    is exact to about ``1e-6`` for L2-normalised features; ``dtype="float64"`` gives ~1e-14
    at about twice the CPU time.

    Parameters
    ----------
    gamma : float or None, default=None
        Kernel parameter. None derives ``gamma_scale / (d * Var(X_fit))`` from the
        (normalised) fit features, Var over all entries.
    gamma_scale : float, default=:data:`~pipeline_lib.registry.GAMMA_SCALE`
        Multiplier of the scikit-learn "scale" gamma; ignored when ``gamma`` is given.
    normalize : bool, default=True
        L2-normalise every row (fit and score) before anything else.
    chunk_size : int, default=2048
        Block size over test rows and over fit rows (see the memory bound above).
    dtype : {"float32", "float64"}, default="float32"
        Compute precision.
    device : str, default="auto"
        Torch device; "auto" is CUDA when available, else CPU. Resolved at scoring time, so a
        saved detector can be scored on another machine.

    Attributes
    ----------
    gamma_ : float
        The kernel parameter used.
    fit_features_ : ndarray of shape (n_fit, n_features)
        The (normalised) fit features, the reference set ``y`` of the sum.
    center_ : ndarray of shape (n_features,)
        Mean of ``fit_features_`` (float64), subtracted before computing distances.
    n_features_in_ : int
        Number of feature columns seen in ``fit``.
    """

    def __init__(
        self,
        *,
        gamma: float | None = _DEFAULTS["gamma"],
        gamma_scale: float = _DEFAULTS["gamma_scale"],
        normalize: bool = _DEFAULTS["normalize"],
        chunk_size: int = _DEFAULTS["chunk_size"],
        dtype: str = _DEFAULTS["dtype"],
        device: str = _DEFAULTS["device"],
    ) -> None:
        self.gamma = gamma
        self.gamma_scale = gamma_scale
        self.normalize = normalize
        self.chunk_size = chunk_size
        self.dtype = dtype
        self.device = device

    _fitted_attribute = "fit_features_"
    _kernel = staticmethod(kde_score)

    def _check_params(self) -> None:
        """Raise ``ValueError`` naming the first invalid hyper-parameter."""
        check_gamma(self.gamma, self.gamma_scale)
        check_bool("normalize", self.normalize)
        super()._check_params()

    def _fit(self, X: np.ndarray) -> None:
        """Store the (normalised) fit features and derive gamma (ValueError when ``gamma`` is
        None and ``X`` has zero variance)."""
        X = maybe_normalize(X, self.normalize)
        self.gamma_ = fitted_gamma(self.gamma, X, gamma_scale=self.gamma_scale)
        self.fit_features_ = np.array(X, copy=True)
        self.center_ = X.mean(axis=0, dtype=np.float64)

    def _kernel_state(self, *, dtype: torch.dtype, device: torch.device) -> KDEState:
        return kde_state(self.fit_features_, self.center_, self.gamma_, dtype=dtype, device=device)
