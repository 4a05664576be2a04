"""Fixtures for the self-supervised training tests: a few real images, tiny networks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pipeline_lib.ssl.fused as fused_module
import pipeline_lib.ssl.run as run_module
from pipeline_lib.data import load_dataset
from tests.ssl.tiny_runs import spy_on_steps
from tests.threads import one_torch_thread


@pytest.fixture(scope="session")
def digits64() -> np.ndarray:
    """64 training images of scikit-learn's digits as uint8 ``(64, 32, 32, 3)``."""
    images = load_dataset("digits").train_images[:64]
    assert images.shape == (64, 32, 32, 3) and images.dtype == np.uint8
    return images


@pytest.fixture(autouse=True)
def _one_thread():
    """The tests share two cores with other work: keep torch to one thread."""
    with one_torch_thread():
        yield


@pytest.fixture
def deterministic_cudnn():
    """cuDNN's deterministic kernels for one test (the trainer's choice on CUDA, which the
    bit-for-bit CUDA tests need); the previous setting restored."""
    before = torch.backends.cudnn.deterministic
    torch.backends.cudnn.deterministic = True
    yield
    torch.backends.cudnn.deterministic = before


@pytest.fixture
def step_batches(monkeypatch) -> list[torch.Tensor]:
    """The batches of every single step trained while the test runs, in order."""
    batches: list[torch.Tensor] = []
    spy_on_steps(monkeypatch, lambda batch: batches.append(batch.clone()))
    return batches


# --- The two-phase step tests (test_stepper*.py, tests.ssl.step_cases) ---


@pytest.fixture
def images(digits64: np.ndarray) -> np.ndarray:
    """48 images: 4 steps per epoch at batch 12, so two epochs cross an epoch boundary."""
    return digits64[:48]


@pytest.fixture
def two_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``train_representation`` run the two-phase step, uncaptured, on the CPU."""
    monkeypatch.setattr(run_module, "resolve_step_mode", lambda *a, **k: "two_phase")


@pytest.fixture(scope="module")
def noise16() -> list[np.ndarray]:
    """Two models' training sets of 16 random 16x16 images."""
    images = np.random.default_rng(0).integers(0, 256, (32, 16, 16, 3), dtype=np.uint8)
    return [images[:16], images[16:]]


@pytest.fixture
def side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fused groups as captured CUDA runs get them: members side by side (here two_phase)."""
    monkeypatch.setattr(run_module, "resolve_step_mode", lambda *a, **k: "two_phase")
    monkeypatch.setattr(fused_module, "_group", fused_module.ConcurrentGroup)
