"""The captured CUDA graph itself (CUDA only; a GPU session runs these, benchmarks/gpu_session.sh
``-k on_cuda``): it gives the eager loop's weights bit for bit with deterministic kernels,
resumes bit-identically, warns and trains uncaptured when capture fails, and fused members
side by side are their separate graph runs."""

from __future__ import annotations

import logging

import pytest
import torch

import pipeline_lib.ssl.fused as fused_module
import pipeline_lib.ssl.train as train_module
from pipeline_lib.registry import default_batch_size
from pipeline_lib.ssl.stepper import StaticStep
from tests.ssl.step_cases import (
    CASES,
    FUSED,
    assert_equal_trees,
    poisoned_resume,
    separate_runs,
    train_case,
    train_fused_case,
    without_timing,
)
from tests.ssl.tiny_runs import (
    keyword_prepare,
    keyword_train_fused,
    killed_then_resumed,
    needs_cuda,
)

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
    eager, eager_history = train_case(case, images, device="cuda", amp=None, step_mode="eager")
    graph, history = train_case(case, images, device="cuda", amp=None, step_mode="graph")
    assert [r["step_mode"] for r in history] == ["graph", "graph"]
    assert_equal_trees(eager.state_dict(), graph.state_dict(), "model")
    assert without_timing(history) == without_timing(eager_history)


@needs_cuda
@pytest.mark.parametrize("case", ["rotnet", "contrastive", "denoising"])
def test_graph_resume_is_bit_identical_on_cuda(case, images, tmp_path, deterministic_cudnn) -> None:
    """Every start runs the same kernels, captured or not, so a resume repeats the run."""
    options = {"device": "cuda", "step_mode": "graph", "epochs": 3}
    resumed, _ = killed_then_resumed(
        lambda **kw: train_case(case, images, **options, **kw), tmp_path / "checkpoint.pt"
    )
    whole, _ = train_case(case, images, **options)
    assert_equal_trees(whole.state_dict(), resumed.state_dict(), "model")


@needs_cuda
def test_failed_capture_warns_and_trains_uncaptured_on_cuda(images, monkeypatch, caplog) -> None:
    def broken_graph(*args, **kwargs):
        raise RuntimeError("capture refused (test)")

    monkeypatch.setattr(torch.cuda, "graph", broken_graph)
    with caplog.at_level(logging.WARNING):
        model, history = train_case("rotnet", images, device="cuda", step_mode="graph")
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
    fused = train_fused_case(method, noise16, **options)
    separate = separate_runs(method, noise16, **options)
    for k, ((model, history), (alone, alone_history)) in enumerate(
        zip(fused, separate, strict=True)
    ):
        assert [r["step_mode"] for r in history] == ["graph"] * 4
        assert_equal_trees(alone.state_dict(), model.state_dict(), f"model {k}")
        assert_equal_trees(without_timing(alone_history), without_timing(history))


@needs_cuda
def test_fused_graph_captures_once_per_group_on_cuda(noise16, monkeypatch) -> None:
    """Three members capture their own steps; one diverges and leaves; the pair captures anew."""
    captured: list[StaticStep] = []
    try_capture = StaticStep._try_capture

    def counted(self: StaticStep) -> None:
        try_capture(self)
        captured.append(self)

    monkeypatch.setattr(StaticStep, "_try_capture", counted)
    monkeypatch.setattr(fused_module, "resume", poisoned_resume(1))
    sets = [noise16[0], noise16[1], noise16[0][::-1].copy()]
    results = keyword_train_fused(
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
            run, state = keyword_prepare(
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
        assert_equal_trees(
            alone.states[0].model.state_dict(), together.states[seed].model.state_dict(), method
        )


@needs_cuda
def test_the_stream_pool_side_by_side_groups_rely_on_on_cuda() -> None:
    """fused.MAX_SIDE_BY_SIDE: torch hands out 32 distinct streams, then the first again."""
    streams = [torch.cuda.Stream() for _ in range(fused_module.MAX_SIDE_BY_SIDE + 1)]
    handles = [stream.cuda_stream for stream in streams]
    assert len(set(handles[:-1])) == fused_module.MAX_SIDE_BY_SIDE
    assert handles[-1] in handles[:-1]
