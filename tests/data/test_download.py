"""The download path, with torchvision's downloaders replaced by fakes (no network)."""

from __future__ import annotations

import urllib.error

import pytest
import torchvision.datasets

from pipeline_lib.data import DataError, load_dataset
from pipeline_lib.data.download import download_fmnist


def test_download_fetches_missing_files_then_reads_them(tmp_path, monkeypatch, write_cifar10):
    calls = []

    class FakeCIFAR10:
        def __init__(self, root, train, download):
            calls.append((root, train, download))
            if not (tmp_path / "cifar-10-batches-py").exists():
                write_cifar10(tmp_path)

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", FakeCIFAR10)
    data = load_dataset("cifar10", root=tmp_path, download=True)
    assert calls == [(str(tmp_path), True, True), (str(tmp_path), False, True)]
    assert data.train_images.shape == (20, 32, 32, 3)


def test_no_download_when_files_are_present(tmp_path, monkeypatch, write_idx_set):
    write_idx_set(tmp_path / "MNIST" / "raw", gz=True)

    def refuse(*args, **kwargs):
        raise AssertionError("must not download")

    monkeypatch.setattr(torchvision.datasets, "MNIST", refuse)
    data = load_dataset("mnist", root=tmp_path, download=True)
    assert len(data.train_labels) == 20


def test_offline_download_names_expected_layout(tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(torchvision.datasets, "CIFAR100", offline)
    with pytest.raises(DataError) as info:
        load_dataset("cifar100", root=tmp_path / "root", download=True)
    message = str(info.value)
    assert "downloading CIFAR-100" in message and "no network" in message
    assert "DROC_DATA_ROOT" in message
    assert str(tmp_path / "root" / "cifar-100-python") in message


def test_failed_fmnist_download_names_root_and_cause(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz")

    monkeypatch.setattr(torchvision.datasets, "FashionMNIST", broken)
    with pytest.raises(DataError, match="Error downloading") as info:
        download_fmnist(tmp_path / "r")
    assert str(tmp_path / "r") in str(info.value)


def test_celeba_download_uses_torchvision_then_our_reader(tmp_path, monkeypatch, write_celeba):
    calls = []

    class FakeCelebA:
        def __init__(self, root, split, target_type, download):
            calls.append((root, split, target_type, download))
            write_celeba(tmp_path)  # torchvision's layout: <root>/celeba/

    monkeypatch.setattr(torchvision.datasets, "CelebA", FakeCelebA)
    data = load_dataset("celeba", root=tmp_path, download=True)
    assert calls == [(str(tmp_path), "all", "attr", True)]
    assert data.train_images.shape == (4, 64, 64, 3)


def test_offline_celeba_download_names_root_and_manual_route(tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise RuntimeError("To download files from GDrive, 'gdown' is required.")

    monkeypatch.setattr(torchvision.datasets, "CelebA", offline)
    with pytest.raises(DataError) as info:
        load_dataset("celeba", root=tmp_path / "root", download=True)
    message = str(info.value)
    assert "downloading CelebA" in message and "gdown" in message
    assert str(tmp_path / "root" / "celeba") in message and "img_align_celeba.zip" in message
