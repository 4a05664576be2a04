"""OC-SVMs against a direct scikit-learn OneClassSVM with the paper's gamma.

The RBF detector scores with its own blocked torch sum (``rbf_kernel_sum``); the tolerance of
"identical to scikit-learn" is 1e-10 relative on ``score_samples`` (the dual coefficients
are non-negative, so the sum has no cancellation) and 1e-10 of ``rho`` absolute on
``decision_function`` (``score - rho`` can be near 0). See ``RBFOneClassSVM``'s docstring.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.svm import OneClassSVM

from pipeline_lib.detection.detectors import LinearOneClassSVM, RBFOneClassSVM
from pipeline_lib.detection.detectors.ocsvm import rbf_kernel_sum
from tests.detectors._oracles import paper_gamma, unit_rows

RTOL = 1e-10


def paper_shaped(n_fit: int, n_test: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Post-ReLU-like features with class structure (a shared mean direction plus noise).

    Small stand-ins for ResNet features: non-negative, non-centred, correlated columns, so
    after L2 normalisation the rows sit on a cap of the sphere and kernel values spread over
    many orders of magnitude (unlike isotropic noise, where all distances are ~2).
    """
    rng = np.random.default_rng(seed)
    mean = np.abs(rng.standard_normal(dim))
    fit = np.maximum(mean + 0.7 * rng.standard_normal((n_fit, dim)), 0.0)
    test = np.maximum(mean + 0.9 * rng.standard_normal((n_test, dim)), 0.0)
    test[: n_test // 4] = np.abs(rng.standard_normal((n_test // 4, dim)))  # off-class rows
    return fit, test


def exact_rbf_sum(direct: OneClassSVM, test: np.ndarray) -> np.ndarray:
    """Oracle: ``sum_i alpha_i exp(-gamma ||sv_i - x||^2)`` with explicit differences."""
    sv, alpha = direct.support_vectors_, direct.dual_coef_[0]
    sq_dist = ((test[:, None, :] - sv[None, :, :]) ** 2).sum(axis=-1)  # (n_test, n_sv)
    return np.exp(-direct._gamma * sq_dist) @ alpha


def assert_equals_sklearn(
    detector: RBFOneClassSVM, direct: OneClassSVM, test_in: np.ndarray, test_sk: np.ndarray
) -> None:
    """Both score functions of ``detector`` on ``test_in`` against ``direct`` on ``test_sk``.

    scikit-learn's ``score_samples`` is ``(sum - rho) + rho`` in floating point, which rounds
    the sum to a multiple of ``eps * rho`` (a sum far below ``rho`` even becomes 0); so it is
    matched to ``RTOL`` plus that rounding, and the sum itself to ``RTOL`` against the exact
    oracle.
    """
    ours = detector.score_samples(test_in)
    exact = exact_rbf_sum(direct, test_sk)
    np.testing.assert_allclose(ours, exact, rtol=RTOL, atol=0)
    rho = float(direct.offset_[0])
    sklearn_rounding = 4 * np.finfo(np.float64).eps * (rho + float(exact.max()))
    sklearn_scores = direct.score_samples(test_sk)
    np.testing.assert_allclose(ours, sklearn_scores, rtol=RTOL, atol=sklearn_rounding)
    np.testing.assert_allclose(
        detector.decision_function(test_in),
        direct.decision_function(test_sk),
        rtol=RTOL,
        atol=RTOL * max(rho, float(exact.max())),
    )


def test_rbf_gamma_is_ten_over_d_var_of_normalized_features(features) -> None:
    fit, _ = features
    detector = RBFOneClassSVM().fit(fit)
    expected = paper_gamma(unit_rows(fit))
    assert detector.gamma_ == pytest.approx(expected, rel=1e-12)
    # 10x scikit-learn's gamma="scale" = 1 / (d * X.var()) on the same features.
    sklearn_scale = 1.0 / (fit.shape[1] * unit_rows(fit).var())
    assert detector.gamma_ == pytest.approx(10.0 * sklearn_scale, rel=1e-12)


def test_rbf_scores_equal_direct_sklearn_on_normalized_features(features) -> None:
    fit, test = features
    fit_n, test_n = unit_rows(fit), unit_rows(test)
    gamma = paper_gamma(fit_n)
    direct = OneClassSVM(kernel="rbf", nu=0.5, gamma=gamma).fit(fit_n).score_samples(test_n)
    ours = RBFOneClassSVM().fit(fit).score_samples(test)
    np.testing.assert_allclose(ours, direct, rtol=1e-10, atol=1e-12)


def test_rbf_explicit_gamma_and_nu_are_used(features) -> None:
    fit, test = features
    detector = RBFOneClassSVM(gamma=3.0, nu=0.2, normalize=False).fit(fit)
    assert detector.gamma_ == 3.0
    assert detector.svm_.nu == 0.2
    direct = OneClassSVM(kernel="rbf", nu=0.2, gamma=3.0).fit(fit).score_samples(test)
    np.testing.assert_allclose(detector.score_samples(test), direct, rtol=1e-10, atol=1e-12)


def test_linear_scores_equal_direct_sklearn_on_raw_features(features) -> None:
    fit, test = features
    detector = LinearOneClassSVM().fit(fit)
    assert detector.normalize is False
    direct = OneClassSVM(kernel="linear").fit(fit).score_samples(test)
    np.testing.assert_allclose(detector.score_samples(test), direct, rtol=1e-10, atol=1e-12)
    # The score is sum_i alpha_i <x_i, x>: linear in x.
    w = detector.svm_.dual_coef_ @ detector.svm_.support_vectors_  # (1, d)
    np.testing.assert_allclose(detector.score_samples(test), test @ w[0], rtol=1e-10)


def test_linear_normalize_option(features) -> None:
    fit, test = features
    ours = LinearOneClassSVM(normalize=True).fit(fit).score_samples(test)
    direct = OneClassSVM(kernel="linear").fit(unit_rows(fit)).score_samples(unit_rows(test))
    np.testing.assert_allclose(ours, direct, rtol=1e-10, atol=1e-12)


def test_rbf_kernel_sum_equals_explicit_differences() -> None:
    rng = np.random.default_rng(5)
    x, sv = rng.standard_normal((23, 7)), rng.standard_normal((11, 7))
    coef = rng.uniform(0.0, 1.0, 11)
    gamma = 0.3
    sq_dist = ((x[:, None, :] - sv[None, :, :]) ** 2).sum(axis=-1)  # (23, 11), exact
    expected = np.exp(-gamma * sq_dist) @ coef
    for chunk_size in (1, 4, 11, 100):
        got = rbf_kernel_sum(
            torch.from_numpy(x),
            torch.from_numpy(sv),
            torch.from_numpy(coef),
            gamma=gamma,
            chunk_size=chunk_size,
        )
        assert got.dtype == torch.float64
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-13, atol=0)


def test_rbf_kernel_sum_clamps_rounding_at_kernel_one() -> None:
    # x equal to the support vector: the exponent is 0 up to rounding, the kernel exactly <= 1.
    sv = torch.tensor([[0.6, 0.8], [1.0, 0.0]], dtype=torch.float64)
    got = rbf_kernel_sum(sv, sv, torch.ones(2, dtype=torch.float64), gamma=1e6, chunk_size=2)
    np.testing.assert_array_equal(got.numpy(), [1.0, 1.0])


@pytest.mark.parametrize(
    ("gamma", "nu", "chunk_size"),
    [(0.05, 0.5, 2048), (0.5, 0.1, 7), (2.0, 0.5, 16), (8.0, 0.9, 3)],
)
def test_rbf_equals_sklearn_on_random_raw_features(gamma: float, nu: float, chunk_size) -> None:
    rng = np.random.default_rng(11)
    fit = 3.0 + rng.standard_normal((120, 5))  # off-centre: exercises the centring
    test = 3.0 + 1.5 * rng.standard_normal((53, 5))
    detector = RBFOneClassSVM(
        gamma=gamma, nu=nu, normalize=False, chunk_size=chunk_size, device="cpu"
    ).fit(fit)
    direct = OneClassSVM(kernel="rbf", gamma=gamma, nu=nu).fit(fit)
    n_sv = len(direct.support_)
    assert n_sv == len(detector.svm_.support_)
    if chunk_size < 2048:
        assert chunk_size < n_sv and chunk_size < len(test)  # several blocks both ways
    assert_equals_sklearn(detector, direct, test, test)


@pytest.mark.parametrize(("gamma_scale", "nu"), [(10.0, 0.5), (1.0, 0.2), (30.0, 0.05)])
def test_rbf_equals_sklearn_on_paper_shaped_normalized_features(gamma_scale, nu) -> None:
    fit, test = paper_shaped(n_fit=300, n_test=160, dim=64, seed=2)
    detector = RBFOneClassSVM(gamma_scale=gamma_scale, nu=nu, chunk_size=37, device="cpu")
    detector.fit(fit)
    fit_n, test_n = unit_rows(fit), unit_rows(test)
    gamma = paper_gamma(fit_n, scale=gamma_scale)
    assert detector.gamma_ == pytest.approx(gamma, rel=1e-12)
    direct = OneClassSVM(kernel="rbf", nu=nu, gamma=detector.gamma_).fit(fit_n)
    assert len(direct.support_) > 37
    assert_equals_sklearn(detector, direct, test, test_n)
    # Not trivially flat: the off-class rows (first quarter) score lower on average.
    scores = detector.score_samples(test)
    assert scores[:40].mean() < scores[40:].mean()


def test_rbf_chunk_size_does_not_change_scores() -> None:
    fit, test = paper_shaped(n_fit=200, n_test=90, dim=32, seed=4)
    whole = RBFOneClassSVM(device="cpu").fit(fit)
    reference = whole.score_samples(test)
    for chunk_size in (1, 5, 64):
        scores = whole.set_params(chunk_size=chunk_size).score_samples(test)
        np.testing.assert_allclose(scores, reference, rtol=1e-13, atol=0)


def test_rbf_float32_option_within_documented_bound() -> None:
    fit, test = paper_shaped(n_fit=200, n_test=90, dim=32, seed=4)
    detector = RBFOneClassSVM(device="cpu").fit(fit)
    reference = detector.score_samples(test)
    scores32 = detector.set_params(dtype="float32").score_samples(test)
    assert scores32.dtype == np.float64
    # ~1e-7 * gamma relative per kernel value (gamma ~ 10 here).
    np.testing.assert_allclose(scores32, reference, rtol=1e-5, atol=0)
    assert not np.array_equal(scores32, reference)


def test_rbf_float32_input_scores_like_sklearn_on_the_same_float32_features() -> None:
    fit, test = paper_shaped(n_fit=150, n_test=40, dim=16, seed=6)
    fit32, test32 = fit.astype(np.float32), test.astype(np.float32)
    detector = RBFOneClassSVM(device="cpu").fit(fit32)
    # scikit-learn is handed the detector's own float32 normalisation (libsvm casts to float64).
    normalized = detector.svm_.support_vectors_
    assert normalized.dtype == np.float64
    from pipeline_lib.detection.detectors.base import l2_normalize

    expected = detector.svm_.score_samples(l2_normalize(test32))
    np.testing.assert_allclose(detector.score_samples(test32), expected, rtol=RTOL, atol=0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without CUDA")
def test_rbf_cuda_request_without_cuda_is_an_error(features) -> None:
    with pytest.raises(ValueError, match="CUDA is not available"):
        RBFOneClassSVM(device="cuda").fit(features[0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_rbf_cuda_equals_cpu_and_sklearn() -> None:
    fit, test = paper_shaped(n_fit=300, n_test=160, dim=64, seed=2)
    detector = RBFOneClassSVM(device="cpu", chunk_size=37).fit(fit)
    cpu = detector.score_samples(test)
    cuda = detector.set_params(device="cuda").score_samples(test)
    np.testing.assert_allclose(cuda, cpu, rtol=RTOL, atol=0)
    cuda32 = detector.set_params(dtype="float32").score_samples(test)
    np.testing.assert_allclose(cuda32, cpu, rtol=1e-5, atol=0)


@pytest.mark.parametrize(
    ("cls", "params", "bad"),
    [
        (RBFOneClassSVM, {"nu": 0.0}, "nu"),
        (RBFOneClassSVM, {"nu": 1.5}, "nu"),
        (RBFOneClassSVM, {"gamma": 0.0}, "gamma"),
        (RBFOneClassSVM, {"gamma_scale": -10.0}, "gamma_scale"),
        (RBFOneClassSVM, {"max_iter": 0}, "max_iter"),
        (RBFOneClassSVM, {"chunk_size": 0}, "chunk_size"),
        (RBFOneClassSVM, {"dtype": "float16"}, "dtype"),
        (RBFOneClassSVM, {"device": "no-such-device"}, "device"),
        (LinearOneClassSVM, {"tol": -1.0}, "tol"),
        (LinearOneClassSVM, {"normalize": 1}, "normalize"),
    ],
)
def test_ocsvm_invalid_parameters_named(features, cls, params: dict, bad: str) -> None:
    with pytest.raises(ValueError, match=bad):
        cls(**params).fit(features[0])
