"""GaussianDensity against an independent multivariate-normal log-density."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from pipeline_lib.detection.detectors import GaussianDensity
from tests.detectors._oracles import unit_rows


@pytest.mark.parametrize("normalize", [True, False])
def test_gde_equals_scipy_logpdf_of_mle_gaussian(features, normalize: bool) -> None:
    fit, test = features
    if normalize:
        fit, test_in = unit_rows(fit), unit_rows(test)
    else:
        test_in = test
    reg = 1e-6
    mean = fit.mean(axis=0)
    cov = (fit - mean).T @ (fit - mean) / fit.shape[0] + reg * np.eye(fit.shape[1])
    expected = multivariate_normal(mean=mean, cov=cov).logpdf(test_in)

    ours = GaussianDensity(normalize=normalize).fit(features[0]).score_samples(test)
    np.testing.assert_allclose(ours, expected, rtol=1e-8, atol=1e-8)


def test_gde_reg_covar_is_used(features) -> None:
    fit, test = features
    fit_n = unit_rows(fit)
    reg = 0.05
    cov = np.cov(fit_n, rowvar=False, bias=True) + reg * np.eye(fit.shape[1])
    expected = multivariate_normal(mean=fit_n.mean(axis=0), cov=cov).logpdf(unit_rows(test))
    detector = GaussianDensity(reg_covar=reg).fit(fit)
    np.testing.assert_allclose(detector.score_samples(test), expected, rtol=1e-8)
    assert detector.gmm_.n_components == 1
    assert detector.gmm_.covariance_type == "full"


def test_gde_more_columns_than_rows_stays_finite() -> None:
    # 512-d features from 50 images: the covariance is singular without reg_covar.
    rng = np.random.default_rng(3)
    fit, test = rng.standard_normal((50, 64)), rng.standard_normal((5, 64))
    scores = GaussianDensity().fit(fit).score_samples(test)
    assert scores.shape == (5,)
    assert np.all(np.isfinite(scores))


@pytest.mark.parametrize(
    ("params", "bad"),
    [({"reg_covar": 0.0}, "reg_covar"), ({"random_state": "x"}, "random_state")],
)
def test_gde_invalid_parameters_named(features, params: dict, bad: str) -> None:
    with pytest.raises(ValueError, match=bad):
        GaussianDensity(**params).fit(features[0])


def test_gde_needs_two_rows() -> None:
    with pytest.raises(ValueError, match=">= 2 fit rows"):
        GaussianDensity().fit(np.ones((1, 3)))
