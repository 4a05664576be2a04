"""A bad config stops the workflow before any job, naming the key and the allowed values."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.workflow.conftest import REPO, run_snakemake

pytestmark = pytest.mark.workflow

BASE = yaml.safe_load((REPO / "tests/configs/tiny.yaml").read_text())


def _dry_run_with(tmp_path: Path, **changes: object) -> str:
    config = {**BASE, **changes}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = run_snakemake(tmp_path, "-n", "--configfile", str(path), check=False)
    assert result.returncode != 0
    assert not (tmp_path / "results").exists()
    return result.stdout + result.stderr


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"methods": ["raw", "simclr"]}, ["methods[1]", "'simclr'", "resnet18_random"]),
        ({"detectors": {"ocsvm": {}, "lof": {}}}, ["detectors", "'lof'", "ocsvm_linear"]),
        ({"datasets": {"svhn": {"classes": "all"}}}, ["datasets", "'svhn'", "cifar10"]),
        ({"splits": {"contamination": [0.0, 1.0]}}, ["splits.contamination[1]", "1.0"]),
        (
            {"methods": ["raw", "resnet50_imagenet"]},
            ["embed.imagenet_weights", "resnet50_imagenet", "resnet50-0676ba61.pth"],
        ),
        (
            {"datasets": {"digits": {"classes": ["0", "eleven"]}}},
            ["datasets.digits.classes", "'eleven'", "allowed: 0, 1, 2"],
        ),
    ],
)
def test_invalid_config_names_the_key(tmp_path: Path, changes: dict, expected: list[str]) -> None:
    message = _dry_run_with(tmp_path, **changes)
    assert "Invalid config" in message
    for fragment in expected:
        assert fragment in message


def test_missing_data_set_names_the_expected_path(tmp_path: Path) -> None:
    config = {**BASE, "datasets": {"cifar10": {"classes": ["cat"]}}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    empty_root = tmp_path / "no_data"
    empty_root.mkdir()
    result = run_snakemake(
        tmp_path,
        "--cores",
        "1",
        "--configfile",
        str(path),
        check=False,
        env={"DROC_DATA_ROOT": str(empty_root)},
    )
    assert result.returncode != 0
    log = (tmp_path / "results/logs/prepare_dataset/cifar10.log").read_text()
    assert str(empty_root / "cifar-10-batches-py") in log
    assert "download" in log
    assert not (tmp_path / "results/cifar10/dataset.npz").exists()


def test_truncated_data_file_is_named_and_leaves_no_output(tmp_path: Path) -> None:
    folder = tmp_path / "images"
    for name in ("good", "bad"):
        (folder / name).mkdir(parents=True)
    from PIL import Image

    for index in range(4):
        Image.new("RGB", (8, 8), (index * 40, 0, 0)).save(folder / "good" / f"{index}.png")
        Image.new("RGB", (8, 8), (0, index * 40, 0)).save(folder / "bad" / f"{index}.png")
    broken = folder / "bad" / "2.png"
    broken.write_bytes(broken.read_bytes()[:20])
    config = {
        **BASE,
        "datasets": {"image_folder": {"classes": ["good"], "options": {"path": str(folder)}}},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = run_snakemake(tmp_path, "--cores", "1", "--configfile", str(path), check=False)
    assert result.returncode != 0
    log = (tmp_path / "results/logs/prepare_dataset/image_folder.log").read_text()
    assert str(broken) in log
    assert not (tmp_path / "results/image_folder/dataset.npz").exists()
