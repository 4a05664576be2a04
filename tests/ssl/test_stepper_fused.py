"""The fused trainer's step of K stacked members (``pipeline_lib.ssl.fused``): its two-phase
step equals the fused eager loop bit for bit, resumes bit-identically, traces under fake
tensors and copies nothing from the host; side by side, each member is its separate run."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading

import pytest
import torch
from torch._subclasses.fake_tensor import (
    FakeTensorMode,
    unset_fake_temporarily,
)

import pipeline_lib.ssl.fused as fused_module
import pipeline_lib.ssl.fused_groups as fused_groups
import pipeline_lib.ssl.run as run_module
import pipeline_lib.ssl.train as train_module
from pipeline_lib.models.checkpoints import load_checkpoint
from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.models.stacked import stack_models
from pipeline_lib.ssl import draws as draws_module
from pipeline_lib.ssl.fused_groups import StackedGroup
from tests.ssl.step_cases import (
    FUSED,
    FUSED_TRACE_CASES,
    META,
    assert_equal_trees,
    fake_state,
    fused_runs,
    host_reads,
    meta_state,
    poisoned_resume,
    separate_runs,
    train_fused_case,
    without_timing,
)


@pytest.mark.parametrize("method", list(FUSED))
def test_fused_two_phase_equals_fused_eager_bit_for_bit(
    method, noise16, tmp_path, monkeypatch
) -> None:
    """Each member's weights, BN buffers, optimiser, schedule, generators and losses equal."""
    eager_paths = [tmp_path / f"eager{k}.pt" for k in range(2)]
    static_paths = [tmp_path / f"static{k}.pt" for k in range(2)]
    eager = train_fused_case(method, noise16, checkpoint_paths=eager_paths)
    monkeypatch.setattr(run_module, "resolve_step_mode", lambda *a, **k: "two_phase")
    static = train_fused_case(method, noise16, checkpoint_paths=static_paths)
    for k, ((eager_model, eager_history), (model, history)) in enumerate(
        zip(eager, static, strict=True)
    ):
        assert [r["step_mode"] for r in eager_history] == ["eager", "eager"]
        assert [r["step_mode"] for r in history] == ["two_phase", "two_phase"]
        assert history[0]["steps"] == 2
        assert_equal_trees(without_timing(eager_history), without_timing(history))
        assert_equal_trees(eager_model.state_dict(), model.state_dict(), f"model {k}")
        saved_eager, saved = load_checkpoint(eager_paths[k]), load_checkpoint(static_paths[k])
        for part in ("optimizer", "scheduler"):
            assert_equal_trees(saved_eager[part], saved[part], f"{part} {k}")
        for stream in ("shuffle", "augment"):
            assert_equal_trees(saved_eager["rng"][stream], saved["rng"][stream], stream)
    assert not torch.equal(*(next(model.parameters()) for model, _ in static))  # two models


def test_fused_two_phase_resume_is_bit_identical(noise16, tmp_path, two_phase) -> None:
    paths = [tmp_path / f"model{k}.pt" for k in range(2)]

    def kill_after_first_epoch(index: int, record: dict) -> None:
        if record["epoch"] == 1 and index == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_fused_case(
            "contrastive",
            noise16,
            epochs=3,
            checkpoint_paths=paths,
            callback=kill_after_first_epoch,
        )
    resumed = train_fused_case("contrastive", noise16, epochs=3, checkpoint_paths=paths)
    whole = train_fused_case("contrastive", noise16, epochs=3)
    for k, ((model, history), (again, again_history)) in enumerate(
        zip(whole, resumed, strict=True)
    ):
        assert_equal_trees(model.state_dict(), again.state_dict(), f"model {k}")
        assert_equal_trees(without_timing(history), without_timing(again_history))
        assert [r["step_mode"] for r in again_history] == ["two_phase"] * 3


def test_fused_two_phase_lone_member_then_new_group_equals_eager(
    noise16, tmp_path, monkeypatch
) -> None:
    """A member behind trains alone (its own static step), then the pair trains as a new group.

    Both the lone run's step and the rebuilt group's step give the eager path's numbers.
    """

    def kill_after_first_epoch(index: int, record: dict) -> None:
        if record["epoch"] == 1:
            raise KeyboardInterrupt

    results = {}
    for mode in ("eager", "two_phase"):
        if mode == "two_phase":
            monkeypatch.setattr(run_module, "resolve_step_mode", lambda *a, **k: "two_phase")
        paths = [tmp_path / f"{mode}{k}.pt" for k in range(2)]
        with pytest.raises(KeyboardInterrupt):  # model 0 alone, killed after epoch 1
            train_fused_case(
                "rotation",
                noise16[:1],
                epochs=3,
                checkpoint_paths=paths[:1],
                callback=kill_after_first_epoch,
            )
        # Model 0 resumes after epoch 1: model 1 trains epoch 1 alone, then both epochs 2-3.
        results[mode] = train_fused_case("rotation", noise16, epochs=3, checkpoint_paths=paths)
    for k, ((eager_model, eager_history), (model, history)) in enumerate(
        zip(results["eager"], results["two_phase"], strict=True)
    ):
        assert_equal_trees(eager_model.state_dict(), model.state_dict(), f"model {k}")
        assert_equal_trees(without_timing(eager_history), without_timing(history))
        assert [r["step_mode"] for r in history] == ["two_phase"] * 3


def test_static_draws_filled_ahead_upload_the_numbers_draw_gives() -> None:
    """fill() then upload() is draw(): the same numbers in the same generator order."""

    def plan(draws: draws_module.StaticDraws) -> None:
        draws.rand(3, 2)
        draws.randn(5)
        draws.freeze()

    direct = draws_module.StaticDraws(torch.Generator().manual_seed(1), torch.device("cpu"))
    ahead = draws_module.StaticDraws(torch.Generator().manual_seed(1), torch.device("cpu"))
    plan(direct)
    plan(ahead)
    for _ in range(3):
        direct.draw()
        ahead.fill()
        assert ahead.filled
        with pytest.raises(RuntimeError, match="upload"):
            ahead.fill()
        ahead.upload()
        assert not ahead.filled
        assert torch.equal(direct.rand(3, 2), ahead.rand(3, 2))
        assert torch.equal(direct.randn(5), ahead.randn(5))
    assert torch.equal(direct.generator.get_state(), ahead.generator.get_state())


@pytest.mark.parametrize("method", list(FUSED))
def test_side_by_side_members_are_their_separate_runs_bit_for_bit(
    method, noise16, side_by_side, monkeypatch
) -> None:
    """Nothing is stacked: each member runs its separate run's step, so equality is exact,
    although each member's next numbers are drawn ahead on a worker thread."""
    threads: list[str] = []
    fill = draws_module.StaticDraws.fill

    def recorded_fill(self) -> None:
        threads.append(threading.current_thread().name)
        fill(self)

    monkeypatch.setattr(draws_module.StaticDraws, "fill", recorded_fill)
    fused = train_fused_case(method, noise16)
    assert any(name != "MainThread" for name in threads), threads
    separate = separate_runs(method, noise16)
    for k, ((model, history), (alone, alone_history)) in enumerate(
        zip(fused, separate, strict=True)
    ):
        assert [r["step_mode"] for r in history] == ["two_phase", "two_phase"]
        assert_equal_trees(alone.state_dict(), model.state_dict(), f"model {k}")
        assert_equal_trees(without_timing(alone_history), without_timing(history))


def test_side_by_side_resume_and_a_diverged_member(noise16, tmp_path, side_by_side, caplog):
    """A killed run resumes bit for bit; a NaN member stops alone, nobody retrains."""
    paths = [tmp_path / f"model{k}.pt" for k in range(2)]

    def kill_after_first_epoch(index: int, record: dict) -> None:
        if record["epoch"] == 1 and index == 1:
            raise KeyboardInterrupt

    options = {"epochs": 3, "checkpoint_paths": paths}
    with pytest.raises(KeyboardInterrupt):
        train_fused_case("contrastive", noise16, callback=kill_after_first_epoch, **options)
    resumed = train_fused_case("contrastive", noise16, **options)
    for (model, _), (alone, _) in zip(
        resumed, separate_runs("contrastive", noise16, epochs=3), strict=True
    ):
        assert_equal_trees(alone.state_dict(), model.state_dict(), "resumed")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fused_module, "resume", poisoned_resume(3))
        with caplog.at_level(logging.WARNING, logger="pipeline_lib.ssl.fused"):
            results = train_fused_case("rotnet", noise16)
    assert isinstance(results[0], train_module.TrainingDivergedError)
    assert "retraining" not in caplog.text
    assert_equal_trees(
        separate_runs("rotnet", noise16)[1][0].state_dict(), results[1][0].state_dict()
    )


def test_fused_graph_on_cpu_is_an_argument_error(noise16) -> None:
    with pytest.raises(ValueError, match="step_mode='graph' needs a CUDA device"):
        train_fused_case("rotnet", noise16, step_mode="graph")


@pytest.mark.parametrize("case", FUSED_TRACE_CASES)
def test_fused_device_phase_traces_with_fake_tensors(case, images, monkeypatch) -> None:
    """The stacked members' step (views, stacked forward, K losses, fused SGD): no host sync.

    ``stack_models`` deep-copies a member, which fake tensors do not support: here the stack
    is built from meta members outside the fake mode, then allocated as fake tensors.
    """
    runs, states = fused_runs(case, images)
    per_step = runs[0].data.per_step
    batch = torch.arange(per_step)
    StackedGroup([0, 1], runs, states).static_step(batch, batch)  # warms the constant caches

    def fake_stack(models: list[torch.nn.Module]) -> torch.nn.Module:
        with unset_fake_temporarily(), META:
            on_meta = [build_proxy_model(runs[0].method, **runs[0].new_state.keywords["arch"])]
            stacked = stack_models(on_meta * len(models))
        return stacked.to_empty(device="cpu")  # in the fake mode: fake tensors

    monkeypatch.setattr(fused_groups, "stack_models", fake_stack)
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            group = StackedGroup([0, 1], runs, [fake_state(run) for run in runs])
            step = group.static_step
            assert step is not None
            step.device_lr = True  # the fused SGD kernel reading a device lr, as on CUDA
            for _ in range(3):  # records the plans, then two steps from the static buffers
                losses = step(batch, batch + 1)
                group.scheduler.step()
            assert losses.shape == (2,) and step.recorded and len(step.draws) == 2
    finally:
        draws_module._cached_constant.cache_clear()  # no fake constant may outlive the mode


@pytest.mark.parametrize("case", FUSED_TRACE_CASES)
def test_fused_device_phase_copies_nothing_from_the_host(case, images, monkeypatch) -> None:
    """On the meta device: no host tensor enters the stacked members' device phase."""
    runs, _ = fused_runs(case, images)
    monkeypatch.setattr(torch, "autocast", lambda *a, **k: contextlib.nullcontext())
    on_meta = [
        dataclasses.replace(
            run,
            data=dataclasses.replace(
                run.data, images=torch.empty_like(run.data.images, device=META)
            ),
        )
        for run in runs
    ]
    group = StackedGroup([0, 1], on_meta, [meta_state(run) for run in runs])
    assert group.static_step is not None
    batch = torch.arange(runs[0].data.per_step, device=META)
    copies, made_from_data = host_reads(group.static_step, [batch, batch])
    assert copies == [] and made_from_data == []
