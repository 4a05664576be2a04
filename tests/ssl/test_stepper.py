"""The two-phase (graph-capturable) training step: same numbers as eager, static, resumable.

On the CPU the two-phase step runs uncaptured (``two_phase``); it must give the eager loop's
weights, BatchNorm buffers, optimiser state, schedule and generator states bit for bit, and
its device phase must trace under fake tensors (a ``.item()``, ``nonzero`` or boolean-mask
index, i.e. a host sync or a data-dependent shape, would raise there), and on the meta
device it must read no host tensor (a captured host-to-device copy would replay stale data).
The same holds for the fused trainer's step of K stacked members (``pipeline_lib.ssl.fused``),
against the fused eager loop. The CUDA-only tests (graph capture itself) are skipped here and
run on a GPU session (benchmarks/gpu_session.sh runs ``-k on_cuda``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    FakeTensorMode,
    unset_fake_temporarily,
)
from torch.utils._python_dispatch import TorchDispatchMode

import pipeline_lib.ssl.fused as fused_module
import pipeline_lib.ssl.fused_groups as fused_groups
import pipeline_lib.ssl.run as run_module
import pipeline_lib.ssl.train as train_module
from pipeline_lib.models.checkpoints import load_checkpoint
from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.models.stacked import stack_models
from pipeline_lib.registry import default_batch_size
from pipeline_lib.ssl import draws as draws_module
from pipeline_lib.ssl.augment import ViewAugment
from pipeline_lib.ssl.fused import train_representations_fused
from pipeline_lib.ssl.fused_groups import StackedGroup
from pipeline_lib.ssl.loop import run_static_step
from pipeline_lib.ssl.run import _parameter_groups
from pipeline_lib.ssl.stepper import StaticStep, one_member, resolve_step_mode
from pipeline_lib.ssl.train import prepare_keyword_run, train_representation

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

#: Tiny runs covering every method and the switches that change what a step draws.
CASES = {
    "rotnet": ("rotnet", {"batch_size": 12}),
    "rotation": ("rotation", {"batch_size": 12, "head_depth": 1, "head_hidden": 32}),
    "contrastive": (
        "contrastive",
        {"batch_size": 12, "head_depth": 1, "head_hidden": 32, "proj_dim": 16},
    ),
    "contrastive_per_image_blur": (
        "contrastive",
        {
            "batch_size": 12,
            "head_depth": 1,
            "head_hidden": 32,
            "proj_dim": 16,
            "augment": ViewAugment(jitter_order="per_image", blur_p=0.5),
        },
    ),
    "contrastive_torchvision_ntxent": (
        "contrastive",
        {
            "batch_size": 12,
            "head_depth": 1,
            "head_hidden": 32,
            "proj_dim": 16,
            "view_jitter": "torchvision",
            "loss_form": "ntxent",
        },
    ),
    "contrastive_da_expanded": (
        "contrastive_da",
        {"batch_size": 24, "head_depth": 1, "head_hidden": 32, "proj_dim": 16},
    ),
    "contrastive_da_per_image": (
        "contrastive_da",
        {
            "batch_size": 6,
            "head_depth": 1,
            "head_hidden": 32,
            "proj_dim": 16,
            "da_batching": "per_image",
            "distributions": ("rot90", "hflip"),
        },
    ),
    "denoising": ("denoising", {"batch_size": 12}),
    "denoising_patch_views": (
        "denoising",
        {"batch_size": 12, "denoising_target": "patch_normalized", "denoising_views": True},
    ),
}


@pytest.fixture
def images(digits64: np.ndarray) -> np.ndarray:
    """48 images: 4 steps per epoch at batch 12, so two epochs cross an epoch boundary."""
    return digits64[:48]


@pytest.fixture
def two_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``train_representation`` run the two-phase step, uncaptured, on the CPU."""
    monkeypatch.setattr(run_module, "resolve_step_mode", lambda *a, **k: "two_phase")


def _train(case: str, images: np.ndarray, **overrides):
    method, options = CASES[case]
    kwargs = {"seed": 5, "epochs": 2, "width": 8, "lr": 0.05, "lr_schedule": "per_step"}
    return train_representation(method, images, **{**kwargs, **options, **overrides})


def _assert_equal_trees(first, second, where: str = "") -> None:
    """Nested dicts / lists / tensors equal bit for bit (floats compared exactly)."""
    if isinstance(first, torch.Tensor):
        assert isinstance(second, torch.Tensor) and torch.equal(first, second), where
    elif isinstance(first, dict):
        assert first.keys() == second.keys(), where
        for key in first:
            _assert_equal_trees(first[key], second[key], f"{where}/{key}")
    elif isinstance(first, (list, tuple)):
        assert len(first) == len(second), where
        for index, (a, b) in enumerate(zip(first, second, strict=True)):
            _assert_equal_trees(a, b, f"{where}[{index}]")
    else:
        assert first == second, where


def _without_timing(history: list[dict]) -> list[dict]:
    drop = ("images_per_s", "seconds", "step_mode")
    return [{k: v for k, v in record.items() if k not in drop} for record in history]


@pytest.mark.parametrize("case", list(CASES))
def test_two_phase_step_equals_eager_bit_for_bit(case, images, tmp_path, monkeypatch) -> None:
    """Weights, BN buffers, optimiser and scheduler state, generators and losses all equal."""
    eager_model, eager_history = _train(case, images, checkpoint_path=tmp_path / "eager.pt")
    monkeypatch.setattr(run_module, "resolve_step_mode", lambda *a, **k: "two_phase")
    model, history = _train(case, images, checkpoint_path=tmp_path / "two_phase.pt")
    assert [r["step_mode"] for r in eager_history] == ["eager", "eager"]
    assert [r["step_mode"] for r in history] == ["two_phase", "two_phase"]
    assert history[0]["steps"] >= 2
    _assert_equal_trees(_without_timing(eager_history), _without_timing(history))
    _assert_equal_trees(eager_model.state_dict(), model.state_dict(), "model")
    eager, static = (
        load_checkpoint(tmp_path / "eager.pt"),
        load_checkpoint(tmp_path / "two_phase.pt"),
    )
    for part in ("optimizer", "scheduler"):
        _assert_equal_trees(eager[part], static[part], part)
    for stream in ("shuffle", "augment"):
        _assert_equal_trees(eager["rng"][stream], static["rng"][stream], stream)


@pytest.mark.parametrize("case", ["rotation", "contrastive_da_per_image", "denoising"])
def test_two_phase_resume_is_bit_identical(case, images, tmp_path, two_phase) -> None:
    path = tmp_path / "checkpoint.pt"

    def kill_after_first_epoch(record: dict) -> None:
        if record["epoch"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _train(case, images, epochs=3, checkpoint_path=path, callback=kill_after_first_epoch)
    resumed, resumed_history = _train(case, images, epochs=3, checkpoint_path=path)
    whole, whole_history = _train(case, images, epochs=3)
    _assert_equal_trees(whole.state_dict(), resumed.state_dict(), "model")
    _assert_equal_trees(_without_timing(whole_history), _without_timing(resumed_history))


def _prepared(case: str, images: np.ndarray):
    """A run with ``train_representation``'s defaults and the case's options."""
    method, options = CASES[case]
    return prepare_keyword_run(
        method, images, seed=5, epochs=2, width=8, lr=0.05, step_mode="eager", **options
    )


def _static_step(run, state, *, device_lr: bool = False) -> StaticStep:
    step = run_static_step(run, state, capture=False)
    step.device_lr = device_lr  # the fused SGD kernel reading a device lr, as on CUDA
    return step


def _fake_state(run) -> SimpleNamespace:
    """A fresh model, SGD and schedule of ``run`` built inside the active fake mode."""
    model = build_proxy_model(run.method, **run.new_state.keywords["arch"])
    groups = _parameter_groups(model, weight_decay=3e-4, exclude_bn_from_decay=False)
    optimizer = torch.optim.SGD(groups, lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, run.cosine)
    return SimpleNamespace(
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        augment_generator=torch.Generator().manual_seed(0),
    )


@pytest.mark.parametrize("case", list(CASES))
def test_device_phase_traces_with_fake_tensors(case, images) -> None:
    """Gather, views, forward, loss, backward and fused SGD: no host sync, static shapes."""
    run, state = _prepared(case, images)
    _static_step(run, state)(torch.arange(run.data.per_step))  # warms the constant caches
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            fake = _fake_state(run)
            step = _static_step(run, fake, device_lr=True)
            for _ in range(3):  # records the plan, then two steps from the static buffers
                loss = step(torch.arange(run.data.per_step))
                fake.scheduler.step()
            assert loss.shape == () and step.recorded
    finally:
        draws_module._cached_constant.cache_clear()  # no fake constant may outlive the mode


def test_fake_trace_catches_a_host_sync(images) -> None:
    """The harness above has teeth: a step that reads its loss on the host fails there."""
    run, state = _prepared("rotnet", images)

    def syncing_step(model, batch, *, generator):
        loss = run.step(model, batch, generator=generator)
        return loss * 0 + loss.detach().item()  # a host sync

    with FakeTensorMode(allow_non_fake_inputs=True):
        fake = _fake_state(run)
        step = _static_step(run, fake)
        step.step = one_member(syncing_step)
        with pytest.raises(DataDependentOutputException):
            step(torch.arange(run.data.per_step))
    draws_module._cached_constant.cache_clear()


class _HostToDevice(TorchDispatchMode):
    """Records every op that reads a CPU tensor into a tensor on another device."""

    def __init__(self) -> None:
        super().__init__()
        self.copies: list[str] = []
        self.ops = 0  # every op seen: the watch was on

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        out = func(*args, **(kwargs or {}))
        reads_host = any(isinstance(a, torch.Tensor) and a.device.type == "cpu" for a in args)
        outputs = out if isinstance(out, (list, tuple)) else [out]
        if reads_host and any(
            isinstance(o, torch.Tensor) and o.device.type != "cpu" for o in outputs
        ):
            self.copies.append(str(func))
        return out


@pytest.mark.parametrize("case", list(CASES))
def test_device_phase_copies_nothing_from_the_host(case, images, monkeypatch) -> None:
    """On the meta device (CUDA's stand-in): no host tensor enters the device phase.

    A CUDA graph replays a host-to-device copy from the address it captured, so the views,
    masks and constants of a captured step must all be made on the device. Autocast has no
    meta backend, so it is a no-op here.
    """
    run, _ = _prepared(case, images)
    monkeypatch.setattr(torch, "autocast", lambda *a, **k: contextlib.nullcontext())
    step = _static_step(
        SimpleNamespace(
            step=run.step,
            data=SimpleNamespace(
                images=torch.empty_like(run.data.images, device=META), per_step=run.data.per_step
            ),
            autocast=run.autocast,
            step_mode=run.step_mode,
        ),
        _meta_state(run),
    )
    copies, made_from_data = _host_reads(step, [torch.arange(run.data.per_step, device=META)])
    assert copies == [] and made_from_data == []


META = torch.device("meta")


def _meta_state(run) -> SimpleNamespace:
    """A fresh model, SGD and schedule of ``run`` on the meta device."""
    with META:
        model = build_proxy_model(run.method, **run.new_state.keywords["arch"])
    groups = _parameter_groups(model, weight_decay=3e-4, exclude_bn_from_decay=False)
    optimizer = torch.optim.SGD(groups, lr=0.05, momentum=0.9)
    return SimpleNamespace(
        model=model,
        optimizer=optimizer,
        scheduler=torch.optim.lr_scheduler.LambdaLR(optimizer, run.cosine),
        augment_generator=torch.Generator().manual_seed(0),
    )


def _host_reads(step: StaticStep, indices: list[torch.Tensor]) -> tuple[list[str], list[str]]:
    """Two steps of ``step`` after its recording step, watched: (host copies, torch.tensor calls).

    The first lists ops reading a CPU tensor into a device one inside the device phase; the
    second, ``torch.tensor(..., device=...)`` calls off the CPU during those steps.
    """
    step(*indices)  # records the plan (copies allowed)
    made_from_data: list[str] = []
    real_tensor = torch.tensor

    def tensor(*args, **kwargs):
        if kwargs.get("device") is not None and torch.device(kwargs["device"]).type != "cpu":
            made_from_data.append(repr(args)[:60])
        return real_tensor(*args, **kwargs)

    watch = _HostToDevice()

    def watching(device_phase):
        def watched(cache_enabled: bool) -> torch.Tensor:
            with watch:
                return device_phase(cache_enabled)

        return watched

    step.wrap_device_phase(watching)
    torch.tensor = tensor  # type: ignore[assignment]
    try:
        for _ in range(2):
            step(*indices)
    finally:
        torch.tensor = real_tensor
    assert watch.ops > 0  # the device phases ran inside the watch
    return watch.copies, made_from_data


def test_device_lr_update_matches_optimizer_step(images) -> None:
    """The fused SGD with a device lr (the CUDA update) equals ``optimizer.step()`` on CPU.

    Tolerance 1e-5 relative: the fused kernel rounds its multiply-adds differently.
    """
    run, state = _prepared("rotation", images)
    run_b, state_b = _prepared("rotation", images)
    eager, fused = _static_step(run, state), _static_step(run_b, state_b, device_lr=True)
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
        _train("rotnet", images, step_mode="graph")


# --- Fused: the step of K stacked members (pipeline_lib.ssl.fused) ---------------------------

#: Two fused models at width 4 on 16x16 noise, 2 steps an epoch (contrastive DA: 8 images, 4
#: copies each, batch 16), so 2 epochs cross an epoch boundary; every method.
FUSED = {
    "rotnet": {"batch_size": 8},
    "rotation": {"batch_size": 8, "head_depth": 1, "head_hidden": 16},
    "denoising": {"batch_size": 8},
    "contrastive": {"batch_size": 8, "head_depth": 1, "head_hidden": 16, "proj_dim": 8},
    "contrastive_da": {"batch_size": 16, "head_depth": 1, "head_hidden": 16, "proj_dim": 8},
}


@pytest.fixture(scope="module")
def noise16() -> list[np.ndarray]:
    """Two models' training sets of 16 random 16x16 images."""
    images = np.random.default_rng(0).integers(0, 256, (32, 16, 16, 3), dtype=np.uint8)
    return [images[:16], images[16:]]


def _train_fused(method: str, sets: list[np.ndarray], **overrides):
    if method == "contrastive_da":
        sets = [images[:8] for images in sets]
    options = {"epochs": 2, "width": 4, "lr": 0.1, "lr_schedule": "per_step", **FUSED[method]}
    seeds = [3, 4][: len(sets)]
    return train_representations_fused(method, sets, seeds=seeds, **{**options, **overrides})


@pytest.mark.parametrize("method", list(FUSED))
def test_fused_two_phase_equals_fused_eager_bit_for_bit(
    method, noise16, tmp_path, monkeypatch
) -> None:
    """Each member's weights, BN buffers, optimiser, schedule, generators and losses equal."""
    eager_paths = [tmp_path / f"eager{k}.pt" for k in range(2)]
    static_paths = [tmp_path / f"static{k}.pt" for k in range(2)]
    eager = _train_fused(method, noise16, checkpoint_paths=eager_paths)
    monkeypatch.setattr(run_module, "resolve_step_mode", lambda *a, **k: "two_phase")
    static = _train_fused(method, noise16, checkpoint_paths=static_paths)
    for k, ((eager_model, eager_history), (model, history)) in enumerate(
        zip(eager, static, strict=True)
    ):
        assert [r["step_mode"] for r in eager_history] == ["eager", "eager"]
        assert [r["step_mode"] for r in history] == ["two_phase", "two_phase"]
        assert history[0]["steps"] == 2
        _assert_equal_trees(_without_timing(eager_history), _without_timing(history))
        _assert_equal_trees(eager_model.state_dict(), model.state_dict(), f"model {k}")
        saved_eager, saved = load_checkpoint(eager_paths[k]), load_checkpoint(static_paths[k])
        for part in ("optimizer", "scheduler"):
            _assert_equal_trees(saved_eager[part], saved[part], f"{part} {k}")
        for stream in ("shuffle", "augment"):
            _assert_equal_trees(saved_eager["rng"][stream], saved["rng"][stream], stream)
    assert not torch.equal(*(next(model.parameters()) for model, _ in static))  # two models


def test_fused_two_phase_resume_is_bit_identical(noise16, tmp_path, two_phase) -> None:
    paths = [tmp_path / f"model{k}.pt" for k in range(2)]

    def kill_after_first_epoch(index: int, record: dict) -> None:
        if record["epoch"] == 1 and index == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _train_fused(
            "contrastive",
            noise16,
            epochs=3,
            checkpoint_paths=paths,
            callback=kill_after_first_epoch,
        )
    resumed = _train_fused("contrastive", noise16, epochs=3, checkpoint_paths=paths)
    whole = _train_fused("contrastive", noise16, epochs=3)
    for k, ((model, history), (again, again_history)) in enumerate(
        zip(whole, resumed, strict=True)
    ):
        _assert_equal_trees(model.state_dict(), again.state_dict(), f"model {k}")
        _assert_equal_trees(_without_timing(history), _without_timing(again_history))
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
            _train_fused(
                "rotation",
                noise16[:1],
                epochs=3,
                checkpoint_paths=paths[:1],
                callback=kill_after_first_epoch,
            )
        # Model 0 resumes after epoch 1: model 1 trains epoch 1 alone, then both epochs 2-3.
        results[mode] = _train_fused("rotation", noise16, epochs=3, checkpoint_paths=paths)
    for k, ((eager_model, eager_history), (model, history)) in enumerate(
        zip(results["eager"], results["two_phase"], strict=True)
    ):
        _assert_equal_trees(eager_model.state_dict(), model.state_dict(), f"model {k}")
        _assert_equal_trees(_without_timing(eager_history), _without_timing(history))
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


@pytest.fixture
def side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fused groups as captured CUDA runs get them: members side by side (here two_phase)."""
    monkeypatch.setattr(run_module, "resolve_step_mode", lambda *a, **k: "two_phase")
    monkeypatch.setattr(fused_module, "_group", fused_module.ConcurrentGroup)


def _separate_runs(method: str, sets: list[np.ndarray], **overrides) -> list:
    """Each member of ``_train_fused`` trained by train_representation alone."""
    if method == "contrastive_da":
        sets = [images[:8] for images in sets]
    options = {"epochs": 2, "width": 4, "lr": 0.1, "lr_schedule": "per_step", **FUSED[method]}
    return [
        train_representation(method, images, seed=seed, **{**options, **overrides})
        for images, seed in zip(sets, [3, 4], strict=False)
    ]


def _poisoned_resume(seed: int):
    """``fused_module.resume`` that puts a NaN into the weights of the run of ``seed``."""
    resume = fused_module.resume

    def poisoned(run, state, path):
        state = resume(run, state, path)
        if run.fingerprint["seed"] == seed:
            with torch.no_grad():
                state.model.backbone.stem[0].weight[0, 0, 0, 0] = float("nan")
        return state

    return poisoned


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
    fused = _train_fused(method, noise16)
    assert any(name != "MainThread" for name in threads), threads
    separate = _separate_runs(method, noise16)
    for k, ((model, history), (alone, alone_history)) in enumerate(
        zip(fused, separate, strict=True)
    ):
        assert [r["step_mode"] for r in history] == ["two_phase", "two_phase"]
        _assert_equal_trees(alone.state_dict(), model.state_dict(), f"model {k}")
        _assert_equal_trees(_without_timing(alone_history), _without_timing(history))


def test_side_by_side_resume_and_a_diverged_member(noise16, tmp_path, side_by_side, caplog):
    """A killed run resumes bit for bit; a NaN member stops alone, nobody retrains."""
    paths = [tmp_path / f"model{k}.pt" for k in range(2)]

    def kill_after_first_epoch(index: int, record: dict) -> None:
        if record["epoch"] == 1 and index == 1:
            raise KeyboardInterrupt

    options = {"epochs": 3, "checkpoint_paths": paths}
    with pytest.raises(KeyboardInterrupt):
        _train_fused("contrastive", noise16, callback=kill_after_first_epoch, **options)
    resumed = _train_fused("contrastive", noise16, **options)
    for (model, _), (alone, _) in zip(
        resumed, _separate_runs("contrastive", noise16, epochs=3), strict=True
    ):
        _assert_equal_trees(alone.state_dict(), model.state_dict(), "resumed")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fused_module, "resume", _poisoned_resume(3))
        with caplog.at_level(logging.WARNING, logger="pipeline_lib.ssl.fused"):
            results = _train_fused("rotnet", noise16)
    assert isinstance(results[0], train_module.TrainingDivergedError)
    assert "retraining" not in caplog.text
    _assert_equal_trees(
        _separate_runs("rotnet", noise16)[1][0].state_dict(), results[1][0].state_dict()
    )


def test_fused_graph_on_cpu_is_an_argument_error(noise16) -> None:
    with pytest.raises(ValueError, match="step_mode='graph' needs a CUDA device"):
        _train_fused("rotnet", noise16, step_mode="graph")


#: One case of each task family, with the switches that add the most ops to a step.
FUSED_TRACE_CASES = ["rotation", "contrastive_da_per_image", "denoising_patch_views"]


def _fused_runs(case: str, images: np.ndarray) -> tuple[list, list]:
    """Two runs of ``case`` (on halves of ``images``) set to two_phase, and their states."""
    half = len(images) // 2
    prepared = [_prepared(case, part) for part in (images[:half], images[half:])]
    runs = [dataclasses.replace(run, step_mode="two_phase") for run, _ in prepared]
    return runs, [state for _, state in prepared]


@pytest.mark.parametrize("case", FUSED_TRACE_CASES)
def test_fused_device_phase_traces_with_fake_tensors(case, images, monkeypatch) -> None:
    """The stacked members' step (views, stacked forward, K losses, fused SGD): no host sync.

    ``stack_models`` deep-copies a member, which fake tensors do not support: here the stack
    is built from meta members outside the fake mode, then allocated as fake tensors.
    """
    runs, states = _fused_runs(case, images)
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
            group = StackedGroup([0, 1], runs, [_fake_state(run) for run in runs])
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
    runs, _ = _fused_runs(case, images)
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
    group = StackedGroup([0, 1], on_meta, [_meta_state(run) for run in runs])
    assert group.static_step is not None
    batch = torch.arange(runs[0].data.per_step, device=META)
    copies, made_from_data = _host_reads(group.static_step, [batch, batch])
    assert copies == [] and made_from_data == []


# --- CUDA only: the captured graph itself ----------------------------------------------------
#
# Measured on an H200 (2026-11-27; benchmarks/rates/README.md): with cuDNN's
# default (nondeterministic) kernels even two eager runs differ after 8 float32 steps of
# these tiny models (RotNet 3.9e-2, contrastive DA 2.8e-1 relative to the distance moved),
# so no rounding bound separates a wrong graph from a right one. With
# ``torch.backends.cudnn.deterministic`` the eager loop, the uncaptured two-phase step and
# the captured graph gave the same weights bit for bit, for every method, in float32 and
# bfloat16, separate and fused: the tests below demand exactly that.


@needs_cuda
@pytest.mark.parametrize("case", list(CASES))
def test_graph_matches_eager_on_cuda(case, images, deterministic_cudnn) -> None:
    """Two epochs of 4 steps (capture at step 4, replays in epoch 2) in float32."""
    eager, eager_history = _train(case, images, device="cuda", amp=None, step_mode="eager")
    graph, history = _train(case, images, device="cuda", amp=None, step_mode="graph")
    assert [r["step_mode"] for r in history] == ["graph", "graph"]
    _assert_equal_trees(eager.state_dict(), graph.state_dict(), "model")
    assert _without_timing(history) == _without_timing(eager_history)


@needs_cuda
@pytest.mark.parametrize("case", ["rotnet", "contrastive", "denoising"])
def test_graph_resume_is_bit_identical_on_cuda(case, images, tmp_path, deterministic_cudnn) -> None:
    """Every start runs the same kernels, captured or not, so a resume repeats the run."""
    path = tmp_path / "checkpoint.pt"

    def kill_after_first_epoch(record: dict) -> None:
        if record["epoch"] == 1:
            raise KeyboardInterrupt

    options = {"device": "cuda", "step_mode": "graph", "epochs": 3}
    with pytest.raises(KeyboardInterrupt):
        _train(case, images, checkpoint_path=path, callback=kill_after_first_epoch, **options)
    resumed, _ = _train(case, images, checkpoint_path=path, **options)
    whole, _ = _train(case, images, **options)
    _assert_equal_trees(whole.state_dict(), resumed.state_dict(), "model")


@needs_cuda
def test_failed_capture_warns_and_trains_uncaptured_on_cuda(images, monkeypatch, caplog) -> None:
    def broken_graph(*args, **kwargs):
        raise RuntimeError("capture refused (test)")

    monkeypatch.setattr(torch.cuda, "graph", broken_graph)
    with caplog.at_level(logging.WARNING):
        model, history = _train("rotnet", images, device="cuda", step_mode="graph")
    assert "capture of the training step failed" in caplog.text
    assert "capture refused (test)" in caplog.text
    assert history[-1]["step_mode"] == "uncaptured"
    assert all(
        torch.isfinite(v).all() for v in model.state_dict().values() if v.is_floating_point()
    )


@needs_cuda
@pytest.mark.parametrize("method", list(FUSED))
def test_fused_graph_members_are_their_separate_graph_runs_on_cuda(
    method, noise16, deterministic_cudnn
) -> None:
    """Captured members run side by side on streams, each its own run's graph: bit for bit
    the separate captured runs (4 epochs of 2 steps in float32, capture in epoch 2)."""
    options = {"device": "cuda", "amp": None, "epochs": 4, "lr": 0.05, "step_mode": "graph"}
    fused = _train_fused(method, noise16, **options)
    separate = _separate_runs(method, noise16, **options)
    for k, ((model, history), (alone, alone_history)) in enumerate(
        zip(fused, separate, strict=True)
    ):
        assert [r["step_mode"] for r in history] == ["graph"] * 4
        _assert_equal_trees(alone.state_dict(), model.state_dict(), f"model {k}")
        _assert_equal_trees(_without_timing(alone_history), _without_timing(history))


@needs_cuda
def test_fused_graph_captures_once_per_group_on_cuda(noise16, monkeypatch) -> None:
    """Three members capture their own steps; one diverges and leaves; the pair captures anew."""
    captured: list[StaticStep] = []
    try_capture = StaticStep._try_capture

    def counted(self: StaticStep) -> None:
        try_capture(self)
        captured.append(self)

    monkeypatch.setattr(StaticStep, "_try_capture", counted)
    monkeypatch.setattr(fused_module, "resume", _poisoned_resume(1))
    sets = [noise16[0], noise16[1], noise16[0][::-1].copy()]
    results = train_representations_fused(
        "rotnet", sets, seeds=[0, 1, 2], epochs=2, batch_size=2, width=4, device="cuda"
    )  # 8 steps an epoch: each group captures at its fourth step
    assert isinstance(results[1], train_module.TrainingDivergedError)
    shapes = [(len(step.draws), step.graph is not None) for step in captured]
    assert shapes == [(1, True)] * 5, shapes  # 3 in epoch 1, 2 in epoch 2
    for k in (0, 2):
        model, history = results[k]
        assert [r["step_mode"] for r in history] == ["graph", "graph"]
        assert all(torch.isfinite(v).all() for v in model.state_dict().values())


@needs_cuda
@pytest.mark.parametrize("method", ["contrastive_da", "contrastive"])
def test_side_by_side_graphs_at_the_paper_width_are_the_runs_alone_on_cuda(method) -> None:
    """Width 64 in bf16, where the heads' GEMMs use cuBLAS's workspace: graphs captured on
    one shared stream shared it and raced when replayed side by side (H200: run 0 of 4
    contrastive DA runs 0.15 of the update away from the run alone); each graph now
    captures on its own stream, and every run must equal its run alone bit for bit."""

    def group(seeds: list[int]) -> fused_module.ConcurrentGroup:
        runs, states = [], []
        for seed in seeds:
            generator = torch.Generator().manual_seed(seed)
            images = torch.randint(0, 256, (32 * 6, 32, 32, 3), generator=generator)
            run, state = prepare_keyword_run(
                method,
                images.to(torch.uint8),
                seed=seed,
                device=torch.device("cuda"),
                epochs=2,
                batch_size=default_batch_size(method),
                width=64,
                amp="bfloat16",
            )
            runs.append(run)
            states.append(state)
        return fused_module.ConcurrentGroup(list(range(len(seeds))), runs, states)

    together = group([0, 1, 2, 3])
    for _ in range(2):  # captures at the fourth step, replays from then on
        together.train_epoch()
    assert together.mode == "graph"
    for seed in range(4):
        alone = group([seed])
        for _ in range(2):
            alone.train_epoch()
        _assert_equal_trees(
            alone.states[0].model.state_dict(), together.states[seed].model.state_dict(), method
        )


@needs_cuda
def test_the_stream_pool_side_by_side_groups_rely_on_on_cuda() -> None:
    """fused.MAX_SIDE_BY_SIDE: torch hands out 32 distinct streams, then the first again."""
    streams = [torch.cuda.Stream() for _ in range(fused_module.MAX_SIDE_BY_SIDE + 1)]
    handles = [stream.cuda_stream for stream in streams]
    assert len(set(handles[:-1])) == fused_module.MAX_SIDE_BY_SIDE
    assert handles[-1] in handles[:-1]
