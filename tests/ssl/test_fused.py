"""Fused training of K models (pipeline_lib.ssl.fused) against K separate runs.

Tolerances. In float64 the stacked computation adds the same terms as the separate one, in
the order its CPU kernels choose: on an Intel CPU that order matched (0 difference after 2
epochs, every method at lr 0.1); on an AMD EPYC the grouped convolutions sum in another order
and single tensors differ by up to 1 float64 epsilon per training step in relative norm (a
near-zero element by 2e-11 relative, so elementwise tolerances do not travel). The float64
tests therefore bound each tensor's difference by ``ROUNDING_PER_STEP`` epsilons per step of
its norm: 64 times what reordering was measured to give, and about 10^10 below what any mix-up
of data, views, noise, BatchNorm statistics or optimiser state gives (of the order of the
weight update itself, a percent of the weights at lr 0.1). Bit-identity is asserted only where
the same kernels run by construction: a resumed run against its uninterrupted twin. In
float32, the training dtype, grouped convolutions and batched matrix products add in another
order: after one step the weight difference measured 4e-6 to 3.5e-4 of the update's norm (the
largest on BatchNorm biases, whose gradients are sums that nearly cancel), below what merely
running the separate model's convolutions channels-last changes (1e-3 to 1.4e-2); later steps
amplify it as they amplify any rounding, so float32 is compared after one step.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import pipeline_lib.ssl.fused as fused_module
import pipeline_lib.ssl.fused_groups as fused_groups
import pipeline_lib.ssl.run as run_module
from pipeline_lib.data.split import OneClassSplit
from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.ssl.fused import train_representations_fused
from pipeline_lib.ssl.jobs import train_on_splits_fused
from pipeline_lib.ssl.settings import Execution, TrainSettings
from pipeline_lib.ssl.train import TrainingDivergedError
from tests.ssl.tiny_runs import (
    FUSED_TINY,
    assert_same_weights,
    keyword_train,
    keyword_train_fused,
    without_timing,
)

SEEDS = [0, 1, 2]
#: float64: a tensor's difference in norm, in epsilons of its norm per training step (see above).
ROUNDING_PER_STEP = 64
#: float32, one step: ||w_fused - w_separate|| / ||w_separate - w_initial|| (see above).
FLOAT32_STEP_RATIO = 2e-3


@pytest.fixture(scope="module")
def noise_sets() -> list[np.ndarray]:
    """Three models' training sets: random pixels (no flat, zero-variance channels)."""
    images = np.random.default_rng(0).integers(0, 256, (48, 32, 32, 3), dtype=np.uint8)
    return [images[0:16], images[16:32], images[32:48]]


@pytest.fixture
def float64(monkeypatch):
    """Build every model in float64 (inputs cast at the backbone), fused and separate."""
    build = run_module.build_proxy_model

    def double(*args, **kwargs):
        model = build(*args, **kwargs).double()
        model.backbone.register_forward_pre_hook(lambda module, inputs: (inputs[0].double(),))
        return model

    monkeypatch.setattr(run_module, "build_proxy_model", double)


def _options(method: str, **overrides) -> dict:
    return {"epochs": 2, "width": 8, "lr": 0.1, **FUSED_TINY[method], **overrides}


def _separate(method: str, sets, seeds=SEEDS, **options) -> list:
    return [
        keyword_train(method, images, seed=seed, **options)
        for images, seed in zip(sets, seeds, strict=True)
    ]


def _initial(method: str, seed: int) -> torch.nn.Module:
    """The untrained model of a run of ``seed`` (its initialisation stream)."""
    arch = {k: v for k, v in FUSED_TINY[method].items() if k != "batch_size"}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(run_module.stream_seed(seed, 0))
        return build_proxy_model(method, width=8, image_size=32, **arch)


def _assert_close_weights(first, second, history: list[dict]) -> None:
    """Each floating tensor within ``ROUNDING_PER_STEP`` of float64's epsilon per step, in norm.

    Integer tensors (BatchNorm's step counters) must be equal.
    """
    steps = sum(record["steps"] for record in history)
    bound = ROUNDING_PER_STEP * torch.finfo(torch.float64).eps * steps
    a, b = first.state_dict(), second.state_dict()
    assert a.keys() == b.keys()
    for name in a:
        if not a[name].is_floating_point():
            assert torch.equal(a[name], b[name]), name
            continue
        assert a[name].dtype == torch.float64, name
        difference = float((a[name] - b[name]).norm())
        assert difference <= bound * float(b[name].norm()), (name, difference, bound)


def _assert_same_history(first: list[dict], second: list[dict]) -> None:
    """The same records but timing; losses equal to the weights' bound (same reason)."""
    steps = sum(record["steps"] for record in second)
    bound = ROUNDING_PER_STEP * torch.finfo(torch.float64).eps * steps
    ours, theirs = without_timing(first), without_timing(second)
    assert [{**r, "loss": None} for r in ours] == [{**r, "loss": None} for r in theirs]
    for a, b in zip(ours, theirs, strict=True):
        assert abs(a["loss"] - b["loss"]) <= bound * abs(b["loss"]), (a, b)


@pytest.mark.parametrize("method", list(FUSED_TINY))
def test_fused_equals_separate_in_float64(method, noise_sets, float64) -> None:
    sets = [images[:8] for images in noise_sets]  # 1 step an epoch (4 with DA's copies)
    options = _options(method)
    fused = keyword_train_fused(method, sets, seeds=SEEDS, **options)
    separate = _separate(method, sets, **options)
    for (model, history), (alone, alone_history) in zip(fused, separate, strict=True):
        assert next(model.parameters()).dtype == torch.float64 and not model.training
        _assert_close_weights(model, alone, alone_history)
        _assert_same_history(history, alone_history)


@pytest.mark.parametrize("method", ["rotnet", "contrastive"])
def test_fused_matches_separate_in_float32_after_one_step(method, noise_sets) -> None:
    sets = [images[:8] for images in noise_sets]
    options = _options(method, epochs=1)
    fused = keyword_train_fused(method, sets, seeds=SEEDS, **options)
    separate = _separate(method, sets, **options)
    for seed, (model, _), (alone, _) in zip(SEEDS, fused, separate, strict=True):
        assert next(model.parameters()).dtype == torch.float32
        start = torch.cat([p.detach().flatten() for p in _initial(method, seed).parameters()])
        ours = torch.cat([p.detach().flatten() for p in model.parameters()])
        theirs = torch.cat([p.detach().flatten() for p in alone.parameters()])
        ratio = float((ours - theirs).norm() / (theirs - start).norm())
        assert ratio < FLOAT32_STEP_RATIO, ratio


def test_models_of_other_sizes_train_in_their_own_group(noise_sets, float64) -> None:
    sets = [noise_sets[0][:8], noise_sets[1], noise_sets[2][:8]]  # 1, 2 and 1 steps an epoch
    options = _options("rotnet")
    fused = keyword_train_fused("rotnet", sets, seeds=SEEDS, **options)
    separate = _separate("rotnet", sets, **options)
    for (model, _), (alone, alone_history) in zip(fused, separate, strict=True):
        _assert_close_weights(model, alone, alone_history)
    assert [result[1][0]["steps"] for result in fused] == [1, 2, 1]


def test_one_diverged_model_stops_alone(noise_sets, float64, monkeypatch, tmp_path) -> None:
    resume = fused_module.resume

    def poison_seed_1(run, state, path):
        state = resume(run, state, path)
        if run.fingerprint["seed"] == 1:
            with torch.no_grad():
                state.model.backbone.stem[0].weight[0, 0, 0, 0] = math.nan
        return state

    monkeypatch.setattr(fused_module, "resume", poison_seed_1)
    sets = [images[:8] for images in noise_sets]
    paths = [tmp_path / f"model{k}.pt" for k in range(3)]
    options = _options("rotnet")
    results = keyword_train_fused("rotnet", sets, seeds=SEEDS, checkpoint_paths=paths, **options)
    error = results[1]
    assert isinstance(error, TrainingDivergedError)
    assert "rotnet loss is nan at epoch 1/2, step 1/1" in str(error)
    assert "lower the learning rate" in str(error)
    assert not paths[1].exists() and paths[0].exists() and paths[2].exists()
    separate = _separate("rotnet", sets, **options)
    for k in (0, 2):
        _assert_close_weights(results[k][0], separate[k][0], separate[k][1])


def test_a_nan_that_reaches_every_member_stops_only_its_source(
    noise_sets, float64, monkeypatch, tmp_path, caplog
) -> None:
    """CUDA's grouped convolutions let a NaN reach every member (measured on an H200): here
    the group's epoch is made to do the same, every member's losses and weights NaN once one
    is; the members retrain the epoch alone and only the source of the NaN stops."""
    resume = fused_module.resume
    train_epoch = fused_groups.StackedGroup.train_epoch

    def poison_seed_1(run, state, path):
        state = resume(run, state, path)
        if run.fingerprint["seed"] == 1 and state.epoch == 0:
            with torch.no_grad():
                state.model.backbone.stem[0].weight[0, 0, 0, 0] = math.nan
        return state

    def leaking_epoch(group):
        losses = train_epoch(group)
        if not bool(torch.isfinite(losses).all()):
            with torch.no_grad():
                for parameter in group.model.parameters():
                    parameter.fill_(math.nan)
            losses = torch.full_like(losses, math.nan)
        return losses

    monkeypatch.setattr(fused_module, "resume", poison_seed_1)
    monkeypatch.setattr(fused_groups.StackedGroup, "train_epoch", leaking_epoch)
    sets = [images[:8] for images in noise_sets]
    paths = [tmp_path / f"model{k}.pt" for k in range(3)]
    options = _options("rotnet")
    with caplog.at_level("WARNING", logger="pipeline_lib.ssl.fused"):
        results = keyword_train_fused(
            "rotnet", sets, seeds=SEEDS, checkpoint_paths=paths, **options
        )
    assert isinstance(results[1], TrainingDivergedError)
    assert "rotnet loss is nan at epoch 1/2, step 1/1" in str(results[1])
    retrained = [r.args[0] for r in caplog.records if "retraining that epoch alone" in r.message]
    assert sorted(retrained) == [0, 1, 2]  # all three diverged in the group's first epoch
    assert not paths[1].exists() and paths[0].exists() and paths[2].exists()
    separate = _separate("rotnet", sets, **options)
    for k in (0, 2):  # epoch 1 alone, epoch 2 as a new group of two: still the separate runs
        _assert_close_weights(results[k][0], separate[k][0], separate[k][1])
        assert [r["epoch"] for r in results[k][1]] == [1, 2]


class _Killed(Exception):
    pass


def _kill_the_third_after_epoch_2(index: int, record: dict) -> None:
    """A fused run's callback: the third model's process dies after its second epoch."""
    if record["epoch"] == 2 and index == 2:
        raise _Killed


def _train_until_killed(method: str, sets, paths: list[Path], options: dict) -> None:
    """A fused run with checkpoints in ``paths`` whose process dies after epoch 2."""
    with pytest.raises(_Killed):
        keyword_train_fused(
            method,
            sets,
            seeds=SEEDS,
            checkpoint_paths=paths,
            callback=_kill_the_third_after_epoch_2,
            **options,
        )


def _resume(method: str, sets, paths: list[Path], options: dict) -> tuple[list, list]:
    """The fused run again from the checkpoints in ``paths``: its results and the
    ``(model index, epoch)`` of each epoch it trained."""
    epochs_run: list[tuple[int, int]] = []
    results = keyword_train_fused(
        method,
        sets,
        seeds=SEEDS,
        checkpoint_paths=paths,
        callback=lambda index, record: epochs_run.append((index, record["epoch"])),
        **options,
    )
    return results, epochs_run


def test_killed_fused_run_resumes_identically(noise_sets, tmp_path) -> None:
    options = _options("contrastive", epochs=3)
    straight = keyword_train_fused("contrastive", noise_sets, seeds=SEEDS, **options)
    paths = [tmp_path / f"model{k}.pt" for k in range(3)]

    _train_until_killed("contrastive", noise_sets, paths, options)
    resumed, epochs_run = _resume("contrastive", noise_sets, paths, options)
    assert epochs_run == [(0, 3), (1, 3), (2, 3)]  # only the missing epoch ran
    for (model, history), (again, again_history) in zip(straight, resumed, strict=True):
        assert_same_weights(model, again)
        assert without_timing(history) == without_timing(again_history)
    # The checkpoints are train_representation's: a separate call finds model 0 finished.
    alone, alone_history = keyword_train(
        "contrastive", noise_sets[0], seed=0, checkpoint_path=paths[0], **options
    )
    assert_same_weights(alone, straight[0][0])
    assert without_timing(alone_history) == without_timing(straight[0][1])


def test_bad_fused_arguments_raise(noise_sets) -> None:
    with pytest.raises(ValueError, match="one seed and one checkpoint path per model"):
        keyword_train_fused("rotnet", noise_sets, seeds=[0], epochs=1, batch_size=8)
    with pytest.raises(ValueError, match="one seed and one checkpoint path per model"):
        settings = TrainSettings("rotnet", epochs=1, batch_size=8)
        train_representations_fused(settings, noise_sets, seeds=SEEDS, checkpoint_paths=[None])
    with pytest.raises(ValueError, match="float16"):
        keyword_train_fused(
            "rotnet", noise_sets, seeds=SEEDS, epochs=1, batch_size=8, amp="float16"
        )


def test_a_model_behind_catches_up_alone_then_rejoins(noise_sets, float64, tmp_path) -> None:
    sets = [images[:8] for images in noise_sets]  # one step an epoch
    options = _options("rotnet", epochs=3)
    paths = [tmp_path / f"model{k}.pt" for k in range(3)]

    _train_until_killed("rotnet", sets, paths, options)
    paths[1].unlink()  # model 1 starts again from scratch
    results, epochs_run = _resume("rotnet", sets, paths, options)
    # Model 1 trains epochs 1 and 2 alone while the others wait, then all three train epoch 3.
    assert epochs_run == [(1, 1), (1, 2), (0, 3), (1, 3), (2, 3)]
    separate = _separate("rotnet", sets, **options)
    for (model, history), (alone, alone_history) in zip(results, separate, strict=True):
        _assert_close_weights(model, alone, alone_history)
        _assert_same_history(history, alone_history)


def test_one_model_trains_exactly_as_train_representation(noise_sets) -> None:
    options = _options("contrastive")
    ((model, history),) = keyword_train_fused("contrastive", noise_sets[:1], seeds=[5], **options)
    alone, alone_history = keyword_train("contrastive", noise_sets[0], seed=5, **options)
    assert_same_weights(model, alone)  # float32, bit for bit: the separate trainer's own epoch
    assert without_timing(history) == without_timing(alone_history)


def _execution_argument(script: Path) -> str:
    """The source of the ``execution=`` argument of the one call in ``script`` that has it."""
    calls = [node for node in ast.walk(ast.parse(script.read_text())) if isinstance(node, ast.Call)]
    found = [ast.unparse(k.value) for call in calls for k in call.keywords if k.arg == "execution"]
    assert len(found) == 1, (script, found)
    return found[0]


def test_the_fused_job_passes_train_step_mode_as_the_separate_job_does(noise_sets) -> None:
    """train.step_mode reaches fused training (graph on the CPU is refused there, as alone),
    read by both job scripts from the same unrecorded param (it re-runs nothing), never from
    ``snakemake.config``."""
    split = OneClassSplit(0, 0.0, 0, np.arange(8), 0, np.arange(1), np.zeros(1, np.int8))
    with pytest.raises(ValueError, match="step_mode='graph' needs a CUDA device"):
        train_on_splits_fused(
            "rotnet",
            noise_sets[0],
            [split, split],
            training={"epochs": 1},
            train_size=None,
            seeds=[0, 1],
            width=4,
            execution=Execution(device="cpu", step_mode="graph"),
        )
    scripts = Path(__file__).resolve().parents[2] / "workflow" / "scripts"
    fused = _execution_argument(scripts / "train_fused.py")
    assert fused == "Execution.from_config(snakemake.params.execution.value, device=device)"
    assert _execution_argument(scripts / "train_representation.py") == (
        "Execution.from_config(execution, device=device)"
    )
    assert (
        "execution = snakemake.params.execution.value"
        in (scripts / "train_representation.py").read_text()
    )
    assert not [
        script.name for script in scripts.glob("*.py") if "snakemake.config" in script.read_text()
    ]


def test_captured_groups_beyond_the_stream_pool_stack_instead() -> None:
    """Side by side needs a capture stream per member; torch's pool has 32 (see the CUDA
    test of the pool in tests/ssl/test_stepper_cuda.py)."""
    side_by_side = fused_module._runs_side_by_side
    assert fused_module.MAX_SIDE_BY_SIDE == 32
    assert side_by_side("graph", 2) and side_by_side("graph", 32)
    assert not side_by_side("graph", 33)
    assert not side_by_side("eager", 2) and not side_by_side("two_phase", 2)
