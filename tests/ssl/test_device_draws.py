"""``train.draws``: a step's random numbers from the CPU generator, or drawn on the device.

On the CPU the step's device is the host, so ``device`` must train the ``host`` run bit for
bit; a checkpoint says where it drew, and a resume under the other setting keeps the
weights and starts the generator from the run's seed. The CUDA tests (graph capture of
device draws, which must advance the registered generator at each replay) are skipped here
and run on a GPU session (benchmarks/gpu_session.sh runs ``-k on_cuda``).
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from pipeline_lib.models.checkpoints import load_checkpoint, save_checkpoint
from pipeline_lib.ssl.draws import DeviceDraws, GeneratorDraws, as_draws, augment_generator_on
from pipeline_lib.ssl.loop import resume
from tests.ssl.tiny_runs import (
    TIMING_FIELDS,
    TINY_RUNS,
    assert_same_weights,
    keyword_prepare,
    keyword_train,
    keyword_train_fused,
    needs_cuda,
    without_timing,
)

#: Tiny runs of the methods whose steps draw the most kinds of numbers.
CASES = TINY_RUNS


@pytest.fixture
def images(digits64: np.ndarray) -> np.ndarray:
    """48 images: 4 steps per epoch at batch 12, so two epochs cross an epoch boundary."""
    return digits64[:48]


#: Every case's settings besides its own.
COMMON = {"seed": 5, "epochs": 2, "width": 8, "lr": 0.05, "lr_schedule": "per_step"}


def _train(case: str, images: np.ndarray, **overrides):
    method, options = CASES[case]
    return keyword_train(method, images, **{**COMMON, **options, **overrides})


def _prepared(case: str, images: np.ndarray):
    """The run and fresh state :func:`_train` would start from."""
    method, options = CASES[case]
    return keyword_prepare(method, images, **{**COMMON, **options})


def _compared(history: list[dict]) -> list[dict]:
    """What two runs' histories must agree on: also without the step mode (some runs
    compared train eager, others captured)."""
    return without_timing(history, (*TIMING_FIELDS, "step_mode"))


@pytest.mark.parametrize("case", list(CASES))
def test_device_draws_on_the_cpu_are_the_host_draws(case, images) -> None:
    host, host_history = _train(case, images, draws="host")
    device, device_history = _train(case, images, draws="device")
    assert_same_weights(host, device)
    assert _compared(device_history) == _compared(host_history)


def test_an_unknown_draws_is_refused_before_training(images) -> None:
    with pytest.raises(ValueError, match=r"unknown draws 'gpu'; allowed: host, device"):
        _train("rotnet", images, draws="gpu")
    with pytest.raises(ValueError, match="unknown draws"):
        augment_generator_on(0, torch.device("cpu"), "gpu")


def test_draws_wrap_a_generator_by_where_it_lives() -> None:
    generator = augment_generator_on(7, torch.device("cpu"), "device")
    assert generator.device.type == "cpu"  # on the CPU the device is the host
    assert isinstance(as_draws(generator), GeneratorDraws)
    expected = torch.rand(3, 4, generator=torch.Generator().manual_seed(7))
    assert torch.equal(as_draws(generator).rand(3, 4), expected)
    with pytest.raises(ValueError, match="needs a generator on an accelerator"):
        DeviceDraws(torch.Generator())


def _checkpoint_after_one_epoch(images: np.ndarray, path) -> None:
    def stop_after_first_epoch(record: dict) -> None:
        if record["epoch"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _train("denoising", images, checkpoint_path=path, callback=stop_after_first_epoch)


def test_a_checkpoint_says_where_it_drew_and_resumes_its_generator(images, tmp_path) -> None:
    path = tmp_path / "checkpoint.pt"
    _checkpoint_after_one_epoch(images, path)
    saved = load_checkpoint(path)
    assert saved["rng"]["augment_device"] == "cpu"
    run, state = _prepared("denoising", images)
    resumed = resume(run, state, path)
    assert resumed.epoch == 1
    assert torch.equal(resumed.augment_generator.get_state(), saved["rng"]["augment"])


def test_a_checkpoint_drawn_elsewhere_resumes_the_weights_from_the_seeded_generator(
    images, tmp_path, caplog
) -> None:
    """A device-drawn checkpoint's generator state cannot enter a CPU generator: the run
    keeps the weights, and its generator starts as the run's seed sets it."""
    path = tmp_path / "checkpoint.pt"
    _checkpoint_after_one_epoch(images, path)
    saved = load_checkpoint(path)
    saved["rng"]["augment_device"] = "cuda"
    saved["rng"]["augment"] = torch.zeros(16, dtype=torch.uint8)  # a Philox state's size
    save_checkpoint(path, saved)
    run, state = _prepared("denoising", images)
    seeded = state.augment_generator.get_state()
    with caplog.at_level(logging.INFO, logger="pipeline_lib.ssl.loop"):
        resumed = resume(run, state, path)
    assert resumed.epoch == 1
    assert torch.equal(resumed.augment_generator.get_state(), seeded)
    for name, value in saved["model"].items():
        assert torch.equal(resumed.model.state_dict()[name], value), name
    assert "drew its random numbers on cuda, this run draws them on cpu" in caplog.text


# --- CUDA only: run on a GPU session -------------------------------------------------------


@needs_cuda
@pytest.mark.parametrize("case", list(CASES))
def test_device_draws_graph_matches_eager_on_cuda(case, images, deterministic_cudnn) -> None:
    """The same kernels draw at the same Philox offsets captured or not (capture at step 4,
    replays in epoch 2), in float32; and they are not the host's numbers."""
    options = {"device": "cuda", "amp": None, "draws": "device"}
    eager, eager_history = _train(case, images, step_mode="eager", **options)
    graph, history = _train(case, images, step_mode="graph", **options)
    assert [r["step_mode"] for r in history] == ["graph", "graph"]
    assert_same_weights(eager, graph)
    assert _compared(history) == _compared(eager_history)
    host, _ = _train(case, images, step_mode="graph", device="cuda", amp=None)
    stem = "backbone.stem.0.weight"
    assert not torch.equal(host.state_dict()[stem], graph.state_dict()[stem])


@needs_cuda
@pytest.mark.parametrize("case", list(CASES))
def test_device_draws_resume_is_bit_identical_on_cuda(
    case, images, tmp_path, deterministic_cudnn
) -> None:
    """The checkpoint saves the device generator's offset, which each replay advanced."""
    path = tmp_path / "checkpoint.pt"

    def kill_after_first_epoch(record: dict) -> None:
        if record["epoch"] == 1:
            raise KeyboardInterrupt

    options = {"device": "cuda", "step_mode": "graph", "epochs": 3, "draws": "device"}
    with pytest.raises(KeyboardInterrupt):
        _train(case, images, checkpoint_path=path, callback=kill_after_first_epoch, **options)
    assert load_checkpoint(path)["rng"]["augment_device"] == "cuda"
    resumed, _ = _train(case, images, checkpoint_path=path, **options)
    whole, _ = _train(case, images, **options)
    assert_same_weights(whole, resumed)


@needs_cuda
def test_device_drawn_members_side_by_side_are_their_runs_alone_on_cuda(
    deterministic_cudnn,
) -> None:
    """Each member's graph advances its own registered generator: side by side on streams
    they are the separate captured runs bit for bit."""
    rng = np.random.default_rng(0)
    sets = [rng.integers(0, 256, (16, 16, 16, 3), dtype=np.uint8) for _ in range(2)]
    options = {
        "epochs": 4,
        "width": 4,
        "lr": 0.1,
        "lr_schedule": "per_step",
        "batch_size": 8,
        "device": "cuda",
        "amp": None,
        "step_mode": "graph",
        "draws": "device",
    }
    fused = keyword_train_fused("denoising", sets, seeds=[3, 4], **options)
    for (model, history), images, seed in zip(fused, sets, [3, 4], strict=True):
        alone, alone_history = keyword_train("denoising", images, seed=seed, **options)
        assert [r["step_mode"] for r in history] == ["graph"] * 4
        assert_same_weights(alone, model)
        assert _compared(history) == _compared(alone_history)
