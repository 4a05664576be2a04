"""The training loop: learning, schedule, checkpoints, resume, divergence, saved files."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest
import torch

from pipeline_lib.models.checkpoints import (
    load_checkpoint,
    load_trained_representation,
    save_representation,
)
from pipeline_lib.models.embed import extract_embeddings
from pipeline_lib.models.representation import TRAINED_METHODS, Representation
from pipeline_lib.paper.protocol import training_notes
from pipeline_lib.runtime.devices import device_name
from pipeline_lib.ssl.augment import distribution_copies
from pipeline_lib.ssl.jobs import save_trained
from pipeline_lib.ssl.settings import TrainSettings
from pipeline_lib.ssl.train import TrainingDivergedError
from tests.ssl.tiny_runs import (
    assert_same_weights,
    keyword_prepare,
    keyword_train,
    keyword_train_fused,
    spy_on_steps,
    without_timing,
)

#: Tiny but learnable settings per method (width-8 ResNet-18, 64 digits, 2 epochs).
TINY = {
    "rotnet": {"batch_size": 16},
    "rotation": {"batch_size": 16, "head_depth": 1, "head_hidden": 32},
    # views A(x) (the recipe) make each epoch's target new: 8 steps an epoch to see it fall
    "denoising": {"batch_size": 8},
    "contrastive": {"batch_size": 16, "head_depth": 1, "head_hidden": 32, "proj_dim": 16},
    "contrastive_da": {"batch_size": 8, "head_depth": 1, "head_hidden": 32, "proj_dim": 16},
}


def _train(method: str, images: np.ndarray, **overrides):
    kwargs = {"seed": 1, "epochs": 2, "width": 8, "lr": 0.1, **TINY[method], **overrides}
    return keyword_train(method, images, **kwargs)


@pytest.mark.parametrize("method", TRAINED_METHODS)
def test_each_method_lowers_its_loss(method: str, digits64: np.ndarray) -> None:
    model, history = _train(method, digits64)
    assert [record["epoch"] for record in history] == [1, 2]
    first, last = history[0]["loss"], history[-1]["loss"]
    assert math.isfinite(first) and last < 0.99 * first, (first, last)
    assert isinstance(model, Representation) and not model.training
    out = model(torch.rand(2, 3, 32, 32))
    assert out["f"].shape == (2, 64)
    assert ("g" in out) == (method != "denoising")


def test_denoising_no_views_variant_lowers_its_loss(digits64: np.ndarray) -> None:
    """The plain-image reading (``denoising_no_views``), at the former default's settings."""
    _, history = _train("denoising", digits64, batch_size=16, denoising_views=False)
    first, last = history[0]["loss"], history[-1]["loss"]
    assert math.isfinite(first) and last < 0.99 * first, (first, last)


@pytest.mark.parametrize("schedule", ["per_epoch", "per_step"])
def test_cosine_schedule_and_history_fields(digits64: np.ndarray, schedule: str) -> None:
    _, history = _train("contrastive", digits64, epochs=3, lr=0.05, lr_schedule=schedule)
    steps, total = 64 // 16, 3 * (64 // 16)
    for record in history:
        last_step = record["epoch"] * steps - 1
        # Released --sched_freq=epoch: the rate of an epoch is that of its first step.
        t = last_step - last_step % steps if schedule == "per_epoch" else last_step
        expected = 0.05 * 0.5 * (1 + math.cos(math.pi * t / total))
        assert record["lr"] == pytest.approx(expected)
        assert record["images_per_s"] > 0 and record["seconds"] > 0
    if schedule == "per_epoch":
        assert history[0]["lr"] == pytest.approx(0.05)  # constant through the first epoch
    assert history[-1]["lr"] < 0.05 * 0.3


def test_same_seed_same_weights_and_global_rng_untouched(digits64: np.ndarray) -> None:
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    first, _ = _train("rotnet", digits64[:32], epochs=1)
    assert torch.equal(torch.random.get_rng_state(), state)
    second, _ = _train("rotnet", digits64[:32], epochs=1)
    other, _ = _train("rotnet", digits64[:32], epochs=1, seed=2)
    assert_same_weights(first, second)
    assert not torch.equal(first.state_dict()["proxy.weight"], other.state_dict()["proxy.weight"])


class _Killed(Exception):
    pass


@pytest.mark.parametrize("method", ["contrastive_da", "denoising"])
def test_kill_and_resume_gives_identical_weights(method, digits64, tmp_path, caplog) -> None:
    images = digits64[:32]
    straight, straight_history = _train(method, images, epochs=3)

    checkpoint = tmp_path / "ckpt.pt"

    def kill_after_second_epoch(record: dict) -> None:
        if record["epoch"] == 2:
            raise _Killed

    with pytest.raises(_Killed):
        _train(
            method, images, epochs=3, checkpoint_path=checkpoint, callback=kill_after_second_epoch
        )
    assert checkpoint.exists()
    epochs_run: list[int] = []

    def from_checkpoint():
        """The same run again from ``checkpoint``, noting each epoch it trains."""
        return _train(
            method,
            images,
            epochs=3,
            checkpoint_path=checkpoint,
            callback=lambda record: epochs_run.append(record["epoch"]),
        )

    with caplog.at_level(logging.INFO, logger="pipeline_lib.ssl.loop"):
        resumed, history = from_checkpoint()
    assert epochs_run == [3]  # only the missing epoch ran
    assert "resuming" in caplog.text
    assert_same_weights(straight, resumed)
    assert without_timing(history) == without_timing(straight_history)

    # A finished checkpoint: the same call returns at once with the same weights.
    epochs_run.clear()
    again, _ = from_checkpoint()
    assert epochs_run == []
    assert_same_weights(straight, again)


def test_corrupt_checkpoint_warns_and_restarts_cleanly(digits64, tmp_path, caplog) -> None:
    images = digits64[:32]
    fresh, _ = _train("rotnet", images, epochs=1)
    checkpoint = tmp_path / "ckpt.pt"
    checkpoint.write_bytes(b"not a checkpoint at all")
    with caplog.at_level(logging.WARNING, logger="pipeline_lib.ssl.loop"):
        restarted, history = _train("rotnet", images, epochs=1, checkpoint_path=checkpoint)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(checkpoint) in warnings[0].getMessage()
    assert [record["epoch"] for record in history] == [1]
    assert_same_weights(fresh, restarted)
    assert checkpoint.stat().st_size > 1000  # overwritten by a valid checkpoint


def test_checkpoint_of_other_arguments_is_not_resumed(digits64, tmp_path, caplog) -> None:
    images = digits64[:32]
    checkpoint = tmp_path / "ckpt.pt"
    _train("rotnet", images, epochs=1, checkpoint_path=checkpoint)
    with caplog.at_level(logging.WARNING, logger="pipeline_lib.ssl.loop"):
        _, history = _train("rotnet", images, epochs=1, lr=0.05, checkpoint_path=checkpoint)
    assert "differs in ['lr']" in caplog.text
    assert len(history) == 1


def test_divergence_raises_with_epoch_and_step(digits64: np.ndarray, tmp_path) -> None:
    checkpoint = tmp_path / "ckpt.pt"
    with pytest.raises(TrainingDivergedError, match=r"epoch \d/2.*lower the learning rate"):
        _train("rotnet", digits64[:32], lr=1e10, checkpoint_path=checkpoint)
    assert issubclass(TrainingDivergedError, RuntimeError)
    if checkpoint.exists():  # only epochs with finite losses are ever checkpointed
        state = load_checkpoint(checkpoint)
        assert all(math.isfinite(record["loss"]) for record in state["history"])
        assert all(
            torch.isfinite(v).all() for v in state["model"].values() if v.is_floating_point()
        )


def test_nan_loss_names_epoch_and_step(digits64: np.ndarray) -> None:
    with pytest.raises(TrainingDivergedError, match=r"loss is nan at epoch 1/2, step \d/4"):
        _train("contrastive", digits64[:32], lr=1e10, batch_size=8)


def test_bad_arguments_raise(digits64: np.ndarray) -> None:
    with pytest.raises(ValueError, match="unknown trained"):
        keyword_train("raw", digits64, seed=0, epochs=1, batch_size=8)
    with pytest.raises(ValueError, match="loss_form"):
        _train("contrastive", digits64, loss_form="simclr")
    with pytest.raises(ValueError, match="distribution transform"):
        _train("contrastive_da", digits64, distributions=("rot45",))
    with pytest.raises(ValueError, match="uint8"):
        _train("rotnet", digits64.astype(np.float32))


def test_small_data_uses_all_images_per_step(digits64: np.ndarray) -> None:
    _, history = _train("rotnet", digits64[:6], batch_size=64, epochs=1)
    assert history[0]["images_per_s"] > 0 and math.isfinite(history[0]["loss"])


def test_history_records_what_ran_and_the_tables_read_it(digits64, tmp_path) -> None:
    # amp bf16 is the default, but autocast runs on CUDA only: a CPU epoch records None
    model, history = _train("rotnet", digits64[:6], batch_size=64, epochs=1, amp="bfloat16")
    assert [(r["autocast"], r["step_mode"]) for r in history] == [(None, "eager")]
    paths = tmp_path / "model.pt", tmp_path / "train_history.json"
    save_trained(
        *paths,
        model,
        history,
        method="rotnet",
        arguments={"amp": "bfloat16"},
        device=torch.device("cpu"),
        width=8,
    )
    record = json.loads(paths[1].read_text())
    assert record["device"] == "cpu" and record["device_name"] == device_name(torch.device("cpu"))
    assert training_notes([record]) == ["Training: float32 on the CPU (1 model)."]


@pytest.mark.parametrize("method", ["rotation", "denoising"])
def test_saved_representation_round_trip(method, digits64, tmp_path) -> None:
    model, _ = _train(method, digits64[:32], epochs=1)
    path = tmp_path / "representation.pt"
    save_representation(path, model, method=method, config_dict={"lr": 0.1, "seed": 1})
    loaded = load_trained_representation(path)
    assert loaded.arch == model.arch and loaded.training_config == {"lr": 0.1, "seed": 1}
    assert_same_weights(model, loaded)
    before = extract_embeddings(model, digits64[:8])
    after = extract_embeddings(loaded, digits64[:8])
    assert before.keys() == after.keys() == ({"f"} if method == "denoising" else {"f", "g"})
    for key in before:
        np.testing.assert_array_equal(before[key], after[key])
    with pytest.raises(ValueError, match="does not match"):
        save_representation(path, model, method="contrastive", config_dict={})


def test_unreadable_representation_file_is_named(tmp_path) -> None:
    path = tmp_path / "broken.pt"
    path.write_bytes(b"\x00garbage")
    with pytest.raises(ValueError, match="broken.pt"):
        load_trained_representation(path)


def test_da_batches_draw_instances_from_the_expanded_set(digits64, step_batches) -> None:
    images = digits64[:16]
    batches = step_batches
    _, history = keyword_train(
        "contrastive_da", images, seed=0, epochs=1, batch_size=8, width=8, head_depth=1
    )
    # Released data/cifar.py: |D| n / b steps, b instances each.
    assert history[0]["steps"] == 4 * 16 // 8 == len(batches)
    assert all(len(batch) == 8 for batch in batches)
    copies = distribution_copies(torch.from_numpy(images).permute(0, 3, 1, 2))
    expanded = copies.images.flatten(1)
    drawn = torch.cat(batches).flatten(1)
    # Every instance of the expanded set exactly once in the epoch: a permutation of it.
    matches = (drawn[:, None, :] == expanded[None, :, :]).all(-1)  # (64, 64)
    assert matches.any(1).all()
    rows = [int(torch.nonzero(m)[0, 0]) for m in matches]
    assert sorted(rows) == list(range(64))
    # Two copies of one image share a batch only by chance, not always (per_image would).
    # per_image batching would give 2 source images x 4 copies in every batch of 8.
    sources = copies.source[torch.tensor(rows)].view(-1, 8)
    assert all(len(set(batch.tolist())) > 2 for batch in sources)


def test_da_per_image_batching_is_the_named_variant(digits64, step_batches) -> None:
    batches = step_batches
    _, history = keyword_train(
        "contrastive_da",
        digits64[:16],
        seed=0,
        epochs=1,
        batch_size=8,
        width=8,
        head_depth=1,
        da_batching="per_image",
    )
    assert history[0]["steps"] == 16 // 8 == len(batches)
    assert all(len(batch) == 8 for batch in batches)  # images; copies are made in the step
    with pytest.raises(ValueError, match="unknown da_batching 'mixed'"):
        keyword_train(
            "contrastive_da", digits64, seed=0, epochs=1, batch_size=8, da_batching="mixed"
        )


def test_default_optimiser_decays_batchnorm_parameters() -> None:
    from pipeline_lib.models.proxy import build_proxy_model
    from pipeline_lib.ssl.run import _parameter_groups

    default = TrainSettings("contrastive", epochs=1, batch_size=2).exclude_bn_from_decay
    assert default is False  # released --regularize_bn=false: nothing excluded
    model = build_proxy_model("contrastive", width=8, head_depth=2)
    groups = _parameter_groups(model, weight_decay=3e-4, exclude_bn_from_decay=default)
    assert len(groups) == 1 and groups[0]["weight_decay"] == 3e-4
    bn = [
        p
        for m in model.modules()
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
        for p in m.parameters(recurse=False)
    ]
    decayed = {id(p) for p in groups[0]["params"]}
    assert bn and all(id(p) in decayed for p in bn)
    variant = _parameter_groups(model, weight_decay=3e-4, exclude_bn_from_decay=True)
    assert {id(p) for p in variant[1]["params"]} == {id(p) for p in bn}
    assert variant[1]["weight_decay"] == 0.0


def _tf32_flags() -> tuple[bool, bool]:
    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32


@pytest.fixture
def tf32_allowed():
    """Both TF32 flags on for one test (cuBLAS's is off by default); restored after."""
    before = _tf32_flags()
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_float32_on_cuda_switches_tf32_off_for_the_run_only(digits64, tf32_allowed) -> None:
    """The flags are read, not used, here: a CUDA run's precision block needs no GPU."""
    import dataclasses

    run, _ = keyword_prepare("rotnet", digits64, seed=0, epochs=1, batch_size=16, width=4)
    cuda = torch.device("cuda")
    for device, amp, inside in (
        (cuda, None, (False, False)),  # float32 meant: float32 done
        (cuda, "bfloat16", (True, True)),  # autocast: left alone
        (torch.device("cpu"), None, (True, True)),  # the CPU has no TF32
    ):
        with dataclasses.replace(run, device=device, amp=amp).precision():
            assert _tf32_flags() == inside, (device, amp)
        assert _tf32_flags() == (True, True)  # restored
    with pytest.raises(RuntimeError, match="inside"):
        with dataclasses.replace(run, device=cuda, amp=None).precision():
            raise RuntimeError("inside")
    assert _tf32_flags() == (True, True)  # restored after an error too


@pytest.mark.parametrize("fused", [False, True])
def test_every_step_runs_inside_the_precision_block(digits64, monkeypatch, fused) -> None:
    """Each epoch's steps, single or fused, and nothing between epochs (the callback)."""
    import contextlib

    import pipeline_lib.ssl.run as run_module
    import pipeline_lib.ssl.tasks.rotation as rotation_task

    depth, steps, between = [0], [], []

    @contextlib.contextmanager
    def recording(self):
        depth[0] += 1
        try:
            yield
        finally:
            depth[0] -= 1

    def spy(real):
        def step(*args, **kwargs):
            steps.append(depth[0])
            return real(*args, **kwargs)

        return step

    monkeypatch.setattr(run_module.Run, "precision", recording)
    options = {"epochs": 2, "batch_size": 16, "width": 4}
    if fused:  # eager on the CPU: one stacked network, the loss per member
        monkeypatch.setattr(rotation_task, "rotation_loss", spy(rotation_task.rotation_loss))
        keyword_train_fused(
            "rotnet",
            [digits64[:32], digits64[32:]],
            seeds=[0, 1],
            callback=lambda k, record: between.append(depth[0]),
            **options,
        )
        expected_steps = 2 * 2 * 2  # epochs x steps x members
    else:
        spy_on_steps(monkeypatch, lambda batch: steps.append(depth[0]))
        keyword_train(
            "rotnet", digits64, seed=0, callback=lambda r: between.append(depth[0]), **options
        )
        expected_steps = 2 * 4
    assert steps == [1] * expected_steps
    assert between == [0] * (4 if fused else 2) and depth[0] == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_float32_training_on_cuda_runs_without_tf32(digits64, tf32_allowed, monkeypatch) -> None:
    during: list[tuple[bool, bool]] = []
    spy_on_steps(monkeypatch, lambda batch: during.append(_tf32_flags()))
    keyword_train(
        "rotnet",
        digits64,
        seed=0,
        epochs=1,
        batch_size=16,
        width=4,
        device="cuda",
        amp=None,
        step_mode="eager",
    )
    assert during == [(False, False)] * 4 and _tf32_flags() == (True, True)
