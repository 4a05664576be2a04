"""Fixtures for the detector tests: tiny, real, deterministic feature sets."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def blob_with_outlier() -> tuple[np.ndarray, np.ndarray, int]:
    """2-D Gaussian blob of inliers around (5, 1) plus one far outlier at (-20, 3).

    The outlier is far in Euclidean distance AND in direction, so it stays an outlier after
    L2 normalisation (which maps the blob to a short arc of the unit circle near angle 0.2
    rad and the outlier to angle ~3.0 rad).

    Returns
    -------
    fit : ndarray of shape (60, 2)
        Inliers to fit on.
    test : ndarray of shape (21, 2)
        20 fresh inliers followed by the outlier.
    outlier_index : int
        Row of the outlier in ``test`` (20).
    """
    rng = np.random.default_rng(0)
    center = np.array([5.0, 1.0])
    fit = center + 0.5 * rng.standard_normal((60, 2))
    test_inliers = center + 0.5 * rng.standard_normal((20, 2))
    test = np.vstack([test_inliers, [[-20.0, 3.0]]])
    return fit, test, 20


@pytest.fixture
def features() -> tuple[np.ndarray, np.ndarray]:
    """Non-centred random features (fit (80, 6), test (37, 6)), like post-ReLU embeddings."""
    rng = np.random.default_rng(1)
    fit = np.abs(rng.standard_normal((80, 6))) + 0.3
    test = np.abs(rng.standard_normal((37, 6))) + 0.3
    return fit, test
