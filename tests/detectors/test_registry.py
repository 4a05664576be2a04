"""``DETECTORS`` and ``make_detector``."""

from __future__ import annotations

import inspect

import pytest
import torch

from pipeline_lib.detection.detectors import (
    DETECTORS,
    GaussianDensity,
    KernelDensityScore,
    KNNCosine,
    LinearOneClassSVM,
    RBFOneClassSVM,
    make_detector,
    params_for_device,
)


def test_registry_ids_match_architecture() -> None:
    assert DETECTORS == {
        "ocsvm": RBFOneClassSVM,
        "ocsvm_linear": LinearOneClassSVM,
        "kde": KernelDensityScore,
        "gde": GaussianDensity,
        "knn": KNNCosine,
    }


def test_paper_defaults() -> None:
    assert make_detector("ocsvm").get_params()["nu"] == 0.5
    assert make_detector("ocsvm").normalize is True
    assert make_detector("ocsvm").gamma_scale == 10.0
    assert make_detector("ocsvm_linear").normalize is False
    assert make_detector("kde").normalize is True
    assert make_detector("gde").normalize is True
    assert make_detector("knn").n_neighbors == 1


def test_make_detector_passes_params() -> None:
    detector = make_detector("kde", gamma_scale=2.0, chunk_size=64)
    assert isinstance(detector, KernelDensityScore)
    assert (detector.gamma_scale, detector.chunk_size) == (2.0, 64)


def test_make_detector_unknown_name_lists_allowed() -> None:
    with pytest.raises(ValueError, match=r"'svm'.*'gde', 'kde', 'knn', 'ocsvm', 'ocsvm_linear'"):
        make_detector("svm")


def test_make_detector_unknown_parameter_named() -> None:
    with pytest.raises(TypeError, match=r"\['bandwidth'\].*accepted"):
        make_detector("kde", bandwidth=0.1)
    with pytest.raises(TypeError, match="gamma"):
        make_detector("gde", gamma=1.0)


def test_make_detector_bad_value_named() -> None:
    with pytest.raises(ValueError, match="nu must be"):
        make_detector("ocsvm", nu=2.0)
    with pytest.raises(ValueError, match="n_neighbors"):
        make_detector("knn", n_neighbors=-1)


def test_every_detector_accepts_exactly_the_registry_parameters_with_its_defaults() -> None:
    # The config check rejects names outside DETECTOR_DEFAULTS before any job runs, so a
    # parameter a class gains must be registered too, and no default may differ.
    from pipeline_lib.registry import DETECTOR_DEFAULTS

    assert list(DETECTORS) == list(DETECTOR_DEFAULTS)
    for name, cls in DETECTORS.items():
        signature = inspect.signature(cls.__init__).parameters
        defaults = {p: v.default for p, v in signature.items() if p != "self"}
        assert defaults == DETECTOR_DEFAULTS[name], name
        assert make_detector(name).get_params() == DETECTOR_DEFAULTS[name], name


def test_params_for_device_fills_torch_detectors_only() -> None:
    configured = {"gamma_scale": 2.0}
    assert params_for_device("ocsvm", configured, "cpu") == {"gamma_scale": 2.0, "device": "cpu"}
    assert params_for_device("kde", {}, torch.device("cpu")) == {"device": "cpu"}
    assert params_for_device("knn", {}, "cuda:1") == {"device": "cuda:1"}
    assert configured == {"gamma_scale": 2.0}  # not modified
    # libsvm-only and numpy-only detectors have no device; None keeps the class default.
    assert params_for_device("ocsvm_linear", {"nu": 0.1}, "cuda") == {"nu": 0.1}
    assert params_for_device("gde", {}, "cuda") == {}
    assert params_for_device("ocsvm", {}, None) == {}
    # An explicit device in the config wins over the job's.
    assert params_for_device("ocsvm", {"device": "cpu"}, "cuda") == {"device": "cpu"}
    detector = make_detector("ocsvm", **params_for_device("ocsvm", {}, "cpu"))
    assert detector.device == "cpu"
    with pytest.raises(ValueError, match="unknown detector 'svm'"):
        params_for_device("svm", {}, "cpu")
