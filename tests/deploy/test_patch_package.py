"""An MVTec patch cell as a product: maps where the defect is, exports, CLI heat maps, pyfunc.

The cell is trained on the synthetic category of tests/mvtec/conftest.py (64 x 64 images,
an off-colour square as the defect): RotNet of width 4, one epoch on 16 x 16 patches, KDE
on every dense training patch (stride 4, a 13 x 13 grid).
"""

from __future__ import annotations

import base64
import csv
import json
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch
from mlflow.models import Model
from PIL import Image

from pipeline_lib.data.mvtec import category_to_arrays, read_mvtec_category
from pipeline_lib.deploy.cli import main as droc
from pipeline_lib.deploy.image_package import PackagedDetector
from pipeline_lib.deploy.mlflow_model import model_arguments
from pipeline_lib.deploy.package_format import PACKAGE_FORMAT, PackageError
from pipeline_lib.deploy.package_kinds import load_package_folder
from pipeline_lib.deploy.packaging import package_cell
from pipeline_lib.deploy.patch_package import PackagedPatchDetector
from pipeline_lib.deploy.patch_protocol import PatchProtocol
from pipeline_lib.deploy.serving import PATCH_SIGNATURE, decode_map
from pipeline_lib.detection.metrics import auroc
from pipeline_lib.models.checkpoints import save_representation
from pipeline_lib.mvtec.patches import train_on_patches
from pipeline_lib.runtime.io import save_npz
from pipeline_lib.ssl.settings import TrainSettings
from tests.deploy.conftest import png_bytes
from tests.mvtec.conftest import write_category

SIZE, PATCH, STRIDE = 64, 16, 4


def patch_protocol(category_path: Path) -> PatchProtocol:
    """The cell's patch protocol: 16 x 16 patches at stride 4, every training patch."""
    return PatchProtocol(
        category_path=category_path,
        patch_size=PATCH,
        stride=STRIDE,
        sigma=4.0,
        normalize=True,
        max_fit_patches=None,
    )


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The packaged cell: its folder, the category and the package's metrics."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny networks: one thread is faster on a busy machine
    folder = tmp_path_factory.mktemp("mvtec_cell")
    category = read_mvtec_category(
        write_category(folder / "data", "widget", size=SIZE, n_train=12), image_size=SIZE
    )
    save_npz(folder / "category.npz", category_to_arrays(category))
    model, _ = train_on_patches(
        TrainSettings("rotnet", epochs=1, batch_size=32, width=4),
        category.train_images,
        per_image=16,
        patch_size=PATCH,
        seed=0,
    )
    save_representation(folder / "model.pt", model, method="rotnet", config_dict={})
    metrics = package_cell(
        folder / "package",
        patch_protocol(folder / "category.npz"),
        model_path=folder / "model.pt",
        cell={"dataset": "mvtec", "inlier": "widget", "method": "rotnet", "detector": "kde"}
        | {"seed": 0},
        detector_params={},
        width=4,
        target_fpr=0.1,
    )
    yield {"package": folder / "package", "category": category, "metrics": metrics}
    torch.set_num_threads(threads)


def test_maps_are_input_sized_and_high_on_the_defect(cell: dict) -> None:
    package = load_package_folder(cell["package"])
    assert isinstance(package, PackagedPatchDetector)
    category = cell["category"]
    result = package.score(category.test_images)
    assert result.maps.shape == (len(category.test_images), SIZE, SIZE)
    assert result.maps.dtype == np.float32
    defective = category.test_labels == 1
    masks = category.test_masks[defective].astype(bool)
    maps = result.maps[defective]
    assert maps[masks].mean() > maps[~masks].mean()
    pixel = auroc(maps.ravel(), masks.ravel().astype(np.int8))
    assert pixel > 75.0, pixel
    metrics = cell["metrics"]
    assert metrics["pixel_auroc"] > 75.0 and metrics["image_auroc"] > 75.0
    assert 0.0 <= metrics["test_fpr"] <= 1.0 and 0.0 <= metrics["test_tpr"] <= 1.0
    assert np.array_equal(result.is_anomaly, result.scores > package.threshold)


def test_exports_agree_and_the_package_says_what_is_exported(cell: dict) -> None:
    document = json.loads((cell["package"] / "package.json").read_text())
    assert document["format"] == PACKAGE_FORMAT and document["kind"] == "patch"
    assert document["resize"] == "stretch"
    assert document["anomaly_map"]["size"] == [SIZE, SIZE]
    assert document["export"]["files"] == ["model.ts", "model.onnx"]
    for part in ("score", "map"):
        parity = document["parity"][part]
        assert parity["ok"]
        assert set(parity["max_abs_diff"]) >= {"torchscript", "onnx", "package_reloaded"}
        assert parity["max_abs_diff"]["package_reloaded"] == 0.0


def test_save_load_round_trip_is_exact(cell: dict, tmp_path: Path) -> None:
    images = cell["category"].test_images
    first = PackagedPatchDetector.load(cell["package"])
    first.save(tmp_path / "copy")
    second = load_package_folder(tmp_path / "copy")
    a, b = first.score(images), second.score(images)
    assert np.array_equal(a.scores, b.scores) and np.array_equal(a.maps, b.maps)
    assert second.threshold == first.threshold
    with pytest.raises(PackageError, match="'patch' package"):
        PackagedDetector.load(cell["package"])


def test_droc_score_writes_a_heatmap_per_image(cell: dict, tmp_path: Path) -> None:
    category = cell["category"]
    folder = tmp_path / "line"
    folder.mkdir()
    chosen = [0, int(np.flatnonzero(category.test_labels)[0])]
    for i in chosen:
        Image.fromarray(category.test_images[i]).save(folder / f"img{i}.png")
    # Another size and aspect: stretched whole to 64 x 64, as the MVTec reader does.
    wide = Image.fromarray(category.test_images[chosen[1]]).resize((96, 48))
    wide.save(folder / "wide.png")
    (folder / "broken.png").write_bytes(png_bytes(category.test_images[0])[:60])
    output = tmp_path / "out" / "scores.csv"
    status = droc(["score", "--model", str(cell["package"]), str(folder), "--output", str(output)])
    assert status == 1  # one error, the others scored
    with open(output) as handle:
        rows = {Path(row["file"]).name: row for row in csv.DictReader(handle)}
    assert set(rows) == {f"img{i}.png" for i in chosen} | {"wide.png"}
    package = load_package_folder(cell["package"])
    expected = package.score(category.test_images[chosen])
    for k, i in enumerate(chosen):
        row = rows[f"img{i}.png"]
        assert abs(float(row["anomaly_score"]) - expected.scores[k]) < 1e-9
        assert row["is_anomaly"] == str(bool(expected.is_anomaly[k]))
        heatmap = Path(row["heatmap"])
        assert heatmap == output.with_name("scores_heatmaps") / f"img{i}_heatmap.png"
        assert np.asarray(Image.open(heatmap)).shape == (SIZE, SIZE, 3)
    assert Path(rows["wide.png"]["heatmap"]).is_file()
    assert len(list(output.with_name("scores_heatmaps").iterdir())) == 3
    with open(output.with_name("scores_errors.csv")) as handle:
        errors = {Path(row["file"]).name: row["error"] for row in csv.DictReader(handle)}
    assert set(errors) == {"broken.png"} and "truncated" in errors["broken.png"]


def test_pyfunc_returns_the_map(cell: dict, tmp_path: Path) -> None:
    mlflow.pyfunc.save_model(str(tmp_path / "pyfunc"), **model_arguments(cell["package"]))
    assert not list((tmp_path / "pyfunc").rglob("*.pkl"))
    assert Model.load(str(tmp_path / "pyfunc")).signature == PATCH_SIGNATURE
    model = mlflow.pyfunc.load_model(str(tmp_path / "pyfunc"))
    images = cell["category"].test_images[-2:]
    frame = pd.DataFrame(
        {
            "name": ["a", "b", "bad"],
            "image": [base64.b64encode(png_bytes(image)).decode() for image in images]
            + ["not base64!"],
        }
    )
    answer = model.predict(frame)
    assert list(answer["error"][:2]) == ["", ""] and "base64" in answer["error"][2]
    expected = load_package_folder(cell["package"]).score(images)
    for k in range(2):
        anomaly_map = decode_map(answer["anomaly_map"][k])
        assert anomaly_map.shape == (SIZE, SIZE) and anomaly_map.dtype == np.float32
        assert np.array_equal(anomaly_map, expected.maps[k])
        assert answer["score"][k] == expected.scores[k]
    assert answer["anomaly_map"][2] is None


def test_unpackable_method_is_refused_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(PackageError, match="resnet50_imagenet.*outside weights"):
        package_cell(
            tmp_path / "package",
            patch_protocol(tmp_path / "missing.npz"),
            model_path=None,
            cell={"dataset": "mvtec", "inlier": "w", "method": "resnet50_imagenet"}
            | {"detector": "kde", "seed": 0},
            detector_params={},
            width=4,
            target_fpr=0.1,
        )
