"""``droc score`` on a folder with broken images: the others scored, the broken ones named."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np

from pipeline_lib.deploy.package import PackagedDetector
from pipeline_lib.runtime.io import load_image_dataset
from tests.deploy.conftest import png_bytes

REPO = Path(__file__).resolve().parents[2]


def test_score_folder_with_a_broken_image(kde_package: Path, digits_cell, tmp_path: Path) -> None:
    images = load_image_dataset(digits_cell["dataset"]).test_images[:6]
    folder = tmp_path / "line"
    (folder / "sub").mkdir(parents=True)
    good = [folder / f"img{i}.png" for i in range(5)] + [folder / "sub" / "img5.png"]
    for path, image in zip(good, images, strict=True):
        path.write_bytes(png_bytes(image))
    (folder / "broken.png").write_bytes(png_bytes(images[0])[:60])  # truncated
    (folder / "fake.jpg").write_text("not a jpeg")
    (tmp_path / "empty").mkdir()
    output = tmp_path / "out" / "scores.csv"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline_lib.deploy.cli",
            "score",
            "--model",
            str(kde_package),
            str(folder),
            str(tmp_path / "empty"),
            "--output",
            str(output),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    with open(output) as handle:
        rows = list(csv.DictReader(handle))
    assert sorted(row["file"] for row in rows) == sorted(str(path) for path in good)
    package = PackagedDetector.load(kde_package)
    expected = dict(zip(map(str, good), package.anomaly_scores(images), strict=True))
    for row in rows:
        assert (
            float(row["score"]) == np.float64(expected[row["file"]]).round(12)
            or abs(float(row["score"]) - expected[row["file"]]) < 1e-9
        )
        assert row["is_anomaly"] == str(expected[row["file"]] > package.threshold)
    with open(output.with_name("scores_errors.csv")) as handle:
        errors = {row["file"]: row["error"] for row in csv.DictReader(handle)}
    assert set(errors) == {
        str(folder / "broken.png"),
        str(folder / "fake.jpg"),
        str(tmp_path / "empty"),
    }
    assert "truncated" in errors[str(folder / "broken.png")]
    assert "broken.png" in result.stderr and "scored 6 image(s)" in result.stderr
