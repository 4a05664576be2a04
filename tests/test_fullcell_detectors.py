"""benchmarks/fullcell_detectors.py on a tiny synthetic features file made here."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline_lib.paper.verdict import reproduction_verdict

REPO = Path(__file__).resolve().parents[1]
N_IN, N_HARD, N_EASY, D = 40, 20, 20, 8


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tool():
    return _load("fullcell_detectors")


def _logits(rng: np.random.Generator, n: int, diagonal: float) -> np.ndarray:
    """(n, 4, 4) logits whose view k puts ``diagonal`` (+ jitter) on class k."""
    logits = rng.normal(0.0, 1.0, size=(n, 4, 4)).astype(np.float32)
    logits[:, np.arange(4), np.arange(4)] += diagonal
    return logits


@pytest.fixture(scope="module")
def cell_files(tmp_path_factory) -> Path:
    """Inliers near one point, outliers far off; rotation logits in which every inlier and
    20 "hard" outliers are classified with certainty (float32 products round to 1) and 20
    "easy" outliers are never (the product underflows to 0); float64 keeps them apart."""
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("cell")
    centre = np.ones(D)
    f_train = centre + 0.3 * rng.normal(size=(60, D))
    f_test = np.concatenate(
        [centre + 0.3 * rng.normal(size=(N_IN, D)), -centre + 0.3 * rng.normal(size=(40, D))]
    )
    is_outlier = np.r_[np.zeros(N_IN), np.ones(N_HARD + N_EASY)].astype(np.int8)
    job = "cifar10-automobile-c0-s0-rotnet"
    np.savez(
        folder / f"{job}.features.npz",
        f_train=f_train.astype(np.float16),
        f_test=f_test.astype(np.float16),
        is_outlier=is_outlier,
    )
    test_logits = np.concatenate(
        [_logits(rng, N_IN, 30.0), _logits(rng, N_HARD, 30.0), _logits(rng, N_EASY, -30.0)]
    )
    np.savez(
        folder / f"{job}.rotation.npz",
        rotation_logits_test=test_logits,
        rotation_logits_train=_logits(rng, 60, 30.0),
    )
    results = {
        "results": [
            {
                "dataset": "cifar10",
                "inlier": "automobile",
                "method": "rotnet",
                "auroc": {"kde": 99.0, "rotation_classifier": 80.0},
            }
        ]
    }
    (folder / "results.json").write_text(json.dumps(results))
    return folder


def test_logit_scores_match_the_library_and_the_released_ties(tool, cell_files) -> None:
    with np.load(cell_files / "cifar10-automobile-c0-s0-rotnet.rotation.npz") as rotation:
        logits = rotation["rotation_logits_test"]
    scores = tool.rotation_scores_from_logits(logits)
    log_p = torch.log_softmax(torch.from_numpy(logits).double(), dim=2).numpy()
    diagonal = log_p[:, np.arange(4), np.arange(4)]
    eps = np.finfo(np.float64).eps
    # float64 log-softmax of the same float32 logits, two implementations: a few ulps.
    assert (
        np.abs(scores["rotation_log_p"] - diagonal.sum(1)).max()
        <= 64 * eps * np.abs(diagonal.sum(1)).max()
    )
    np.testing.assert_allclose(scores["rotation_p0"], np.exp(log_p[:, 0, 0]), rtol=1e-12)
    np.testing.assert_allclose(scores["rotation_sum_p"], np.exp(diagonal).sum(1), rtol=1e-12)
    released = -scores["rotation_released"]  # the released anomaly score 1 - prod p
    assert released.dtype == np.float32
    assert np.array_equal(released, np.r_[np.zeros(N_IN + N_HARD), np.ones(N_EASY)])
    assert tool.tie_count(released) == N_IN + N_HARD + N_EASY
    assert tool.tie_count(scores["rotation_log_p"]) == 0
    with pytest.raises(ValueError, match=r"\(n, 4, 4\)"):
        tool.rotation_scores_from_logits(logits[:, :3])


def test_table_of_every_detector_and_score(tool, cell_files) -> None:
    out = cell_files / "tables"
    job = "cifar10-automobile-c0-s0-rotnet"
    tool.main(
        [
            "--features",
            str(cell_files / f"{job}.features.npz"),
            "--results",
            str(cell_files / "results.json"),
            "--out",
            str(out),
        ]
    )
    payload = json.loads((out / f"{job}.detectors.json").read_text())
    assert payload["cell"] | {} == {**payload["cell"], "dataset": "cifar10", "method": "rotnet"}
    rows = {row["key"]: row for row in payload["rows"]}
    assert list(rows) == [
        "kde_gamma1",
        "kde_gamma3",
        "kde",
        "kde_gamma30",
        "ocsvm",
        "gde",
        "knn",
        "rotation_p0",
        "rotation_log_p",
        "rotation_released",
        "rotation_sum_p",
    ]
    # Separated blobs: every feature detector ranks the outliers first.
    for key in ("kde_gamma1", "kde", "kde_gamma30", "ocsvm", "gde", "knn"):
        assert rows[key]["auroc"] > 99.0, key
    # The kernel width grows with the scale: gamma_ = scale / (d Var(X)).
    assert rows["kde_gamma30"]["gamma_"] == pytest.approx(30 * rows["kde_gamma1"]["gamma_"])
    # Released: the easy outliers above all inliers, the hard ones tied with them (half).
    assert rows["rotation_released"]["auroc"] == pytest.approx(
        100 * (N_EASY * N_IN + 0.5 * N_HARD * N_IN) / ((N_EASY + N_HARD) * N_IN)
    )
    assert rows["rotation_released"]["ties"] == N_IN + N_HARD + N_EASY
    # Paper values from the published tables, verdicts by the one rule.
    assert (rows["kde"]["paper_mean"], rows["kde"]["paper_std"]) == (96.7, 0.1)
    assert rows["kde"]["verdict"] == reproduction_verdict(rows["kde"]["auroc"], 96.7, 0.1)
    assert (rows["rotation_sum_p"]["paper_mean"], rows["rotation_sum_p"]["paper_std"]) == (
        91.2,
        0.3,
    )
    assert rows["kde_gamma3"]["verdict"] == rows["ocsvm"]["verdict"] == "no paper value"
    # The device run's numbers beside them; its rotation_classifier was the sum of log p.
    assert rows["kde"]["device_auroc"] == 99.0
    assert rows["rotation_log_p"]["device_auroc"] == 80.0
    table = (out / f"{job}.detectors.md").read_text()
    assert "| KDE on f, gamma scale 10 (the paper's) |" in table
    assert f"{N_IN + N_HARD + N_EASY} tied test scores" in table
