"""The score of every torch-scored detector, written once, as functions of its fitted state.

One kernel per detector, called by the detector's ``score_samples`` (block by block, to bound
memory), by the explanations (:mod:`pipeline_lib.explain`, differentiated) and by
the exported graphs (:mod:`pipeline_lib.deploy.export`, traced into TorchScript and ONNX):
the three paths agree by construction, not by three copies kept in step.

=====================  ================================================================
kernel                 score of a (normalised, where the detector normalises) feature ``x``
=====================  ================================================================
:func:`kde_score`      ``(1/g) log sum_j exp(-g ||x - y_j||^2)`` over the fit rows ``y_j``
:func:`rbf_expansion`  ``sum_i a_i exp(-g ||x - s_i||^2)`` over the support vectors
:func:`gaussian_score` ``log N(x; mu, Sigma)`` through the precision's Cholesky factor
:func:`knn_score`      mean of the ``k`` largest ``<x, y_j>`` over the fit rows
=====================  ================================================================

Each kernel takes the features and its state, a named tuple of tensors built by the matching
``*_state`` function from the fitted detector's arrays (the exported graphs hold those tensors
as buffers), and returns float64 scores ``(n,)``. With ``chunk_size=None``
a kernel is one block of tensor algebra without Python loops over the batch, so tracing
keeps the batch dimension free; with an integer ``chunk_size`` it walks ``chunk_size`` query
rows times ``chunk_size`` reference rows at a time, so no ``(n, n_ref)`` matrix is formed.
Both walks run the same block function. Query rows may live on another device than the
state; each block is moved to the state's device and dtype (after centring in float64).

The L2 normalisation of the features is the detectors' preprocessing (NumPy, shared with
``fit``); :func:`normalize_rows` is its torch twin for the graph and explanation paths.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

#: Squared-norm floor of the L2 normalisation, as ``tf.nn.l2_normalize`` in the released code
#: (epsilon on the squared norm): an all-zero row stays all-zero instead of becoming NaN.
NORM_EPS_SQ = 1e-12

__all__ = [
    "GaussianState",
    "KDEState",
    "KDE_BLOCK_BYTES",
    "KNNState",
    "NORM_EPS_SQ",
    "RBFExpansionState",
    "gaussian_score",
    "gaussian_state",
    "kde_log_kernel_sum",
    "kde_score",
    "kde_state",
    "knn_score",
    "knn_state",
    "knn_top_k",
    "normalize_rows",
    "rbf_expansion",
    "rbf_expansion_state",
    "rbf_kernel_block",
]


def _tensor(array: np.ndarray, *, dtype: torch.dtype, device: str | torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array)).to(device=device, dtype=dtype)


def normalize_rows(x: torch.Tensor) -> torch.Tensor:
    """Scale every row to unit norm, ``x / max(||x||, 1e-6)``; all-zero rows stay zero.

    The torch twin of the detectors' NumPy normalisation (same floor, that of
    ``tf.nn.l2_normalize``), traceable and differentiable.

    Parameters
    ----------
    x : Tensor of shape (n, d)

    Returns
    -------
    Tensor of shape (n, d), in the dtype of ``x``.
    """
    sq = (x * x).sum(dim=1, keepdim=True)
    return x * torch.rsqrt(torch.clamp(sq, min=NORM_EPS_SQ))


def _centred(x: torch.Tensor, center: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``x - center`` ``(b, d)`` in ``like``'s dtype and device, subtracted in float64 first
    (before any rounding to a float32 compute dtype, whose cancellation it avoids)."""
    return (x.to(device=like.device, dtype=torch.float64) - center).to(like.dtype)


# --------------------------------------------------------------------------------------- KDE
#: Most bytes of one (query rows, fit rows) block of the KDE's blocked walk. The block goes
#: through five passes (product, norms, clamp, scale, log-sum-exp); at 16 MiB it stays in
#: a CPU's last-level cache between them. A float64 block of 2048 x 2048 rows (32 MiB)
#: scored 1.2x slower on one thread of an AMD EPYC than 2048 x 1024; float32 blocks of
#: 2048 x 2048 are 16 MiB, so the float32 walk is the same as without this bound.
KDE_BLOCK_BYTES = 16 * 2**20


class KDEState(NamedTuple):
    """Fitted state of the KDE score (:class:`~pipeline_lib.detection.detectors.kde.
    KernelDensityScore`)."""

    #: ``(d,)`` float64: the fit rows' mean, subtracted from both sides (distances unchanged,
    #: smaller norms, smaller cancellation error).
    center: torch.Tensor
    #: ``(n_fit, d)`` in the compute dtype: the fit rows minus ``center``.
    ref: torch.Tensor
    #: ``(n_fit,)``: squared norms of ``ref`` rows.
    ref_sq: torch.Tensor
    #: The kernel parameter.
    gamma: float


def kde_state(
    fit_features: np.ndarray,
    center: np.ndarray,
    gamma: float,
    *,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> KDEState:
    """The KDE's state from its fitted arrays (``fit_features_``, ``center_``, ``gamma_``)."""
    center64 = np.asarray(center, np.float64)
    ref = _tensor(np.asarray(fit_features, np.float64) - center64, dtype=dtype, device=device)
    center_t = _tensor(center64, dtype=torch.float64, device=device)
    return KDEState(center_t, ref, ref.square().sum(dim=1), float(gamma))


def kde_log_kernel_sum(
    x: torch.Tensor, ref: torch.Tensor, ref_sq: torch.Tensor, gamma: float
) -> torch.Tensor:
    """One block of the KDE: ``log sum_j exp(-gamma ||x_i - ref_j||^2)`` for every row of ``x``.

    Squared distances as ``||ref||^2 - 2 x.ref + ||x||^2`` (one matrix product), clamped at 0
    against rounding; the in-place steps reuse the product's memory (autograd supports them).

    Parameters
    ----------
    x : Tensor of shape (b, d)
        Centred query rows, in ``ref``'s dtype and device.
    ref, ref_sq : Tensor of shape (c, d) and (c,)
        A block of the state's reference rows and their squared norms.
    gamma : float

    Returns
    -------
    Tensor of shape (b,), in ``ref``'s dtype.
    """
    x_sq = x.square().sum(dim=1, keepdim=True)  # (b, 1)
    d2 = torch.addmm(ref_sq[None, :], x, ref.T, beta=1.0, alpha=-2.0)  # (b, c)
    d2.add_(x_sq).clamp_(min=0.0).mul_(-gamma)
    return torch.logsumexp(d2, dim=1)


def kde_score(x: torch.Tensor, state: KDEState, *, chunk_size: int | None = None) -> torch.Tensor:
    """The KDE score ``(1/gamma) log sum_j exp(-gamma ||x_i - y_j||^2)`` (paper Appendix A.1).

    Parameters
    ----------
    x : Tensor of shape (n, d)
        Query rows (normalised when the detector normalises), any float dtype and device.
    state : KDEState
    chunk_size : int or None, default=None
        None: one block (the traced and differentiated form). Else ``chunk_size`` query rows
        by ``chunk_size`` reference rows at a time (fewer reference rows where a block would
        exceed :data:`KDE_BLOCK_BYTES`), the partial sums merged with ``logaddexp``
        (streaming log-sum-exp).

    Returns
    -------
    Tensor of shape (n,), float64, on the state's device.
    """
    center, ref, ref_sq, gamma = state
    if chunk_size is None:
        lse = kde_log_kernel_sum(_centred(x, center, ref), ref, ref_sq, gamma)
        return lse.to(torch.float64) / gamma
    out = torch.empty(x.shape[0], dtype=torch.float64, device=ref.device)
    rows = min(chunk_size, x.shape[0])
    ref_rows = max(1, min(chunk_size, KDE_BLOCK_BYTES // (max(rows, 1) * ref.element_size())))
    for start in range(0, x.shape[0], chunk_size):
        xb = _centred(x[start : start + chunk_size], center, ref)  # (b, d)
        acc = torch.full((xb.shape[0],), -torch.inf, dtype=ref.dtype, device=ref.device)
        for first in range(0, ref.shape[0], ref_rows):
            block = slice(first, first + ref_rows)
            acc = torch.logaddexp(acc, kde_log_kernel_sum(xb, ref[block], ref_sq[block], gamma))
        out[start : start + xb.shape[0]] = acc.to(torch.float64) / gamma
    return out


# ------------------------------------------------------------------------------ RBF OC-SVM
class RBFExpansionState(NamedTuple):
    """Fitted state of the RBF kernel expansion (:class:`~pipeline_lib.detection.detectors.
    ocsvm.RBFOneClassSVM`)."""

    #: ``(d,)`` float64: the support vectors' mean, subtracted from both sides.
    center: torch.Tensor
    #: ``(n_sv, d + 2)`` in the compute dtype: rows ``[s - m, 1, -gamma ||s - m||^2]``.
    sv_aug: torch.Tensor
    #: ``(n_sv,)``: the dual coefficients ``alpha_i``.
    coef: torch.Tensor
    #: The kernel parameter.
    gamma: float


def rbf_expansion_state(
    support_vectors: np.ndarray,
    dual_coef: np.ndarray,
    gamma: float,
    *,
    center: np.ndarray | None = None,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> RBFExpansionState:
    """The expansion's state from libsvm's ``support_vectors_`` and ``dual_coef_[0]``.

    ``center`` defaults to the support vectors' mean (see
    :class:`~pipeline_lib.detection.detectors.ocsvm.RBFOneClassSVM`, Accuracy); any point
    gives the same sum up to rounding.
    """
    sv64 = np.asarray(support_vectors, np.float64)
    center64 = sv64.mean(axis=0) if center is None else np.asarray(center, np.float64)
    sv = _tensor(sv64 - center64, dtype=dtype, device=device)
    n_sv, d = sv.shape
    sv_aug = torch.empty(n_sv, d + 2, dtype=dtype, device=sv.device)
    sv_aug[:, :d] = sv
    sv_aug[:, d] = 1.0
    torch.sum(sv.square(), dim=1, out=sv_aug[:, d + 1]).mul_(-float(gamma))
    coef = _tensor(np.asarray(dual_coef, np.float64), dtype=dtype, device=device)
    center_t = _tensor(center64, dtype=torch.float64, device=device)
    return RBFExpansionState(center_t, sv_aug, coef, float(gamma))


def _augmented_queries(x: torch.Tensor, gamma: float) -> torch.Tensor:
    """Rows ``[2 gamma x, -gamma ||x||^2, 1]`` ``(b, d + 2)``: with the state's ``sv_aug``
    one matrix product gives the exponent ``-gamma ||x - s||^2`` of a whole block."""
    sq = x.square().sum(dim=1, keepdim=True).mul(-gamma)  # (b, 1)
    return torch.cat([x.mul(2.0 * gamma), sq, torch.ones_like(sq)], dim=1)


def rbf_kernel_block(
    x_aug: torch.Tensor, sv_aug: torch.Tensor, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Kernel values ``exp(-gamma ||x_i - s_j||^2)`` ``(b, c)`` of one block.

    The exponent comes out of ONE matrix product of the augmented rows (folding the norms
    into the product saves two passes over every block, which matters on a shared CPU where
    each parallel pass also pays a thread hand-off); it is clamped at 0 (a rounding-positive
    exponent would give a kernel value above 1) and exponentiated in place. ``out``, a
    ``(b, c)`` buffer, lets the blocked walk reuse one allocation: a fresh 128 MiB tensor per
    block would be mapped and page-faulted anew each time (the CPU allocator does not cache
    large blocks).
    """
    if out is None:
        kernel = torch.mm(x_aug, sv_aug.T)
    else:
        kernel = torch.mm(x_aug, sv_aug.T, out=out)
    return kernel.clamp_(max=0.0).exp_()


def rbf_expansion(
    x: torch.Tensor, state: RBFExpansionState, *, chunk_size: int | None = None
) -> torch.Tensor:
    """The RBF decision sum ``sum_i alpha_i exp(-gamma ||x - s_i||^2)`` (without ``rho``).

    Parameters
    ----------
    x, state
        As for :func:`kde_score`, with an :class:`RBFExpansionState`.
    chunk_size : int or None, default=None
        None: one block. Else ``chunk_size`` query rows by ``chunk_size`` support vectors at
        a time; the largest temporary is one ``(chunk_size, chunk_size)`` matrix, reused.

    Returns
    -------
    Tensor of shape (n,), float64, on the state's device.

    Notes
    -----
    Accuracy: the absolute rounding error of ``gamma ||x - s||^2`` from the norm expansion is
    a few ``eps * gamma * (||x - m||^2 + ||s - m||^2)`` (plus ``sqrt(d) eps`` growth in the
    dot product), which is why both sides are centred on ``m = center``; each kernel value
    has that as its relative error, and the sum over non-negative ``alpha`` adds at most
    ``n_sv * eps`` relative.
    """
    center, sv_aug, coef, gamma = state
    if chunk_size is None:
        kernel = rbf_kernel_block(_augmented_queries(_centred(x, center, sv_aug), gamma), sv_aug)
        return torch.mv(kernel, coef).to(torch.float64)
    n_sv = sv_aug.shape[0]
    rows = min(chunk_size, x.shape[0])
    buffer = torch.empty(rows * min(chunk_size, n_sv), dtype=sv_aug.dtype, device=sv_aug.device)
    out = torch.zeros(x.shape[0], dtype=sv_aug.dtype, device=sv_aug.device)
    for start in range(0, x.shape[0], chunk_size):
        x_aug = _augmented_queries(_centred(x[start : start + chunk_size], center, sv_aug), gamma)
        b = x_aug.shape[0]
        acc = out[start : start + b]  # view: addmv_ accumulates into out
        for first in range(0, n_sv, chunk_size):
            block = slice(first, first + chunk_size)
            c = sv_aug[block].shape[0]
            kernel = rbf_kernel_block(x_aug, sv_aug[block], out=buffer[: b * c].view(b, c))
            acc.addmv_(kernel, coef[block])
    return out.to(torch.float64)


# -------------------------------------------------------------------------------------- GDE
class GaussianState(NamedTuple):
    """Fitted state of the Gaussian log-density (:class:`~pipeline_lib.detection.detectors.
    gde.GaussianDensity`), in float64."""

    #: ``(d, d)``: the Cholesky factor ``P`` of the precision, ``Sigma^-1 = P P^T``.
    chol: torch.Tensor
    #: ``(d,)``: ``mu P``.
    shift: torch.Tensor
    #: ``d log(2 pi)``.
    log_2pi_d: float
    #: ``log det P`` plus the log mixture weight (0 for one component).
    offset: float


def gaussian_state(
    mean: np.ndarray,
    precision_cholesky: np.ndarray,
    weight: float = 1.0,
    *,
    device: str | torch.device = "cpu",
) -> GaussianState:
    """The state from a one-component ``GaussianMixture``'s ``means_[0]``,
    ``precisions_cholesky_[0]`` and ``weights_[0]``."""
    chol = np.asarray(precision_cholesky, np.float64)
    mean64 = np.asarray(mean, np.float64)
    d = mean64.shape[0]
    offset = float(np.sum(np.log(np.diag(chol)))) + float(np.log(weight))
    return GaussianState(
        _tensor(chol, dtype=torch.float64, device=device),
        _tensor(mean64 @ chol, dtype=torch.float64, device=device),
        d * math.log(2 * math.pi),
        offset,
    )


def gaussian_score(x: torch.Tensor, state: GaussianState) -> torch.Tensor:
    """``log N(x; mu, Sigma) = -(d log 2 pi + ||x P - mu P||^2) / 2 + log det P`` (+ log weight).

    scikit-learn's ``GaussianMixture.score_samples`` for one full-covariance component, in
    its order of operations (the log-sum-exp over one component is the identity).

    Parameters
    ----------
    x : Tensor of shape (n, d)
        Query rows (normalised when the detector normalises), any float dtype.
    state : GaussianState

    Returns
    -------
    Tensor of shape (n,), float64, on the state's device.
    """
    chol, shift, log_2pi_d, offset = state
    y = torch.mm(x.to(device=chol.device, dtype=torch.float64), chol)  # (n, d)
    # In place on the product's memory: one (n, d) temporary instead of three.
    return -0.5 * (log_2pi_d + y.sub_(shift).square_().sum(dim=1)) + offset


# -------------------------------------------------------------------------------------- kNN
class KNNState(NamedTuple):
    """Fitted state of the cosine k-NN score (:class:`~pipeline_lib.detection.detectors.knn.
    KNNCosine`)."""

    #: ``(n_fit, d)`` in the compute dtype: the L2-normalised fit rows.
    ref: torch.Tensor
    #: Number of neighbours.
    k: int


def knn_state(
    fit_features: np.ndarray,
    k: int,
    *,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> KNNState:
    """The state from the detector's ``fit_features_`` (already normalised) and ``k``."""
    return KNNState(_tensor(np.asarray(fit_features), dtype=dtype, device=device), int(k))


def knn_top_k(x: torch.Tensor, ref: torch.Tensor, k: int) -> torch.Tensor:
    """One block: the ``min(k, c)`` largest ``<x_i, ref_j>`` per row, descending, ``(b, .)``."""
    sim = x @ ref.T  # (b, c)
    return torch.topk(sim, min(k, ref.shape[0]), dim=1).values


def knn_score(x: torch.Tensor, state: KNNState, *, chunk_size: int | None = None) -> torch.Tensor:
    """Mean of the ``k`` largest inner products ``<x_i, y_j>`` (cosines on unit rows).

    Parameters
    ----------
    x : Tensor of shape (n, d)
        L2-normalised query rows, any float dtype and device.
    state : KNNState
        ``len(state.ref) >= state.k``.
    chunk_size : int or None, default=None
        None: one block. Else ``chunk_size`` query rows by ``chunk_size`` reference rows at a
        time, keeping a running top-k (the block's top-k merged into it): memory
        ``O(chunk_size * (chunk_size + k))``.

    Returns
    -------
    Tensor of shape (n,), float64, on the state's device.
    """
    ref, k = state
    if chunk_size is None:
        top = knn_top_k(x.to(device=ref.device, dtype=ref.dtype), ref, k)
        return top.to(torch.float64).mean(dim=1)
    out = torch.empty(x.shape[0], dtype=torch.float64, device=ref.device)
    for start in range(0, x.shape[0], chunk_size):
        xb = x[start : start + chunk_size].to(device=ref.device, dtype=ref.dtype)  # (b, d)
        best = torch.full((xb.shape[0], 0), -torch.inf, dtype=ref.dtype, device=ref.device)
        for first in range(0, ref.shape[0], chunk_size):
            block_best = knn_top_k(xb, ref[first : first + chunk_size], k)
            merged = torch.cat([best, block_best], dim=1)  # (b, <= 2k)
            best = torch.topk(merged, min(k, merged.shape[1]), dim=1).values
        out[start : start + xb.shape[0]] = best.to(torch.float64).mean(dim=1)
    return out
