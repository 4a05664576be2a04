"""Integrated gradients and GradCAM: completeness, exact oracles, the figure's columns."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from pipeline_lib.detection.detectors.kde import KernelDensityScore
from pipeline_lib.explain import (
    explain_images,
    explanation_layer,
    gradcam,
    integrated_gradients,
    kde_anomaly_function,
    rotation_anomaly_function,
)
from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.models.representation import Representation, build_representation


def _trained_like(method: str) -> nn.Module:
    """A tiny model whose BatchNorm statistics are not the identity of a fresh network.

    A fresh network without biases is positively homogeneous, f(a x) = a f(x), so the
    normalised feature is constant along the path from a black image and jumps at 0:
    integrated gradients cannot be complete there (nor on any such model).
    """
    torch.manual_seed(0)
    # torch's init: its Dense layers have biases (the released init zeroes them), so the
    # rotation head's score moves well above the quadrature error along the path.
    model = build_proxy_model(method, width=4, image_size=16, init="torch")
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.bias.copy_(0.3 * torch.randn(module.bias.shape, generator=generator))
                module.running_mean.copy_(
                    0.3 * torch.randn(module.running_mean.shape, generator=generator)
                )
    return model.eval()


@pytest.fixture(autouse=True, scope="module")
def _flush_denormals():
    """The randomised BatchNorm statistics produce denormal floats, which slow CPU
    convolutions several-fold; flushing them to zero changes no tested value."""
    torch.set_flush_denormal(True)
    yield
    torch.set_flush_denormal(False)


@pytest.fixture(scope="module")
def rotnet() -> nn.Module:
    return _trained_like("rotnet")


@pytest.fixture(scope="module")
def images() -> torch.Tensor:
    """Two smooth ramps: far from the fit set's grey noise, so the scores change enough."""
    ramp = torch.linspace(0, 1, 16)
    return torch.stack([ramp[None, :, None].expand(3, 16, 16), 0.8 * ramp.expand(3, 16, 16)])


def _fit_features(model: nn.Module) -> np.ndarray:
    noise = 0.5 + 0.1 * torch.randn(30, 3, 16, 16, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        return model(noise)["f"].numpy()


def test_kde_function_equals_the_kde_detector(rotnet, images):
    fit = _fit_features(rotnet)
    score = kde_anomaly_function(rotnet, fit)
    with torch.no_grad():
        ours = score(images).numpy()
        features = rotnet(images)["f"].numpy()
    expected = -KernelDensityScore().fit(fit).score_samples(features)
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("which", ["kde", "rotation"])
def test_integrated_gradients_are_complete(rotnet, images, which):
    if which == "kde":
        score = kde_anomaly_function(rotnet, _fit_features(rotnet))
    else:
        score = rotation_anomaly_function(rotnet)
    with torch.no_grad():
        change = (score(images) - score(torch.zeros_like(images))).double()
    assert change.abs().min() > 1e-3  # the check is not vacuous
    coarse = integrated_gradients(score, images, steps=8)[1].abs()
    attributions, gaps = integrated_gradients(score, images, steps=64)
    assert attributions.shape == images.shape
    # Completeness (Sundararajan et al.): sum of attributions = F(x) - F(black), up to
    # the quadrature error, which shrinks with the number of steps (RotNet's four passes
    # through ReLU kinks converge more slowly than the KDE score).
    np.testing.assert_allclose(
        attributions.sum(dim=(1, 2, 3)), change, rtol=0.02 if which == "kde" else 0.1, atol=1e-5
    )
    np.testing.assert_allclose(gaps, attributions.sum(dim=(1, 2, 3)) - change, atol=1e-12)
    assert gaps.abs().max() < coarse.max()


def test_integrated_gradients_of_a_linear_score_are_exact():
    weights = torch.randn(3, 4, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)

    def score(x: torch.Tensor) -> torch.Tensor:
        return (x.double() * weights).sum(dim=(1, 2, 3))

    x = torch.rand(2, 3, 4, 4, dtype=torch.float64)
    baseline = torch.full((3, 4, 4), 0.25, dtype=torch.float64)
    attributions, gaps = integrated_gradients(score, x, baseline=baseline, steps=1)
    torch.testing.assert_close(attributions, (x - baseline) * weights)
    assert gaps.abs().max() < 1e-12


class _TinyNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.Sequential(nn.Conv2d(3, 2, 3, padding=1), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stages(x).mean(dim=(2, 3))


def test_gradcam_equals_its_formula_on_a_tiny_network():
    torch.manual_seed(0)
    model = Representation(_TinyNet()).eval()
    x = torch.rand(1, 3, 6, 6)

    def score(images: torch.Tensor) -> torch.Tensor:
        f = model(images)["f"]
        return 2.0 * f[:, 0] - f[:, 1]

    cam = gradcam(score, x, layer=explanation_layer(model))
    with torch.no_grad():
        activation = model.backbone.stages(x)  # (1, 2, 6, 6); dF/dA_c = w_c / 36
    expected = torch.relu((2.0 * activation[:, 0] - activation[:, 1]) / 36)
    expected = expected / expected.max()
    torch.testing.assert_close(cam, expected, rtol=1e-5, atol=1e-6)


def test_gradcam_turns_rotated_passes_back(rotnet, images):
    layer = explanation_layer(rotnet)

    def plain(x: torch.Tensor) -> torch.Tensor:
        return rotnet(x)["f"].square().sum(dim=1)

    def on_rotated(x: torch.Tensor) -> torch.Tensor:
        return plain(torch.rot90(x, 1, dims=(2, 3)))

    on_rotated.views = (1,)
    turned_back = gradcam(on_rotated, images, layer=layer)
    expected = torch.rot90(
        gradcam(plain, torch.rot90(images, 1, dims=(2, 3)), layer=layer), -1, (1, 2)
    )
    torch.testing.assert_close(turned_back, expected)
    cam = gradcam(rotation_anomaly_function(rotnet), images, layer=layer)  # four passes
    assert cam.shape == (2, 16, 16) and cam.min() >= 0 and cam.max() == pytest.approx(1.0)


def test_explanation_layer_of_each_backbone():
    resnet = build_representation("resnet18_random", seed=0, width=4)
    assert explanation_layer(resnet) is resnet.backbone.stages[-1]
    with pytest.raises(ValueError, match="no convolutional stage"):
        explanation_layer(build_representation("raw", seed=0))


def test_explain_images_returns_the_paper_columns(rotnet):
    contrastive = _trained_like("contrastive")
    images = np.random.default_rng(0).integers(0, 256, size=(2, 16, 16, 3), dtype=np.uint8)
    fits = {"rotnet": _fit_features(rotnet), "contrastive": _fit_features(contrastive)}
    heatmaps, diagnostics = explain_images(
        {"rotnet": rotnet, "contrastive": contrastive},
        fits,
        images,
        rotation_methods=["rotnet"],
        labels={"rotnet": "RotNet"},
        ig_steps=8,
    )
    assert list(heatmaps) == [
        "IG: RotNet + KDE",
        "IG: RotNet + rotation classifier",
        "IG: contrastive + KDE",
        "GradCAM: RotNet + KDE",
        "GradCAM: RotNet + rotation classifier",
        "GradCAM: contrastive + KDE",
    ]
    for maps in heatmaps.values():
        assert maps.shape == (2, 16, 16) and maps.min() >= 0 and maps.max() <= 1
        assert maps.max() > 0  # not a blank map
    assert set(diagnostics["score"]) == {c for c in heatmaps if c.startswith("IG")}
