"""CIFAR-10 / CIFAR-100 pickle readers on tiny trees written by the tests."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from pipeline_lib.data import DataError, MissingDataError, load_dataset
from pipeline_lib.data.cifar import CIFAR10_CLASSES, CIFAR100_COARSE_CLASSES


@pytest.mark.parametrize("bytes_keys", [True, False])
def test_cifar10_reads_pixels_labels_and_names(tmp_path, bytes_keys, write_cifar10):
    expected = write_cifar10(tmp_path, bytes_keys=bytes_keys)
    data = load_dataset("cifar10", root=tmp_path)
    assert data.name == "cifar10"
    assert data.class_names == CIFAR10_CLASSES
    assert data.train_images.shape == (20, 32, 32, 3)
    assert data.test_images.shape == (6, 32, 32, 3)
    assert data.train_images.dtype == np.uint8 and data.train_labels.dtype == np.int64
    # batches are concatenated in order 1..5 and channel-major rows become NHWC
    np.testing.assert_array_equal(data.train_images, expected["train_x"])
    np.testing.assert_array_equal(data.train_labels, expected["train_y"])
    np.testing.assert_array_equal(data.test_images, expected["test_x"])
    np.testing.assert_array_equal(data.test_labels, expected["test_y"])


def test_cifar100_uses_coarse_labels_and_safe_names(tmp_path, write_cifar100):
    expected = write_cifar100(tmp_path)
    data = load_dataset("cifar100", root=tmp_path)
    assert data.class_names == CIFAR100_COARSE_CLASSES
    assert len(data.class_names) == 20
    assert data.class_names[9] == "large_man_made_outdoor_things"
    assert data.class_names[13] == "non_insect_invertebrates"
    np.testing.assert_array_equal(data.train_labels, expected["train_y"])
    np.testing.assert_array_equal(data.test_labels, expected["test_y"])
    np.testing.assert_array_equal(data.train_images, expected["train_x"])
    assert data.train_labels.max() == 19


def test_truncated_cifar_pickle_names_the_file(tmp_path, write_cifar10):
    write_cifar10(tmp_path)
    path = tmp_path / "cifar-10-batches-py" / "data_batch_3"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(DataError, match="data_batch_3") as info:
        load_dataset("cifar10", root=tmp_path)
    assert "truncated or corrupt" in str(info.value)
    assert not isinstance(info.value, MissingDataError)


def test_truncated_cifar100_pickle_names_the_file(tmp_path, write_cifar100):
    write_cifar100(tmp_path)
    path = tmp_path / "cifar-100-python" / "test"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(DataError, match=r"cifar-100-python/test"):
        load_dataset("cifar100", root=tmp_path)


def test_pickle_with_foreign_global_is_refused(tmp_path, write_cifar10):
    write_cifar10(tmp_path)
    path = tmp_path / "cifar-10-batches-py" / "test_batch"
    path.write_bytes(pickle.dumps({"data": np.zeros((1, 3072)), "labels": [0], "x": object()}))
    with pytest.raises(DataError, match="test_batch"):
        load_dataset("cifar10", root=tmp_path)


def test_missing_cifar10_names_expected_path_and_remedy(tmp_path, monkeypatch):
    monkeypatch.delenv("DROC_DATA_ROOT", raising=False)
    root = tmp_path / "nowhere"
    with pytest.raises(MissingDataError) as info:
        load_dataset("cifar10", root=root)
    message = str(info.value)
    assert str(root / "cifar-10-batches-py") in message
    assert "data_batch_1" in message and "batches.meta" in message
    assert "no such folder" in message
    assert "download: true" in message and "DROC_DATA_ROOT" in message
    assert isinstance(info.value, ValueError)


def test_missing_single_file_is_listed(tmp_path, write_cifar100):
    write_cifar100(tmp_path)
    (tmp_path / "cifar-100-python" / "meta").unlink()
    with pytest.raises(MissingDataError, match=r"missing: meta"):
        load_dataset("cifar100", root=tmp_path)


def test_wrong_meta_names_are_rejected(tmp_path, write_cifar10):
    write_cifar10(tmp_path)
    meta = tmp_path / "cifar-10-batches-py" / "batches.meta"
    meta.write_bytes(pickle.dumps({b"label_names": [b"a", b"b"]}, protocol=2))
    with pytest.raises(DataError, match="batches.meta"):
        load_dataset("cifar10", root=tmp_path)


def test_wrong_row_length_is_rejected(tmp_path, write_cifar10):
    write_cifar10(tmp_path)
    path = tmp_path / "cifar-10-batches-py" / "test_batch"
    path.write_bytes(pickle.dumps({"data": np.zeros((2, 100), np.uint8), "labels": [0, 1]}))
    with pytest.raises(DataError, match=r"test_batch.*\(N, 3072\)"):
        load_dataset("cifar10", root=tmp_path)
