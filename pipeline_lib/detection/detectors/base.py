"""What the detectors share: the fit / score_samples template, input and parameter checks,
the L2 normalisation and the RBF gamma.

:class:`Detector` holds the scikit-learn plumbing (``_check_params``, validation, the fitted
check) once, around two hooks, ``_fit`` and ``_score``; :class:`TorchDetector` adds the
blocked torch scoring of the detectors whose score is a kernel of
:mod:`pipeline_lib.detection.detectors.kernels`. Each detector keeps its own ``__init__``
(explicit keyword hyper-parameters, as ``get_params`` and ``clone`` need).
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Self

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from pipeline_lib.detection.detectors.kernels import NORM_EPS_SQ
from pipeline_lib.registry import GAMMA_SCALE


def validate_features(estimator: BaseEstimator, X: Any, *, reset: bool) -> np.ndarray:
    """Validate a feature matrix for ``fit`` (``reset=True``) or scoring (``reset=False``).

    Parameters
    ----------
    estimator : BaseEstimator
        The detector; ``reset=True`` records ``n_features_in_`` on it, ``reset=False``
        checks ``X`` against the recorded value.
    X : array-like of shape (n_samples, n_features)
        Features. Must be 2-D, numeric and finite.
    reset : bool
        True in ``fit``, False in ``score_samples``.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64 or float32
        The validated features (float32 input is kept as float32).

    Raises
    ------
    ValueError
        If ``X`` is not 2-D, is empty, contains NaN or infinity, or (when ``reset=False``) its
        number of columns differs from the fitted one.
    """
    return validate_data(
        estimator,
        X,
        reset=reset,
        dtype=[np.float64, np.float32],
        ensure_2d=True,
        ensure_all_finite=True,
        ensure_min_samples=1,
    )


def l2_normalize(X: np.ndarray) -> np.ndarray:
    """Scale every row to unit Euclidean norm.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Features.

    Returns
    -------
    X_normalized : ndarray of shape (n_samples, n_features)
        ``X / max(||x||, 1e-6)`` row-wise, in the dtype of ``X``. All-zero rows stay zero.
    """
    sq_norm = np.einsum("ij,ij->i", X, X)  # (n_samples,), in the dtype of X
    scale = 1.0 / np.sqrt(np.maximum(sq_norm, X.dtype.type(NORM_EPS_SQ)))
    return X * scale[:, None]


def maybe_normalize(X: np.ndarray, normalize: bool) -> np.ndarray:
    """Return :func:`l2_normalize` of ``X`` when ``normalize`` is True, else ``X`` itself."""
    return l2_normalize(X) if normalize else X


def rbf_gamma(X: np.ndarray, *, gamma_scale: float = GAMMA_SCALE) -> float:
    """The paper's RBF kernel parameter, ``gamma = gamma_scale / (d * Var(X))``.

    ``Var`` is the variance of all entries of ``X`` (not per column), ``d`` the number of
    columns. ``gamma_scale=1`` is scikit-learn's ``gamma="scale"``; the paper uses 10,
    :data:`pipeline_lib.registry.GAMMA_SCALE` ("we reduce [the kernel width] by 10 times
    than default", Sec. 3.2; appendix "Details of Experimental Setting"; the released code).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        The fit features, already L2-normalised if the detector normalises.
    gamma_scale : float, default=:data:`~pipeline_lib.registry.GAMMA_SCALE`
        Multiplier of the scikit-learn default.

    Returns
    -------
    gamma : float
        The kernel parameter, > 0.

    Raises
    ------
    ValueError
        If all entries of ``X`` are equal (zero variance), so no gamma can be derived.
    """
    variance = float(np.var(X, dtype=np.float64))
    # ptp catches all-equal entries whose float variance is a rounding residue (~1e-33).
    if not variance > 0.0 or np.ptp(X) == 0:
        raise ValueError(
            f"all {X.size} entries of the fit features (n_samples={X.shape[0]}, "
            f"n_features={X.shape[1]}) are equal, Var(X) = {variance:.3g}; the RBF gamma = "
            "gamma_scale / (d * Var(X)) needs a positive variance. Pass gamma= explicitly."
        )
    return float(gamma_scale) / (X.shape[1] * variance)


def fitted_gamma(gamma: float | None, X: np.ndarray, *, gamma_scale: float) -> float:
    """The RBF gamma a detector fits with: the explicit ``gamma``, else :func:`rbf_gamma`."""
    return float(gamma) if gamma is not None else rbf_gamma(X, gamma_scale=gamma_scale)


def check_positive(name: str, value: Any, *, integer: bool = False) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``value`` is a positive (integer) number.

    Parameters
    ----------
    name : str
        Parameter name used in the message.
    value : object
        The value to check.
    integer : bool, default=False
        Require an integer (``bool`` is rejected).

    Raises
    ------
    ValueError
        If ``value`` is not a finite number > 0 (an integer >= 1 when ``integer=True``).
    """
    kind = numbers.Integral if integer else numbers.Real
    if (
        isinstance(value, bool)
        or not isinstance(value, kind)
        or not np.isfinite(value)
        or not value > 0
    ):
        what = "a positive integer" if integer else "a positive finite number"
        raise ValueError(f"{name} must be {what}, got {value!r}")


def check_bool(name: str, value: Any) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``value`` is a bool."""
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be True or False, got {value!r}")


def check_gamma(gamma: Any, gamma_scale: Any) -> None:
    """Validate the ``gamma`` / ``gamma_scale`` pair of an RBF detector.

    Raises
    ------
    ValueError
        If ``gamma`` is neither None nor a positive finite number, or ``gamma_scale`` is not
        a positive finite number.
    """
    if gamma is not None:
        check_positive("gamma", gamma)
    check_positive("gamma_scale", gamma_scale)


def resolve_device(device: str | torch.device) -> torch.device:
    """Turn a ``device`` parameter into a :class:`torch.device`.

    Parameters
    ----------
    device : str or torch.device
        ``"auto"`` (CUDA when available, else CPU) or anything :class:`torch.device` accepts.

    Returns
    -------
    device : torch.device

    Raises
    ------
    ValueError
        If ``device`` is not a valid device string, or names CUDA while none is available.
    """
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must be 'auto' or a torch device, got {device!r}") from err
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but CUDA is not available; use 'auto' or 'cpu'")
    return resolved


_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def resolve_dtype(dtype: str) -> torch.dtype:
    """Map the ``dtype`` parameter (``"float32"`` or ``"float64"``) to a torch dtype.

    Raises
    ------
    ValueError
        If ``dtype`` is not one of the two names.
    """
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
    return _DTYPES[dtype]


@contextlib.contextmanager
def full_precision_matmul() -> Iterator[None]:
    """Disable TF32 / bf16 float32 matmuls for the duration (another module may enable them).

    KDE squared distances come from ``||x||^2 + ||y||^2 - 2 x.y``; a reduced-precision product
    (TF32 keeps 10 mantissa bits) would swamp the small distances that dominate the sum.
    """
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


class Detector(BaseEstimator):
    """Template of the detectors: validated ``fit`` and ``score_samples`` around two hooks.

    A subclass defines ``__init__`` (keyword hyper-parameters only), ``_check_params``,
    ``_fit`` (sets the fitted attributes from validated features) and ``_score``, and names
    in ``_fitted_attribute`` the attribute ``_fit`` sets, which marks the detector fitted.
    """

    #: Attribute set by ``_fit``; ``score_samples`` raises ``NotFittedError`` without it.
    _fitted_attribute: ClassVar[str]

    def _check_params(self) -> None:
        """Raise ``ValueError`` naming the first invalid hyper-parameter."""
        raise NotImplementedError

    def _check_scoring(self) -> None:
        """Checks of a fitted detector before it scores; none by default."""

    def _fit(self, X: np.ndarray) -> None:
        """Set the fitted attributes from validated features ``X``."""
        raise NotImplementedError

    def _score(self, X: np.ndarray) -> np.ndarray:
        """Normality scores ``(n_samples,)`` float64 of validated features ``X``."""
        raise NotImplementedError

    def fit(self, X: Any, y: Any = None) -> Self:
        """Fit the detector on inlier features.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inlier features; finite.
        y : None
            Ignored.

        Returns
        -------
        self
            The fitted detector.

        Raises
        ------
        ValueError
            If a hyper-parameter is invalid, ``X`` is not a finite 2-D array, or the
            detector cannot be fitted on it (the class documents when; the message says why).
        """
        self._check_params()
        self._fit(validate_features(self, X, reset=True))
        return self

    def score_samples(self, X: Any) -> np.ndarray:
        """Normality scores; higher = more normal.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features to score.

        Returns
        -------
        scores : ndarray of shape (n_samples,), float64
            The detector's score (its class docstring gives the formula).

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before ``fit``.
        ValueError
            If ``X`` is not finite, not 2-D or has a different number of columns, or a
            hyper-parameter read at scoring time was set to an invalid value after ``fit``.
        """
        check_is_fitted(self, self._fitted_attribute)
        self._check_scoring()
        return self._score(validate_features(self, X, reset=False))


class TorchDetector(Detector):
    """A detector scored by one kernel of :mod:`~pipeline_lib.detection.detectors.kernels`.

    Adds the ``chunk_size``, ``dtype`` and ``device`` hyper-parameters (checked after the
    subclass's own, and again at scoring time: the device is resolved then, so a saved
    detector can be scored on another machine) and the scoring: the kernel's state on the
    device, the query rows walked ``chunk_size`` at a time, in inference mode at full
    float32 matmul precision. A subclass names the kernel in ``_kernel`` and builds its
    state in ``_kernel_state``.
    """

    #: ``kernel(x, state, *, chunk_size)``, one of the kernels module's ``*_score`` functions.
    _kernel: ClassVar[Callable[..., torch.Tensor]]

    chunk_size: int
    dtype: str
    device: str | torch.device

    def _check_params(self) -> None:
        """Raise ``ValueError`` if ``chunk_size``, ``dtype`` or ``device`` is invalid."""
        check_positive("chunk_size", self.chunk_size, integer=True)
        resolve_dtype(self.dtype)
        resolve_device(self.device)

    def _check_scoring(self) -> None:
        """Check the hyper-parameters again: ``device``, ``dtype`` and ``chunk_size`` are
        read only now."""
        self._check_params()

    def _kernel_state(self, *, dtype: torch.dtype, device: torch.device) -> tuple:
        """The kernel's state from the fitted attributes, on ``device`` in ``dtype``."""
        raise NotImplementedError

    def _query_rows(self, X: np.ndarray) -> np.ndarray:
        """The rows the kernel scores: ``X`` normalised when the detector normalises, float64."""
        return np.asarray(maybe_normalize(X, self.normalize), dtype=np.float64)

    def _score(self, X: np.ndarray) -> np.ndarray:
        state = self._kernel_state(
            dtype=resolve_dtype(self.dtype), device=resolve_device(self.device)
        )
        x = torch.from_numpy(self._query_rows(X))
        with torch.inference_mode(), full_precision_matmul():
            scores = self._kernel(x, state, chunk_size=self.chunk_size)
        return scores.cpu().numpy()
