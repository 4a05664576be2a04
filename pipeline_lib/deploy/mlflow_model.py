"""The package as an MLflow model: logged from code, registered, and loaded back from a URI.

The model is logged from code (:mod:`pipeline_lib.deploy.model_code`), with the package
folder as its artifact and this project's code beside it, so the registry holds no pickle
and a served model answers as :mod:`pipeline_lib.deploy.serving` says. mlflow is imported
here (as in :mod:`pipeline_lib.deploy.serving` and :mod:`pipeline_lib.tracking.mlflow_store`);
this module is imported only by the register step and where the CLI resolves a ``models:/``
or ``runs:/`` URI.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.models import Model
from mlflow.models.model import MODEL_CODE_PATH

from pipeline_lib.deploy.package_format import PackageError
from pipeline_lib.deploy.package_kinds import Package
from pipeline_lib.deploy.saved_package import read_document
from pipeline_lib.deploy.serving import ARTIFACT, PATCH_SIGNATURE, SIGNATURE

#: The model's code file (MLflow "models from code"): logged instead of a pickled object.
MODEL_CODE = Path(__file__).with_name("model_code.py")


def model_arguments(package_dir: str | os.PathLike) -> dict[str, Any]:
    """What ``mlflow.pyfunc.log_model`` / ``save_model`` get for a package folder.

    The model is logged from code (:data:`MODEL_CODE`), not as a cloudpickled
    :class:`~pipeline_lib.deploy.serving.DrocPyfunc`: the logged model holds no pickle, and
    loading it runs this project's code and reads the package folder
    (:mod:`pipeline_lib.deploy.saved_package`, which unpickles nothing either). The
    project's code travels as ``code_paths``, so serving needs only the environment (torch,
    scikit-learn, mlflow), not a checkout.
    """
    import pipeline_lib

    return {
        "python_model": str(MODEL_CODE),
        "artifacts": {ARTIFACT: str(package_dir)},
        "code_paths": [str(Path(pipeline_lib.__file__).parent)],
        "signature": PATCH_SIGNATURE
        if read_document(package_dir)["kind"] == "patch"
        else SIGNATURE,
        "pip_requirements": _requirements(),
    }


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

    Logged from code with the package as an artifact (:func:`model_arguments`).

    Returns
    -------
    dict
        ``run_id``, ``model_uri`` (``runs:/...``), ``registered_name``, ``version`` and
        ``registered_uri`` (``models:/NAME/VERSION``) when registered.
    """
    mlflow.set_tracking_uri(tracking_uri)
    with mlflow.start_run(experiment_id=experiment_id, run_name=run_name, tags=tags) as run:
        mlflow.log_params({k: str(v) for k, v in params.items()})
        mlflow.log_metrics({k: float(v) for k, v in metrics.items()})
        info = mlflow.pyfunc.log_model(
            name="model",
            input_example=input_example,
            registered_model_name=registered_name,
            **model_arguments(package_dir),
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


def load_package(uri: str) -> Package:
    """The packaged detector behind an MLflow model URI (``models:/``, ``runs:/``, a path).

    Raises
    ------
    PackageError
        If the model was logged as a pickled object (before models from code): loading it
        would unpickle ``python_model.pkl``, so it is refused unread.
    """
    local = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri))
    flavor = Model.load(str(local)).flavors.get("python_function", {})
    if MODEL_CODE_PATH not in flavor:
        raise PackageError(
            f"{uri} is not a model logged from code (its python_function flavor has no "
            "model_code_path, so loading it would unpickle its python_model); re-run the "
            "register step (snakemake --forcerun register_model ...) to log it again"
        )
    model = mlflow.pyfunc.load_model(str(local))
    return model.unwrap_python_model().package
