"""TrainSettings: checked once, torch-free, and the same recipe as train_representation's."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys

import pytest

from pipeline_lib.registry import method_training, training_arguments
from pipeline_lib.ssl.settings import TrainSettings
from pipeline_lib.ssl.train import RECIPE_KEYWORDS, train_representation


def test_settings_import_without_torch() -> None:
    code = (
        "import sys; from pipeline_lib.ssl.settings import TrainSettings; "
        "TrainSettings(method='rotation', epochs=1, batch_size=2); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_defaults_match_train_representation() -> None:
    """One recipe: the keyword defaults of the trainer are the settings' defaults."""
    parameters = inspect.signature(train_representation).parameters
    fields = {f.name: f.default for f in dataclasses.fields(TrainSettings)}
    assert set(RECIPE_KEYWORDS) == set(fields)
    for name, default in fields.items():
        if default is dataclasses.MISSING:
            continue
        assert parameters[name].default == default, name


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


def test_settings_or_keywords_not_both() -> None:
    settings = TrainSettings(method="rotnet", epochs=1, batch_size=4)
    images = None  # never reached: the check comes first
    with pytest.raises(ValueError, match="not both: \\['lr'\\]"):
        train_representation("rotnet", images, seed=0, lr=0.5, settings=settings)
    with pytest.raises(ValueError, match="differs from the settings' 'rotnet'"):
        train_representation("rotation", images, seed=0, settings=settings)
    with pytest.raises(TypeError, match="needs epochs and batch_size"):
        train_representation("rotnet", images, seed=0, epochs=1)


def test_settings_train_as_the_keywords_do(digits64) -> None:
    """The workflow passes settings; the same recipe as keywords gives the same weights."""
    import torch

    options = {"epochs": 1, "batch_size": 16, "width": 4, "lr": 0.05, "head_depth": 1}
    by_keywords, history = train_representation("rotation", digits64[:32], seed=2, **options)
    settings = TrainSettings(method="rotation", **options)
    by_settings, again = train_representation("rotation", digits64[:32], seed=2, settings=settings)
    for a, b in zip(
        by_keywords.state_dict().values(), by_settings.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)  # the same kernels on the same inputs, by construction
    assert history[0]["loss"] == again[0]["loss"]
