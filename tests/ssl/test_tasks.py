"""A proxy task is one module and one row of the method table: a task that no loop names
trains alone and fused, validates in a config and is planned, with nothing else changed."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.config.validate import ConfigError, validate_config
from pipeline_lib.planning.training import training_spec
from pipeline_lib.registry import METHOD_SPECS, MethodSpec, method_training
from pipeline_lib.ssl.fused import train_representations_fused
from pipeline_lib.ssl.run import prepare_run
from pipeline_lib.ssl.settings import Execution, TrainSettings
from pipeline_lib.ssl.tasks import ProxyTask, StepParts, load_task, task_of
from pipeline_lib.ssl.train import train_representation
from tests.benchmark_scripts import REPO


def _bind(settings: TrainSettings, augment) -> StepParts:
    """Flip prediction: a view and its mirror image, labelled 0 and 1."""

    def inputs(batch, generator):
        views = augment(batch.repeat(2, 1, 1, 1), generator, streams=2)
        n = len(batch)
        labels = torch.arange(2, device=views.device).repeat_interleave(n)
        return torch.cat([views[:n], views[n:].flip(-1)]), labels

    return StepParts(
        inputs=inputs,
        forward=lambda model, x: model.proxy(model.head(model.backbone(x))),
        loss=lambda logits, labels: F.cross_entropy(logits[:, :2].float(), labels),
    )


FLIP = ProxyTask("flip prediction", _bind)
SPEC = MethodSpec(
    "flip",
    trained=True,
    head="rotation_mlp",
    task="tests.ssl.test_tasks:FLIP",
    batch_size=8,
    views_per_instance=2,
)


@pytest.fixture
def flip(monkeypatch: pytest.MonkeyPatch) -> MethodSpec:
    monkeypatch.setitem(METHOD_SPECS, "flip", SPEC)
    return SPEC


def test_the_built_in_methods_name_loadable_tasks() -> None:
    trained = [spec for spec in METHOD_SPECS.values() if spec.trained]
    assert {spec.id: task_of(spec.id).name for spec in trained} == {
        "rotnet": "rotation prediction",
        "rotation": "rotation prediction",
        "denoising": "denoising autoencoder",
        "contrastive": "contrastive learning",
        "contrastive_da": "contrastive learning",
    }
    with pytest.raises(ValueError, match="raw is a frozen representation"):
        task_of("raw")
    with pytest.raises(ValueError, match="must read 'module:attribute'"):
        load_task("pipeline_lib.ssl.tasks.rotation")
    with pytest.raises(ValueError, match="cannot load the proxy task 'no_such_module:TASK'"):
        load_task("no_such_module:TASK")
    with pytest.raises(ValueError, match="is a type, not a ProxyTask"):
        load_task("pipeline_lib.ssl.tasks:StepParts")


@pytest.mark.slow
def test_a_task_of_the_table_trains_alone_and_fused(flip, digits64) -> None:
    training = method_training("flip", {"epochs": 1, "head_depth": 1, "head_hidden": 8})
    settings = TrainSettings.from_config("flip", training, width=4)
    assert settings.batch_size == 8 and settings.has_head
    model, history = train_representation(settings, digits64[:16], seed=0)
    assert model.arch["method"] == "flip" and history[0]["steps"] == 2
    fused = train_representations_fused(settings, [digits64[:16], digits64[16:32]], seeds=[0, 1])
    (alone, alone_history), (_, other_history) = fused
    # The stacked group sums the same products in another order: float32 rounding apart.
    assert alone_history[0]["loss"] == pytest.approx(history[0]["loss"], rel=1e-5)
    assert other_history[0]["loss"] != pytest.approx(history[0]["loss"], rel=1e-3)
    first = next(iter(model.state_dict()))
    assert torch.allclose(alone.state_dict()[first], model.state_dict()[first], atol=1e-5)


def test_a_task_of_the_table_validates_and_is_planned(flip) -> None:
    config = {
        "datasets": {"digits": {"classes": ["0"]}},
        "methods": ["flip", "rotnet", "flip_small"],
        "variants": {"flip_small": {"method": "flip", "train": {"batch_size": 4}}},
        "seeds": [0],
        "detectors": {"kde": {}},
        "train": {"epochs": 3},
    }
    validated = validate_config(config, REPO / "workflow/schemas/config.schema.yaml")
    spec = training_spec("flip_small", validated)
    assert (spec.base, spec.batch_size, spec.epochs) == ("flip", 4, 3)
    # No rates of its own: the planner has none to fall back to (unmeasured, not an error).
    assert flip.rates == {}


def test_a_method_that_cannot_fuse_or_capture_is_refused(monkeypatch, digits64) -> None:
    """Validation, the fused trainer and the step mode honour fusable and capturable."""
    stiff = dataclasses.replace(SPEC, id="stiff", fusable=False, capturable=False)
    monkeypatch.setitem(METHOD_SPECS, "stiff", stiff)
    config = {
        "datasets": {"digits": {"classes": ["0"]}},
        "methods": ["stiff"],
        "seeds": [0],
        "detectors": {"kde": {}},
    }
    schema = REPO / "workflow/schemas/config.schema.yaml"
    with pytest.raises(
        ConfigError, match="'train.fuse': 2 but stiff \\(stiff\\) cannot train fused"
    ):
        validate_config({**config, "train": {"fuse": 2}}, schema)
    with pytest.raises(ConfigError, match="'train.step_mode': graph but the step of stiff"):
        validate_config({**config, "train": {"step_mode": "graph"}}, schema)
    settings = TrainSettings("stiff", epochs=1, batch_size=8, width=4, head_depth=1)
    with pytest.raises(ValueError, match="stiff cannot train fused"):
        train_representations_fused(settings, [digits64[:8], digits64[8:16]], seeds=[0, 1])
    with pytest.raises(ValueError, match="the step of stiff cannot be captured"):
        prepare_run(settings, digits64[:8], seed=0, execution=Execution(step_mode="graph"))
    run, _ = prepare_run(settings, digits64[:8], seed=0)  # auto: eager, never captured
    assert run.step_mode == "eager"
