"""A fitted detector as data: ``detector.npz`` (arrays) and ``detector.json`` (the rest).

Why not pickle: unpickling calls whatever the file names, so a package handed over by
anyone could run code under ``droc score --model FOLDER``. Here a load builds only classes
of an explicit allow-list (:data:`ALLOWED_CLASSES`: the project's detectors and the
scikit-learn estimators they hold), calls their constructors with the stored parameters and
sets the stored fitted attributes; arrays are read with ``allow_pickle=False``, each file is
opened once as a regular file (:mod:`pipeline_lib.deploy.bounded_files`), and the sizes are
checked before anything is read (:data:`MAX_STATE_BYTES`,
:data:`~pipeline_lib.deploy.bounded_files.MAX_JSON_BYTES`).

``detector.json``::

    {"format": "droc-detector-state/1", "estimator": ESTIMATOR}
    ESTIMATOR = {"class": NAME, "params": {name: VALUE}, "fitted": {name: VALUE}}
    VALUE     = null | true | false | int | finite float | string | [VALUE, ...]
              | {"array": KEY}                  an array of detector.npz (bool/int/float dtypes)
              | {"scalar": DTYPE, "value": V}   a numpy scalar (V a number, or "nan"/"inf"/"-inf")
              | {"float": "nan" | "inf" | "-inf"}
              | {"tuple": [VALUE, ...]} | {"dict": {string: VALUE}}
              | {"estimator": ESTIMATOR}        a nested estimator (RBFOneClassSVM.svm_, ...)

``params`` are ``get_params(deep=False)``; ``fitted`` is every other instance attribute. A
fitted attribute may not shadow a class attribute (a method, a property, ``_impl``), and the
scikit-learn one-class SVM's arrays, which libsvm's C code indexes without checking, are
checked for consistent shapes and dtypes (:func:`check_one_class_svm`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.mixture import GaussianMixture
from sklearn.svm import OneClassSVM
from sklearn.utils.validation import check_is_fitted

from pipeline_lib.deploy.bounded_files import (
    PackageFile,
    archive_file_limit,
    open_archive,
    open_json_file,
    open_package_file,
    parse_json,
)
from pipeline_lib.deploy.package_format import REWRITE, PackageError
from pipeline_lib.detection.detectors import DETECTORS
from pipeline_lib.runtime.io import atomic_path

STATE_FORMAT = "droc-detector-state/1"
ARRAYS_FILE = "detector.npz"
STATE_FILE = "detector.json"
#: Most uncompressed bytes a state (or representation) archive may declare. The largest
#: packaged fit set (MVTec patches, ``mvtec.embed.max_fit_patches`` x 512 float64) is a few
#: hundred MiB; a zip bomb declares more and is refused before a byte is inflated.
MAX_STATE_BYTES = 4 * 2**30
#: Most members (arrays) a state archive may hold.
MAX_STATE_ARRAYS = 1024
#: Deepest nesting of values in ``detector.json``.
MAX_DEPTH = 16
#: Classes a state may name: the project's detectors by class name, and the scikit-learn
#: estimators they hold by their public import path. Never resolved by importing a name.
ALLOWED_CLASSES: dict[str, type[BaseEstimator]] = {
    **{cls.__name__: cls for cls in DETECTORS.values()},
    "sklearn.svm.OneClassSVM": OneClassSVM,
    "sklearn.mixture.GaussianMixture": GaussianMixture,
}
_CLASS_NAMES = {cls: name for name, cls in ALLOWED_CLASSES.items()}
#: dtype kinds an array or scalar may have: bool, signed and unsigned int, float.
_NUMERIC_KINDS = "biuf"
_SPECIAL_FLOATS = ("nan", "inf", "-inf")
_ATTRIBUTE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ARRAY_KEY = re.compile(r"^a[0-9]+$")


class DetectorStateError(PackageError):
    """A detector state cannot be written or read; names the file, the key and what to do."""


def save_detector(detector: BaseEstimator, folder: str | os.PathLike) -> None:
    """Write ``detector.npz`` and ``detector.json`` of a fitted detector into ``folder``.

    Raises
    ------
    DetectorStateError
        If the detector, or an estimator inside it, is not of an allowed class, or holds a
        value of a type the format has no place for (the message names the attribute).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    state = {"format": STATE_FORMAT, "estimator": _encode_estimator(detector, arrays, "detector")}
    with atomic_path(folder / ARRAYS_FILE) as tmp:
        np.savez(tmp, allow_pickle=False, **arrays)
    with atomic_path(folder / STATE_FILE) as tmp:
        Path(tmp).write_text(json.dumps(state, indent=1, sort_keys=True, allow_nan=False))


def load_detector(folder: str | os.PathLike) -> BaseEstimator:
    """The fitted detector stored by :func:`save_detector` in ``folder``; never unpickles.

    Raises
    ------
    DetectorStateError
        If a file is missing, not a regular file, too large, not of this format, names a
        class outside :data:`ALLOWED_CLASSES`, holds an array of a non-numeric (object,
        string) dtype or a value of an unknown form, or the restored estimator's values are
        inconsistent.
    """
    with open_detector_files(Path(folder)) as (state_file, arrays_file):
        return read_detector(state_file, arrays_file)


@contextlib.contextmanager
def open_detector_files(folder: Path) -> Iterator[tuple[PackageFile, PackageFile]]:
    """``detector.json`` and ``detector.npz`` opened as regular files, sizes checked.

    Raises
    ------
    DetectorStateError
        As :func:`~pipeline_lib.deploy.bounded_files.open_package_file`.
    """
    limit = archive_file_limit(MAX_STATE_BYTES, MAX_STATE_ARRAYS)
    with (
        open_json_file(folder / STATE_FILE, error=DetectorStateError) as state_file,
        open_package_file(
            folder / ARRAYS_FILE,
            max_bytes=limit,
            what="a detector state archive",
            error=DetectorStateError,
        ) as arrays_file,
    ):
        yield state_file, arrays_file


def read_detector(state_file: PackageFile, arrays_file: PackageFile) -> BaseEstimator:
    """The detector of files from :func:`open_detector_files` (as :func:`load_detector`)."""
    json_path = state_file.path
    state = parse_json(state_file, error=DetectorStateError)
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise DetectorStateError(f"{json_path} is not a {STATE_FORMAT} file; {REWRITE}")
    arrays = _read_arrays(arrays_file)
    detector = _decode_estimator(state.get("estimator"), arrays, json_path, "estimator", 0)
    if type(detector) not in DETECTORS.values():
        raise DetectorStateError(
            f"{json_path}: the stored estimator is a {type(detector).__name__}, not one of the "
            f"project's detectors; {REWRITE}"
        )
    return detector


def check_one_class_svm(svm: OneClassSVM, where: str) -> None:
    """Check the arrays libsvm's ``decision_function`` indexes without bounds checks.

    libsvm rebuilds its model from ``support_vectors_``, ``_n_support``, ``_dual_coef_``,
    ``_intercept_`` and ``_probA``/``_probB``; lengths that disagree would make it read past
    an array's end. A fitted one-class SVM has ``n_sv`` support vectors of ``d`` features
    (``support_`` the same length), one row of ``n_sv`` coefficients and one intercept;
    ``_n_support`` has two entries (its length is libsvm's class count, which sizes the
    intercepts; one-class libsvm reads no entry of it).

    Raises
    ------
    ValueError
        Naming the first attribute whose type, dtype, shape or value disagrees.
    """
    if svm.kernel not in ("linear", "rbf"):
        raise ValueError(f"{where}.kernel is {svm.kernel!r}; a packaged SVM is linear or rbf")
    if svm.__dict__.get("_sparse") is not False:
        raise ValueError(f"{where}._sparse must be False (packaged SVMs are dense)")
    sv = svm.__dict__.get("support_vectors_")
    if not isinstance(sv, np.ndarray) or sv.dtype != np.float64 or sv.ndim != 2:
        raise ValueError(f"{where}.support_vectors_ must be a 2-D float64 array")
    n_sv, d = sv.shape
    expected = {
        "support_vectors_": (np.float64, (n_sv, d)),
        "support_": (np.int32, (n_sv,)),
        "_n_support": (np.int32, (2,)),
        "dual_coef_": (np.float64, (1, n_sv)),
        "_dual_coef_": (np.float64, (1, n_sv)),
        "intercept_": (np.float64, (1,)),
        "_intercept_": (np.float64, (1,)),
        "offset_": (np.float64, (1,)),
        "_probA": (np.float64, (0,)),
        "_probB": (np.float64, (0,)),
    }
    for name, (dtype, shape) in expected.items():
        value = svm.__dict__.get(name)
        if (
            not isinstance(value, np.ndarray)
            or value.dtype != dtype
            or value.shape != shape
            or not value.flags.c_contiguous
        ):
            got = (
                f"{value.dtype} {value.shape}"
                if isinstance(value, np.ndarray)
                else type(value).__name__
            )
            raise ValueError(
                f"{where}.{name} must be a C-ordered {np.dtype(dtype)} array of shape {shape}, "
                f"got {got}"
            )
    shape_fit = svm.__dict__.get("shape_fit_")
    if (
        not isinstance(shape_fit, tuple)
        or len(shape_fit) != 2
        or shape_fit[1] != d
        or svm.__dict__.get("n_features_in_") != d
    ):
        raise ValueError(f"{where}.shape_fit_ / n_features_in_ disagree with {d} features")
    if not np.isfinite(float(svm.__dict__.get("_gamma", np.nan))):
        raise ValueError(f"{where}._gamma must be a finite number")


def _encode_estimator(estimator: BaseEstimator, arrays: dict[str, np.ndarray], where: str) -> dict:
    name = _CLASS_NAMES.get(type(estimator))
    if name is None:
        raise DetectorStateError(
            f"{where} is a {type(estimator).__module__}.{type(estimator).__qualname__}, not one "
            f"of the classes a package may hold ({sorted(ALLOWED_CLASSES)})"
        )
    params = estimator.get_params(deep=False)
    fitted = {k: v for k, v in vars(estimator).items() if k not in params}
    return {
        "class": name,
        "params": {k: _encode(v, arrays, f"{where}.{k}") for k, v in sorted(params.items())},
        "fitted": {k: _encode(v, arrays, f"{where}.{k}") for k, v in sorted(fitted.items())},
    }


def _encode(value: Any, arrays: dict[str, np.ndarray], where: str) -> Any:
    if isinstance(value, BaseEstimator):
        return {"estimator": _encode_estimator(value, arrays, where)}
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _NUMERIC_KINDS:
            raise DetectorStateError(
                f"{where} is an array of dtype {value.dtype}; a detector state holds bool, "
                "integer and float arrays only"
            )
        key = f"a{len(arrays)}"
        arrays[key] = value
        return {"array": key}
    if isinstance(value, np.generic):
        if value.dtype.kind not in _NUMERIC_KINDS:
            raise DetectorStateError(f"{where} is a numpy {value.dtype} scalar")
        return {"scalar": value.dtype.name, "value": _number(value.item())}
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": _number(value)}
    if isinstance(value, tuple):
        return {"tuple": [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: _encode(v, arrays, f"{where}[{k!r}]") for k, v in value.items()}}
    raise DetectorStateError(
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}; a detector state "
        "holds numbers, strings, arrays, lists, tuples, dicts and allowed estimators only"
    )


def _number(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _read_arrays(file: PackageFile) -> dict[str, np.ndarray]:
    """Every array of an open ``detector.npz``, after checking sizes and headers.

    Its zip directory is checked before any member is read, each member's ``.npy`` header
    before ``np.load`` reads the same file object.
    """
    path = file.path
    archive, members = open_archive(
        file, max_bytes=MAX_STATE_BYTES, max_members=MAX_STATE_ARRAYS, error=DetectorStateError
    )
    try:
        with archive:
            for member in members:
                _check_member(path, archive, member)
        file.handle.seek(0)
        with np.load(file.handle, allow_pickle=False) as npz:
            return {key: npz[key] for key in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        if isinstance(exc, PackageError):
            raise
        raise DetectorStateError(f"{path} cannot be read ({exc}); {REWRITE}") from exc


def _check_member(path: Path, archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> None:
    """An ``.npy`` member's header: numeric dtype, and no more data than the zip declares.

    ``np.load`` allocates the array the header declares before reading it; a header that
    declares more bytes than the member holds is refused here.
    """
    key = member.filename.removesuffix(".npy")
    if not member.filename.endswith(".npy") or not _ARRAY_KEY.match(key):
        raise DetectorStateError(
            f"{path} holds a member {member.filename!r}; a detector state holds a0.npy, "
            f"a1.npy, ... only. {REWRITE}"
        )
    with archive.open(member) as handle:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
        else:
            raise DetectorStateError(f"{path}: array {key!r} has .npy version {version}; {REWRITE}")
    if dtype.hasobject or dtype.kind not in _NUMERIC_KINDS:
        raise DetectorStateError(
            f"{path}: array {key!r} has dtype {dtype}; a detector state holds bool, integer and "
            f"float arrays only (object arrays would need pickle). {REWRITE}"
        )
    declared = math.prod(shape) * dtype.itemsize
    if declared > member.file_size:
        raise DetectorStateError(
            f"{path}: array {key!r} declares shape {shape} ({declared:,} bytes) in a member of "
            f"{member.file_size:,} bytes; refused unread. {REWRITE}"
        )


def _decode_estimator(
    node: Any, arrays: dict[str, np.ndarray], path: Path, where: str, depth: int
) -> BaseEstimator:
    if not isinstance(node, dict) or set(node) != {"class", "params", "fitted"}:
        raise DetectorStateError(
            f"{path}: {where} must be an object with keys class, params, fitted; {REWRITE}"
        )
    name = node["class"]
    cls = ALLOWED_CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise DetectorStateError(
            f"{path}: {where}.class is {name!r}, not a class this version loads "
            f"({sorted(ALLOWED_CLASSES)}); nothing was imported. {REWRITE}"
        )
    params, fitted = node["params"], node["fitted"]
    if not isinstance(params, dict) or not isinstance(fitted, dict):
        raise DetectorStateError(f"{path}: {where}.params and .fitted must be objects; {REWRITE}")
    accepted = set(cls._get_param_names())
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise DetectorStateError(
            f"{path}: {where}.params has {unknown}, not parameters of {name} "
            f"({sorted(accepted)}); {REWRITE}"
        )
    try:
        estimator = cls(
            **{
                k: _decode(v, arrays, path, f"{where}.params.{k}", depth + 1)
                for k, v in params.items()
            }
        )
        for attribute, value in fitted.items():
            if (
                not isinstance(attribute, str)
                or not _ATTRIBUTE.match(attribute)
                or attribute.startswith("__")
                or attribute in accepted
                or hasattr(cls, attribute)
            ):
                raise DetectorStateError(
                    f"{path}: {where}.fitted.{attribute} is not a fitted attribute {name} may "
                    f"hold (it names a parameter, a class member or a dunder); {REWRITE}"
                )
            decoded = _decode(value, arrays, path, f"{where}.fitted.{attribute}", depth + 1)
            setattr(estimator, attribute, decoded)
        _check_restored(estimator, where)
    except DetectorStateError:
        raise
    except (TypeError, ValueError, AttributeError) as exc:
        raise DetectorStateError(
            f"{path}: {where} ({name}) is not valid: {exc}; {REWRITE}"
        ) from exc
    return estimator


def _check_restored(estimator: BaseEstimator, where: str) -> None:
    """Parameter checks of the restored estimator, and the SVM's array shapes."""
    if type(estimator) in DETECTORS.values():
        estimator._check_params()
        check_is_fitted(estimator)
    else:
        estimator._validate_params()
    if isinstance(estimator, OneClassSVM):
        check_one_class_svm(estimator, where)


def _decode(node: Any, arrays: dict[str, np.ndarray], path: Path, where: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise DetectorStateError(f"{path}: {where} nests deeper than {MAX_DEPTH}; {REWRITE}")
    if node is None or isinstance(node, bool | int | float | str):
        return node
    if isinstance(node, list):
        return [_decode(v, arrays, path, f"{where}[{i}]", depth + 1) for i, v in enumerate(node)]
    if isinstance(node, dict):
        tag = set(node)
        if tag == {"array"} and isinstance(node["array"], str) and node["array"] in arrays:
            return arrays[node["array"]]
        if tag == {"scalar", "value"} and node["scalar"] in _SCALAR_TYPES:
            return _scalar(node["scalar"], node["value"], path, where)
        if tag == {"float"} and node["float"] in _SPECIAL_FLOATS:
            return float(node["float"])
        if tag == {"tuple"} and isinstance(node["tuple"], list):
            return tuple(_decode(node["tuple"], arrays, path, where, depth))
        if tag == {"dict"} and isinstance(node["dict"], dict):
            return {
                k: _decode(v, arrays, path, f"{where}[{k!r}]", depth + 1)
                for k, v in node["dict"].items()
            }
        if tag == {"estimator"}:
            return _decode_estimator(node["estimator"], arrays, path, where, depth + 1)
    raise DetectorStateError(
        f"{path}: {where} is {json.dumps(node)[:80]}, not a value this format defines (a "
        f"number, string, list, or an array/scalar/float/tuple/dict/estimator tag naming an "
        f"existing array or an allowed dtype); {REWRITE}"
    )


_SCALAR_TYPES: dict[str, type[np.generic]] = {
    np.dtype(t).name: np.dtype(t).type
    for t in (
        np.bool_,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.float16,
        np.float32,
        np.float64,
    )
}


def _scalar(dtype: str, value: Any, path: Path, where: str) -> np.generic:
    kind = np.dtype(dtype).kind
    valid = (
        (kind == "b" and isinstance(value, bool))
        or (kind in "iu" and isinstance(value, int) and not isinstance(value, bool))
        or (
            kind == "f"
            and (
                (isinstance(value, int | float) and not isinstance(value, bool))
                or value in _SPECIAL_FLOATS
            )
        )
    )
    if not valid:
        raise DetectorStateError(f"{path}: {where} holds {value!r}, not a {dtype}; {REWRITE}")
    try:
        return _SCALAR_TYPES[dtype](float(value) if kind == "f" else value)
    except OverflowError as exc:
        raise DetectorStateError(
            f"{path}: {where}: {value!r} overflows {dtype}; {REWRITE}"
        ) from exc
