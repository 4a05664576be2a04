"""k-nearest-neighbour cosine similarity score, as in the authors' released code.

Source: google-research/google-research, ``deep_representation_one_class/util/train.py``,
``BaseTrain.eval_embed`` (the metrics named ``*.auc``):

.. code-block:: text

    squared_difference(a, b, do_normalization=True) = -2 * matmul(l2n(a), l2n(b)^T)
    sim  = -0.5 * squared_difference(test, train, True)     # cosine similarities
    dist = reduce_mean(1.0 - top_k(sim, k=1).values, axis=1)  # anomaly score
    auc  = roc(pr=dist, gt=labels)                           # outlier = positive

i.e. the anomaly score is one minus the mean of the top-k cosine similarities to the fit
features, with ``k`` hard-coded to 1 (the nearest neighbour). This module returns the
normality score ``mean of the top-k cosine similarities``; its negation differs from the
released ``dist`` by the constant 1, so AUCs are identical.
"""

from __future__ import annotations

import numpy as np
import torch

from pipeline_lib.detection.detectors.base import TorchDetector, check_positive, l2_normalize
from pipeline_lib.detection.detectors.kernels import KNNState, knn_score, knn_state
from pipeline_lib.registry import DETECTOR_DEFAULTS

# Defaults come from the registry, where the config check reads them too (one statement of
# each value; tests/detectors/test_registry.py checks that the two agree).
_DEFAULTS = DETECTOR_DEFAULTS["knn"]


class KNNCosine(TorchDetector):
    """Mean cosine similarity to the ``k`` nearest fit features (released code's kNN score).

    ``score(x) = mean_{y in topk(x)} <x/||x||, y/||y||>`` over the fit features ``y``; with the
    default ``n_neighbors=1`` it is the cosine similarity to the nearest fit feature. The
    released code (google-research/google-research,
    ``deep_representation_one_class/util/train.py``, ``BaseTrain.eval_embed``) reports
    ``1 - mean(top_k(cosine similarity, k=1))`` as its anomaly score for the ``*.auc``
    metrics; this is the same quantity as a normality score (higher = more normal). Rows are
    always L2-normalised (that is what makes the similarity a cosine), so there is no
    ``normalize`` parameter.

    Parameters
    ----------
    n_neighbors : int, default=1
        ``k``; the released code uses 1. Must not exceed the number of fit rows.
    chunk_size : int, default=2048
        Block size over test rows and fit rows: memory beyond the fit features is about
        ``chunk_size * (chunk_size + n_neighbors)`` values.
    dtype : {"float32", "float64"}, default="float32"
        Compute precision.
    device : str, default="auto"
        Torch device; "auto" is CUDA when available, else CPU.

    Attributes
    ----------
    fit_features_ : ndarray of shape (n_fit, n_features)
        L2-normalised fit features.
    n_features_in_ : int
        Number of feature columns seen in ``fit``.
    """

    def __init__(
        self,
        *,
        n_neighbors: int = _DEFAULTS["n_neighbors"],
        chunk_size: int = _DEFAULTS["chunk_size"],
        dtype: str = _DEFAULTS["dtype"],
        device: str = _DEFAULTS["device"],
    ) -> None:
        self.n_neighbors = n_neighbors
        self.chunk_size = chunk_size
        self.dtype = dtype
        self.device = device

    _fitted_attribute = "fit_features_"
    _kernel = staticmethod(knn_score)

    def _check_params(self) -> None:
        """Raise ``ValueError`` naming the first invalid hyper-parameter."""
        check_positive("n_neighbors", self.n_neighbors, integer=True)
        super()._check_params()

    def _check_n_fit(self, n_fit: int) -> None:
        """Raise ``ValueError`` if ``n_neighbors`` exceeds the ``n_fit`` fit rows."""
        if n_fit < self.n_neighbors:
            raise ValueError(
                f"n_neighbors={self.n_neighbors} exceeds the number of fit rows ({n_fit})"
            )

    def _check_scoring(self) -> None:
        super()._check_scoring()
        self._check_n_fit(self.fit_features_.shape[0])

    def _fit(self, X: np.ndarray) -> None:
        """Store the L2-normalised fit features (ValueError if ``X`` has fewer rows than
        ``n_neighbors``)."""
        self._check_n_fit(X.shape[0])
        self.fit_features_ = l2_normalize(X)

    def _kernel_state(self, *, dtype: torch.dtype, device: torch.device) -> KNNState:
        return knn_state(self.fit_features_, self.n_neighbors, dtype=dtype, device=device)

    def _query_rows(self, X: np.ndarray) -> np.ndarray:
        """Always L2-normalised (that makes the similarity a cosine), in the dtype of ``X``."""
        return l2_normalize(X)
