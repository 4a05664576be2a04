"""Registry, data-root resolution and option checking of ``pipeline_lib.data``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline_lib.data import (
    DATASETS,
    DataError,
    ImageDataset,
    dataset_class_names,
    load_dataset,
    resolve_data_root,
)
from pipeline_lib.data.base import safe_class_name


def test_registry_holds_the_architecture_ids():
    assert set(DATASETS) == {
        "cifar10",
        "cifar100",
        "fmnist",
        "mnist",
        "digits",
        "catvsdog",
        "celeba",
        "cifar10_rotated",
        "digits_rotated",
        "image_folder",
    }
    with pytest.raises(TypeError):
        DATASETS["other"] = DATASETS["cifar10"]  # read-only mapping


def test_unknown_dataset_lists_allowed_names():
    with pytest.raises(DataError, match="unknown dataset 'svhn'") as info:
        load_dataset("svhn")
    assert "cifar10" in str(info.value) and "image_folder" in str(info.value)
    with pytest.raises(ValueError, match="svhn"):
        dataset_class_names("svhn")


def test_unknown_option_is_named(tmp_path):
    with pytest.raises(DataError, match=r"unknown option\(s\) \['path'\]; allowed: none"):
        load_dataset("cifar10", root=tmp_path, path="x")
    with pytest.raises(DataError, match="colour"):
        dataset_class_names("image_folder", path=tmp_path, colour=True)


@pytest.mark.parametrize(
    ("name", "n", "first", "last"),
    [
        ("cifar10", 10, "airplane", "truck"),
        ("cifar100", 20, "aquatic_mammals", "vehicles_2"),
        ("fmnist", 10, "t_shirt_top", "ankle_boot"),
        ("mnist", 10, "0", "9"),
        ("digits", 10, "0", "9"),
        ("catvsdog", 2, "cat", "dog"),
        ("celeba", 2, "no_eyeglasses", "eyeglasses"),
    ],
)
def test_static_class_names_need_no_files(tmp_path, name, n, first, last):
    names = dataset_class_names(name, root=tmp_path / "empty")
    assert len(names) == n and names[0] == first and names[-1] == last
    assert all(safe_class_name(c) == c for c in names)


def test_resolve_data_root_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("DROC_DATA_ROOT", str(tmp_path / "env"))
    assert resolve_data_root(tmp_path / "cfg") == tmp_path / "cfg"
    assert resolve_data_root(str(tmp_path / "cfg")) == tmp_path / "cfg"
    assert resolve_data_root(None) == tmp_path / "env"
    assert resolve_data_root("") == tmp_path / "env"
    monkeypatch.delenv("DROC_DATA_ROOT")
    assert resolve_data_root(None) == Path("data")


def test_env_root_is_used_by_load_dataset(tmp_path, monkeypatch):
    monkeypatch.setenv("DROC_DATA_ROOT", str(tmp_path / "envroot"))
    with pytest.raises(DataError, match=str(tmp_path / "envroot" / "cifar-10-batches-py")):
        load_dataset("cifar10")


def test_safe_class_name():
    assert safe_class_name("large_man-made_outdoor_things") == "large_man_made_outdoor_things"
    assert safe_class_name("a b.c") == "a_b_c"


def _images(n, size=4):
    return np.zeros((n, size, size, 3), np.uint8)


def test_image_dataset_validates_contract():
    ok = ImageDataset("x", _images(2), np.array([0, 1]), _images(1), np.array([1]), ("a", "b"))
    assert ok.n_classes == 2
    with pytest.raises(DataError, match="uint8"):
        ImageDataset(
            "x", _images(2).astype(float), np.array([0, 1]), _images(1), np.array([1]), ("a", "b")
        )
    with pytest.raises(DataError, match=r"outside \[0, 1\]"):
        ImageDataset("x", _images(2), np.array([0, 2]), _images(1), np.array([1]), ("a", "b"))
    with pytest.raises(DataError, match="'a-b'"):
        ImageDataset("x", _images(2), np.array([0, 0]), _images(1), np.array([0]), ("a-b",))
    with pytest.raises(DataError, match="differ in size"):
        ImageDataset("x", _images(2), np.array([0, 0]), _images(1, 8), np.array([0]), ("a",))
    with pytest.raises(DataError, match=r"shape \(3,\), expected \(2,\)"):
        ImageDataset("x", _images(2), np.array([0, 0, 0]), _images(1), np.array([0]), ("a",))


def test_image_dataset_is_frozen_and_compares_by_identity():
    data = ImageDataset("x", _images(1), np.array([0]), _images(1), np.array([0]), ("a",))
    twin = ImageDataset("x", _images(1), np.array([0]), _images(1), np.array([0]), ("a",))
    assert data == data and data != twin  # no ambiguous array comparison
    assert len({data, twin}) == 2
    with pytest.raises(AttributeError):
        data.name = "y"
