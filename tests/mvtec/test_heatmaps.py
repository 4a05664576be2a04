"""Figure arrangement: localisation rows and explanation columns."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline_lib.mvtec.heatmaps import plot_explanations, plot_localization

RNG = np.random.default_rng(0)


def test_localization_figure_has_input_mask_and_one_column_per_method():
    images = np.zeros((3, 16, 16, 3), dtype=np.uint8)
    maps = {"RotNet": RNG.random((3, 16, 16)), "Contrastive": RNG.random((3, 16, 16))}
    fig = plot_localization(images, np.zeros((3, 16, 16)), maps, row_labels=["a", "b", "c"])
    axes = fig.axes
    assert len(axes) == 3 * 4
    assert [ax.get_title() for ax in axes[:4]] == ["input", "mask", "RotNet", "Contrastive"]
    no_mask = plot_localization(images, None, maps)
    assert no_mask.axes[1].texts[0].get_text() == "no mask"
    with pytest.raises(ValueError, match="shape"):
        plot_localization(images, None, {"x": np.zeros((2, 16, 16))})


def test_explanation_grid_is_input_then_one_column_per_method():
    images = np.zeros((2, 8, 8, 3), dtype=np.uint8)
    columns = {f"IG: m{i}": RNG.random((2, 8, 8)) for i in range(3)}
    fig = plot_explanations(images, columns, title="t")
    assert len(fig.axes) == 2 * 4
    assert [ax.get_title() for ax in fig.axes[:4]] == ["input", "IG: m0", "IG: m1", "IG: m2"]
