"""A detector's state as npz + JSON: every packaged detector round-trips; hostile files are refused.

Round trips compare scores bit for bit: the restored arrays are byte-identical copies and the
same ``score_samples`` code runs on them, so the same kernels run by construction.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from sklearn.ensemble import IsolationForest

from pipeline_lib.deploy import bounded_files, detector_state
from pipeline_lib.deploy.detector_state import (
    ARRAYS_FILE,
    STATE_FILE,
    DetectorStateError,
    load_detector,
    save_detector,
)
from pipeline_lib.detection.detectors import DETECTORS, make_detector


def _features(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 6))


def _saved(folder: Path, name: str = "ocsvm") -> Path:
    save_detector(make_detector(name).fit(_features(0, 50)), folder)
    return folder


def _edit_state(folder: Path, edit) -> None:
    path = folder / STATE_FILE
    state = json.loads(path.read_text())
    edit(state["estimator"])
    path.write_text(json.dumps(state))


class _Payload:
    """Unpickling this object would create ``path`` (what a planted pickle does)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_every_detector_round_trips_with_identical_scores(name: str, tmp_path: Path) -> None:
    detector = make_detector(name).fit(_features(0, 80))
    query = _features(1, 40)
    save_detector(detector, tmp_path)
    restored = load_detector(tmp_path)
    assert type(restored) is type(detector)
    assert restored.get_params() == detector.get_params()
    expected = detector.score_samples(query)
    assert expected.shape == (40,) and np.ptp(expected) > 0  # scores that can differ
    np.testing.assert_array_equal(restored.score_samples(query), expected)
    for attribute, value in vars(detector).items():
        assert type(vars(restored)[attribute]) is type(value), attribute
    assert not list(tmp_path.glob("*.pkl"))


def test_nested_estimators_keep_their_fitted_arrays_and_types(tmp_path: Path) -> None:
    for name, inner in (("ocsvm_linear", "svm_"), ("gde", "gmm_")):
        detector = make_detector(name).fit(_features(0, 60))
        save_detector(detector, tmp_path / name)
        restored = getattr(load_detector(tmp_path / name), inner)
        for attribute, value in vars(getattr(detector, inner)).items():
            got = vars(restored)[attribute]
            assert type(got) is type(value), attribute
            if isinstance(value, np.ndarray):
                assert got.dtype == value.dtype and np.array_equal(got, value), attribute


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("os.system", {"command": "touch {marker}"}),
        ("builtins.eval", {"source": "open({marker!r}, 'w')"}),
    ],
)
def test_a_class_outside_the_allow_list_is_refused_and_nothing_runs(
    name: str, params: dict, tmp_path: Path
) -> None:
    folder = _saved(tmp_path / "state")
    marker = tmp_path / "marker"
    filled = {k: v.format(marker=str(marker)) for k, v in params.items()}
    _edit_state(folder, lambda estimator: estimator.update({"class": name, "params": filled}))
    with pytest.raises(DetectorStateError, match=f"class is '{name}', not a class this version"):
        load_detector(folder)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        ("__class__", "os.system"),
        ("score_samples", None),  # would shadow the method
        ("_impl", "c_svc"),  # would make libsvm read the SVM as another machine type
    ],
)
def test_a_fitted_attribute_may_not_shadow_a_class_member(
    attribute: str, value: object, tmp_path: Path
) -> None:
    folder = _saved(tmp_path)
    target = "svm_" if attribute == "_impl" else None

    def edit(estimator: dict) -> None:
        where = estimator["fitted"][target]["estimator"] if target else estimator
        where["fitted"][attribute] = value

    _edit_state(folder, edit)
    with pytest.raises(DetectorStateError, match=f"fitted.{attribute} is not a fitted attribute"):
        load_detector(folder)


def test_an_unknown_value_form_is_refused_by_key(tmp_path: Path) -> None:
    folder = _saved(tmp_path)
    _edit_state(folder, lambda e: e["fitted"].update(gamma_={"pickle": "gASV..."}))
    with pytest.raises(DetectorStateError, match=r"estimator\.fitted\.gamma_ is .*pickle"):
        load_detector(folder)


def test_an_unknown_parameter_is_refused(tmp_path: Path) -> None:
    folder = _saved(tmp_path)
    _edit_state(folder, lambda e: e["params"].update(kernel="rbf"))
    with pytest.raises(DetectorStateError, match=r"params has \['kernel'\], not parameters"):
        load_detector(folder)


def test_an_object_array_is_refused_and_its_pickle_never_runs(tmp_path: Path) -> None:
    folder = _saved(tmp_path / "state", "kde")
    marker = tmp_path / "marker"
    arrays = dict(np.load(folder / ARRAYS_FILE, allow_pickle=False))
    arrays["a0"] = np.array([_Payload(marker)], dtype=object)
    np.savez(folder / ARRAYS_FILE, allow_pickle=True, **arrays)
    with pytest.raises(DetectorStateError, match="array 'a0' has dtype object"):
        load_detector(folder)
    assert not marker.exists()


def test_an_inconsistent_svm_is_refused_before_libsvm_reads_it(tmp_path: Path) -> None:
    folder = _saved(tmp_path, "ocsvm_linear")
    state = json.loads((folder / STATE_FILE).read_text())
    key = state["estimator"]["fitted"]["svm_"]["estimator"]["fitted"]["_dual_coef_"]["array"]
    arrays = dict(np.load(folder / ARRAYS_FILE, allow_pickle=False))
    arrays[key] = arrays[key][:, :2]  # libsvm would read n_sv coefficients from it
    np.savez(folder / ARRAYS_FILE, **arrays)
    with pytest.raises(DetectorStateError, match=r"svm_\._dual_coef_ must be a C-ordered"):
        load_detector(folder)


def test_a_zip_bomb_is_refused_by_its_declared_size(tmp_path: Path, monkeypatch) -> None:
    folder = _saved(tmp_path)
    zeros = np.zeros(2**19)  # 4 MiB of zeros: deflated to a few kB
    with zipfile.ZipFile(folder / ARRAYS_FILE, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("a999.npy", "w") as handle:
            np.lib.format.write_array(handle, zeros)
    assert (folder / ARRAYS_FILE).stat().st_size < 2**20
    monkeypatch.setattr(detector_state, "MAX_STATE_BYTES", 2**20)
    with pytest.raises(DetectorStateError, match="uncompressed bytes, over the limit.*zip bomb"):
        load_detector(folder)


def test_a_header_declaring_more_than_its_member_holds_is_refused(tmp_path: Path) -> None:
    folder = _saved(tmp_path)
    with zipfile.ZipFile(folder / ARRAYS_FILE, "a") as archive:
        with archive.open("a999.npy", "w") as handle:
            np.lib.format.write_array_header_1_0(
                handle, {"descr": "<f8", "fortran_order": False, "shape": (2**40,)}
            )
            handle.write(b"\0" * 64)
    with pytest.raises(DetectorStateError, match=r"array 'a999' declares shape \(1099511627776,\)"):
        load_detector(folder)


def test_an_oversized_or_deep_json_is_refused(tmp_path: Path, monkeypatch) -> None:
    folder = _saved(tmp_path)
    monkeypatch.setattr(bounded_files, "MAX_JSON_BYTES", 100)
    with pytest.raises(DetectorStateError, match="over the limit of 100 for a package's JSON"):
        load_detector(folder)
    monkeypatch.undo()
    deep: object = 1.0
    for _ in range(40):
        deep = [deep]
    _edit_state(folder, lambda e: e["fitted"].update(gamma_=deep))
    with pytest.raises(DetectorStateError, match="nests deeper than 16"):
        load_detector(folder)


def test_saving_refuses_what_it_cannot_load(tmp_path: Path) -> None:
    with pytest.raises(DetectorStateError, match="IsolationForest, not one of the classes"):
        save_detector(IsolationForest().fit(_features(0, 20)), tmp_path)
    detector = make_detector("kde").fit(_features(0, 20))
    detector.note_ = object()
    with pytest.raises(DetectorStateError, match=r"detector\.note_ is a builtins\.object"):
        save_detector(detector, tmp_path)
    detector.note_ = np.array(["a"], dtype=object)
    with pytest.raises(DetectorStateError, match=r"detector\.note_ is an array of dtype object"):
        save_detector(detector, tmp_path)
