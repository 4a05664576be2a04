"""The two-phase (graph-capturable) training step: same numbers as eager, static, resumable.

On the CPU the two-phase step runs uncaptured (``two_phase``); it must give the eager loop's
weights, BatchNorm buffers, optimiser state, schedule and generator states bit for bit, and
its device phase must trace under fake tensors (a ``.item()``, ``nonzero`` or boolean-mask
index, i.e. a host sync or a data-dependent shape, would raise there), and on the meta
device it must read no host tensor (a captured host-to-device copy would replay stale data).
The fused trainer's step is tested in test_stepper_fused.py, the captured graph itself (CUDA
only) in test_stepper_cuda.py.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest
import torch
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    FakeTensorMode,
)

import pipeline_lib.ssl.run as run_module
from pipeline_lib.models.checkpoints import load_checkpoint
from pipeline_lib.ssl import draws as draws_module
from pipeline_lib.ssl.stepper import one_member, resolve_step_mode
from tests.ssl.step_cases import (
    CASES,
    META,
    assert_equal_trees,
    fake_state,
    host_reads,
    meta_state,
    prepared_case,
    static_step_of,
    train_case,
    without_timing,
)
from tests.ssl.tiny_runs import killed_then_resumed


@pytest.mark.parametrize("case", list(CASES))
def test_two_phase_step_equals_eager_bit_for_bit(case, images, tmp_path, monkeypatch) -> None:
    """Weights, BN buffers, optimiser and scheduler state, generators and losses all equal."""
    eager_model, eager_history = train_case(case, images, checkpoint_path=tmp_path / "eager.pt")
    monkeypatch.setattr(run_module, "resolve_step_mode", lambda *a, **k: "two_phase")
    model, history = train_case(case, images, checkpoint_path=tmp_path / "two_phase.pt")
    assert [r["step_mode"] for r in eager_history] == ["eager", "eager"]
    assert [r["step_mode"] for r in history] == ["two_phase", "two_phase"]
    assert history[0]["steps"] >= 2
    assert_equal_trees(without_timing(eager_history), without_timing(history))
    assert_equal_trees(eager_model.state_dict(), model.state_dict(), "model")
    eager, static = (
        load_checkpoint(tmp_path / "eager.pt"),
        load_checkpoint(tmp_path / "two_phase.pt"),
    )
    for part in ("optimizer", "scheduler"):
        assert_equal_trees(eager[part], static[part], part)
    for stream in ("shuffle", "augment"):
        assert_equal_trees(eager["rng"][stream], static["rng"][stream], stream)


@pytest.mark.parametrize("case", ["rotation", "contrastive_da_per_image", "denoising"])
def test_two_phase_resume_is_bit_identical(case, images, tmp_path, two_phase) -> None:
    resumed, resumed_history = killed_then_resumed(
        lambda **kw: train_case(case, images, epochs=3, **kw), tmp_path / "checkpoint.pt"
    )
    whole, whole_history = train_case(case, images, epochs=3)
    assert_equal_trees(whole.state_dict(), resumed.state_dict(), "model")
    assert_equal_trees(without_timing(whole_history), without_timing(resumed_history))


@pytest.mark.parametrize("case", list(CASES))
def test_device_phase_traces_with_fake_tensors(case, images) -> None:
    """Gather, views, forward, loss, backward and fused SGD: no host sync, static shapes."""
    run, state = prepared_case(case, images)
    static_step_of(run, state)(torch.arange(run.data.per_step))  # warms the constant caches
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            fake = fake_state(run)
            step = static_step_of(run, fake, device_lr=True)
            for _ in range(3):  # records the plan, then two steps from the static buffers
                loss = step(torch.arange(run.data.per_step))
                fake.scheduler.step()
            assert loss.shape == () and step.recorded
    finally:
        draws_module._cached_constant.cache_clear()  # no fake constant may outlive the mode


def test_fake_trace_catches_a_host_sync(images) -> None:
    """The harness above has teeth: a step that reads its loss on the host fails there."""
    run, state = prepared_case("rotnet", images)

    def syncing_step(model, batch, *, generator):
        loss = run.step(model, batch, generator=generator)
        return loss * 0 + loss.detach().item()  # a host sync

    with FakeTensorMode(allow_non_fake_inputs=True):
        fake = fake_state(run)
        step = static_step_of(run, fake)
        step.step = one_member(syncing_step)
        with pytest.raises(DataDependentOutputException):
            step(torch.arange(run.data.per_step))
    draws_module._cached_constant.cache_clear()


@pytest.mark.parametrize("case", list(CASES))
def test_device_phase_copies_nothing_from_the_host(case, images, monkeypatch) -> None:
    """On the meta device (CUDA's stand-in): no host tensor enters the device phase.

    A CUDA graph replays a host-to-device copy from the address it captured, so the views,
    masks and constants of a captured step must all be made on the device. Autocast has no
    meta backend, so it is a no-op here.
    """
    run, _ = prepared_case(case, images)
    monkeypatch.setattr(torch, "autocast", lambda *a, **k: contextlib.nullcontext())
    step = static_step_of(
        SimpleNamespace(
            step=run.step,
            data=SimpleNamespace(
                images=torch.empty_like(run.data.images, device=META), per_step=run.data.per_step
            ),
            autocast=run.autocast,
            step_mode=run.step_mode,
        ),
        meta_state(run),
    )
    copies, made_from_data = host_reads(step, [torch.arange(run.data.per_step, device=META)])
    assert copies == [] and made_from_data == []


def test_device_lr_update_matches_optimizer_step(images) -> None:
    """The fused SGD with a device lr (the CUDA update) equals ``optimizer.step()`` on CPU.

    Tolerance 1e-5 relative: the fused kernel rounds its multiply-adds differently.
    """
    run, state = prepared_case("rotation", images)
    run_b, state_b = prepared_case("rotation", images)
    eager, fused = static_step_of(run, state), static_step_of(run_b, state_b, device_lr=True)
    for index in range(3):
        batch = torch.arange(index, index + run.data.per_step)
        eager(batch)
        fused(batch)
    for name, value in state.model.state_dict().items():
        other = state_b.model.state_dict()[name]
        if value.is_floating_point():
            torch.testing.assert_close(other, value, rtol=1e-5, atol=1e-6, msg=name)


def test_step_mode_resolution() -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert resolve_step_mode("auto", cpu, float16_scaler=False) == "eager"
    assert resolve_step_mode("eager", cuda, float16_scaler=False) == "eager"
    assert resolve_step_mode("auto", cuda, float16_scaler=False) == "graph"
    assert resolve_step_mode("auto", cuda, float16_scaler=True) == "eager"
    with pytest.raises(ValueError, match="needs a CUDA device"):
        resolve_step_mode("graph", cpu, float16_scaler=False)
    with pytest.raises(ValueError, match="float16"):
        resolve_step_mode("graph", cuda, float16_scaler=True)
    with pytest.raises(ValueError, match="step_mode"):
        resolve_step_mode("compiled", cpu, float16_scaler=False)


def test_graph_on_cpu_is_an_argument_error(images) -> None:
    with pytest.raises(ValueError, match="step_mode='graph' needs a CUDA device"):
        train_case("rotnet", images, step_mode="graph")
