"""Rotation prediction: the loss step and RotNet's own one-class scores."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.models.proxy import build_proxy_model, rotation_logits
from pipeline_lib.ssl.augment import rotate90, to_unit_float
from pipeline_lib.ssl.rotation import (
    rotation_loss,
    rotation_scores,
    rotation_step,
    rotation_view_logits,
)


def _identity(images: torch.Tensor, generator: torch.Generator, streams: int = 1) -> torch.Tensor:
    return to_unit_float(images)


def test_rotation_step_is_cross_entropy_over_the_four_rotations() -> None:
    torch.manual_seed(0)
    model = build_proxy_model("rotnet", width=8).eval()
    batch = torch.randint(0, 256, (3, 3, 32, 32), dtype=torch.uint8)
    loss = rotation_step(model, batch, generator=torch.Generator(), augment=_identity)
    x = to_unit_float(batch)
    with torch.no_grad():
        logits = torch.cat([rotation_logits(model, rotate90(x, k)) for k in range(4)])
    expected = F.cross_entropy(logits, torch.arange(4).repeat_interleave(3))
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_rotation_loss_checks_shapes() -> None:
    assert rotation_loss(torch.zeros(4, 4), torch.arange(4)).item() == pytest.approx(np.log(4))
    with pytest.raises(ValueError, match=r"\(n, 4\)"):
        rotation_loss(torch.zeros(4, 3), torch.arange(4))


def test_rotation_scores_match_the_classifier(digits64: np.ndarray) -> None:
    torch.manual_seed(0)
    model = build_proxy_model("rotation", width=8, head_depth=1, head_hidden=16)
    images = digits64[:5]
    scores = rotation_scores(model, images, batch_size=2)
    assert set(scores) == {"p_rot0", "log_p_rotations"}
    x = to_unit_float(torch.from_numpy(images).permute(0, 3, 1, 2))
    with torch.no_grad():
        log_probs = [F.log_softmax(rotation_logits(model, rotate90(x, k)), 1) for k in range(4)]
    np.testing.assert_allclose(scores["p_rot0"], log_probs[0][:, 0].exp().numpy(), rtol=1e-5)
    expected = sum(log_probs[k][:, k] for k in range(4)).numpy()
    np.testing.assert_allclose(scores["log_p_rotations"], expected, rtol=1e-5)
    assert scores["p_rot0"].shape == (5,) and np.all(
        (scores["p_rot0"] > 0) & (scores["p_rot0"] < 1)
    )
    assert np.all(scores["log_p_rotations"] < 0)


def test_rotation_scores_reject_models_without_classifier(digits64: np.ndarray) -> None:
    model = build_proxy_model("contrastive", width=8, head_depth=1, head_hidden=16)
    with pytest.raises(ValueError, match="rotation classifier"):
        rotation_scores(model, digits64[:2])


def test_rotation_view_logits_give_back_the_library_scores(digits64: np.ndarray) -> None:
    """[i, k, y]: image i rotated k times, class y; the diagonal y = k is what the scores
    sum, so both rotation scores follow from the saved logits offline."""
    torch.manual_seed(0)
    model = build_proxy_model("rotnet", width=8)
    images = digits64[:5]
    logits = rotation_view_logits(model, images, batch_size=2)
    assert logits.shape == (5, 4, 4) and logits.dtype == np.float32
    x = to_unit_float(torch.from_numpy(images).permute(0, 3, 1, 2))
    with torch.no_grad():
        expected = torch.stack([rotation_logits(model, rotate90(x, k)) for k in range(4)], 1)
    np.testing.assert_allclose(logits, expected.numpy(), rtol=1e-5, atol=1e-6)
    scores = rotation_scores(model, images, batch_size=2)
    log_p = torch.log_softmax(torch.from_numpy(logits).double(), dim=2).numpy()
    total = log_p[:, np.arange(4), np.arange(4)].sum(axis=1)
    # Same float32 logits (same batches, same kernels), then float64 arithmetic on 16 numbers.
    tolerance = 64 * np.finfo(np.float64).eps * np.abs(scores["log_p_rotations"]).max()
    assert np.abs(total - scores["log_p_rotations"]).max() <= tolerance
    np.testing.assert_allclose(np.exp(log_p[:, 0, 0]), scores["p_rot0"], rtol=1e-12)
    with pytest.raises(ValueError, match="uint8"):
        rotation_view_logits(model, images.astype(np.float32))
