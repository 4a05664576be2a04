"""Shallow one-class detectors fitted on learned features (scikit-learn estimators).

Every detector follows the scikit-learn contract: ``__init__`` stores keyword
hyper-parameters, ``fit(X, y=None)`` validates ``X`` and returns ``self``, and
``score_samples(X)`` returns an array of shape ``(n_samples,)`` where **higher means more
normal**. Anomaly scores (``-score_samples``) are formed only in
:mod:`pipeline_lib.detection.evaluate`. ``fit`` and ``score_samples`` are written once, in
:class:`~pipeline_lib.detection.detectors.base.Detector` (torch-scored detectors:
:class:`~pipeline_lib.detection.detectors.base.TorchDetector`); a detector class adds its
``__init__``, ``_check_params``, ``_fit`` and ``_score`` (or its kernel and kernel state).

``DETECTORS`` maps the detector ids of the pipeline to their classes:

=================  ====================================================================
id                 class
=================  ====================================================================
``ocsvm``          :class:`RBFOneClassSVM` (RBF kernel, L2-normalised features; libsvm fit,
                   torch scoring)
``ocsvm_linear``   :class:`LinearOneClassSVM` (linear kernel, raw features)
``kde``            :class:`KernelDensityScore` (RBF kernel density, PyTorch)
``gde``            :class:`GaussianDensity` (one full-covariance Gaussian)
``knn``            :class:`KNNCosine` (top-k cosine similarity, released code)
=================  ====================================================================

The scores of ``kde``, ``ocsvm``, ``gde`` and ``knn`` are written once, in
:mod:`pipeline_lib.detection.detectors.kernels`, which the explanations and the exported graphs
call too. Detectors that score with torch on a chosen device (``ocsvm``, ``kde``, ``knn``) take
a ``device`` parameter;
:func:`params_for_device` fills it from the job's device, so their scoring runs on the GPU a
job was given and on the CPU otherwise.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import torch
from sklearn.base import BaseEstimator

# The paper's feature normalisation and RBF width, public for pipeline_lib.explain.
from pipeline_lib.detection.detectors.base import l2_normalize, rbf_gamma
from pipeline_lib.detection.detectors.gde import GaussianDensity
from pipeline_lib.detection.detectors.kde import KernelDensityScore
from pipeline_lib.detection.detectors.knn import KNNCosine
from pipeline_lib.detection.detectors.ocsvm import LinearOneClassSVM, RBFOneClassSVM
from pipeline_lib.registry import detector_spec, plugin_of

DETECTORS: dict[str, type[BaseEstimator]] = {
    "ocsvm": RBFOneClassSVM,
    "ocsvm_linear": LinearOneClassSVM,
    "kde": KernelDensityScore,
    "gde": GaussianDensity,
    "knn": KNNCosine,
}


def detector_class(name: str) -> type[BaseEstimator]:
    """The estimator class of detector ``name``: a built-in one, or the class an active
    plugin's :class:`~pipeline_lib.registry.DetectorSpec` names (imported here, in the job).

    Raises
    ------
    ValueError
        If ``name`` is not a known id, or a plugin's class does not import.
    """
    if name in DETECTORS:
        return DETECTORS[name]
    spec = detector_spec(name)
    if spec is None:
        raise ValueError(f"unknown detector {name!r}; allowed: {sorted(DETECTORS)}")
    module, _, attribute = spec.estimator.partition(":")
    try:
        cls = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"detector {name!r}: cannot import {spec.estimator!r}: {error}") from error
    if not (isinstance(cls, type) and hasattr(cls, "fit") and hasattr(cls, "score_samples")):
        raise ValueError(f"detector {name!r}: {spec.estimator!r} has no fit and score_samples")
    return cls


def _plugin_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """A plugin detector's parameters without ``package``, the ``name==version`` its job was
    planned with (:func:`pipeline_lib.registry.detector_job_params`), which must be the
    package installed here."""
    params = dict(params)
    planned = params.pop("package", None)
    plugin = plugin_of(name)
    have = None if plugin is None else plugin.provenance
    if planned is not None and planned != have:
        raise ValueError(
            f"detector {name!r} was planned with {planned} but this environment has "
            f"{have or 'no such package'}; install the same version where the jobs run "
            "(docs/extending.md)"
        )
    return params


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
    cls = detector_class(name)
    spec = detector_spec(name)
    if spec is not None:
        params = _plugin_params(name, params)
        accepted = sorted(spec.params)
    else:
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
    if spec is None:
        detector._check_params()
    return detector


def params_for_device(
    name: str, params: dict[str, Any], device: str | torch.device | None
) -> dict[str, Any]:
    """Hyper-parameters of detector ``name`` with ``device`` filled in from the job's device.

    The job's resources decide where scoring runs
    (:func:`pipeline_lib.runtime.devices.select_device`), not mere CUDA availability; an
    explicit ``device`` in ``params`` (e.g. from the config) still wins.

    Parameters
    ----------
    name : str
        A key of :data:`DETECTORS`.
    params : dict
        The configured hyper-parameters; not modified.
    device : str or torch.device or None
        The job's device; None leaves ``params`` as they are.

    Returns
    -------
    params : dict
        A copy of ``params``, plus ``device=str(device)`` when the detector has a ``device``
        parameter, ``device`` is not None and ``params`` does not set one.

    Raises
    ------
    ValueError
        If ``name`` is not a known id.
    """
    params = dict(params)
    takes_device = "device" in inspect.signature(detector_class(name).__init__).parameters
    if device is not None and takes_device and "device" not in params:
        params["device"] = str(device)
    return params


__all__ = [
    "DETECTORS",
    "GaussianDensity",
    "KNNCosine",
    "KernelDensityScore",
    "LinearOneClassSVM",
    "RBFOneClassSVM",
    "detector_class",
    "l2_normalize",
    "make_detector",
    "params_for_device",
    "rbf_gamma",
]
