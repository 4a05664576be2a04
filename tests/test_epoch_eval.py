"""train.eval_every: test-split AUCs during training, with the same weights as without them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline_lib.data import load_dataset
from pipeline_lib.data.split import one_class_split
from pipeline_lib.detection.epoch_eval import epoch_evaluator
from pipeline_lib.detection.runner import run_detection, run_rotation_detection
from pipeline_lib.registry import ROTATION_DETECTORS
from pipeline_lib.ssl.jobs import embed_trained
from tests.ssl.tiny_runs import keyword_train
from tests.threads import one_torch_thread

DETECTORS = {"kde": {}, "ocsvm": {}}
TINY = {"seed": 1, "width": 8, "lr": 0.1, "batch_size": 16}


@pytest.fixture(autouse=True)
def _one_thread():
    with one_torch_thread():
        yield


@pytest.fixture(scope="module")
def cell():
    """Digits, inlier class 3: about 120 training images, the 599-image test split."""
    dataset = load_dataset("digits")
    split = one_class_split(
        dataset.train_labels, dataset.test_labels, inlier=3, contamination=0.0, seed=0
    )
    return dataset, split


def _evaluator(cell, method: str = "rotnet", **options):
    dataset, split = cell
    return epoch_evaluator(
        dataset, split, method=method, detectors=DETECTORS, seed=0, batch_size=128, **options
    )


def _train(cell, method: str = "rotnet", n: int | None = None, **options):
    dataset, split = cell
    images = dataset.train_images[split.train_index[:n]]
    return keyword_train(method, images, **TINY, **options)


def _without_eval(history: list[dict]) -> list[dict]:
    dropped = ("eval", "eval_seconds", "images_per_s", "seconds")
    return [{k: v for k, v in record.items() if k not in dropped} for record in history]


def test_eval_every_leaves_weights_history_and_global_rng_as_they_were(cell) -> None:
    plain, plain_history = _train(cell, epochs=2)
    torch.manual_seed(7)
    rng = torch.random.get_rng_state()
    seen: list[dict] = []
    evaluated, history = _train(
        cell, epochs=2, evaluate=_evaluator(cell), eval_every=1, callback=seen.append
    )
    assert torch.equal(torch.random.get_rng_state(), rng)
    # The same CPU kernels run in both trainings: bit for bit, or evaluation leaked in.
    a, b = plain.state_dict(), evaluated.state_dict()
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert _without_eval(history) == _without_eval(plain_history)
    assert [sorted(record["eval"]) for record in history] == [
        sorted(["kde", "ocsvm", *ROTATION_DETECTORS])
    ] * 2
    assert all(0 <= auc <= 100 for record in history for auc in record["eval"].values())
    assert all(record["eval_seconds"] > 0 for record in history)
    assert "eval" not in plain_history[0]
    # The tracking callback sees the record with its evaluation.
    assert [record["eval"] for record in seen] == [record["eval"] for record in history]


def test_last_evaluation_is_the_pipeline_auc_of_the_trained_model(cell) -> None:
    dataset, split = cell
    model, history = _train(cell, epochs=2, evaluate=_evaluator(cell), eval_every=2)
    assert ["eval" in record for record in history] == [False, True]
    features = embed_trained(model, dataset, split, method="rotnet", batch_size=128, device="cpu")
    expected = {
        detector: run_detection(
            split,
            features,
            fitset="train",
            detector=detector,
            detector_params=params,
            max_fit=20000,
            seed=0,
        )[0]["auroc"]
        for detector, params in DETECTORS.items()
    }
    for detector in ROTATION_DETECTORS:
        expected[detector] = run_rotation_detection(split, features, detector=detector)[0]["auroc"]
    # Same weights, same embedding and detector code on the same CPU: the same numbers.
    assert history[-1]["eval"] == expected


def test_evaluation_falls_every_n_epochs_and_after_the_last(cell) -> None:
    calls: list[bool] = []

    def evaluate(model):
        calls.append(model.training)
        return {"constant": 50.0}

    model, history = _train(cell, n=32, epochs=5, evaluate=evaluate, eval_every=2)
    assert [record["epoch"] for record in history if "eval" in record] == [2, 4, 5]
    assert calls == [False, False, False]  # it gets an inference-mode copy
    _, history = _train(cell, n=32, epochs=2, evaluate=evaluate, eval_every=0)
    assert not any("eval" in record for record in history) and len(calls) == 3


def test_a_failing_evaluation_is_recorded_and_training_goes_on(cell, caplog) -> None:
    def evaluate(model):
        raise RuntimeError("out of memory")

    plain, _ = _train(cell, n=32, epochs=2)
    model, history = _train(cell, n=32, epochs=2, evaluate=evaluate, eval_every=1)
    assert [record.get("eval_error") for record in history] == ["RuntimeError: out of memory"] * 2
    assert not any("eval" in record for record in history)
    assert "evaluation failed" in caplog.text
    for name, tensor in plain.state_dict().items():
        assert torch.equal(tensor, model.state_dict()[name]), name


def test_evaluations_survive_a_resume(cell, tmp_path) -> None:
    checkpoint = tmp_path / "ckpt.pt"

    class Killed(Exception):
        pass

    def kill_after_second_epoch(record: dict) -> None:
        if record["epoch"] == 2:
            raise Killed

    def evaluate(model):
        return {"kde": 60.0}

    with pytest.raises(Killed):
        _train(
            cell,
            n=32,
            epochs=3,
            evaluate=evaluate,
            eval_every=1,
            checkpoint_path=checkpoint,
            callback=kill_after_second_epoch,
        )
    _, history = _train(
        cell, n=32, epochs=3, evaluate=evaluate, eval_every=1, checkpoint_path=checkpoint
    )
    assert [record.get("eval") for record in history] == [{"kde": 60.0}] * 3


def test_bad_eval_settings_are_named(cell) -> None:
    with pytest.raises(ValueError, match="eval_every must be >= 0"):
        _train(cell, epochs=1, eval_every=-1)
    dataset, split = cell
    with pytest.raises(ValueError, match="unknown detectors"):
        epoch_evaluator(dataset, split, method="rotnet", detectors={"kd": {}})
    with pytest.raises(ValueError, match="no detector"):
        epoch_evaluator(dataset, split, method="denoising", detectors={})


def test_non_rotation_methods_get_only_the_feature_detectors(cell) -> None:
    evaluate = _evaluator(cell, method="denoising")
    model, _ = _train(cell, method="denoising", n=32, epochs=1)
    scores = evaluate(model)
    assert sorted(scores) == ["kde", "ocsvm"]
    assert np.all([0 <= value <= 100 for value in scores.values()])
