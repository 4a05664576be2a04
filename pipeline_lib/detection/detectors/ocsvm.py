"""One-class SVMs: RBF kernel on L2-normalised features and linear kernel on raw features.

Paper, Appendix A.1 ("Formulations of One-Class Classifiers") and Sec. 3.2; released code
``deep_representation_one_class/util/train.py`` (``BaseTrain.eval_embed``).

Both fit with libsvm (:class:`sklearn.svm.OneClassSVM`). The RBF detector scores with
:func:`pipeline_lib.detection.detectors.kernels.rbf_expansion` (blocked matrix products in
PyTorch, the kernel the exported graph also runs) instead of libsvm's per-row loop:
at the paper's sizes (5,000 fit x 10,000 test x 512-d, 5,000 support vectors) libsvm spends
10-14 CPU-seconds in one single-threaded loop per (test row, support vector) pair, while the
same sum is one 5e10-flop float64 GEMM (~0.6 s at the ~85 GFLOP/s two cores give here) plus
three elementwise passes, with the same scores to ~1e-11 relative
(``benchmarks/bench_ocsvm.py``). That GEMM bounds the float64 speed-up at about 15-17x on two
idle cores; ``dtype="float32"`` halves it but is not identical (~1e-6 relative).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch
from sklearn.svm import OneClassSVM
from sklearn.utils.validation import check_is_fitted

from pipeline_lib.detection.detectors.base import (
    Detector,
    TorchDetector,
    check_bool,
    check_gamma,
    check_positive,
    fitted_gamma,
    maybe_normalize,
)
from pipeline_lib.detection.detectors.kernels import (
    RBFExpansionState,
    rbf_expansion,
    rbf_expansion_state,
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


def _libsvm(detector: Detector, kernel: str, **kernel_params: float) -> OneClassSVM:
    """An unfitted libsvm one-class SVM with the detector's ``nu``, ``tol``, ``cache_size``
    and ``max_iter``."""
    return OneClassSVM(
        kernel=kernel,
        nu=detector.nu,
        tol=detector.tol,
        cache_size=detector.cache_size,
        max_iter=detector.max_iter,
        **kernel_params,
    )


def rbf_kernel_sum(
    x: torch.Tensor,
    sv: torch.Tensor,
    coef: torch.Tensor,
    *,
    gamma: float,
    chunk_size: int,
) -> torch.Tensor:
    """``sum_j coef_j exp(-gamma ||x_i - sv_j||^2)`` for every row of ``x``, in bounded memory.

    :func:`~pipeline_lib.detection.detectors.kernels.rbf_expansion` on tensors, without
    centring (callers should centre ``x`` and ``sv`` on a common point first, see its Notes).

    Parameters
    ----------
    x : Tensor of shape (n_x, d)
        Query rows (any device; moved block by block to ``sv.device`` and ``sv.dtype``).
    sv : Tensor of shape (n_sv, d)
        Support vectors, on the compute device, in the compute dtype.
    coef : Tensor of shape (n_sv,)
        Dual coefficients ``alpha_j``.
    gamma : float
        Kernel parameter, > 0.
    chunk_size : int
        Block side over ``x`` rows and over support vectors.

    Returns
    -------
    sums : Tensor of shape (n_x,), float64
        On ``sv.device``.
    """
    state = rbf_expansion_state(
        sv.detach().cpu().double().numpy(),
        coef.detach().cpu().double().numpy(),
        gamma,
        center=np.zeros(sv.shape[1]),
        dtype=sv.dtype,
        device=sv.device,
    )
    return rbf_expansion(x, state, chunk_size=chunk_size)


class RBFOneClassSVM(TorchDetector):
    """One-class SVM with an RBF kernel and the paper's kernel width.

    Fits :class:`sklearn.svm.OneClassSVM` (``kernel="rbf"``, libsvm) on L2-normalised features
    with ``gamma = gamma_scale / (d * Var(X_fit))``, the variance taken over all entries of the
    normalised fit features (10x scikit-learn's ``gamma="scale"``). The normality score is
    scikit-learn's ``score_samples``, ``sum_i alpha_i exp(-gamma ||sv_i - x||^2)`` over the
    support vectors ``sv_i`` with dual coefficients ``alpha_i = svm_.dual_coef_[0, i]`` (paper
    Appendix A.1 without the constant ``rho``), exactly what the released code negates for its
    AUC. :meth:`decision_function` is that minus ``rho = svm_.offset_`` (scikit-learn's
    ``decision_function``; ``svm_.intercept_ = -rho``).

    Scoring does not call libsvm's per-row loop:
    :func:`~pipeline_lib.detection.detectors.kernels.rbf_expansion` computes the same sum
    as blocked matrix products in PyTorch, 9-15x faster (wall) than libsvm on the shared
    two-core CPU at the paper's sizes, float32 ~18x (``benchmarks/bench_ocsvm.py``), and on a
    GPU when ``device`` names one.

    Accuracy: with the default ``dtype="float64"`` the scores equal scikit-learn's
    ``score_samples`` to 1e-10 relative (tested; typically ~1e-13). Why: the ``alpha_i`` are
    non-negative, so the sum has no cancellation and its order (blocks vs libsvm's sequential
    loop) changes it by at most ``n_sv * eps ~ 1e-12`` relative; each kernel value's relative
    error is ``gamma`` times the absolute error of the squared distance, about
    ``eps * (||x - m||^2 + ||sv - m||^2)`` from the norm expansion after centring both sides on
    the support vectors' mean ``m`` (``<= 4 eps`` for unit rows), i.e. ~1e-14 at the paper's
    ``gamma ~ 10``. Chunking only splits the sum and the matrix product into blocks, so it keeps
    these bounds. ``decision_function`` subtracts ``rho`` after the sum, so its error is
    absolute: 1e-10 of ``max(|score|, rho)``. ``dtype="float32"`` is about twice as fast but
    carries ~1e-7 * gamma relative error per kernel value (~1e-6 on the score): it ranks the
    same for AUC purposes but is NOT identical to scikit-learn.

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
    chunk_size : int, default=4096
        Block side over test rows and over support vectors when scoring; the largest
        temporary is one ``(chunk_size, chunk_size)`` matrix (128 MiB in float64; 2048 gives
        32 MiB at ~10 % more CPU time), whatever the number of test rows or support vectors.
    dtype : {"float64", "float32"}, default="float64"
        Scoring precision (see Accuracy above).
    device : str, default="cpu"
        Torch device for scoring: "cpu", "cuda", "cuda:N", or "auto" (CUDA when available).
        The fit is always libsvm on the CPU. Resolved at scoring time, so a saved detector
        can be scored on another machine; the pipeline passes the job's device
        (:func:`pipeline_lib.detection.runner.run_detection`).

    Attributes
    ----------
    gamma_ : float
        The kernel parameter used.
    svm_ : sklearn.svm.OneClassSVM
        The fitted SVM (on the normalised features when ``normalize``); its
        ``support_vectors_``, ``dual_coef_`` and ``offset_`` define the scores.
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
        chunk_size: int = _RBF["chunk_size"],
        dtype: str = _RBF["dtype"],
        device: str = _RBF["device"],
    ) -> None:
        self.nu = nu
        self.gamma = gamma
        self.gamma_scale = gamma_scale
        self.normalize = normalize
        self.tol = tol
        self.cache_size = cache_size
        self.max_iter = max_iter
        self.chunk_size = chunk_size
        self.dtype = dtype
        self.device = device

    _fitted_attribute = "svm_"
    _kernel = staticmethod(rbf_expansion)

    def _check_params(self) -> None:
        """Raise ``ValueError`` naming the first invalid hyper-parameter."""
        _check_svm_params(self.nu, self.tol, self.cache_size, self.max_iter)
        check_gamma(self.gamma, self.gamma_scale)
        check_bool("normalize", self.normalize)
        super()._check_params()

    def _fit(self, X: np.ndarray) -> None:
        """Fit the SVM with libsvm, on the CPU (ValueError when ``gamma`` is None and ``X``
        has zero variance)."""
        X = maybe_normalize(X, self.normalize)
        self.gamma_ = fitted_gamma(self.gamma, X, gamma_scale=self.gamma_scale)
        self.svm_ = _libsvm(self, "rbf", gamma=self.gamma_).fit(X)

    def _kernel_state(self, *, dtype: torch.dtype, device: torch.device) -> RBFExpansionState:
        # libsvm works on float64 copies; so does the state (centred in float64).
        return rbf_expansion_state(
            self.svm_.support_vectors_,
            self.svm_.dual_coef_[0],
            self.gamma_,
            dtype=dtype,
            device=device,
        )

    def decision_function(self, X: Any) -> np.ndarray:
        """scikit-learn's ``decision_function``: :meth:`score_samples` minus ``rho``.

        Positive for points inside the learned support (predicted inliers), negative outside.
        ``X`` as for :meth:`score_samples`, which this calls: the same ranking; the pipeline
        uses the latter.

        Returns
        -------
        decision : ndarray of shape (n_samples,), float64
            ``score_samples(X) - svm_.offset_``.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If called before ``fit``.
        ValueError
            As :meth:`score_samples`.
        """
        check_is_fitted(self, "svm_")
        return self.score_samples(X) - float(self.svm_.offset_[0])


class LinearOneClassSVM(Detector):
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

    _fitted_attribute = "svm_"

    def _check_params(self) -> None:
        """Raise ``ValueError`` naming the first invalid hyper-parameter."""
        _check_svm_params(self.nu, self.tol, self.cache_size, self.max_iter)
        check_bool("normalize", self.normalize)

    def _fit(self, X: np.ndarray) -> None:
        """Fit the SVM with libsvm."""
        self.svm_ = _libsvm(self, "linear").fit(maybe_normalize(X, self.normalize))

    def _score(self, X: np.ndarray) -> np.ndarray:
        """``sum_i alpha_i <x_i, x>`` over the support vectors (scikit-learn's score)."""
        return np.asarray(self.svm_.score_samples(maybe_normalize(X, self.normalize)), np.float64)
