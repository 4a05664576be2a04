"""TrainSettings and Execution: checked once, torch-free, the one way every trainer takes a
recipe and how it runs."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys

import pytest

from pipeline_lib.mvtec.patches import random_patches, train_on_patches
from pipeline_lib.registry import method_training, training_arguments
from pipeline_lib.ssl.fused import train_representations_fused
from pipeline_lib.ssl.settings import Execution, TrainSettings
from pipeline_lib.ssl.train import train_representation


def test_settings_import_without_torch() -> None:
    code = (
        "import sys; from pipeline_lib.ssl.settings import TrainSettings; "
        "TrainSettings(method='rotation', epochs=1, batch_size=2); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("trainer", [train_representation, train_representations_fused])
def test_the_trainers_take_the_recipe_as_one_value(trainer) -> None:
    """No recipe setting is a keyword of a trainer: it arrives in the settings, one way."""
    parameters = list(inspect.signature(trainer).parameters)
    assert parameters[0] == "settings" and "execution" in parameters
    fields = {f.name for f in dataclasses.fields(TrainSettings)}
    assert not fields & set(parameters[1:])


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"method": "simclr"}, "unknown trained representation 'simclr'"),
        ({"epochs": 0}, "epochs must be >= 1, got 0"),
        ({"log_every": 0}, "checkpoint_every and log_every must be >= 1"),
        ({"momentum": 1.0}, "0 <= momentum < 1"),
        ({"momentum_form": "keras"}, "unknown momentum_form 'keras'; allowed: released, torch"),
        ({"stem_width": 0}, "stem_width must be >= 1 or None, got 0"),
        ({"amp": "int8"}, "amp must be one of bfloat16, float16 or None"),
        ({"loss_form": "paper"}, "was renamed 'same_view'"),
        ({"temperature": 0.0}, "temperature must be > 0"),
        ({"view_flip": "sometimes"}, "unknown view_flip 'sometimes'"),
        ({"distributions": ("rot90+shear",)}, "unknown distribution transform 'rot90\\+shear'"),
        ({"distributions": ()}, "contrastive_da needs at least one distribution"),
    ],
)
def test_bad_settings_name_the_setting(changes, message) -> None:
    arguments = {"method": "contrastive_da", "epochs": 1, "batch_size": 4, **changes}
    with pytest.raises(ValueError, match=message):
        TrainSettings(**arguments)


def test_distributions_are_the_set_in_use() -> None:
    da = TrainSettings(method="contrastive_da", epochs=1, batch_size=4, distributions=["hflip"])
    assert da.distributions == ("hflip",) and da.expands
    plain = TrainSettings(method="contrastive", epochs=1, batch_size=4)
    assert plain.distributions == () and not plain.expands


def test_method_facts() -> None:
    rotnet = TrainSettings(method="rotnet", epochs=1, batch_size=4)
    rotation = TrainSettings(method="rotation", epochs=1, batch_size=4)
    assert (rotnet.has_head, rotnet.default_head_depth) == (False, 0)
    assert (rotation.has_head, rotation.default_head_depth) == (True, 8)


def test_from_config_keeps_what_the_method_reads() -> None:
    training = method_training(
        "rotation", {"epochs": 3, "lr": 0.05, "temperature": 0.5, "head_depth": 2}
    )
    settings = TrainSettings.from_config("rotation", training, width=8)
    arguments = training_arguments("rotation", training)
    assert "temperature" not in arguments  # the registry drops what rotation does not read
    assert (settings.epochs, settings.lr, settings.head_depth, settings.width) == (3, 0.05, 2, 8)
    assert settings.batch_size == arguments["batch_size"] == 64
    assert settings.temperature == TrainSettings.temperature  # the default, not 0.5


def test_an_execution_is_checked_and_read_from_a_train_section() -> None:
    with pytest.raises(ValueError, match="unknown step_mode 'jit'; allowed: auto, eager"):
        Execution(step_mode="jit")
    with pytest.raises(ValueError, match="unknown draws 'gpu'; allowed: host, device"):
        Execution(draws="gpu")
    assert Execution.from_config({"epochs": 3}) == Execution()
    read = Execution.from_config({"step_mode": "eager", "draws": "device", "lr": 1}, device="cuda")
    assert read == Execution(device="cuda", step_mode="eager", draws="device")


def test_single_fused_and_patch_training_take_the_same_settings(digits64) -> None:
    """One settings value trains alike through the single trainer, a fused job of one model
    (the separate trainer's own epoch) and the MVTec patch trainer (the single trainer on
    its patches): the same kernels on the same inputs, so the same weights bit for bit."""
    import torch

    settings = TrainSettings(
        method="rotation", epochs=1, batch_size=16, width=4, lr=0.05, head_depth=1
    )
    images = digits64[:32]
    single, history = train_representation(settings, images, seed=2)
    ((fused, fused_history),) = train_representations_fused(settings, [images], seeds=[2])
    source = digits64[:8]
    patches = random_patches(source, per_image=4, patch_size=16, seed=2)
    on_patches, _ = train_on_patches(settings, source, per_image=4, patch_size=16, seed=2)
    directly, _ = train_representation(settings, patches, seed=2, execution=Execution())
    for a, b, c, d in zip(
        single.state_dict().values(),
        fused.state_dict().values(),
        on_patches.state_dict().values(),
        directly.state_dict().values(),
        strict=True,
    ):
        assert torch.equal(a, b) and torch.equal(c, d)
    assert history[0]["loss"] == fused_history[0]["loss"]
