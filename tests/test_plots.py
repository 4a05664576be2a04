"""Tests of the figures: bar and line counts, published markers, and the PNG written."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection
from matplotlib.container import BarContainer
from matplotlib.figure import Figure

from pipeline_lib.paper.plots import (
    DPI,
    plot_eval_curves,
    plot_per_class_auc,
    plot_roc_curves,
    save_figure,
)


def _results() -> pd.DataFrame:
    rows = []
    for seed in range(3):
        for k, inlier in enumerate(["a0", "a1", "a2"]):
            for detector, offset in (("kde", 0.0), ("ocsvm", -10.0)):
                rows.append(
                    {
                        "dataset": "toy_a",
                        "inlier": inlier,
                        "method": "contrastive",
                        "seed": seed,
                        "contamination": 0.0,
                        "fitset": "train",
                        "detector": detector,
                        "auroc": 80.0 + 2 * k + seed + offset,
                    }
                )
    return pd.DataFrame(rows)


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])


def test_per_class_bars_error_bars_and_published_markers(tmp_path: Path) -> None:
    published = pd.DataFrame(
        {
            "dataset": ["toy_a", "toy_a", "toy_a"],
            "inlier": ["a0", "a2", "mean"],
            "method": ["contrastive"] * 3,
            "detector": ["kde", "kde", "ocsvm"],
            "mean": [80.0, 86.0, 72.0],
            "std": [0.5, 0.5, 0.5],
        }
    )
    fig = plot_per_class_auc(_results(), "toy_a", published)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    # 3 classes + the mean group, 2 detectors
    assert len(ax.patches) == 4 * 2
    bars = {c.get_label(): c for c in ax.containers if isinstance(c, BarContainer)}
    assert list(bars) == ["Contrastive / OC-SVM", "Contrastive / KDE"]
    kde_heights = [p.get_height() for p in bars["Contrastive / KDE"].patches]
    np.testing.assert_allclose(kde_heights, [81.0, 83.0, 85.0, 83.0])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a0", "a1", "a2", "mean"]
    markers = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(markers) == 1 and markers[0].get_label() == "paper"
    np.testing.assert_allclose(sorted(markers[0].get_offsets()[:, 1]), [72.0, 80.0, 86.0])
    path = save_figure(fig, tmp_path / "figs" / "per_class.png")
    assert path.is_file() and path.stat().st_size > 1000
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind


def test_per_class_without_published_has_no_markers() -> None:
    fig = plot_per_class_auc(_results(), "toy_a")
    ax = fig.axes[0]
    assert len(ax.patches) == 8
    assert not [c for c in ax.collections if isinstance(c, PathCollection)]


def test_roc_curves_lines_and_png_size(tmp_path: Path) -> None:
    curves = [
        {"label": "KDE", "fpr": [0.0, 0.1, 1.0], "tpr": [0.0, 0.8, 1.0], "auc": 85.5},
        {"label": "OC-SVM", "fpr": np.linspace(0, 1, 5), "tpr": np.linspace(0, 1, 5), "auc": 50},
    ]
    fig = plot_roc_curves(curves, title="toy")
    ax = fig.axes[0]
    assert len(ax.lines) == 3  # two curves and the chance diagonal
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels == ["KDE (AUC 85.5)", "OC-SVM (AUC 50.0)", "chance"]
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [0.0, 0.8, 1.0])
    path = save_figure(fig, tmp_path / "roc.png")
    width, height = _png_size(path)
    assert (width, height) == (5 * DPI, 5 * DPI)


def test_roc_and_save_reject_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="empty"):
        plot_roc_curves([])
    with pytest.raises(ValueError, match="'bad'"):
        plot_roc_curves([{"label": "bad", "fpr": [0, 1], "tpr": [0, 0.5, 1], "auc": 50}])
    with pytest.raises(ValueError, match="auc"):
        plot_roc_curves([{"label": "x", "fpr": [0, 1], "tpr": [0, 1]}])
    fig = plot_roc_curves([{"label": "x", "fpr": [0, 1], "tpr": [0, 1], "auc": 50}])
    with pytest.raises(ValueError, match="roc.pdf"):
        save_figure(fig, tmp_path / "roc.pdf")


def test_eval_curves_one_line_per_detector_at_the_evaluated_epochs(tmp_path: Path) -> None:
    history = [
        {"epoch": 1, "loss": 1.0},
        {"epoch": 2, "loss": 0.8, "eval": {"kde": 70.0, "rotation_classifier": 60.0}},
        {"epoch": 3, "loss": 0.7},
        {"epoch": 4, "loss": 0.6, "eval": {"kde": 75.0, "rotation_classifier": 58.0}},
    ]
    fig = plot_eval_curves(history, title="3 rotnet seed 0")
    (ax,) = fig.axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert sorted(lines) == ["KDE", "Rotation classifier"]
    assert list(lines["KDE"].get_xdata()) == [2, 4]
    assert list(lines["KDE"].get_ydata()) == [70.0, 75.0]
    assert list(lines["Rotation classifier"].get_ydata()) == [60.0, 58.0]
    # The figure says what the numbers are: the test split, not a way to pick epochs.
    title = ax.get_title()
    assert title.startswith("3 rotnet seed 0") and "TEST split" in title and "pick" in title
    path = save_figure(fig, tmp_path / "eval_curve.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="eval_every"):
        plot_eval_curves([{"epoch": 1, "loss": 1.0}])
