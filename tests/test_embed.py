"""Batched feature extraction of ``pipeline_lib.models.embed``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from pipeline_lib.data import ImageDataset
from pipeline_lib.models.embed import embed_dataset, extract_embeddings, images_to_tensor
from pipeline_lib.models.representation import Representation, build_representation


@pytest.fixture(scope="module")
def model() -> Representation:
    return build_representation("resnet18_random", seed=0, width=8)


@pytest.fixture
def images() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, size=(10, 16, 16, 3), dtype=np.uint8)


def test_images_to_tensor_is_channel_first_in_unit_interval(images) -> None:
    batch = images_to_tensor(images, torch.device("cpu"))
    assert batch.shape == (10, 3, 16, 16)
    assert batch.dtype == torch.float32
    np.testing.assert_allclose(
        batch.numpy(), images.transpose(0, 3, 1, 2).astype(np.float32) / 255.0, atol=1e-7
    )


def test_extract_embeddings_equals_a_direct_forward_pass(model, images) -> None:
    features = extract_embeddings(model, images, batch_size=4)
    with torch.inference_mode():
        x = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255.0
        direct = model(x)["f"].numpy()
    assert set(features) == {"f"}
    assert features["f"].shape == (10, 64)
    assert features["f"].dtype == np.float32
    np.testing.assert_allclose(features["f"], direct, rtol=0, atol=1e-5)


def test_batch_size_does_not_change_results(model, images) -> None:
    whole = extract_embeddings(model, images, batch_size=256)["f"]
    for batch_size in (1, 3):
        np.testing.assert_allclose(
            extract_embeddings(model, images, batch_size=batch_size)["f"], whole, atol=1e-5
        )


def test_head_output_is_returned_as_g(images) -> None:
    torch.manual_seed(0)
    model = Representation(nn.Flatten(), head=nn.Linear(16 * 16 * 3, 2))
    features = extract_embeddings(model, images, batch_size=3)
    assert features["f"].shape == (10, 768)
    assert features["g"].shape == (10, 2)
    with torch.inference_mode():
        expected = model.head(torch.from_numpy(features["f"])).numpy()
    np.testing.assert_allclose(features["g"], expected, atol=1e-5)


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros((2, 8, 8, 3), dtype=np.float32),
        np.zeros((2, 8, 8, 3), dtype=np.int64),
        np.zeros((2, 8, 8), dtype=np.uint8),
        np.zeros((2, 8, 8, 1), dtype=np.uint8),
        np.zeros((2, 3, 8, 8), dtype=np.uint8),
    ],
    ids=["float32", "int64", "no-channels", "grey", "channels-first"],
)
def test_rejects_non_uint8_or_wrong_shape(model, bad) -> None:
    with pytest.raises(ValueError, match=r"images must be uint8 of shape \(n, h, w, 3\)"):
        extract_embeddings(model, bad)


def test_rejects_empty_input(model) -> None:
    with pytest.raises(ValueError, match="no images to embed"):
        extract_embeddings(model, np.zeros((0, 8, 8, 3), dtype=np.uint8))


def test_rejects_batch_size_below_one(model, images) -> None:
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        extract_embeddings(model, images, batch_size=0)


def test_embed_dataset_layout(model) -> None:
    rng = np.random.default_rng(1)
    dataset = ImageDataset(
        name="tiny",
        train_images=rng.integers(0, 256, size=(7, 16, 16, 3), dtype=np.uint8),
        train_labels=np.array([0, 1, 0, 1, 0, 1, 0], dtype=np.int64),
        test_images=rng.integers(0, 256, size=(5, 16, 16, 3), dtype=np.uint8),
        test_labels=np.array([0, 1, 1, 0, 1], dtype=np.int64),
        class_names=("a", "b"),
    )
    features = embed_dataset(model, dataset, batch_size=4)
    assert set(features) == {"train_index", "f_train", "test_index", "f_test"}
    np.testing.assert_array_equal(features["train_index"], np.arange(7))
    np.testing.assert_array_equal(features["test_index"], np.arange(5))
    assert features["train_index"].dtype == np.int64
    assert features["test_index"].dtype == np.int64
    assert features["f_train"].shape == (7, 64)
    assert features["f_test"].shape == (5, 64)
    np.testing.assert_allclose(
        features["f_test"], extract_embeddings(model, dataset.test_images)["f"], atol=1e-5
    )
