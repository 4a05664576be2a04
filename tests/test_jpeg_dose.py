"""benchmarks/jpeg_dose.py and its package benchmarks/jpeg/: the dose of a JPEG re-encoding,
the fit through the origin, one measurement on a tiny synthetic CIFAR-shaped set, the
summary's documented keys and the script's ``--report-only``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from pipeline_lib.data import ImageDataset
from pipeline_lib.data.cifar import CIFAR10_CLASSES
from tests.benchmark_scripts import load_benchmark, load_benchmark_package

FILES = ("results.csv", "summary.json", "README.md")


@pytest.fixture(scope="module")
def jpeg():
    return load_benchmark_package("jpeg")


def _photo_like(n: int, seed: int = 0) -> np.ndarray:
    """Smooth colour fields plus mild noise: something JPEG compresses like a photograph."""
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(0, 255, size=(n, 4, 4, 3))
    smooth = coarse.repeat(8, axis=1).repeat(8, axis=2)
    return np.clip(smooth + rng.normal(0, 12, size=smooth.shape), 0, 255).astype(np.uint8)


def test_lower_quality_gives_a_larger_dose_and_q100_444_a_tiny_one(jpeg) -> None:
    images = _photo_like(6)
    doses = {
        q: jpeg.doses.mean_abs_change(images, jpeg.doses.reencode(images, quality=q))
        for q in (75, 50, 30)
    }
    assert 0 < doses[75] < doses[50] < doses[30]
    near_lossless = jpeg.doses.reencode(images, quality=100, subsampling=jpeg.doses.SUBSAMPLING_444)
    # q100 4:4:4 only rounds through YCbCr and unit DCT steps: well under one grey level.
    assert jpeg.doses.mean_abs_change(images, near_lossless) < 1.0 < doses[75]
    # A second pass at the same quality changes far less than the first one did.
    once = jpeg.doses.reencode(images, quality=75)
    assert jpeg.doses.mean_abs_change(once, jpeg.doses.reencode(once, quality=75)) < doses[75] / 2


def test_dataset_dose_is_the_mean_over_both_splits(jpeg) -> None:
    train, test = _photo_like(4, seed=1), _photo_like(2, seed=2)
    labels = np.zeros(4, dtype=np.int64), np.zeros(2, dtype=np.int64)
    dataset = ImageDataset("cifar10", train, labels[0], test, labels[1], CIFAR10_CLASSES)
    recoded, dose = jpeg.doses.reencode_dataset(dataset, jpeg.doses.Dose("q50", 50))
    everything = (
        np.concatenate([train, test]),
        np.concatenate([recoded.train_images, recoded.test_images]),
    )
    assert dose == pytest.approx(jpeg.doses.mean_abs_change(*everything), rel=1e-12)
    assert jpeg.doses.reencode_dataset(dataset, jpeg.doses.Dose("shared", None)) == (dataset, 0.0)
    with pytest.raises(ValueError, match="repeated"):
        jpeg.doses.doses_for([50, 50])


def test_fit_through_origin_recovers_an_exact_slope(jpeg) -> None:
    assert jpeg.fit.fit_through_origin([0.3, 2.0, 5.0], [-0.15, -1.0, -2.5]) == pytest.approx(-0.5)
    # Off-line points: sum(d y) / sum(d^2) = (1 * 1 + 2 * 1) / (1 + 4).
    assert jpeg.fit.fit_through_origin([1.0, 2.0], [1.0, 1.0]) == pytest.approx(0.6)
    with pytest.raises(ValueError, match="every dose is 0"):
        jpeg.fit.fit_through_origin([0.0], [1.0])
    # The same points as AUC rows: residuals 1 - 0.6 and 1 - 1.2 about the line.
    rows = [
        {"dose_name": name, "representation": "raw", "detector": "kde", "seed": 0, "auroc": auc}
        for name, auc in (("shared", 80.0), ("q50", 81.0), ("q30", 81.0))
    ]
    fit = jpeg.fit.slopes_from_rows(rows, {"shared": 0.0, "q50": 1.0, "q30": 2.0})["raw/kde"]
    assert fit["slope"] == pytest.approx(0.6) and fit["slope_spread"] == 0.0
    assert fit["residual_rms"] == pytest.approx(math.sqrt((0.4**2 + 0.2**2) / 2))


def _rows(jpeg, doses: dict[str, float]) -> list[dict]:
    """Hand-made AUCs: KDE falls 0.4 per grey level for seed 0, 0.2 for seed 1."""
    rows = []
    for seed, slope in ((0, -0.4), (1, -0.2)):
        for name, dose in doses.items():
            rows.append(
                {
                    "dose_name": name,
                    "quality": None,
                    "dose": dose,
                    "representation": "rotnet",
                    "width": 8,
                    "epochs": 1,
                    "n_train": 16,
                    "seed": seed,
                    "detector": "kde",
                    "auroc": 90.0 + seed + slope * dose,
                    "last_loss": 1.0,
                    "train_s": 1.0,
                    "embed_s": 1.0,
                    "detect_s": 1.0,
                    "wall_s": 3.0,
                }
            )
    return rows


def test_summary_slopes_predictions_and_keys(jpeg, tmp_path: Path) -> None:
    doses = {"shared": 0.0, "q75": 0.3, "q50": 6.0, "q30": 9.0}
    rows = _rows(jpeg, doses)
    lossless = {
        "bottle": jpeg.lossless.LosslessDose(n_images=3, q75=2.0, further=3.0),
        "photos": jpeg.lossless.LosslessDose(n_images=3, q75=4.0, further=6.0),
    }
    summary = jpeg.summary.build_summary(
        rows,
        doses=doses,
        qualities={"shared": None, "q75": 75, "q50": 50, "q30": 30},
        lossless=lossless,
        settings=jpeg.measure.Settings(rotnet_width=8, epochs=1, n_train=16),
        seeds=[0, 1],
        command="python benchmarks/jpeg_dose.py",
        wall_s=1.0,
        machine="Measuring CPU (2 CPUs), 1 torch thread per worker",
    )
    assert set(jpeg.summary.SUMMARY_KEYS) <= set(summary)
    fit = summary["slopes"]["rotnet/kde"]
    assert fit["slope_seeds"] == {"0": pytest.approx(-0.4), "1": pytest.approx(-0.2)}
    assert fit["slope"] == pytest.approx(-0.3) and fit["slope_spread"] == pytest.approx(0.1)
    assert fit["deltas"]["q50"] == pytest.approx(-0.3 * 6.0)
    # Calibration: CIFAR's q50 change (6.0) over the source's further change.
    estimates = summary["q75_dose_estimates"]
    assert estimates["bottle_calibrated"] == pytest.approx(2.0 * 6.0 / 3.0)
    assert estimates["photos_calibrated"] == pytest.approx(4.0 * 6.0 / 6.0)
    assert summary["q75_dose_estimate"] == 2.0 and summary["q75_dose_range"] == [2.0, 4.0]
    kde = summary["predicted_kde_change"]
    assert kde["central"] == pytest.approx(0.3 * 2.0)  # lossless higher: -slope x dose
    assert (kde["low"], kde["high"]) == (pytest.approx(0.2 * 2.0), pytest.approx(0.4 * 4.0))
    assert summary["can_move_kde_half_point"] is True
    assert "+0.60 points" in summary["conclusion"]

    flat = [dict(row, auroc=90.0 + row["seed"] + 0.01 * row["dose"]) for row in rows]
    small = jpeg.summary.build_summary(
        flat,
        doses=doses,
        qualities={},
        lossless=lossless,
        settings=jpeg.measure.Settings(),
        seeds=[0, 1],
        command="c",
        wall_s=1.0,
    )
    assert small["can_move_kde_half_point"] is False  # 0.01 x 4 grey levels = 0.04 points

    jpeg.report.write_outputs(tmp_path, rows, summary)
    assert jpeg.rows.read_rows(tmp_path / "results.csv")[3]["auroc"] == pytest.approx(
        rows[3]["auroc"], abs=1e-4
    )
    assert json.loads((tmp_path / "summary.json").read_text())["doses"] == doses
    readme = (tmp_path / "README.md").read_text()
    assert "| rotnet/kde | 90.50 | 90.41 | 88.70 | 87.80 | -0.300 +- 0.100 |" in readme
    assert all(f"`{key}`" in readme for key in jpeg.summary.SUMMARY_KEYS)
    # --report-only rebuilds the same summary from the files (AUCs rounded to 1e-4 there).
    rebuilt = jpeg.report.rebuild_report(tmp_path)
    assert rebuilt["slopes"]["rotnet/kde"]["slope"] == pytest.approx(-0.3, abs=1e-4)
    assert rebuilt["predicted_kde_change"] == pytest.approx(kde, abs=1e-3)
    assert rebuilt["command"] == summary["command"] and rebuilt["can_move_kde_half_point"]
    assert rebuilt["machine"] == summary["machine"]  # the measuring machine, not this one
    # The script's --report-only is that rebuild: run on its own output, it rewrites the same
    # bytes (the rows are already rounded, so nothing moves a second time).
    written = {name: (tmp_path / name).read_bytes() for name in FILES}
    script = load_benchmark("jpeg_dose.py")
    assert script.main(["--report-only", "--out", str(tmp_path)]) == rebuilt
    assert {name: (tmp_path / name).read_bytes() for name in FILES} == written


def test_one_measurement_on_a_tiny_set(jpeg) -> None:
    rng = np.random.default_rng(0)
    train_labels = np.repeat(np.arange(10, dtype=np.int64), 3)
    test_labels = np.repeat(np.arange(10, dtype=np.int64), 2)
    dataset = ImageDataset(
        "cifar10",
        _photo_like(len(train_labels), seed=3),
        train_labels,
        rng.integers(0, 256, size=(len(test_labels), 32, 32, 3), dtype=np.uint8),
        test_labels,
        CIFAR10_CLASSES,
    )
    settings = jpeg.measure.Settings(rotnet_width=8, epochs=1, n_train=2, frozen_width=8)
    rows = jpeg.measure.measure(dataset, representation="rotnet", seed=0, settings=settings)
    assert [r["detector"] for r in rows] == ["kde", "ocsvm", "rotation_log_p"]
    assert all(0.0 <= r["auroc"] <= 100.0 for r in rows)
    assert (
        rows[0]["n_train"] == 2 and rows[0]["epochs"] == 1 and math.isfinite(rows[0]["last_loss"])
    )
    raw = jpeg.measure.measure(dataset, representation="raw", seed=0, settings=settings)
    assert [(r["detector"], r["width"], r["n_train"]) for r in raw] == [
        ("kde", 0, 0),
        ("ocsvm", 0, 0),
    ]
    with pytest.raises(ValueError, match="unknown representation"):
        jpeg.measure.measure(dataset, representation="contrastive", seed=0, settings=settings)
