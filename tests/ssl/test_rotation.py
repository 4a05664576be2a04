"""Rotation prediction: the task's step and RotNet's own one-class scores."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.data.split import OneClassSplit
from pipeline_lib.detection.runner import run_rotation_detection
from pipeline_lib.models.proxy import build_proxy_model, rotation_logits
from pipeline_lib.registry import ROTATION_DETECTORS
from pipeline_lib.ssl.augment import rotate90, to_unit_float
from pipeline_lib.ssl.rotation import (
    ROTATION_SCORE_NAMES,
    rotation_logits_of_images,
    rotation_scores,
    scores_from_rotation_logits,
)
from pipeline_lib.ssl.settings import TrainSettings
from pipeline_lib.ssl.tasks import task_of
from pipeline_lib.ssl.tasks.rotation import rotation_loss

EPS64 = float(np.finfo(np.float64).eps)
EPS32 = float(np.finfo(np.float32).eps)


def _identity(images: torch.Tensor, generator: torch.Generator, streams: int = 1) -> torch.Tensor:
    return to_unit_float(images)


def test_rotation_step_is_cross_entropy_over_the_four_rotations() -> None:
    torch.manual_seed(0)
    model = build_proxy_model("rotnet", width=8).eval()
    batch = torch.randint(0, 256, (3, 3, 32, 32), dtype=torch.uint8)
    step = task_of("rotnet").step(TrainSettings("rotnet", epochs=1, batch_size=3), _identity)
    loss = step(model, batch, generator=torch.Generator())
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
    assert set(scores) == set(ROTATION_SCORE_NAMES) == set(ROTATION_DETECTORS.values())
    x = to_unit_float(torch.from_numpy(images).permute(0, 3, 1, 2))
    with torch.no_grad():
        logits = [rotation_logits(model, rotate90(x, k)) for k in range(4)]
    log_probs = [F.log_softmax(view.double(), 1) for view in logits]
    diagonal = torch.stack([log_probs[k][:, k] for k in range(4)])  # (4, n)
    np.testing.assert_allclose(scores["p_rot0"], diagonal[0].exp().numpy(), rtol=1e-5)
    np.testing.assert_allclose(scores["log_p_rotations"], diagonal.sum(0).numpy(), rtol=1e-5)
    np.testing.assert_allclose(scores["sum_p_rotations"], diagonal.exp().sum(0).numpy(), rtol=1e-5)
    product = np.prod([F.softmax(view, 1)[:, k].numpy() for k, view in enumerate(logits)], axis=0)
    np.testing.assert_allclose(scores["released_rotations"], product - 1.0, atol=64 * EPS32)
    assert scores["released_rotations"].dtype == np.float32
    assert all(scores[name].dtype == np.float64 for name in ROTATION_SCORE_NAMES[:3])
    assert scores["p_rot0"].shape == (5,) and np.all(
        (scores["p_rot0"] > 0) & (scores["p_rot0"] < 1)
    )
    assert np.all(scores["log_p_rotations"] < 0)
    assert np.all((scores["sum_p_rotations"] > 0) & (scores["sum_p_rotations"] < 4))


def _view_logits(probabilities: list[list[float]]) -> torch.Tensor:
    """Logits ``(4, 1, 4)`` whose view k has softmax ``probabilities[k]`` (a hand-made image)."""
    return torch.log(torch.tensor(probabilities, dtype=torch.float64))[:, None, :]


def _confident(gap: float) -> torch.Tensor:
    """Every view k puts logit ``gap`` on class k and 0 on the others."""
    return (gap * torch.eye(4, dtype=torch.float64))[:, None, :]


def _spread(p_right: list[float]) -> list[list[float]]:
    """View k gives its own class k ``p_right[k]`` and the rest evenly to the others."""
    return [[p if y == k else (1.0 - p) / 3.0 for y in range(4)] for k, p in enumerate(p_right)]


# A: one confident view (p(0|x) = 0.97), three uncertain ones (0.25); B: uniformly moderate
# (0.4 on every view); C: unsure of the upright view (0.3) and fairly sure of the others
# (0.6); D and E: every view certain, logit gaps 20 and 25 (float32 softmax = 1 exactly).
HAND = {
    "A": _view_logits([[0.97, 0.01, 0.01, 0.01], *_spread([0.25, 0.25, 0.25, 0.25])[1:]]),
    "B": _view_logits(_spread([0.4, 0.4, 0.4, 0.4])),
    "C": _view_logits(_spread([0.3, 0.6, 0.6, 0.6])),
    "D": _confident(20.0),
    "E": _confident(25.0),
}


def _hand_scores() -> dict[str, np.ndarray]:
    logits = torch.cat(list(HAND.values()), dim=1)  # (4, 5, 4)
    return {k: v.numpy() for k, v in scores_from_rotation_logits(logits).items()}


def test_the_four_rotation_scores_of_hand_made_logits() -> None:
    scores = _hand_scores()
    log = math.log
    # By hand: sum_k p_k, sum_k log p_k, p_0, and -(1 - prod_k p_k).
    expected = {
        "sum_p_rotations": [0.97 + 3 * 0.25, 4 * 0.4, 0.3 + 3 * 0.6],
        "log_p_rotations": [log(0.97) + 3 * log(0.25), 4 * log(0.4), log(0.3) + 3 * log(0.6)],
        "p_rot0": [0.97, 0.4, 0.3],
        "released_rotations": [0.97 * 0.25**3 - 1, 0.4**4 - 1, 0.3 * 0.6**3 - 1],
    }
    for name, values in expected.items():
        ours = scores[name][:3]
        if name == "released_rotations":
            # float32 throughout: a few roundings of values of size 1.
            np.testing.assert_allclose(ours, values, rtol=0, atol=8 * EPS32)
        else:
            np.testing.assert_allclose(ours, values, rtol=16 * EPS64, atol=0)
    # The certain views by hand: p = 1 / (1 + 3 exp(-gap)).
    for column, gap in ((3, 20.0), (4, 25.0)):
        p = 1.0 / (1.0 + 3.0 * math.exp(-gap))
        assert scores["sum_p_rotations"][column] == pytest.approx(4 * p, rel=16 * EPS64)
        assert scores["log_p_rotations"][column] == pytest.approx(4 * log(p), rel=1e-12)
    # Each score ranks A, B, C its own way (higher = more normal).
    order = {name: "".join(np.array(list("ABC"))[np.argsort(-v[:3])]) for name, v in scores.items()}
    assert order == {
        "sum_p_rotations": "CAB",
        "log_p_rotations": "CBA",
        "p_rot0": "ABC",
        "released_rotations": "CBA",
    }


def test_the_released_form_ties_in_float32_where_the_float64_scores_differ() -> None:
    scores = _hand_scores()
    d, e = 3, 4
    # float64: E's views are surer than D's, and every float64 score says so.
    for name in ("sum_p_rotations", "log_p_rotations", "p_rot0"):
        assert scores[name][e] > scores[name][d]
    # float32: softmax = 1 on every view of both, exp(sum log p) = 1, 1 - 1 = 0: a tie.
    assert scores["released_rotations"][d] == scores["released_rotations"][e] == 0.0
    # The other end: two images sure of the wrong rotation, exp(sum log p) below 2^-25
    # (float64 sums of log p of about -120 and -160), both -(1 - dscore) = -1 in float32.
    wrong = torch.cat([_confident(-30.0), _confident(-40.0)], dim=1)
    low = {k: v.numpy() for k, v in scores_from_rotation_logits(wrong).items()}
    assert low["log_p_rotations"][0] > low["log_p_rotations"][1] + 30
    assert low["released_rotations"][0] == low["released_rotations"][1] == -1.0


def test_each_rotation_detector_ranks_its_own_score() -> None:
    """The scoring job's call: one AUC per detector id, ties counted as half."""
    scores = _hand_scores()
    features = {f"{name}_test": values for name, values in scores.items()}
    features["test_index"] = np.arange(5)
    # Outliers A and E against inliers B, C, D.
    split = OneClassSplit(
        inlier=0,
        contamination=0.0,
        seed=0,
        train_index=np.arange(0),
        n_outliers_in_train=0,
        test_index=np.arange(5),
        test_is_outlier=np.array([1, 0, 0, 0, 1], dtype=np.int8),
    )
    aurocs = {
        detector: run_rotation_detection(split, features, detector=detector)[0]["auroc"]
        for detector in ROTATION_DETECTORS
    }
    # Pairs (outlier, inlier) with the outlier less normal, out of 6, by hand from the
    # values above: sum p: A < C, A < D; sum log p: A below all three; p0: A < D only;
    # released: A below all three, E ties D.
    expected = {
        "rotation_classifier": 2 / 6,
        "rotation_log_p": 3 / 6,
        "rotation_p0": 1 / 6,
        "rotation_released": 3.5 / 6,
    }
    assert aurocs == pytest.approx({k: 100 * v for k, v in expected.items()}, abs=1e-9)


def test_rotation_scores_need_four_views_of_four_classes() -> None:
    with pytest.raises(ValueError, match=r"\(4, n, 4\)"):
        scores_from_rotation_logits(torch.zeros(3, 2, 4))


def test_old_feature_files_are_named_when_a_score_is_missing() -> None:
    split = OneClassSplit(0, 0.0, 0, np.arange(0), 0, np.arange(2), np.array([0, 1], np.int8))
    old = {
        "test_index": np.arange(2),
        "log_p_rotations_test": np.zeros(2),
        "p_rot0_test": np.ones(2),
    }
    with pytest.raises(ValueError, match="delete this features.npz"):
        run_rotation_detection(split, old, detector="rotation_classifier")


def test_rotation_scores_reject_models_without_classifier(digits64: np.ndarray) -> None:
    model = build_proxy_model("contrastive", width=8, head_depth=1, head_hidden=16)
    with pytest.raises(ValueError, match="rotation classifier"):
        rotation_scores(model, digits64[:2])


def test_rotation_logits_of_images_give_back_the_library_scores(digits64: np.ndarray) -> None:
    """[i, k, y]: image i rotated k times, class y; the diagonal y = k is what the scores
    sum, so both rotation scores follow from the saved logits offline."""
    torch.manual_seed(0)
    model = build_proxy_model("rotnet", width=8)
    images = digits64[:5]
    logits = rotation_logits_of_images(model, images, batch_size=2)
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
        rotation_logits_of_images(model, images.astype(np.float32))
