"""OC-SVMs against a direct scikit-learn OneClassSVM with the paper's gamma."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.svm import OneClassSVM

from pipeline_lib.detection.detectors import LinearOneClassSVM, RBFOneClassSVM
from tests.detectors._oracles import paper_gamma, unit_rows


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


@pytest.mark.parametrize(
    ("cls", "params", "bad"),
    [
        (RBFOneClassSVM, {"nu": 0.0}, "nu"),
        (RBFOneClassSVM, {"nu": 1.5}, "nu"),
        (RBFOneClassSVM, {"gamma": 0.0}, "gamma"),
        (RBFOneClassSVM, {"gamma_scale": -10.0}, "gamma_scale"),
        (RBFOneClassSVM, {"max_iter": 0}, "max_iter"),
        (LinearOneClassSVM, {"tol": -1.0}, "tol"),
        (LinearOneClassSVM, {"normalize": 1}, "normalize"),
    ],
)
def test_ocsvm_invalid_parameters_named(features, cls, params: dict, bad: str) -> None:
    with pytest.raises(ValueError, match=bad):
        cls(**params).fit(features[0])
