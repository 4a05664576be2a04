"""KernelDensityScore against the formula of the paper and against scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from sklearn.neighbors import KernelDensity

from pipeline_lib.detection.detectors import KernelDensityScore, kernels
from tests.detectors._oracles import paper_gamma, unit_rows


def naive_kde(fit: np.ndarray, test: np.ndarray, gamma: float) -> np.ndarray:
    """docs/protocol.md's KDE, (1/gamma) log sum_y exp(-gamma ||x - y||^2), all pairs at once."""
    sq_dist = ((test[:, None, :] - fit[None, :, :]) ** 2).sum(axis=-1)  # (n_test, n_fit)
    return logsumexp(-gamma * sq_dist, axis=1) / gamma


@pytest.mark.parametrize("chunk_size", [1, 7, 2048])
def test_kde_equals_naive_logsumexp_float64(features, chunk_size: int) -> None:
    fit, test = features
    kde = KernelDensityScore(dtype="float64", chunk_size=chunk_size, device="cpu").fit(fit)
    gamma = paper_gamma(unit_rows(fit))
    assert kde.gamma_ == pytest.approx(gamma, rel=1e-12)
    expected = naive_kde(unit_rows(fit), unit_rows(test), gamma)
    np.testing.assert_allclose(kde.score_samples(test), expected, rtol=0, atol=1e-12)


def test_kde_float32_error_within_documented_bound(features) -> None:
    fit, test = features
    kde = KernelDensityScore(dtype="float32", chunk_size=16, device="cpu").fit(fit)
    expected = naive_kde(unit_rows(fit), unit_rows(test), paper_gamma(unit_rows(fit)))
    np.testing.assert_allclose(kde.score_samples(test), expected, rtol=0, atol=2e-6)


def test_kde_unnormalized_with_explicit_gamma_and_far_points(features) -> None:
    # Raw, off-centre features and a large gamma: every exp underflows in a naive sum,
    # the streaming log-sum-exp must still match scipy's.
    fit, test = features
    fit, test = 100.0 + fit, 100.0 + test
    kde = KernelDensityScore(gamma=50.0, normalize=False, dtype="float64", chunk_size=5)
    scores = kde.fit(fit).score_samples(test)
    assert kde.gamma_ == 50.0
    np.testing.assert_allclose(scores, naive_kde(fit, test, 50.0), rtol=0, atol=1e-10)
    scores32 = kde.set_params(dtype="float32").score_samples(test)
    np.testing.assert_allclose(scores32, naive_kde(fit, test, 50.0), rtol=0, atol=1e-4)


def test_kde_gamma_scale_changes_gamma_linearly(features) -> None:
    fit, _ = features
    base = KernelDensityScore().fit(fit).gamma_
    assert KernelDensityScore(gamma_scale=1.0).fit(fit).gamma_ == pytest.approx(base / 10.0)


def test_kde_matches_sklearn_kernel_density_after_affine_map(features) -> None:
    """Derivation of the affine map.

    scikit-learn's Gaussian KDE with bandwidth h is
    ``log p(x) = log[(1/N) sum_y (2 pi h^2)^(-d/2) exp(-||x - y||^2 / (2 h^2))]``.
    With ``h = 1/sqrt(2 gamma)``, ``1/(2 h^2) = gamma``, so
    ``log p(x) = LSE_y(-gamma ||x - y||^2) - log N - (d/2) log(2 pi h^2)`` and our score
    ``LSE / gamma = (log p(x) + log N + (d/2) log(2 pi h^2)) / gamma``.
    """
    fit, test = features
    fit_n, test_n = unit_rows(fit), unit_rows(test)
    kde = KernelDensityScore(dtype="float64").fit(fit)
    gamma = kde.gamma_
    h = 1.0 / np.sqrt(2.0 * gamma)
    n, d = fit.shape
    log_density = KernelDensity(kernel="gaussian", bandwidth=h).fit(fit_n).score_samples(test_n)
    mapped = (log_density + np.log(n) + 0.5 * d * np.log(2.0 * np.pi * h**2)) / gamma
    np.testing.assert_allclose(kde.score_samples(test), mapped, rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    ("params", "bad"),
    [
        ({"gamma": -1.0}, "gamma"),
        ({"gamma_scale": 0}, "gamma_scale"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"chunk_size": 2.5}, "chunk_size"),
        ({"dtype": "float16"}, "dtype"),
        ({"device": "no-such-device"}, "device"),
        ({"normalize": "yes"}, "normalize"),
    ],
)
def test_kde_invalid_parameters_named(features, params: dict, bad: str) -> None:
    with pytest.raises(ValueError, match=bad):
        KernelDensityScore(**params).fit(features[0])


def test_kde_zero_variance_needs_explicit_gamma() -> None:
    constant = np.ones((5, 3))
    with pytest.raises(ValueError, match="entries of the fit features .* are equal"):
        KernelDensityScore().fit(constant)
    scores = KernelDensityScore(gamma=2.0).fit(constant).score_samples(constant)
    # All distances are 0: score = log(5) / 2 for every row.
    np.testing.assert_allclose(scores, np.full(5, np.log(5.0) / 2.0), rtol=1e-6)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without CUDA")
def test_kde_cuda_request_without_cuda_is_an_error(features) -> None:
    with pytest.raises(ValueError, match="CUDA is not available"):
        KernelDensityScore(device="cuda").fit(features[0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_kde_cuda_equals_cpu(features) -> None:
    fit, test = features
    cpu = KernelDensityScore(device="cpu", dtype="float64").fit(fit).score_samples(test)
    cuda = KernelDensityScore(device="cuda", chunk_size=16).fit(fit).score_samples(test)
    np.testing.assert_allclose(cuda, cpu, rtol=0, atol=2e-6)


def test_kde_blocks_stay_within_the_cache_bound_and_change_no_score(monkeypatch) -> None:
    """A float64 block of 2048 x 2048 rows (32 MiB) leaves the last-level cache: the walk takes
    fewer fit rows per block then; float32 blocks of that size (16 MiB) are walked as before."""
    rng = np.random.default_rng(3)
    fit, test = rng.standard_normal((3000, 8)), rng.standard_normal((2100, 8))
    expected = naive_kde(unit_rows(fit), unit_rows(test), paper_gamma(unit_rows(fit)))
    blocks: list[tuple[int, int]] = []
    original = kernels.kde_log_kernel_sum

    def recording(x, ref, ref_sq, gamma):
        blocks.append((x.shape[0], ref.shape[0]))
        return original(x, ref, ref_sq, gamma)

    monkeypatch.setattr(kernels, "kde_log_kernel_sum", recording)
    for dtype, size, fit_rows, atol in (("float64", 8, 1024, 1e-12), ("float32", 4, 2048, 2e-6)):
        blocks.clear()
        kde = KernelDensityScore(chunk_size=2048, dtype=dtype, device="cpu").fit(fit)
        np.testing.assert_allclose(kde.score_samples(test), expected, rtol=0, atol=atol)
        assert blocks[0] == (2048, fit_rows), dtype
        assert max(b * c for b, c in blocks) * size <= kernels.KDE_BLOCK_BYTES
