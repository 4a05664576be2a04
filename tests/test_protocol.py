"""The protocol line: how a run differs from the paper's, computed from its config."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from pipeline_lib.config.grids import study_grids
from pipeline_lib.config.validate import validate_config
from pipeline_lib.paper.protocol import (
    PAPER_PROTOCOL,
    mvtec_protocol_notes,
    protocol_breaks,
    protocol_differences,
    protocol_notes,
    table_notes,
    training_notes,
    training_setting,
)

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def _config(path: str) -> dict:
    return validate_config(yaml.safe_load((ROOT / path).read_text()), SCHEMA)


def test_tiny_config_lists_each_difference_from_its_own_values() -> None:
    config = _config("tests/configs/tiny.yaml")
    digits = config["datasets"]["digits"]
    differences = protocol_differences(config)
    assert differences == [
        f"ResNet width {config['embed']['width']} (paper {PAPER_PROTOCOL['width']})",
        f"{len(config['seeds'])} seeds (paper {PAPER_PROTOCOL['seeds']})",
        f"digits: at most {digits['max_train_per_class']} training images per class and at "
        f"most {digits['max_test_per_class']} test images per class (paper: all)",
        f"digits: {len(digits['classes'])} of 10 classes ({', '.join(digits['classes'])}) "
        "(paper: all)",
        "contamination 0.1 (paper's main table: 0)",
    ]
    (line,) = protocol_notes(config)
    assert line.startswith("Protocol differs from the paper's: ResNet width")
    # raw and resnet18_random train nothing: no word about epochs
    assert "epochs" not in line


def test_epochs_training_settings_and_variants_are_named() -> None:
    config = _config("tests/configs/tiny.yaml")
    config = copy.deepcopy(config)
    config["methods"] = ["rotnet", "contrastive_h2"]
    config["variants"] = {"contrastive_h2": {"method": "contrastive", "train": {"head_depth": 2}}}
    config["train"] |= {"epochs": 20, "lr": 0.1}
    differences = protocol_differences(config)
    assert "20 training epochs (paper 2048)" in differences
    assert "training: lr 0.1 (paper 0.01)" in differences
    assert "non-paper variant contrastive_h2 (contrastive: head_depth=2)" in differences
    # a study's variants are its design, not a departure
    study = protocol_differences(config, main=False)
    assert not any(d.startswith("non-paper variant") for d in study)
    assert not any(d.startswith("contamination") for d in study)


def test_the_new_recipe_switches_are_named_off_their_recipe() -> None:
    config = copy.deepcopy(_config("tests/configs/tiny.yaml"))
    config["methods"] = ["rotnet", "contrastive_old"]
    config["variants"] = {
        "contrastive_old": {"method": "contrastive", "train": {"loss_form": "same_view"}}
    }
    config["train"] |= {"epoch_order": "permutation", "init": "torch", "momentum_form": "torch"}
    differences = protocol_differences(config)
    assert (
        "training: epoch_order permutation (paper released), init torch (paper released), "
        "momentum_form torch (paper released)"
    ) in differences
    assert "non-paper variant contrastive_old (contrastive: loss_form=same_view)" in differences
    config["train"] |= {"epoch_order": "released", "init": "released", "momentum_form": "released"}
    assert not any(d.startswith("training:") for d in protocol_differences(config))


@pytest.mark.parametrize(
    ("width", "stem", "expected"),
    [
        (16, None, "ResNet width 16 (paper 64)"),
        (16, 64, "ResNet width 16, trained stem 64 (paper 64)"),
        (64, 64, None),
        (64, 32, "trained ResNet stem 32 (paper 64)"),
    ],
)
def test_the_trained_stem_is_named_when_it_is_not_the_papers(width, stem, expected) -> None:
    config = copy.deepcopy(_config("tests/configs/tiny.yaml"))
    config["methods"] = ["rotnet"]
    config["embed"]["width"], config["train"]["stem_width"] = width, stem
    named = [d for d in protocol_differences(config) if "ResNet" in d]
    assert named == ([expected] if expected else [])


def test_paper_config_and_its_studies_follow_the_paper() -> None:
    config = _config("config/paper.yaml")
    # bf16 autocast is no difference the config can state: whether a job autocasts depends
    # on the device a profile gives it; the training line says what ran (training_notes).
    assert config["train"]["amp"] == "bfloat16"
    assert protocol_differences(config) == []
    for grid in study_grids(config, config["studies"]):
        assert protocol_notes(config, grid) == protocol_notes(config), grid.name
    assert protocol_notes(config)[0].startswith("Protocol: the paper's")


def _history(device: str, amp: str | None, **extra) -> dict:
    """A train_history.json as the training jobs write it, two epochs."""
    epochs = [{"epoch": k, "step_mode": extra.pop("step_mode", "eager")} for k in (1, 2)]
    if "autocast" in extra:
        epochs = [e | {"autocast": extra["autocast"]} for e in epochs]
    return {
        "method": "rotnet",
        "arguments": {"amp": amp},
        "history": epochs,
        "device": device,
        **({"device_name": extra["device_name"]} if "device_name" in extra else {}),
    }


def test_training_line_says_what_each_model_ran_on() -> None:
    cpu = _history("cpu", "bfloat16", device_name="AMD EPYC (2 threads)", autocast=None)
    h200 = _history("cuda", "bfloat16", device_name="NVIDIA H200", autocast="bfloat16")
    # amp is a config default; on the CPU nothing autocasts: float32, whatever amp says
    assert training_setting(cpu) == "float32 on the CPU"
    assert training_setting(h200) == "bf16 autocast on an H200"
    assert training_notes([cpu, cpu]) == ["Training: float32 on the CPU (2 models)."]
    assert training_notes([h200, cpu, h200]) == [
        "Training mixes settings: bf16 autocast on an H200 (2 models); float32 on the CPU "
        "(1 model)."
    ]
    assert training_notes([]) == []  # nothing trained: no line
    # records from before autocast was written: amp applies on CUDA only
    assert training_setting(_history("cuda", "float16")) == "fp16 autocast on CUDA"
    assert training_setting(_history("cpu", "bfloat16")) == "float32 on the CPU"
    graph = _history(
        "cuda", None, device_name="NVIDIA A100-SXM4-80GB", autocast=None, step_mode="graph"
    )
    assert training_setting(graph) == ("float32 on an A100-SXM4-80GB, graph-captured steps")
    t4 = _history("cuda", None, device_name="Tesla T4", autocast=None)
    assert training_setting(t4) == "float32 on a Tesla T4"


def test_protocol_and_data_lines_stand_only_beside_published_numbers() -> None:
    lines = {"protocol": ["Protocol differs"], "data": ["Data: x"], "training": ["Training: y"]}
    assert table_notes(**lines, published=True) == ["Protocol differs", "Data: x", "Training: y"]
    assert table_notes(**lines, published=False) == ["Training: y"]


def test_mvtec_notes_name_the_patch_protocol_and_subsets() -> None:
    raw = yaml.safe_load((ROOT / "config/mvtec_bottle_reduced.yaml").read_text())
    raw["mvtec"] |= {"image_size": 128, "max_train_images": 10}
    raw["mvtec"]["patches"] = {"size": 32, "stride": 8}
    config = validate_config(raw, SCHEMA)
    (line,) = mvtec_protocol_notes(config)
    assert line.startswith("Protocol differs from the paper's:")
    for fragment in (
        "image size 128 (paper 256)",
        "patch stride 8 (paper 4)",
        "at most 10 training images per category (paper: all)",
        f"ResNet width {config['embed']['width']} (paper 64)",
        f"{len(config['seeds'])} seed (paper 5)",
    ):
        assert fragment in line
    assert "patch size" not in line  # 32 is the paper's


@pytest.mark.parametrize(
    ("top", "own", "expected"),
    [
        (2, None, "2 training epochs (paper 2048)"),  # mvtec.train.epochs null: the top level's
        (2, 5, "5 training epochs (paper 2048)"),
        (2048, None, None),
    ],
)
def test_mvtec_notes_name_the_epochs_that_ran(top, own, expected) -> None:
    raw = yaml.safe_load((ROOT / "config/mvtec_bottle_reduced.yaml").read_text())
    raw["train"] = {**(raw.get("train") or {}), "epochs": top}
    raw["mvtec"]["train"] = {**(raw["mvtec"].get("train") or {}), "epochs": own}
    (line,) = mvtec_protocol_notes(validate_config(raw, SCHEMA)) or ("",)
    assert "None" not in line
    if expected:
        assert expected in line
    else:
        assert "training epochs" not in line


def test_breaks_leave_out_the_seed_count() -> None:
    tiny = _config("tests/configs/tiny.yaml")
    seeds = f"{len(tiny['seeds'])} seeds (paper {PAPER_PROTOCOL['seeds']})"
    assert protocol_breaks(tiny) == [d for d in protocol_differences(tiny) if d != seeds]
    assert protocol_breaks(tiny) and seeds in protocol_differences(tiny)
    paper = _config("config/paper.yaml")
    paper["seeds"] = [0]
    assert protocol_differences(paper) == ["1 seed (paper 5)"] and protocol_breaks(paper) == []
