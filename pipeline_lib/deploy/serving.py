"""A served package: MLflow's pyfunc model class and the requests it answers, row by row.

Request format (``mlflow models serve``; one row per image, JSON such as
``{"dataframe_records": [{"name": "a.png", "image": "<base64 PNG>"}]}``):

* ``image``: base64 of an encoded image file (PNG, JPEG, ...), any size; or
* ``array``: pixels as nested lists ``(h, w)``, ``(h, w, 1)`` or ``(h, w, 3)``, 0..255;
* ``name`` (optional): echoed back, to match answers to inputs.

Answer: one row per input with ``name``, ``score`` (anomaly score, higher = more
anomalous), ``is_anomaly`` (``score > threshold``) and ``error`` (empty when scored).
MVTec (patch) packages add ``anomaly_map``: base64 of a ``.npy`` file holding the float32
``(image_size, image_size)`` up-sampled anomaly map of the resized input (higher = more
anomalous, on the scale of ``score``), read back with
``np.load(io.BytesIO(base64.b64decode(value)))`` (:func:`decode_map`). Why ``.npy`` and not
nested lists: a 256 x 256 map is 65,536 floats, about 1.3 MB as JSON numbers and 350 kB as
base64 ``.npy``, and the shape and dtype travel with it. Why not a PNG: a PNG holds 8- or
16-bit levels, not the scores.

Why per-row errors: MLflow's scoring server turns any exception raised in ``predict`` into
one HTTP 400 for the whole request, so one truncated JPEG would fail every image sent with
it. ``predict`` therefore never raises for a bad item; it reports it in that row's
``error`` and scores the others. A request over the limits (:data:`MAX_ROWS` images,
:data:`MAX_REQUEST_BYTES` of image data, or more pixels declared by its images' headers
and arrays' shapes, all rows together, than the request pixel budget: 200,000,000 by
default, ``DROC_REQUEST_PIXELS`` in the server's environment to change it) is refused as
a whole, before any image is decoded, with an ``MlflowException(INVALID_PARAMETER_VALUE)``,
which the server answers with HTTP 400 and the reason. MLflow's server reads the whole
body before the model sees it (it has no body size limit of its own), so a reverse proxy
in front should cap the body size too.

The class, :class:`DrocPyfunc`, subclasses ``mlflow.pyfunc.PythonModel``, so this module
imports mlflow (as :mod:`pipeline_lib.deploy.mlflow_model` and
:mod:`pipeline_lib.tracking.mlflow_store` do); it is imported only by the deploy step, the
CLI (for ``models:/`` and ``runs:/`` URIs) and the serving process.
"""

from __future__ import annotations

import base64
import io
import os
from typing import Any

import mlflow
import numpy as np
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.types.schema import AnyType, ColSpec, DataType, Schema

from pipeline_lib.deploy.images import (
    DEFAULT_MAX_PIXELS,
    DEFAULT_REQUEST_PIXELS,
    ImageError,
    RequestTooLargeError,
    check_request_pixels,
    decode_base64_image,
    image_from_array,
)
from pipeline_lib.deploy.package_kinds import Package, has_maps, load_package_folder

#: Most images one request may carry.
MAX_ROWS = 256
#: Most image data (base64 characters plus array values) one request may carry.
MAX_REQUEST_BYTES = 64 * 2**20
#: Environment variable of the serving process that sets the request pixel budget
#: (default :data:`~pipeline_lib.deploy.images.DEFAULT_REQUEST_PIXELS`).
REQUEST_PIXELS_ENV = "DROC_REQUEST_PIXELS"
#: Name of the package folder among the pyfunc model's artifacts.
ARTIFACT = "package"

SIGNATURE = ModelSignature(
    inputs=Schema(
        [
            ColSpec(DataType.string, "name", required=False),
            ColSpec(DataType.string, "image", required=False),
            ColSpec(AnyType(), "array", required=False),
        ]
    ),
    outputs=Schema(
        [
            ColSpec(DataType.string, "name"),
            ColSpec(DataType.double, "score", required=False),
            ColSpec(DataType.boolean, "is_anomaly", required=False),
            ColSpec(DataType.string, "error"),
        ]
    ),
)
#: MVTec (patch) packages: the same plus ``anomaly_map`` (base64 ``.npy``, module docstring).
PATCH_SIGNATURE = ModelSignature(
    inputs=SIGNATURE.inputs,
    outputs=Schema(
        [*SIGNATURE.outputs.inputs, ColSpec(DataType.string, "anomaly_map", required=False)]
    ),
)


def encode_map(anomaly_map: np.ndarray) -> str:
    """base64 of the ``.npy`` bytes of a float32 map (the ``anomaly_map`` column)."""
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(anomaly_map, dtype=np.float32), allow_pickle=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def decode_map(text: str) -> np.ndarray:
    """The map of an ``anomaly_map`` value (inverse of :func:`encode_map`)."""
    return np.load(io.BytesIO(base64.b64decode(text)), allow_pickle=False)


def _present(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, float) and np.isnan(value):
        return False
    return True


def _request_size(frame: pd.DataFrame) -> int:
    size = 0
    for column in ("image", "array"):
        if column in frame:
            for value in frame[column]:
                if isinstance(value, str | bytes):
                    size += len(value)
                elif _present(value):
                    size += int(np.size(np.asarray(value, dtype=object)))
    return size


def request_pixel_budget() -> int:
    """The request pixel budget: ``$DROC_REQUEST_PIXELS``, else ``DEFAULT_REQUEST_PIXELS``.

    Read from the serving process's environment, so whoever runs the server sets it, not
    whoever sends the request.

    Raises
    ------
    ValueError
        If the variable is set to something other than a positive integer.
    """
    text = os.environ.get(REQUEST_PIXELS_ENV, "").strip().replace("_", "")
    if not text:
        return DEFAULT_REQUEST_PIXELS
    if not text.isdigit() or int(text) < 1:
        raise ValueError(
            f"${REQUEST_PIXELS_ENV}={os.environ[REQUEST_PIXELS_ENV]!r} is not a positive "
            "integer (pixels per request, all images together); unset it for the default "
            f"{DEFAULT_REQUEST_PIXELS:,}"
        )
    return int(text)


def _check_request_pixels(frame: pd.DataFrame, *, budget: int, max_pixels: int) -> None:
    """The request's header pixels within ``budget``, or its HTTP 400 naming how to raise it.

    Each row counts what :func:`score_rows` would decode: its ``image`` if present, else
    its ``array``.
    """
    images, arrays = [], []
    for i in range(len(frame)):
        image = frame["image"].iloc[i] if "image" in frame else None
        if _present(image):
            images.append(image)
        elif "array" in frame and _present(frame["array"].iloc[i]):
            arrays.append(frame["array"].iloc[i])
    try:
        check_request_pixels(images, arrays, budget=budget, max_pixels=max_pixels)
    except RequestTooLargeError as error:
        raise MlflowException.invalid_parameter_value(
            f"{error}, or raise the budget by starting the server with "
            f"{REQUEST_PIXELS_ENV}=<pixels> in its environment"
        ) from error


def score_rows(
    package: Package,
    frame: pd.DataFrame,
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    request_pixels: int | None = None,
) -> pd.DataFrame:
    """Decode and score every row of a request; bad rows get an error, the rest a score.

    Parameters
    ----------
    package : Package
        The detector.
    frame : DataFrame
        The request's rows (module docstring).
    max_pixels : int, default=DEFAULT_MAX_PIXELS
        Most pixels of one image (and of its resize intermediate); larger ones are refused
        in their row.
    request_pixels : int, optional
        Most pixels all of the request's images may declare together, read from their
        headers and shapes before any is decoded; default :func:`request_pixel_budget`.

    Raises
    ------
    MlflowException
        (INVALID_PARAMETER_VALUE, HTTP 400) if the request exceeds :data:`MAX_ROWS`,
        :data:`MAX_REQUEST_BYTES` or ``request_pixels``, or has neither an ``image`` nor an
        ``array`` column.
    """
    if not isinstance(frame, pd.DataFrame):
        frame = pd.DataFrame(frame)
    _check_request(frame, max_pixels=max_pixels, request_pixels=request_pixels)
    errors, good, images = _decode_rows(package, frame, max_pixels=max_pixels)
    names = [
        str(frame["name"].iloc[i])
        if "name" in frame and _present(frame["name"].iloc[i])
        else str(i)
        for i in range(len(frame))
    ]
    scores, flags, maps = _score_rows(package, images, good, len(frame))
    columns = {
        "name": names,
        "score": pd.Series(scores, dtype=object),
        "is_anomaly": pd.Series(flags, dtype=object),
        "error": errors,
    }
    if has_maps(package):
        columns["anomaly_map"] = pd.Series(maps, dtype=object)
    return pd.DataFrame(columns)


def _check_request(frame: pd.DataFrame, *, max_pixels: int, request_pixels: int | None) -> None:
    """Refuse a request over the limits as a whole (HTTP 400), before any image is decoded."""
    if len(frame) > MAX_ROWS:
        raise MlflowException.invalid_parameter_value(
            f"request holds {len(frame)} images, over the limit of {MAX_ROWS} per request; "
            "split it into smaller requests"
        )
    size = _request_size(frame)
    if size > MAX_REQUEST_BYTES:
        raise MlflowException.invalid_parameter_value(
            f"request holds {size:,} bytes of image data, over the limit of "
            f"{MAX_REQUEST_BYTES:,}; send fewer or smaller images per request"
        )
    if "image" not in frame and "array" not in frame:
        raise MlflowException.invalid_parameter_value(
            f"request has columns {list(frame.columns)}; each row needs 'image' (base64 of an "
            "image file) or 'array' (pixels as nested lists)"
        )
    _check_request_pixels(
        frame,
        budget=request_pixel_budget() if request_pixels is None else request_pixels,
        max_pixels=max_pixels,
    )


def _decode_rows(
    package: Package, frame: pd.DataFrame, *, max_pixels: int
) -> tuple[list[str], list[int], list[np.ndarray]]:
    """Every row's error (empty when decoded), the decoded rows and their pixels."""
    errors = [""] * len(frame)
    good: list[int] = []
    images: list[np.ndarray] = []
    for i in range(len(frame)):
        image = frame["image"].iloc[i] if "image" in frame else None
        array = frame["array"].iloc[i] if "array" in frame else None
        try:
            if _present(image):
                pixels = decode_base64_image(
                    image, size=package.image_size, max_pixels=max_pixels, resize=package.resize
                )
            elif array is not None and not (isinstance(array, float) and np.isnan(array)):
                pixels = image_from_array(
                    array, size=package.image_size, max_pixels=max_pixels, resize=package.resize
                )
            else:
                raise ImageError("row has neither 'image' nor 'array'")
        except ImageError as error:
            errors[i] = str(error)
            continue
        good.append(i)
        images.append(pixels)
    return errors, good, images


def _score_rows(
    package: Package, images: list[np.ndarray], good: list[int], n_rows: int
) -> tuple[list[float | None], list[bool | None], list[str | None]]:
    """Score, verdict and encoded map (patch packages) of the decoded rows; None elsewhere."""
    scores: list[float | None] = [None] * n_rows
    flags: list[bool | None] = [None] * n_rows
    maps: list[str | None] = [None] * n_rows
    if images and has_maps(package):
        result = package.score(np.stack(images))
        for k, i in enumerate(good):
            scores[i] = float(result.scores[k])
            flags[i] = bool(result.is_anomaly[k])
            maps[i] = encode_map(result.maps[k])
    elif images:
        anomaly = package.anomaly_scores(np.stack(images))
        for i, value in zip(good, anomaly, strict=True):
            scores[i] = float(value)
            flags[i] = bool(value > package.threshold)
    return scores, flags, maps


class DrocPyfunc(mlflow.pyfunc.PythonModel):
    """MLflow wrapper of a package of either kind (:mod:`pipeline_lib.deploy.package_kinds`)."""

    def load_context(self, context: Any) -> None:
        request_pixel_budget()  # a bad $DROC_REQUEST_PIXELS stops the server at its start
        self.package = load_package_folder(context.artifacts[ARTIFACT])

    def predict(
        self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None
    ) -> pd.DataFrame:
        return score_rows(self.package, model_input)
