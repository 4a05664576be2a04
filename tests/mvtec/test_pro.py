"""PRO / AUPRO against the definition computed threshold by threshold."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline_lib.mvtec.pro import aupro, pro_curve, pro_curve_reference, truncated_area


def _random_case(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    masks = np.zeros((4, 12, 12), dtype=np.uint8)
    masks[0, 2:5, 2:6] = 1  # one region
    masks[1, 1:3, 1:3] = 1  # two regions of different sizes in one image
    masks[1, 7:11, 5:11] = 1
    masks[2, 5, 5] = masks[2, 6, 6] = 1  # diagonal neighbours: one 8-connected region
    # image 3 is defect-free; coarse rounding makes many ties
    scores = np.round(rng.normal(size=masks.shape) + 1.5 * masks, 1)
    return scores, masks


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_curve_equals_the_definition(seed):
    scores, masks = _random_case(seed)
    fpr, pro = pro_curve(scores, masks)
    fpr_ref, pro_ref = pro_curve_reference(scores, masks)
    assert fpr.shape == fpr_ref.shape == (len(np.unique(scores)) + 1,)
    np.testing.assert_allclose(fpr, fpr_ref, atol=1e-12)
    np.testing.assert_allclose(pro, pro_ref, atol=1e-12)
    assert np.all(np.diff(fpr) >= 0) and fpr[-1] == pro[-1] == 1.0


def test_every_region_counts_the_same_whatever_its_size():
    masks = np.zeros((1, 10, 10), dtype=np.uint8)
    masks[0, 0, 0] = 1  # 1 pixel
    masks[0, 5:9, 5:9] = 1  # 16 pixels
    scores = masks.astype(float).copy()
    scores[0, 5:9, 5:9] = 0.5  # the big region scores below the small one
    fpr, pro = pro_curve(scores, masks)
    # Threshold 1 finds only the 1-pixel region: half the regions, whatever their areas.
    assert fpr[1] == 0.0 and pro[1] == pytest.approx(0.5)


def test_diagonal_pixels_are_one_region():
    masks = np.zeros((1, 6, 6), dtype=np.uint8)
    masks[0, 1, 1] = masks[0, 2, 2] = masks[0, 4, 4] = 1
    scores = np.zeros((1, 6, 6))
    scores[0, 1, 1] = 1.0
    _, pro = pro_curve(scores, masks)
    # 8-connected: {(1,1), (2,2)} half found, {(4,4)} not: 0.25 (4-connected would give 1/3)
    assert pro[1] == pytest.approx(0.25)


def test_perfect_map_scores_100_and_a_constant_map_scores_the_diagonal():
    scores, masks = _random_case(0)
    assert aupro(masks.astype(float), masks) == pytest.approx(100.0)
    # a map equal everywhere flags everything at once: a straight line from (0, 0) to (1, 1)
    assert aupro(np.zeros(masks.shape), masks) == pytest.approx(15.0)  # 0.3^2 / 2 / 0.3


def test_truncated_area_interpolates_at_the_limit():
    fpr = np.array([0.0, 0.2, 0.4, 1.0])
    pro = np.array([0.0, 0.5, 1.0, 1.0])
    # 0.2 * 0.5 / 2 + 0.1 * (0.5 + 0.75) / 2 = 0.1125, divided by 0.3
    assert truncated_area(fpr, pro, max_fpr=0.3) == pytest.approx(0.375)
    assert truncated_area(fpr, pro, max_fpr=1.0) == pytest.approx((0.05 + 0.15 + 0.6) / 1.0)


def test_degenerate_inputs_are_refused():
    with pytest.raises(ValueError, match="no defective pixel"):
        aupro(np.zeros((1, 4, 4)), np.zeros((1, 4, 4)))
    with pytest.raises(ValueError, match="shape"):
        aupro(np.zeros((1, 4, 4)), np.ones((1, 4, 5)))
    with pytest.raises(ValueError, match="max_fpr"):
        truncated_area(np.array([0.0, 1.0]), np.array([0.0, 1.0]), max_fpr=0.0)
