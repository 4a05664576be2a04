"""The ``compiled`` step mode: the network compiled inside the captured step.

On the CPU nothing can be captured and inductor's C++ build is too slow for CI, so the CPU
tests check the plumbing with dynamo's ``eager`` backend (the same numbers as uncompiled,
through dynamo), the checkpoint-facing invariants and the errors before training. The
CUDA tests (inductor, captured; run by benchmarks/gpu_session.sh) check what the mode
promises: a resume repeats the run, a fresh compilation repeats it too, K compiled runs
side by side are their runs alone, and the compiled run stays near the graph run.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch._dynamo
import torch.utils._triton

import pipeline_lib.ssl.compiling as compiling
from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.ssl.loop import run_static_step, train_epoch
from pipeline_lib.ssl.stepper import resolve_step_mode
from tests.ssl.tiny_runs import (
    TINY_RUNS,
    keyword_prepare,
    keyword_train,
    keyword_train_fused,
    killed_then_resumed,
    needs_cuda,
)

#: Tiny runs: 4 steps an epoch on 48 images.
CASES = {name: TINY_RUNS[name] for name in ("rotnet", "contrastive_da")}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test compiles from scratch and leaves no compiled code behind."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def images(digits64: np.ndarray) -> np.ndarray:
    return digits64[:48]


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


def _assert_same(first: dict, second: dict) -> None:
    assert first.keys() == second.keys()
    for name in first:
        assert torch.equal(first[name], second[name]), name


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_compiled_network_trains_through_dynamo_to_the_same_numbers_on_the_cpu(
    case, backend, images
) -> None:
    """dynamo's ``eager`` backend runs its traced graphs, ``aot_eager`` also AOTAutograd's
    forward and backward graphs, with the same kernels: an epoch of the two-phase step with
    the network compiled must give the uncompiled weights exactly (all inductor may change
    is rounding); the counters prove the compiled modules, not the originals, ran."""
    method, options = CASES[case]
    trained = []
    for compiled in (False, True):
        run, state = keyword_prepare(
            method, images, seed=3, epochs=1, width=8, step_mode="eager", **options
        )
        run = dataclasses.replace(run, step_mode="two_phase")
        if compiled:
            compiling.compile_network(state.model, backend=backend)
        torch._dynamo.utils.counters.clear()
        step = run_static_step(run, state, capture=False)
        train_epoch(run, state, step)
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        assert (graphs > 0) == compiled, graphs
        trained.append(_weights(state.model))
    _assert_same(*trained)


def test_compiled_modules_keep_state_dict_and_release_runs_eagerly() -> None:
    """Compiled in place: checkpoints name the same tensors; released, no module compiles."""
    model = build_proxy_model("rotnet", width=4)
    keys = list(model.state_dict())
    compiling.compile_network(model, backend="eager")
    assert list(model.state_dict()) == keys
    assert all(child._compiled_call_impl is not None for child in model.children())
    compiling.release_network(model)
    assert all(child._compiled_call_impl is None for child in model.children())
    torch._dynamo.utils.counters.clear()
    model.eval()(torch.rand(3, 3, 32, 32))
    assert not torch._dynamo.utils.counters["stats"]["unique_graphs"]


def test_eager_copy_runs_uncompiled_and_leaves_the_compiled_model_alone() -> None:
    """train.eval_every scores a copy: the trained model keeps its compiled modules, mode
    and tensors whatever the copy does."""
    model = build_proxy_model("rotnet", width=4).train()
    compiling.compile_network(model, backend="eager")
    compiled = [child._compiled_call_impl for child in model.children()]
    copy = compiling.eager_copy(model).eval()
    assert [child._compiled_call_impl for child in model.children()] == compiled
    assert all(child._compiled_call_impl is None for child in copy.children())
    assert model.training and not copy.training
    torch._dynamo.utils.counters.clear()
    with torch.no_grad():
        copy(torch.rand(3, 3, 32, 32))
        next(copy.parameters()).add_(1.0)
    assert not torch._dynamo.utils.counters["stats"]["unique_graphs"]
    theirs = copy.state_dict()
    for name, ours in model.state_dict().items():
        assert ours.data_ptr() != theirs[name].data_ptr(), name
    assert not torch.equal(next(model.parameters()), next(copy.parameters()))


def test_compiled_needs_cuda_triton_and_a_c_compiler(monkeypatch) -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    with pytest.raises(ValueError, match="step_mode='compiled' needs a CUDA device"):
        compiling.check_compiler(cpu)
    with pytest.raises(ValueError, match="float16"):
        resolve_step_mode("compiled", cuda, float16_scaler=True)
    monkeypatch.setattr(torch.utils._triton, "has_triton", lambda: False)
    with pytest.raises(ValueError, match="needs Triton"):
        resolve_step_mode("compiled", cuda, float16_scaler=False)
    monkeypatch.setattr(torch.utils._triton, "has_triton", lambda: True)
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(compiling.shutil, "which", lambda name: None)
    with pytest.raises(ValueError, match="needs a C compiler"):
        resolve_step_mode("compiled", cuda, float16_scaler=False)
    monkeypatch.setattr(compiling.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert resolve_step_mode("compiled", cuda, float16_scaler=False) == "compiled"


def test_compiled_on_the_cpu_fails_before_training(images) -> None:
    with pytest.raises(ValueError, match="step_mode='compiled' needs a CUDA device"):
        keyword_train(
            "rotnet", images, seed=0, epochs=1, batch_size=12, width=4, step_mode="compiled"
        )


def _train(case: str, images: np.ndarray, **overrides):
    method, options = CASES[case]
    kwargs = {"seed": 5, "epochs": 2, "width": 8, "lr": 0.05, "device": "cuda"}
    return keyword_train(method, images, **{**kwargs, **options, **overrides})


@needs_cuda
@pytest.mark.parametrize("case", list(CASES))
def test_compiled_resume_is_bit_identical_on_cuda(case, images, tmp_path) -> None:
    options = {"step_mode": "compiled", "epochs": 3}
    resumed, history = killed_then_resumed(
        lambda **kw: _train(case, images, **options, **kw), tmp_path / "checkpoint.pt"
    )
    whole, _ = _train(case, images, **options)
    assert [r["step_mode"] for r in history] == ["compiled"] * 3
    _assert_same(_weights(whole), _weights(resumed))
    assert all(child._compiled_call_impl is None for child in resumed.children())


@needs_cuda
def test_a_fresh_compilation_repeats_the_run_on_cuda(images) -> None:
    """Inductor's deterministic mode: compiling anew (no cache) picks the same kernels."""
    import torch._inductor.config as inductor_config

    first, _ = _train("contrastive_da", images, step_mode="compiled")
    torch._dynamo.reset()
    with inductor_config.patch(force_disable_caches=True):
        second, _ = _train("contrastive_da", images, step_mode="compiled")
    _assert_same(_weights(first), _weights(second))


@needs_cuda
@pytest.mark.parametrize("case", list(CASES))
def test_compiled_runs_side_by_side_are_their_runs_alone_on_cuda(case, images) -> None:
    method, options = CASES[case]
    sets = [images[:24], images[24:], images[::-1][:24].copy()]
    common = {"epochs": 2, "width": 8, "lr": 0.05, "device": "cuda", "step_mode": "compiled"}
    common |= {**options, "batch_size": options["batch_size"] // 2}
    fused = keyword_train_fused(method, sets, seeds=[0, 1, 2], **common)
    for k, images_k in enumerate(sets):
        alone, _ = keyword_train(method, images_k, seed=k, **common)
        model, history = fused[k]
        assert [r["step_mode"] for r in history] == ["compiled"] * 2
        _assert_same(_weights(alone), _weights(model))


@needs_cuda
def test_compiled_stays_near_the_graph_run_on_cuda(images) -> None:
    """Other kernels, same function. A tiny network at lr 0.05 amplifies rounding step by
    step: on the CPU in float32 the same run with the model channels-last ends 0.11 (of the
    distance trained) from the contiguous one after these 8 steps, and on an H200 compiled
    ended 0.14 from graph. A compiled graph that froze its parameters, skipped an update or
    read the wrong numbers would be of the order of the distance itself: the bound is 0.5.
    That dynamo's traced graphs (and AOTAutograd's) compute exactly the uncompiled step is
    checked on the CPU (``aot_eager`` gives the uncompiled weights bit for bit)."""
    method, options = CASES["rotnet"]
    _, fresh = keyword_prepare(method, images, seed=5, epochs=2, width=8, lr=0.05, **options)
    initial = _weights(fresh.model)  # the runs' own initial weights (seeded), on the CPU
    graph, _ = _train("rotnet", images, amp=None, step_mode="graph")
    compiled, _ = _train("rotnet", images, amp=None, step_mode="compiled")
    reference, weights = _weights(graph), _weights(compiled)
    names = [name for name, value in reference.items() if value.is_floating_point()]
    gap = sum(float((weights[n] - reference[n]).double().norm() ** 2) for n in names) ** 0.5
    moved = sum(float((reference[n].cpu() - initial[n]).double().norm() ** 2) for n in names)
    assert moved > 0 and gap / moved**0.5 < 0.5
