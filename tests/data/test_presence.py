"""Whether a data set's files are where its reader looks (the workflow's start check)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline_lib.data import DATASETS
from pipeline_lib.data.presence import EXPECTED_LAYOUTS, missing_data


def test_every_data_set_has_an_expected_layout() -> None:
    assert set(EXPECTED_LAYOUTS) == set(DATASETS)


def test_a_missing_root_is_named_with_the_folder_and_the_layout(tmp_path: Path) -> None:
    root = tmp_path / "absent"
    reason = missing_data("cifar10", root=root)
    assert reason.startswith(f"cifar10: none of {root}/cifar-10-batches-py/ found")
    assert f"the data root {root}/ does not exist" in reason
    assert "data_batch_1..5, test_batch and batches.meta" in reason
    assert "DROC_DATA_ROOT" in reason and "data.download: true" in reason
    # with download on, a data set that has a downloader is fetched: nothing is missing
    assert missing_data("cifar10", root=root, download=True) is None


def test_a_root_without_the_data_set_says_so_and_a_present_one_passes(tmp_path: Path) -> None:
    assert "exists, but holds none of them" in missing_data("cifar100", root=tmp_path)
    (tmp_path / "cifar-100-python").mkdir()
    assert missing_data("cifar100", root=tmp_path) is None
    (tmp_path / "MNIST" / "raw").mkdir(parents=True)
    assert missing_data("mnist", root=tmp_path) is None


def test_catvsdog_layouts_narrow_the_folders_and_no_download_is_offered(tmp_path: Path) -> None:
    kaggle = missing_data("catvsdog", root=tmp_path, layout="kaggle", download=True)
    assert f"{tmp_path}/dogs-vs-cats/train/" in kaggle and "PetImages" not in kaggle.split(";")[0]
    assert "data.download" not in kaggle  # no downloader: download cannot help
    (tmp_path / "PetImages").mkdir()
    assert missing_data("catvsdog", root=tmp_path, layout="petimages") is None
    assert missing_data("catvsdog", root=tmp_path) is None  # auto: either layout
    assert missing_data("catvsdog", root=tmp_path, layout="kaggle") is not None


@pytest.mark.parametrize("name", ["digits", "digits_rotated", "image_folder"])
def test_data_sets_without_files_under_the_root_are_never_missing(name: str, tmp_path) -> None:
    assert missing_data(name, root=tmp_path / "absent") is None
