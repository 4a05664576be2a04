"""IDX readers for Fashion-MNIST and MNIST on files written by the tests."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from pipeline_lib.data import DataError, MissingDataError, load_dataset
from pipeline_lib.data.mnist import FMNIST_CLASSES, MNIST_CLASSES, read_fmnist, read_idx

LAYOUTS = {
    ("fmnist", "torchvision"): ("FashionMNIST", "raw"),
    ("fmnist", "flat"): ("fashion-mnist",),
    ("mnist", "torchvision"): ("MNIST", "raw"),
    ("mnist", "flat"): ("mnist",),
}


@pytest.mark.parametrize("gz", [True, False], ids=["gz", "plain"])
@pytest.mark.parametrize(("name", "layout"), sorted(LAYOUTS))
def test_idx_layouts_are_read_and_padded(tmp_path, name, layout, gz, write_idx_set):
    arrays = write_idx_set(tmp_path.joinpath(*LAYOUTS[name, layout]), gz=gz)
    data = load_dataset(name, root=tmp_path)
    assert data.class_names == (FMNIST_CLASSES if name == "fmnist" else MNIST_CLASSES)
    assert data.train_images.shape == (20, 32, 32, 3)
    assert data.test_images.shape == (10, 32, 32, 3)
    assert data.train_images.dtype == np.uint8 and data.test_labels.dtype == np.int64
    for channel in range(3):
        np.testing.assert_array_equal(data.train_images[:, 2:30, 2:30, channel], arrays["train_x"])
        np.testing.assert_array_equal(data.test_images[:, 2:30, 2:30, channel], arrays["test_x"])
    # the 2-pixel frame is zero padding (the fixture pixels are all >= 1)
    frame = data.train_images.copy()
    frame[:, 2:30, 2:30] = 0
    assert frame.max() == 0
    assert data.train_images[:, 2:30, 2:30].min() >= 1
    np.testing.assert_array_equal(data.train_labels, arrays["train_y"])
    np.testing.assert_array_equal(data.test_labels, arrays["test_y"])


def test_fmnist_class_names():
    assert FMNIST_CLASSES[0] == "t_shirt_top" and FMNIST_CLASSES[-1] == "ankle_boot"
    assert MNIST_CLASSES == tuple("0123456789")


def test_plain_file_preferred_over_gz(tmp_path, write_idx_set):
    folder = tmp_path / "MNIST" / "raw"
    write_idx_set(folder, gz=True, seed=10)
    plain = write_idx_set(folder, gz=False, seed=11)
    data = load_dataset("mnist", root=tmp_path)
    np.testing.assert_array_equal(data.train_images[:, 2:30, 2:30, 0], plain["train_x"])


def test_truncated_idx_names_the_file(tmp_path, write_idx_set):
    folder = tmp_path / "mnist"
    write_idx_set(folder, gz=False)
    path = folder / "t10k-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(DataError, match="t10k-images-idx3-ubyte") as info:
        load_dataset("mnist", root=tmp_path)
    assert "truncated" in str(info.value)


def test_truncated_gzip_names_the_file(tmp_path, write_idx_set):
    folder = tmp_path / "fashion-mnist"
    write_idx_set(folder, gz=True)
    path = folder / "train-images-idx3-ubyte.gz"
    path.write_bytes(path.read_bytes()[:50])
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte\.gz"):
        read_fmnist(tmp_path, system_dirs=())


def test_gzip_with_truncated_payload_names_the_file(tmp_path, idx_bytes):
    path = tmp_path / "train-labels-idx1-ubyte.gz"
    path.write_bytes(gzip.compress(idx_bytes(np.arange(10, dtype=np.uint8))[:-3]))
    with pytest.raises(DataError, match=r"train-labels-idx1-ubyte\.gz.*need 18"):
        read_idx(path, magic=0x801)


def test_wrong_magic_is_rejected(tmp_path, idx_bytes):
    path = tmp_path / "labels"
    path.write_bytes(idx_bytes(np.zeros((2, 28, 28), np.uint8)))
    with pytest.raises(DataError, match="magic number 0x00000803, expected 0x00000801"):
        read_idx(path, magic=0x801)


def test_label_count_must_match_images(tmp_path, idx_bytes, write_idx_set):
    folder = tmp_path / "mnist"
    write_idx_set(folder, gz=False)
    (folder / "train-labels-idx1-ubyte").write_bytes(idx_bytes(np.zeros(3, np.uint8)))
    with pytest.raises(DataError, match="3 labels for 20 images"):
        load_dataset("mnist", root=tmp_path)


def test_missing_fmnist_lists_candidate_folders(tmp_path):
    with pytest.raises(MissingDataError) as info:
        read_fmnist(tmp_path, system_dirs=(tmp_path / "system",))
    message = str(info.value)
    assert str(tmp_path / "FashionMNIST" / "raw") in message
    assert str(tmp_path / "fashion-mnist") in message
    assert str(tmp_path / "system") in message
    assert "t10k-labels-idx1-ubyte" in message


def test_incomplete_folder_reports_missing_files(tmp_path, write_idx_set):
    folder = tmp_path / "mnist"
    write_idx_set(folder, gz=True)
    (folder / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(MissingDataError, match=r"lacks t10k-labels-idx1-ubyte") as info:
        load_dataset("mnist", root=tmp_path)
    assert "download: true" in str(info.value)
