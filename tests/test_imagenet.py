"""The ResNet-50 (ImageNet) frozen representation, with a locally written weights file.

The real ImageNet weights are never downloaded: the tests save torchvision's ResNet-50 with
seeded random weights in the same format (a plain state dict, classifier included).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as TF

from pipeline_lib.config import validate as config_module
from pipeline_lib.config.validate import export_data_settings
from pipeline_lib.models.embed import extract_embeddings
from pipeline_lib.models.imagenet import ImageNetInput
from pipeline_lib.models.representation import (
    FROZEN_METHODS,
    IMAGENET_WEIGHTS_ENV,
    IMAGENET_WEIGHTS_URL,
    build_representation,
    imagenet_weights_from_env,
)


@pytest.fixture(scope="module")
def weights_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torchvision's ResNet-50 (1000-class fc included) with seeded random weights (~100 MB)."""
    path = tmp_path_factory.mktemp("imagenet") / "resnet50-test.pth"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        network = torchvision.models.resnet50(weights=None)
    # Non-trivial BatchNorm statistics, so a wrongly loaded buffer changes the output.
    generator = torch.Generator().manual_seed(1)
    for module in network.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.normal_(0.0, 0.1, generator=generator)
            module.running_var.uniform_(0.5, 1.5, generator=generator)
    torch.save(network.state_dict(), path)
    return path


@pytest.fixture(scope="module")
def reference(weights_file: Path) -> torch.nn.Module:
    """The oracle: plain torchvision ResNet-50 with the same weights, classifier dropped."""
    network = torchvision.models.resnet50(weights=None)
    network.load_state_dict(torch.load(weights_file, weights_only=True))
    network.fc = torch.nn.Identity()
    return network.eval()


def _reference_features(reference: torch.nn.Module, x: torch.Tensor, size: int) -> torch.Tensor:
    x = TF.resize(x, [size, size], interpolation=InterpolationMode.BILINEAR, antialias=False)
    x = TF.normalize(x, mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    with torch.inference_mode():
        return reference(x)


def test_features_equal_torchvision_on_resized_normalised_inputs(
    weights_file: Path, reference: torch.nn.Module
) -> None:
    assert "resnet50_imagenet" in FROZEN_METHODS
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(3, 32, 32, 3), dtype=np.uint8)
    model = build_representation("resnet50_imagenet", seed=0, imagenet_weights=weights_file)
    assert not model.training and model.head is None
    features = extract_embeddings(model, images)
    assert set(features) == {"f"}
    f = features["f"]
    assert f.shape == (3, 2048) and f.dtype == np.float32
    x = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255.0
    expected = _reference_features(reference, x, 224).numpy()
    assert np.abs(expected).max() > 1e-3  # not a degenerate all-zero comparison
    np.testing.assert_allclose(f, expected, rtol=0, atol=1e-4)


def test_seed_plays_no_part_and_the_global_rng_is_left_alone(
    weights_file: Path, reference: torch.nn.Module
) -> None:
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    first = build_representation(
        "resnet50_imagenet", seed=0, imagenet_weights=weights_file, imagenet_size=64
    )
    assert torch.equal(torch.random.get_rng_state(), state)
    other = build_representation(
        "resnet50_imagenet", seed=7, imagenet_weights=str(weights_file), imagenet_size=64
    )
    x = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        f_first, f_other = first(x)["f"], other(x)["f"]
    torch.testing.assert_close(f_first, f_other, rtol=0, atol=0)
    # imagenet_size sets the side the backbone sees.
    assert isinstance(first.backbone, ImageNetInput) and first.backbone.size == 64
    torch.testing.assert_close(f_first, _reference_features(reference, x, 64), rtol=0, atol=1e-4)


@pytest.mark.parametrize("weights", [None, "missing.pth"])
def test_missing_weights_name_the_config_key(tmp_path: Path, weights: str | None) -> None:
    path = None if weights is None else tmp_path / weights
    with pytest.raises(ValueError, match="embed.imagenet_weights") as info:
        build_representation("resnet50_imagenet", seed=0, imagenet_weights=path)
    assert IMAGENET_WEIGHTS_URL in str(info.value)
    if path is not None:
        assert str(path) in str(info.value)


def test_corrupt_weights_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "resnet50-broken.pth"
    path.write_bytes(b"this is not a torch file")
    with pytest.raises(ValueError, match="could not load") as info:
        build_representation("resnet50_imagenet", seed=0, imagenet_weights=path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("wrapped", [False, True])
def test_mismatched_weights_file_is_named(tmp_path: Path, wrapped: bool) -> None:
    # A ResNet-18 first convolution: the wrong shape, and most ResNet-50 keys missing. A
    # {"state_dict": ...} checkpoint is unwrapped first, so it fails the same way.
    state = {"conv1.weight": torch.zeros(64, 3, 3, 3)}
    path = tmp_path / "resnet18.pth"
    torch.save({"state_dict": state} if wrapped else state, path)
    with pytest.raises(ValueError, match="does not fit torchvision's ResNet-50") as info:
        build_representation("resnet50_imagenet", seed=0, imagenet_weights=path)
    assert str(path) in str(info.value)
    assert "conv1.weight" in str(info.value)


def test_weights_file_without_a_state_dict_is_named(tmp_path: Path) -> None:
    path = tmp_path / "list.pth"
    torch.save([torch.zeros(1)], path)
    with pytest.raises(ValueError, match="not a state dict") as info:
        build_representation("resnet50_imagenet", seed=0, imagenet_weights=path)
    assert str(path) in str(info.value)


def test_imagenet_size_below_32_is_rejected(weights_file: Path) -> None:
    with pytest.raises(ValueError, match="imagenet_size must be >= 32, got 16"):
        build_representation(
            "resnet50_imagenet", seed=0, imagenet_weights=weights_file, imagenet_size=16
        )


def test_weights_path_travels_through_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(IMAGENET_WEIGHTS_ENV, raising=False)
    assert imagenet_weights_from_env() is None
    monkeypatch.chdir(tmp_path)
    export_data_settings(root=None, download=False, imagenet_weights="weights/resnet50.pth")
    # Made absolute, since jobs may run in another working directory.
    assert imagenet_weights_from_env() == str(tmp_path / "weights" / "resnet50.pth")
    monkeypatch.setenv(IMAGENET_WEIGHTS_ENV, "")
    assert imagenet_weights_from_env() is None


def test_config_copies_of_the_torch_side_constants_agree() -> None:
    # pipeline_lib.config.validate keeps them as text so validating a config never imports torch.
    assert config_module._IMAGENET_WEIGHTS_ENV == IMAGENET_WEIGHTS_ENV
    assert config_module._IMAGENET_WEIGHTS_URL == IMAGENET_WEIGHTS_URL
    assert torchvision.models.ResNet50_Weights.IMAGENET1K_V1.url == IMAGENET_WEIGHTS_URL
