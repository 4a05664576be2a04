"""KNNCosine against a naive numpy top-k cosine similarity."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline_lib.detection.detectors import KNNCosine
from tests.detectors._oracles import unit_rows


def naive_knn(fit: np.ndarray, test: np.ndarray, k: int) -> np.ndarray:
    cosine = unit_rows(test) @ unit_rows(fit).T  # (n_test, n_fit)
    return np.sort(cosine, axis=1)[:, ::-1][:, :k].mean(axis=1)


@pytest.mark.parametrize(("k", "chunk_size"), [(1, 2048), (1, 7), (5, 3), (80, 16)])
def test_knn_equals_naive_topk_cosine(features, k: int, chunk_size: int) -> None:
    fit, test = features
    detector = KNNCosine(n_neighbors=k, chunk_size=chunk_size, dtype="float64").fit(fit)
    np.testing.assert_allclose(detector.score_samples(test), naive_knn(fit, test, k), atol=1e-12)


def test_knn_released_code_score_k1(features) -> None:
    # Released code: anomaly = mean(1 - top_k(cos, k=1)); ours = -score + const.
    fit, test = features
    released_anomaly = 1.0 - (unit_rows(test) @ unit_rows(fit).T).max(axis=1)
    ours = KNNCosine().fit(fit).score_samples(test)
    np.testing.assert_allclose(-ours + 1.0, released_anomaly, atol=1e-6)


def test_knn_fit_point_scores_one(features) -> None:
    fit, _ = features
    scores = KNNCosine().fit(fit).score_samples(fit[:10] * 3.0)  # scale-invariant
    np.testing.assert_allclose(scores, np.ones(10), atol=1e-6)


def test_knn_too_many_neighbors(features) -> None:
    with pytest.raises(ValueError, match="n_neighbors=81"):
        KNNCosine(n_neighbors=81).fit(features[0])
    with pytest.raises(ValueError, match="n_neighbors"):
        KNNCosine(n_neighbors=0).fit(features[0])
