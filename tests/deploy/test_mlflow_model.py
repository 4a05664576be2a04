"""The registered pyfunc model is logged from code: no pickle is written, none is loaded."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import mlflow
import numpy as np
import pytest
from mlflow.models import Model
from mlflow.models.model import MODEL_CODE_PATH
from mlflow.tracking import MlflowClient

from pipeline_lib.deploy.mlflow_model import load_package, log_and_register, model_arguments
from pipeline_lib.deploy.package_format import PackageError
from pipeline_lib.deploy.serving import DrocPyfunc
from tests.deploy.conftest import SMALL_SIZE, small_package


class _Payload:
    """Unpickling this object creates ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_registered_model_holds_no_pickle_and_scores_as_the_package(tmp_path: Path) -> None:
    package = small_package(tmp_path / "package")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    experiment = MlflowClient(uri).create_experiment(
        "deploy", artifact_location=(tmp_path / "artifacts").as_uri()
    )
    result = log_and_register(
        tmp_path / "package",
        tracking_uri=uri,
        experiment_id=experiment,
        registered_name="small",
        run_name="register",
        params={},
        metrics={},
    )
    assert result["registered_uri"] == "models:/small/1"
    mlflow.set_tracking_uri(uri)
    local = Path(mlflow.artifacts.download_artifacts(result["registered_uri"]))
    assert (local / "MLmodel").is_file() and (local / "artifacts" / "package").is_dir()
    assert not list(local.rglob("*.pkl")), "the logged model holds a pickle"
    assert MODEL_CODE_PATH in Model.load(str(local)).flavors["python_function"]
    served = load_package(result["registered_uri"])
    images = np.random.default_rng(2).integers(0, 256, (5, SMALL_SIZE, SMALL_SIZE, 3), np.uint8)
    # Same package files, same scoring code: the same kernels run by construction.
    np.testing.assert_array_equal(served.anomaly_scores(images), package.anomaly_scores(images))


def test_a_model_logged_as_a_pickle_is_refused_unread(tmp_path: Path) -> None:
    small_package(tmp_path / "package")
    arguments = model_arguments(tmp_path / "package") | {"python_model": DrocPyfunc()}
    mlflow.pyfunc.save_model(str(tmp_path / "model"), **arguments)
    pickles = list((tmp_path / "model").glob("python_model.pkl"))
    assert len(pickles) == 1  # what MLflow writes for an object python_model
    marker = tmp_path / "marker"
    pickles[0].write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(PackageError, match="not a model logged from code.*register_model"):
        load_package(str(tmp_path / "model"))
    assert not marker.exists()


#: The model code file ``pyfunc_model.py`` that models registered by earlier versions carry:
#: loading such a model runs it, so ``pipeline_lib.deploy.pyfunc.DrocPyfunc`` must resolve.
EARLIER_MODEL_CODE = """import mlflow

from pipeline_lib.deploy.pyfunc import DrocPyfunc

mlflow.models.set_model(DrocPyfunc())
"""


def test_a_model_logged_with_the_earlier_model_code_loads_and_scores(tmp_path: Path) -> None:
    package = small_package(tmp_path / "package")
    code = tmp_path / "pyfunc_model.py"
    code.write_text(EARLIER_MODEL_CODE)
    arguments = model_arguments(tmp_path / "package") | {"python_model": str(code)}
    mlflow.pyfunc.save_model(str(tmp_path / "model"), **arguments)
    flavor = Model.load(str(tmp_path / "model")).flavors["python_function"]
    assert Path(flavor[MODEL_CODE_PATH]).name == "pyfunc_model.py"
    assert (tmp_path / "model" / "pyfunc_model.py").read_text() == EARLIER_MODEL_CODE
    # pipeline_lib is imported already (as in `droc score --model models:/...`), so the
    # model's code resolves `pipeline_lib.deploy.pyfunc` against this checkout.
    loaded = load_package(str(tmp_path / "model"))
    images = np.random.default_rng(3).integers(0, 256, (4, SMALL_SIZE, SMALL_SIZE, 3), np.uint8)
    # Same package files, same scoring code: the same kernels run by construction.
    np.testing.assert_array_equal(loaded.anomaly_scores(images), package.anomaly_scores(images))
    assert loaded.threshold == package.threshold
