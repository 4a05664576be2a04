"""Train, package, register and serve a detector for real; compare served scores.

The session's studies toy run (tests/configs/studies_toy.yaml, its ``deploy`` section) trains
a RotNet (width 8, 3 epochs) on digits class 0 among its other models, scores it, logs the
sweep and registers the packaged RotNet + KDE cell in the run's SQLite MLflow store.
``mlflow models serve`` then answers on 127.0.0.1 (tests/serving.py: a free port, bounded
wait, stopped at the end); the served scores of the real test images must equal the
in-process ones and give the AUC the pipeline recorded for that cell.
"""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from pipeline_lib.data.split import load_split
from pipeline_lib.deploy.image_package import PackagedDetector
from pipeline_lib.detection.metrics import auroc
from pipeline_lib.runtime.io import load_image_dataset, load_json
from tests.deploy.conftest import png_bytes
from tests.deploy.hostile_corpus import png_with_header
from tests.serving import post_json, served_model

pytestmark = pytest.mark.workflow

NAME = "droc-digits-0"
CELL = "digits/0/contam0/seed0"


@pytest.fixture(scope="module")
def deploy_run(studies_run: Path) -> Path:
    """The run whose deploy section packaged and registered the cell."""
    return studies_run


def test_deploy_registers_the_cell(deploy_run: Path) -> None:
    record = load_json(deploy_run / f"deploy/{NAME}/deployed.json")
    assert record["cell"]["method"] == "rotnet" and record["cell"]["detector"] == "kde"
    result = load_json(deploy_run / f"{CELL}/rotnet/train/kde/result.json")
    metrics = record["metrics"]
    assert metrics["auroc_recorded"] == result["auroc"]
    assert metrics["auroc_pixels"] == pytest.approx(result["auroc"], abs=1e-9)
    assert 0.0 <= metrics["test_fpr"] <= 1.0 and metrics["heldout_fpr"] <= 0.05
    client = MlflowClient(f"sqlite:///{deploy_run / 'mlflow/mlflow.db'}")
    versions = client.search_model_versions(f"name = '{NAME}'")
    assert [str(v.version) for v in versions] == ["1"]
    run = client.get_run(versions[0].run_id)
    assert run.data.metrics["threshold"] == pytest.approx(metrics["threshold"])
    assert run.data.metrics["test_fpr"] == pytest.approx(metrics["test_fpr"])


def test_served_scores_match_in_process_and_recorded_auc(deploy_run: Path) -> None:
    dataset = load_image_dataset(deploy_run / "digits/dataset.npz")
    split = load_split(deploy_run / f"{CELL}/split.npz")
    images = dataset.test_images[split.test_index]
    records = [
        {"name": str(i), "image": base64.b64encode(png_bytes(image)).decode()}
        for i, image in enumerate(images)
    ]
    records.append({"name": "broken", "image": base64.b64encode(b"\x89PNG\r\n").decode()})
    tracking_uri = f"sqlite:///{deploy_run / 'mlflow/mlflow.db'}"
    with served_model(f"models:/{NAME}/1", tracking_uri=tracking_uri, workdir=deploy_run) as url:
        status, answer = post_json(f"{url}/invocations", {"dataframe_records": records})
        too_many = post_json(f"{url}/invocations", {"dataframe_records": [{"image": "x"}] * 257})
        # Five headers of 7,000 x 7,000 (49 Mpx each, under the per-image limit): 245 Mpx,
        # over the default request budget of 200 Mpx, refused before any is decoded.
        lying = base64.b64encode(png_with_header(7_000, 7_000)).decode()
        too_big = post_json(f"{url}/invocations", {"dataframe_records": [{"image": lying}] * 5})
    assert status == 200, answer
    rows = answer["predictions"]
    assert [row["name"] for row in rows] == [*map(str, range(len(images))), "broken"]
    assert rows[-1]["score"] is None and "image" in rows[-1]["error"]
    served = np.array([row["score"] for row in rows[:-1]], dtype=np.float64)

    package = PackagedDetector.load(deploy_run / f"deploy/{NAME}/package")
    in_process = package.anomaly_scores(images)
    difference = float(np.max(np.abs(served - in_process)))
    print(f"served vs in-process: max |diff| {difference:.3g} over {len(images)} images")
    assert difference <= 1e-9
    recorded = load_json(deploy_run / f"{CELL}/rotnet/train/kde/result.json")["auroc"]
    served_auc = auroc(served, split.test_is_outlier)
    print(f"AUC served {served_auc:.6f}, recorded by the pipeline {recorded:.6f}")
    assert served_auc == pytest.approx(recorded, abs=1e-9)
    assert [row["is_anomaly"] for row in rows[:-1]] == list(in_process > package.threshold)
    status, reason = too_many
    assert status == 400 and "over the limit of 256" in reason
    status, reason = too_big
    assert status == 400 and "245,000,000 pixels in total, over the budget of 200,000,000" in reason
    assert "DROC_REQUEST_PIXELS=<pixels>" in reason
