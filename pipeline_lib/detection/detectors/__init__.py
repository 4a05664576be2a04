"""Shallow one-class detectors fitted on learned features (scikit-learn estimators).

Every detector follows the scikit-learn contract: ``__init__`` stores keyword
hyper-parameters, ``fit(X, y=None)`` validates ``X`` and returns ``self``, and
``score_samples(X)`` returns an array of shape ``(n_samples,)`` where **higher means more
normal**. Anomaly scores (``-score_samples``) are formed only in
:mod:`pipeline_lib.detection.evaluate`.

``DETECTORS`` maps the detector ids of the pipeline to their classes:

=================  ====================================================================
id                 class
=================  ====================================================================
``ocsvm``          :class:`RBFOneClassSVM` (RBF kernel, L2-normalised features)
``ocsvm_linear``   :class:`LinearOneClassSVM` (linear kernel, raw features)
``kde``            :class:`KernelDensityScore` (RBF kernel density, PyTorch)
``gde``            :class:`GaussianDensity` (one full-covariance Gaussian)
``knn``            :class:`KNNCosine` (top-k cosine similarity, released code)
=================  ====================================================================
"""

from __future__ import annotations

import inspect
from typing import Any

from sklearn.base import BaseEstimator

from pipeline_lib.detection.detectors.gde import GaussianDensity
from pipeline_lib.detection.detectors.kde import KernelDensityScore
from pipeline_lib.detection.detectors.knn import KNNCosine
from pipeline_lib.detection.detectors.ocsvm import LinearOneClassSVM, RBFOneClassSVM

DETECTORS: dict[str, type[BaseEstimator]] = {
    "ocsvm": RBFOneClassSVM,
    "ocsvm_linear": LinearOneClassSVM,
    "kde": KernelDensityScore,
    "gde": GaussianDensity,
    "knn": KNNCosine,
}


def make_detector(name: str, **params: Any) -> BaseEstimator:
    """Build an unfitted detector from its id and hyper-parameters.

    Parameters
    ----------
    name : str
        A key of :data:`DETECTORS`.
    **params
        Keyword hyper-parameters of that detector's class; omitted ones take the class
        defaults.

    Returns
    -------
    detector : BaseEstimator
        Unfitted; hyper-parameter values already checked.

    Raises
    ------
    ValueError
        If ``name`` is not a known id (the message lists the allowed ids), or a
        hyper-parameter value is invalid (the message names it).
    TypeError
        If a keyword is not a hyper-parameter of that detector (the message names it and
        lists the accepted ones).
    """
    if name not in DETECTORS:
        raise ValueError(f"unknown detector {name!r}; allowed: {sorted(DETECTORS)}")
    cls = DETECTORS[name]
    accepted = sorted(
        p.name
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    )
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise TypeError(
            f"detector {name!r} ({cls.__name__}) got unknown parameter(s) {unknown}; "
            f"accepted: {accepted}"
        )
    detector = cls(**params)
    detector._check_params()
    return detector


__all__ = [
    "DETECTORS",
    "GaussianDensity",
    "KNNCosine",
    "KernelDensityScore",
    "LinearOneClassSVM",
    "RBFOneClassSVM",
    "make_detector",
]
