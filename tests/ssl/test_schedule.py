"""The momentum forms of the schedule (pipeline_lib.ssl.schedule) against their update rules.

``released`` must be Keras' SGD (v <- m v - lr g; w <- w + v) and ``torch`` torch's
(b <- m b + g; w <- w - lr b) whatever the rates, in float64 to its rounding; the trainer must
carry the setting (tests/reference/test_steps.py checks ``released`` against the released
optimiser itself).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline_lib.ssl.schedule import MOMENTUM_LR, MomentumFormLR
from tests.ssl.tiny_runs import keyword_train

#: The rate factor of each step: it moves at steps 2, 3 and 5, and reaches 0 after the last.
FACTORS = (1.0, 1.0, 0.75, 0.5, 0.5, 0.125, 0.0)
LR, MOMENTUM, DECAY = 0.1, 0.9, 0.01
#: float64: a few rounding errors of each update's terms, over 6 steps.
TOLERANCE = 64 * np.finfo(np.float64).eps


def _factor(step: int) -> float:
    return FACTORS[step]


def _gradients(steps: int, shape: tuple[int, ...]) -> list[np.ndarray]:
    stream = np.random.default_rng(3)
    return [stream.standard_normal(shape) for _ in range(steps)]


def _keras(start: np.ndarray, gradients: list[np.ndarray]) -> np.ndarray:
    """Keras' SGD with the loss's L2 gradient ``DECAY * w`` added, at ``LR * FACTORS[k]``."""
    w, v = start.copy(), np.zeros_like(start)
    for k, g in enumerate(gradients):
        v = MOMENTUM * v - LR * FACTORS[k] * (g + DECAY * w)
        w = w + v
    return w


def _torch_rule(start: np.ndarray, gradients: list[np.ndarray]) -> np.ndarray:
    w, b = start.copy(), None
    for k, g in enumerate(gradients):
        d = g + DECAY * w
        b = d if b is None else MOMENTUM * b + d
        w = w - LR * FACTORS[k] * b
    return w


def _train(form: str, start: np.ndarray, gradients: list[np.ndarray], resume_at: int | None = None):
    """Our SGD and schedule over the gradients; optionally saved and reloaded mid-way."""
    parameter = torch.nn.Parameter(torch.from_numpy(start.copy()))

    def fresh() -> tuple[torch.optim.SGD, MomentumFormLR]:
        optimizer = torch.optim.SGD([parameter], lr=LR, momentum=MOMENTUM, weight_decay=DECAY)
        return optimizer, MomentumFormLR(optimizer, _factor, momentum_form=form)

    optimizer, schedule = fresh()
    for k, gradient in enumerate(gradients):
        if k == resume_at:
            saved = optimizer.state_dict(), schedule.state_dict()
            optimizer, schedule = fresh()
            optimizer.load_state_dict(saved[0])
            schedule.load_state_dict(saved[1])
        parameter.grad = torch.from_numpy(gradient)
        optimizer.step()
        schedule.step()
    return parameter.detach().numpy(), optimizer


@pytest.mark.parametrize("resume_at", [None, 3])
def test_released_form_is_keras_sgd_across_rate_changes(resume_at) -> None:
    start = np.random.default_rng(1).standard_normal((3, 4))
    gradients = _gradients(6, start.shape)
    ours, optimizer = _train("released", start, gradients, resume_at)
    keras = _keras(start, gradients)
    assert np.abs(ours - keras).max() <= TOLERANCE * np.abs(keras).max()
    # The schedule's last step moved the rate to 0: no rescaling (no step can follow), the
    # buffers keep the scale of the last rate they were used at.
    group = optimizer.param_groups[0]
    assert group["lr"] == 0.0 and group[MOMENTUM_LR] == LR * FACTORS[5]
    assert np.isfinite(optimizer.state[group["params"][0]]["momentum_buffer"].numpy()).all()


def test_torch_form_is_torch_sgd_and_differs_once_the_rate_moves() -> None:
    start = np.random.default_rng(1).standard_normal((3, 4))
    gradients = _gradients(6, start.shape)
    ours, optimizer = _train("torch", start, gradients)
    expected = _torch_rule(start, gradients)
    assert np.abs(ours - expected).max() <= TOLERANCE * np.abs(expected).max()
    assert MOMENTUM_LR not in optimizer.param_groups[0]  # nothing of the form is kept
    # The same while the rate holds (two steps; rounding apart), apart once it moves.
    keras_two, torch_two = _keras(start, gradients[:2]), _torch_rule(start, gradients[:2])
    assert np.abs(keras_two - torch_two).max() <= TOLERANCE * np.abs(torch_two).max()
    apart = np.abs(_keras(start, gradients) - expected).max() / np.abs(expected).max()
    assert apart > 1e3 * TOLERANCE


def test_unknown_form_is_refused() -> None:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="momentum_form 'keras'.*released, torch"):
        MomentumFormLR(optimizer, lambda step: 1.0, momentum_form="keras")


def test_the_trainer_keeps_the_form_it_is_given(digits64) -> None:
    """Equal within the first epoch (one rate), apart after the rate moves at epoch 2."""
    options = {"seed": 0, "batch_size": 32, "width": 4, "lr": 0.05, "amp": None}
    weights = {}
    for form in ("released", "torch"):
        for epochs in (1, 3):
            model, _ = keyword_train(
                "rotnet", digits64, epochs=epochs, momentum_form=form, **options
            )
            weights[form, epochs] = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert torch.equal(weights["released", 1], weights["torch", 1])
    moved = (weights["released", 3] - weights["torch", 3]).norm()
    assert moved > 1e-3 * (weights["released", 3] - weights["released", 1]).norm()
