"""The two-phase (graph-capturable) training step: same numbers as eager, static, resumable.

On the CPU the two-phase step runs uncaptured (``two_phase``); it must give the eager loop's
weights, BatchNorm buffers, optimiser state, schedule and generator states bit for bit, and
its device phase must trace under fake tensors (a ``.item()``, ``nonzero`` or boolean-mask
index, i.e. a host sync or a data-dependent shape, would raise there), and on the meta
device it must read no host tensor (a captured host-to-device copy would replay stale data).
The CUDA-only tests (graph capture itself) are skipped here and run on a GPU session.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

import pipeline_lib.ssl.train as train_module
from pipeline_lib.models.checkpoints import load_checkpoint
from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.ssl import draws as draws_module
from pipeline_lib.ssl.augment import ViewAugment
from pipeline_lib.ssl.stepper import StaticStep, one_member, resolve_step_mode
from pipeline_lib.ssl.train import _parameter_groups, _prepare_run, train_representation

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
    monkeypatch.setattr(train_module, "resolve_step_mode", lambda *a, **k: "two_phase")


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
    monkeypatch.setattr(train_module, "resolve_step_mode", lambda *a, **k: "two_phase")
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
    """``_prepare_run`` with ``train_representation``'s defaults and the case's options."""
    method, options = CASES[case]
    parameters = inspect.signature(train_representation).parameters
    kwargs = {
        name: p.default
        for name, p in parameters.items()
        if p.default is not inspect.Parameter.empty
        and name not in ("checkpoint_path", "progress", "callback")
    }
    kwargs.update(seed=5, epochs=2, width=8, lr=0.05, step_mode="eager", **options)
    return _prepare_run(method, images, **kwargs)


def _static_step(run, state, *, device_lr: bool = False) -> StaticStep:
    step = StaticStep(
        model=state.model,
        optimizer=state.optimizer,
        step=one_member(run.step),
        images=[run.data.images],
        per_step=run.data.per_step,
        generators=[state.augment_generator],
        autocast=run.autocast,
        capture=False,
    )
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

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
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
    made_from_data: list[str] = []
    real_tensor = torch.tensor

    def tensor(*args, **kwargs):
        if kwargs.get("device") is not None and torch.device(kwargs["device"]).type != "cpu":
            made_from_data.append(repr(args)[:60])
        return real_tensor(*args, **kwargs)

    meta = torch.device("meta")
    with meta:
        model = build_proxy_model(run.method, **run.new_state.keywords["arch"])
    groups = _parameter_groups(model, weight_decay=3e-4, exclude_bn_from_decay=False)
    state = SimpleNamespace(
        model=model,
        optimizer=torch.optim.SGD(groups, lr=0.05, momentum=0.9),
        augment_generator=torch.Generator().manual_seed(0),
    )
    step = _static_step(
        SimpleNamespace(
            step=run.step,
            data=SimpleNamespace(
                images=torch.empty_like(run.data.images, device=meta), per_step=run.data.per_step
            ),
            autocast=run.autocast,
        ),
        state,
    )
    step(torch.arange(run.data.per_step, device=meta))  # records the plan (copies allowed)
    watch, device_phase = _HostToDevice(), step._device_phase

    def watched(cache_enabled: bool) -> torch.Tensor:
        with watch:
            return device_phase(cache_enabled)

    step._device_phase = watched
    monkeypatch.setattr(torch, "tensor", tensor)
    for _ in range(2):
        step(torch.arange(run.data.per_step, device=meta))
    monkeypatch.setattr(torch, "tensor", real_tensor)
    assert watch.copies == [] and made_from_data == []


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


# --- CUDA only: the captured graph itself ----------------------------------------------------

#: ||w_graph - w_eager|| / ||w_eager - w_initial|| after 2 epochs of 4 steps in float32
#: (amp off): the graph's fused SGD and cuDNN's algorithm choices round differently from the
#: eager loop; the random numbers and batches are the same, so the gap is rounding-sized.
GRAPH_VS_EAGER_RELATIVE = 1e-3


def _relative_gap(first: torch.nn.Module, second: torch.nn.Module, initial: dict) -> float:
    a, b = first.state_dict(), second.state_dict()
    names = [n for n in a if a[n].is_floating_point()]
    gap = torch.sqrt(sum(((a[n] - b[n]).double() ** 2).sum() for n in names))
    moved = torch.sqrt(sum(((a[n].cpu() - initial[n]).double() ** 2).sum() for n in names))
    return float(gap.cpu() / moved)


@needs_cuda
@pytest.mark.parametrize("case", list(CASES))
def test_graph_matches_eager_on_cuda(case, images) -> None:
    run, state = _prepared(case, images)
    initial = {k: v.detach().cpu().clone() for k, v in state.model.state_dict().items()}
    eager, _ = _train(case, images, device="cuda", amp=None, step_mode="eager")
    graph, history = _train(case, images, device="cuda", amp=None, step_mode="graph")
    assert [r["step_mode"] for r in history] == ["graph", "graph"]
    assert _relative_gap(eager, graph, initial) < GRAPH_VS_EAGER_RELATIVE


@needs_cuda
@pytest.mark.parametrize("case", ["rotnet", "contrastive", "denoising"])
def test_graph_resume_is_bit_identical_on_cuda(case, images, tmp_path) -> None:
    """Every start runs the same kernels, captured or not, so a resume repeats the run."""
    torch.backends.cudnn.deterministic = True
    path = tmp_path / "checkpoint.pt"

    def kill_after_first_epoch(record: dict) -> None:
        if record["epoch"] == 1:
            raise KeyboardInterrupt

    options = {"device": "cuda", "step_mode": "graph", "epochs": 3}
    try:
        with pytest.raises(KeyboardInterrupt):
            _train(case, images, checkpoint_path=path, callback=kill_after_first_epoch, **options)
        resumed, _ = _train(case, images, checkpoint_path=path, **options)
        whole, _ = _train(case, images, **options)
    finally:
        torch.backends.cudnn.deterministic = False
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
