"""One scikit-learn contract test over every entry of ``DETECTORS``."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import check_estimator

from pipeline_lib.detection.detectors import DETECTORS


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_detector_contract(name: str, blob_with_outlier) -> None:
    fit, test, outlier = blob_with_outlier
    detector = DETECTORS[name]()

    with pytest.raises(NotFittedError):
        detector.score_samples(test)

    assert detector.fit(fit) is detector
    assert detector.n_features_in_ == 2

    scores = detector.score_samples(test)
    assert isinstance(scores, np.ndarray)
    assert scores.shape == (test.shape[0],)
    assert scores.dtype == np.float64
    assert np.all(np.isfinite(scores))

    # Higher = more normal: the far outlier scores below every inlier.
    inliers = np.delete(scores, outlier)
    assert scores[outlier] < inliers.min()

    # Pickle round-trip gives identical scores (scikit-learn's contract; packages use the
    # pickle-free state of pipeline_lib.deploy.detector_state, tested in tests/deploy).
    restored = pickle.loads(pickle.dumps(detector))  # noqa: S301 - the bytes it just wrote
    np.testing.assert_array_equal(restored.score_samples(test), scores)

    # Scoring is deterministic and does not depend on the batch it is in.
    np.testing.assert_allclose(detector.score_samples(test[::-1])[::-1], scores, rtol=1e-6)

    # __init__ only stores parameters: clone rebuilds an equal, unfitted estimator.
    twin = clone(detector)
    assert twin.get_params() == detector.get_params()
    with pytest.raises(NotFittedError):
        twin.score_samples(test)


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_detector_rejects_bad_input(name: str, blob_with_outlier) -> None:
    fit, test, _ = blob_with_outlier
    detector = DETECTORS[name]()

    with pytest.raises(ValueError, match="2D array"):
        detector.fit(fit[:, 0])
    bad = fit.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        detector.fit(bad)

    detector.fit(fit)
    with pytest.raises(ValueError, match="3 features"):
        detector.score_samples(np.ones((4, 3)))
    inf_test = test.copy()
    inf_test[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        detector.score_samples(inf_test)


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_detector_accepts_float32_and_lists(name: str, blob_with_outlier) -> None:
    fit, test, _ = blob_with_outlier
    reference = DETECTORS[name]().fit(fit).score_samples(test)
    from_float32 = DETECTORS[name]().fit(fit.astype(np.float32)).score_samples(test)
    from_lists = DETECTORS[name]().fit(fit.tolist()).score_samples(test.tolist())
    assert from_float32.shape == from_lists.shape == reference.shape
    np.testing.assert_allclose(from_lists, reference, rtol=1e-12)
    # float32 input only perturbs the features at ~1e-7 relative.
    np.testing.assert_allclose(from_float32, reference, rtol=1e-3, atol=1e-4)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")
@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_detector_passes_sklearn_estimator_checks(name: str) -> None:
    """scikit-learn's own API checks (cloning, input validation, pickling, n_features_in_)."""
    results = check_estimator(DETECTORS[name](), on_fail=None)
    failed = {r["check_name"]: str(r["exception"]) for r in results if r["status"] == "failed"}
    assert failed == {}
    assert len(results) > 30
