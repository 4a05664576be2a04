"""The packaged detector as an MLflow ``pyfunc`` model: log, register, load, predict.

This module imports mlflow (besides :mod:`pipeline_lib.report.tracking`, the only one that does):
the pyfunc class must subclass ``mlflow.pyfunc.PythonModel``. It is imported only by the
deploy step, the CLI (for ``models:/`` and ``runs:/`` URIs) and the serving process.

Request format (``mlflow models serve``; one row per image, JSON such as
``{"dataframe_records": [{"name": "a.png", "image": "<base64 PNG>"}]}``):

* ``image``: base64 of an encoded image file (PNG, JPEG, ...), any size; or
* ``array``: pixels as nested lists ``(h, w)``, ``(h, w, 1)`` or ``(h, w, 3)``, 0..255;
* ``name`` (optional): echoed back, to match answers to inputs.

Answer: one row per input with ``name``, ``score`` (anomaly score, higher = more
anomalous), ``is_anomaly`` (``score > threshold``) and ``error`` (empty when scored).

Why per-row errors: MLflow's scoring server turns any exception raised in ``predict`` into
one HTTP 400 for the whole request, so one truncated JPEG would fail every image sent with
it. ``predict`` therefore never raises for a bad item; it reports it in that row's
``error`` and scores the others. A request over the limits (:data:`MAX_ROWS` images or
:data:`MAX_REQUEST_BYTES` of image data) is refused as a whole with an
``MlflowException(INVALID_PARAMETER_VALUE)``, which the server answers with HTTP 400 and
the reason. MLflow's server reads the whole body before the model sees it (it has no body
size limit of its own), so a reverse proxy in front should cap the body size too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.types.schema import AnyType, ColSpec, DataType, Schema

from pipeline_lib.deploy.images import (
    DEFAULT_MAX_PIXELS,
    ImageError,
    decode_base64_image,
    image_from_array,
)
from pipeline_lib.deploy.package import PackagedDetector
from pipeline_lib.detection.evaluate import to_anomaly_scores

#: Most images one request may carry.
MAX_ROWS = 256
#: Most image data (base64 characters plus array values) one request may carry.
MAX_REQUEST_BYTES = 64 * 2**20
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


def score_rows(
    package: PackagedDetector, frame: pd.DataFrame, *, max_pixels: int = DEFAULT_MAX_PIXELS
) -> pd.DataFrame:
    """Decode and score every row of a request; bad rows get an error, the rest a score.

    Raises
    ------
    MlflowException
        (INVALID_PARAMETER_VALUE, HTTP 400) if the request exceeds :data:`MAX_ROWS` or
        :data:`MAX_REQUEST_BYTES`, or has neither an ``image`` nor an ``array`` column.
    """
    if not isinstance(frame, pd.DataFrame):
        frame = pd.DataFrame(frame)
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
    names = [
        str(frame["name"].iloc[i])
        if "name" in frame and _present(frame["name"].iloc[i])
        else str(i)
        for i in range(len(frame))
    ]
    errors = [""] * len(frame)
    good: list[int] = []
    images: list[np.ndarray] = []
    for i in range(len(frame)):
        image = frame["image"].iloc[i] if "image" in frame else None
        array = frame["array"].iloc[i] if "array" in frame else None
        try:
            if _present(image):
                pixels = decode_base64_image(image, size=package.image_size, max_pixels=max_pixels)
            elif array is not None and not (isinstance(array, float) and np.isnan(array)):
                pixels = image_from_array(array, size=package.image_size, max_pixels=max_pixels)
            else:
                raise ImageError("row has neither 'image' nor 'array'")
        except ImageError as error:
            errors[i] = str(error)
            continue
        good.append(i)
        images.append(pixels)
    scores: list[float | None] = [None] * len(frame)
    flags: list[bool | None] = [None] * len(frame)
    if images:
        anomaly = to_anomaly_scores(package.normality(np.stack(images)))
        for i, value in zip(good, anomaly, strict=True):
            scores[i] = float(value)
            flags[i] = bool(value > package.threshold)
    return pd.DataFrame(
        {
            "name": names,
            "score": pd.Series(scores, dtype=object),
            "is_anomaly": pd.Series(flags, dtype=object),
            "error": errors,
        }
    )


class DrocPyfunc(mlflow.pyfunc.PythonModel):
    """MLflow wrapper of a :class:`~pipeline_lib.deploy.package.PackagedDetector`."""

    def load_context(self, context: Any) -> None:
        self.package = PackagedDetector.load(context.artifacts[ARTIFACT])

    def predict(
        self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None
    ) -> pd.DataFrame:
        return score_rows(self.package, model_input)


def log_and_register(
    package_dir: str | os.PathLike,
    *,
    tracking_uri: str,
    experiment_id: str,
    registered_name: str | None,
    run_name: str,
    params: dict[str, Any],
    metrics: dict[str, float],
    tags: dict[str, str] | None = None,
    input_example: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """Log the package as a pyfunc model in a new run and register it under ``registered_name``.

    The model carries this project's code (``code_paths``), so serving it needs only the
    environment (torch, scikit-learn, mlflow), not a checkout.

    Returns
    -------
    dict
        ``run_id``, ``model_uri`` (``runs:/...``), ``registered_name``, ``version`` and
        ``registered_uri`` (``models:/NAME/VERSION``) when registered.
    """
    import pipeline_lib

    mlflow.set_tracking_uri(tracking_uri)
    code = str(Path(pipeline_lib.__file__).parent)
    with mlflow.start_run(experiment_id=experiment_id, run_name=run_name, tags=tags) as run:
        mlflow.log_params({k: str(v) for k, v in params.items()})
        mlflow.log_metrics({k: float(v) for k, v in metrics.items()})
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=DrocPyfunc(),
            artifacts={ARTIFACT: str(package_dir)},
            code_paths=[code],
            signature=SIGNATURE,
            input_example=input_example,
            registered_model_name=registered_name,
            pip_requirements=_requirements(),
        )
    result = {"run_id": run.info.run_id, "model_uri": f"runs:/{run.info.run_id}/model"}
    if registered_name:
        version = str(info.registered_model_version)
        result.update(
            registered_name=registered_name,
            version=version,
            registered_uri=f"models:/{registered_name}/{version}",
        )
    return result


def _requirements() -> list[str]:
    """Pinned to this environment, so an ``--env-manager virtualenv`` server matches it."""
    from importlib.metadata import version

    names = ["torch", "scikit-learn", "numpy", "pandas", "pillow", "mlflow", "onnxruntime"]
    return [f"{name}=={version(name)}" for name in names]


def load_package(uri: str) -> PackagedDetector:
    """The packaged detector behind an MLflow model URI (``models:/``, ``runs:/``, a path)."""
    model = mlflow.pyfunc.load_model(uri)
    return model.unwrap_python_model().package
