"""Sign convention and bookkeeping of ``pipeline_lib.detection.evaluate``."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline_lib.detection.detectors import DETECTORS, make_detector
from pipeline_lib.detection.evaluate import DetectionResult, evaluate_detector, score_with_detector
from pipeline_lib.detection.metrics import auroc


@pytest.fixture
def split() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inliers around direction (1, 1, 0, 0), outliers around (0, 0, 1, 1)."""
    rng = np.random.default_rng(0)
    inlier_mean = np.array([3.0, 3.0, 0.0, 0.0])
    fit = inlier_mean + 0.5 * rng.standard_normal((80, 4))
    test_in = inlier_mean + 0.5 * rng.standard_normal((30, 4))
    test_out = inlier_mean[::-1] + 0.5 * rng.standard_normal((10, 4))
    test = np.vstack([test_in, test_out])
    is_outlier = np.r_[np.zeros(30, dtype=int), np.ones(10, dtype=int)]
    return fit, test, is_outlier


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_score_with_detector_negates_score_samples(split, name: str) -> None:
    fit, test, _ = split
    anomaly = score_with_detector(fit, test, detector=name)
    normality = make_detector(name).fit(fit).score_samples(test)
    assert anomaly.shape == (test.shape[0],)
    np.testing.assert_allclose(anomaly, -normality, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_evaluate_detector_separable_split_scores_100(split, name: str) -> None:
    fit, test, is_outlier = split
    result = evaluate_detector(fit, test, is_outlier, detector=name)
    assert isinstance(result, DetectionResult)
    assert result.auroc == 100.0
    assert result.auroc == auroc(result.anomaly_scores, is_outlier)
    assert (result.n_fit, result.n_test) == (80, 40)
    assert result.anomaly_scores.shape == (40,)
    assert result.fit_seconds >= 0.0 and result.score_seconds >= 0.0
    # Outliers get the higher anomaly scores.
    assert (
        result.anomaly_scores[is_outlier == 1].min() > result.anomaly_scores[is_outlier == 0].max()
    )


def test_detector_params_reach_the_detector(split) -> None:
    fit, test, _ = split
    default = score_with_detector(fit, test, detector="kde")
    wider = score_with_detector(fit, test, detector="kde", gamma_scale=1.0)
    explicit = -make_detector("kde", gamma_scale=1.0).fit(fit).score_samples(test)
    np.testing.assert_allclose(wider, explicit, rtol=1e-9)
    assert not np.allclose(default, wider)


def test_evaluate_errors_are_named(split) -> None:
    fit, test, is_outlier = split
    with pytest.raises(ValueError, match="unknown detector 'svm'"):
        score_with_detector(fit, test, detector="svm")
    with pytest.raises(TypeError, match="nu_"):
        score_with_detector(fit, test, detector="ocsvm", nu_=0.1)
    with pytest.raises(ValueError, match="is_outlier has 39 entries"):
        evaluate_detector(fit, test, is_outlier[:-1], detector="gde")
    with pytest.raises(ValueError, match="only the value 0"):
        evaluate_detector(fit, test, np.zeros(40, dtype=int), detector="gde")
