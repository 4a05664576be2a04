"""Patch protocol: sampling, dense embedding against per-patch oracles, up-sampling, metrics."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.data.mvtec import read_mvtec_category
from pipeline_lib.detection.auroc_intervals import INTERVAL_OMITTED, auroc_interval_record
from pipeline_lib.detection.detectors.kde import KernelDensityScore
from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.mvtec.localize import (
    evaluate_score_maps,
    gaussian_kernel,
    grid_side,
    image_scores,
    upsample_score_maps,
)
from pipeline_lib.mvtec.patches import (
    PatchOptions,
    dense_positions,
    embed_category_patches,
    embed_patches,
    patch_score_maps,
    random_patches,
    rotation_anomaly_patches,
    sample_positions,
    score_category,
)
from pipeline_lib.mvtec.pixel_intervals import LOCALIZATION_INTERVAL_FIELDS
from pipeline_lib.registry import ROTATION_DETECTORS
from pipeline_lib.ssl.rotation import rotation_scores


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return build_proxy_model("rotnet", width=4, image_size=16).eval()


@pytest.fixture
def images():
    return np.random.default_rng(0).integers(0, 256, size=(3, 32, 32, 3), dtype=np.uint8)


def test_paper_grid_is_57_and_bad_strides_are_refused():
    assert grid_side(256, 32, 4) == 57
    assert grid_side(64, 16, 4) == 13
    with pytest.raises(ValueError, match="does not tile"):
        grid_side(256, 32, 5)
    with pytest.raises(ValueError, match="patch_size <= image_size"):
        grid_side(16, 32, 4)


def test_random_patches_are_seeded_crops(images):
    patches = random_patches(images, per_image=4, patch_size=8, seed=3)
    assert patches.shape == (12, 8, 8, 3) and patches.dtype == np.uint8
    rng = np.random.default_rng(3)
    rows, cols = rng.integers(0, 32 - 8 + 1, size=(2, 12))
    for k in range(12):
        i = k // 4
        assert np.array_equal(patches[k], images[i, rows[k] : rows[k] + 8, cols[k] : cols[k] + 8])
    assert np.array_equal(patches, random_patches(images, per_image=4, patch_size=8, seed=3))


def test_positions_dense_and_capped():
    dense = dense_positions(2, 3)
    assert dense.shape == (18, 3) and dense[4].tolist() == [0, 1, 1]
    capped = sample_positions(2, 3, max_patches=5, seed=0)
    assert len(capped) == 5 and len({tuple(p) for p in capped}) == 5
    assert np.array_equal(capped, sample_positions(2, 3, max_patches=5, seed=0))
    assert np.array_equal(sample_positions(2, 3, max_patches=None, seed=0), dense)


def _crop(images: np.ndarray, position: np.ndarray, size: int, stride: int) -> torch.Tensor:
    i, r, c = position
    crop = images[i, r * stride : r * stride + size, c * stride : c * stride + size]
    return torch.from_numpy(np.ascontiguousarray(crop)).permute(2, 0, 1)[None].float() / 255


def test_dense_embedding_equals_embedding_each_crop(model, images):
    features = embed_patches(model, images, options=PatchOptions(16, 4, batch_size=7))
    positions = dense_positions(3, 5)
    assert features.shape == (75, 32)
    with torch.no_grad():
        for k in (0, 13, 41, 74):
            direct = model(_crop(images, positions[k], 16, 4))["f"][0].numpy()
            np.testing.assert_allclose(features[k], direct, atol=1e-5)
    subset = positions[[40, 2, 17]]
    picked = embed_patches(model, images, positions=subset, options=PatchOptions(16, 4))
    np.testing.assert_allclose(picked, features[[40, 2, 17]], atol=1e-5)


def test_rotation_patch_score_is_minus_the_rotation_classifier_detector(model, images):
    anomaly = rotation_anomaly_patches(model, images, options=PatchOptions(16, 8, batch_size=5))
    positions = dense_positions(3, 3)
    crops = np.stack([images[i, r * 8 : r * 8 + 16, c * 8 : c * 8 + 16] for i, r, c in positions])
    # The image-level rotation_classifier score (the paper's sum of p) of each crop.
    expected = rotation_scores(model, crops)[ROTATION_DETECTORS["rotation_classifier"]]
    assert expected.min() > 0 and expected.max() < 4
    np.testing.assert_allclose(anomaly, -expected, rtol=1e-5)


def test_upsampling_of_a_single_patch_places_the_kernel_under_it():
    maps = np.zeros((1, 57, 57))
    maps[0, 10, 20] = 1.0
    pixels = upsample_score_maps(maps, normalize=False)  # the paper's sizes
    assert pixels.shape == (1, 256, 256)
    kernel = gaussian_kernel(32, 10.0)
    np.testing.assert_allclose(pixels[0, 40:72, 80:112], kernel, rtol=1e-6)
    assert pixels[0].sum() == pytest.approx(kernel.sum(), rel=1e-6)


@pytest.mark.parametrize("normalize", [False, True])
def test_upsampling_is_the_transposed_convolution(normalize):
    maps = np.random.default_rng(0).normal(size=(3, 13, 13))
    kernel = torch.from_numpy(gaussian_kernel(16, 4.0))[None, None]
    x = torch.from_numpy(maps)[:, None]
    expected = F.conv_transpose2d(x, kernel, stride=4)
    if normalize:
        expected = expected / F.conv_transpose2d(torch.ones_like(x[:1]), kernel, stride=4)
    ours = upsample_score_maps(maps, patch_size=16, stride=4, sigma=4.0, normalize=normalize)
    np.testing.assert_allclose(ours, expected[:, 0].numpy(), rtol=1e-5, atol=1e-6)


def test_normalised_upsampling_keeps_constants_and_the_plain_sum_dims_borders():
    constant = np.full((2, 13, 13), 3.0)
    np.testing.assert_allclose(
        upsample_score_maps(constant, patch_size=16, sigma=4.0), 3.0, rtol=1e-6
    )
    plain = upsample_score_maps(constant, patch_size=16, sigma=4.0, normalize=False)
    assert plain[0, 0, 0] < plain[0, 32, 32]  # fewer patches cover a corner


def test_gaussian_kernel_is_symmetric_with_the_given_sigma():
    kernel = gaussian_kernel(32, 10.0)
    assert kernel.shape == (32, 32) and np.allclose(kernel, kernel.T)
    assert np.allclose(kernel, kernel[::-1, ::-1])
    # centred at 15.5: pixel 25 is 9.5 from the centre, pixel 15 is 0.5
    profile = kernel[15]
    assert profile[25] / profile[15] == pytest.approx(np.exp(-(9.5**2 - 0.5**2) / (2 * 10.0**2)))


def test_image_score_is_the_spatial_maximum():
    maps = np.random.default_rng(0).normal(size=(4, 5, 5))
    np.testing.assert_array_equal(image_scores(maps), maps.reshape(4, -1).max(axis=1))


def test_kde_score_maps_equal_the_detector_scores():
    rng = np.random.default_rng(0)
    fit, test = rng.normal(size=(50, 6)), rng.normal(size=(2 * 9, 6))
    maps = patch_score_maps(fit, test, n_images=2, detector="kde")
    expected = -KernelDensityScore().fit(fit).score_samples(test)
    assert maps.shape == (2, 3, 3)
    np.testing.assert_allclose(maps.ravel(), expected, rtol=1e-5)
    with pytest.raises(ValueError, match="square score maps"):
        patch_score_maps(fit, test[:-1], n_images=2, detector="kde")


def test_perfect_maps_score_100_and_no_masks_give_image_auc_only():
    masks = np.zeros((4, 64, 64), dtype=np.uint8)
    masks[2, 20:36, 20:36] = masks[3, 40:56, 8:24] = 1
    maps = np.zeros((4, 13, 13))
    maps[2, 4:6, 4:6] = maps[3, 8:10, 1:3] = 5.0
    labels = np.array([0, 0, 1, 1])
    metrics = evaluate_score_maps(maps, labels, masks, patch_size=16, stride=4, sigma=4.0)
    assert metrics["image_auroc"] == 100.0
    assert metrics["pixel_auroc"] > 90.0 and metrics["aupro"] > 80.0
    # each localisation metric carries its interval over the test images
    for name in ("pixel_auroc", "aupro"):
        assert 50.0 < metrics[f"{name}_low"] <= metrics[f"{name}_high"] <= 100.0
    assert evaluate_score_maps(maps, labels, None, patch_size=16, stride=4) == {
        "image_auroc": 100.0
    }
    with pytest.raises(ValueError, match="patch size and stride"):
        evaluate_score_maps(maps, labels, masks[:, :60, :60], patch_size=16, stride=4)


def test_random_features_find_easy_synthetic_defects(mvtec_category, model):
    category = read_mvtec_category(mvtec_category(size=48, n_train=6), image_size=48)
    features = embed_category_patches(
        model,
        category.train_images,
        category.test_images,
        options=PatchOptions(16, 4),
        max_fit_patches=300,
        rotation=True,
    )
    assert features["f_fit"].shape == (300, 32) and features["f_test"].shape == (10 * 81, 32)
    assert features["rotation_anomaly_test"].shape == (10, 9, 9)
    record, arrays = score_category(
        category, features, detector="kde", patch_size=16, stride=4, sigma=4.0
    )
    assert record["image_auroc"] > 90 and record["pixel_auroc"] > 90 and record["aupro"] > 50
    assert (
        record["n_fit"] == 300
        and record["inlier"] == "widget"
        and record["auroc"] == record["image_auroc"]
    )
    assert arrays["score_maps"].shape == (10, 9, 9)
    np.testing.assert_array_equal(arrays["image_score"], image_scores(arrays["score_maps"]))
    # the image AUC's interval over the test set, as the image jobs record it
    expected = auroc_interval_record(arrays["image_score"], category.test_labels)
    assert {k: record[k] for k in expected} == expected
    assert record["auroc_low"] <= record["image_auroc"] <= record["auroc_high"]
    no_masks = dataclasses.replace(category, test_masks=None)
    record, _ = score_category(no_masks, features, detector="kde", patch_size=16, stride=4)
    assert record["image_auroc"] > 90 and record["pixel_auroc"] is None and record["aupro"] is None
    record, _ = score_category(
        category, features, detector="rotation_classifier", patch_size=16, stride=4
    )
    assert record["n_fit"] == 0 and 0 <= record["image_auroc"] <= 100


def test_a_single_defective_test_image_keeps_the_auc_without_an_interval(mvtec_category):
    folder = mvtec_category(size=48, n_train=2, n_good=4, defects={"scratch": 1})
    category = read_mvtec_category(folder, image_size=48)
    assert category.test_labels.tolist() == [0, 0, 0, 0, 1]
    rng = np.random.default_rng(0)  # patch features of a 9 x 9 grid per test image
    features = {"f_fit": rng.normal(size=(60, 4)), "f_test": rng.normal(size=(5 * 81, 4))}
    record, arrays = score_category(category, features, detector="kde", patch_size=16, stride=4)
    assert 0.0 <= record["image_auroc"] <= 100.0
    assert "auroc_low" not in record and "auroc_se_delong" not in record
    assert "1 outlier(s) and 4 inlier(s)" in record[INTERVAL_OMITTED]
    assert arrays["image_score"].shape == (5,)
    # with masks, the localisation metrics stand too; their intervals resample the same
    # five images by label, so they are NaN for the same reason (not a failed job)
    assert category.has_masks and 0.0 <= record["pixel_auroc"] <= 100.0
    assert all(np.isnan(record[field]) for field in LOCALIZATION_INTERVAL_FIELDS)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_embedding_and_kde_match_the_cpu(model, images):
    cpu = embed_patches(model, images, options=PatchOptions(16, 4))
    gpu = embed_patches(model, images, options=PatchOptions(16, 4, device="cuda"))
    np.testing.assert_allclose(gpu, cpu, atol=1e-3)
    maps_cpu = patch_score_maps(cpu[:40], cpu, n_images=3, detector="kde", device="cpu")
    maps_gpu = patch_score_maps(cpu[:40], cpu, n_images=3, detector="kde", device="cuda")
    np.testing.assert_allclose(maps_gpu, maps_cpu, rtol=1e-4, atol=1e-5)
