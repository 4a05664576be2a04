"""Experiment folders (``pipeline_lib.config.experiment``): names, rebased paths, the record.

Two configs run end to end in one folder: tests/workflow/test_experiments.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline_lib.config.experiment import (
    CONFIG_RECORD,
    DEFAULT_EXPERIMENT,
    RUN_FOLDER_ENV,
    anchor_paths,
    claim_folder,
    default_experiment,
    experiment_folder,
    run_folder,
)
from pipeline_lib.config.validate import ConfigError, validate_config

SCHEMA = Path(__file__).resolve().parents[1] / "workflow/schemas/config.schema.yaml"


def test_a_config_without_a_name_is_named_after_its_file() -> None:
    assert default_experiment([Path("config/my_data.yaml")]) == "my_data"
    # Of several files, the last (it overrides the others).
    assert default_experiment(["base.yaml", "cifar10 run (2).yml"]) == "cifar10-run-2"
    assert default_experiment([]) == DEFAULT_EXPERIMENT
    assert default_experiment(["...yaml"]) == DEFAULT_EXPERIMENT
    assert experiment_folder("my_data") == Path("results/my_data")


@pytest.mark.parametrize("name", [".", "..", "-x", "a/b", ""])
def test_an_experiment_name_cannot_leave_its_folder(name: str) -> None:
    config = {
        "experiment": name,
        "datasets": {"digits": {"classes": ["0"]}},
        "methods": ["raw"],
        "seeds": [0],
        "detectors": {"knn": {}},
    }
    with pytest.raises(ConfigError, match="config key 'experiment'"):
        validate_config(config, SCHEMA)


def test_relative_paths_are_rebased_onto_the_experiment_folder() -> None:
    folder = Path("results/mine")
    config = {
        "data": {"root": "data", "download": False},
        "embed": {"imagenet_weights": "weights/resnet50.pth", "width": 64},
        "datasets": {
            "image_folder": {"classes": "all", "options": {"path": "my_images"}},
            "digits": {"classes": ["0"]},
        },
        "studies": [
            {"datasets": {"image_folder": {"options": {"path": "/abs/images"}}}},
            {"datasets": {"image_folder": {"options": {"path": "other"}}}},
        ],
        "mvtec": {"root": None, "paths": {"part": "parts/part", "bolt": "/data/bolt"}},
    }
    anchored = anchor_paths(config, folder)
    up = os.path.join("..", "..")
    assert anchored["data"] == {"root": f"{up}/data", "download": False}
    assert anchored["embed"] == {"imagenet_weights": f"{up}/weights/resnet50.pth", "width": 64}
    assert anchored["datasets"]["image_folder"]["options"] == {"path": f"{up}/my_images"}
    assert anchored["datasets"]["digits"] == {"classes": ["0"]}
    assert anchored["studies"][0]["datasets"]["image_folder"]["options"]["path"] == "/abs/images"
    assert anchored["studies"][1]["datasets"]["image_folder"]["options"]["path"] == f"{up}/other"
    assert anchored["mvtec"]["root"] is None  # null: the data root's mvtec_ad
    assert anchored["mvtec"]["paths"] == {"part": f"{up}/parts/part", "bolt": "/data/bolt"}
    # Each resolves, from the folder, to the path the user meant from where they started.
    for path in ("data", "my_images", "parts/part"):
        assert os.path.normpath(folder / f"{up}/{path}") == path
    assert config["data"]["root"] == "data"  # the input is left as it was


def test_the_folder_records_its_config_files_and_refuses_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = experiment_folder("mine")
    claim_folder(folder, "mine", [tmp_path / "configs/mine.yaml"])
    # Relative to where Snakemake starts: a checkout moved as a whole keeps its record.
    assert (folder / CONFIG_RECORD).read_text() == "configs/mine.yaml\n"
    claim_folder(folder, "mine", [Path("configs/mine.yaml")])  # the same file: its folder
    with pytest.raises(ConfigError) as refused:
        claim_folder(folder, "mine", [tmp_path / "configs/copy.yaml"])
    message = str(refused.value)
    assert message.startswith(
        "config key 'experiment': results/mine/ holds the runs of configs/mine.yaml, and "
        "this run of configs/copy.yaml has the same experiment name 'mine'."
    )
    assert "--config experiment=NAME" in message and f"delete {folder / CONFIG_RECORD}" in message
    # Deleting the record hands the folder over.
    (folder / CONFIG_RECORD).unlink()
    claim_folder(folder, "mine", [Path("configs/copy.yaml")])
    assert (folder / CONFIG_RECORD).read_text() == "configs/copy.yaml\n"


def test_a_job_step_works_where_its_run_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job's own Snakemake process (a SLURM job step) starts where the run started and is
    not told about --directory: it moves as the run did, or stays where the run stayed."""
    monkeypatch.chdir(tmp_path)
    here = tmp_path.resolve()

    def folder(*, given: bool, main: bool, environ: dict[str, str]) -> Path | None:
        return run_folder("mine", directory_given=given, main_process=main, environ=environ)

    # Run without --directory: into results/mine/, and so does its job step.
    environ: dict[str, str] = {}
    assert folder(given=False, main=True, environ=environ) == Path("results/mine")
    assert environ == {RUN_FOLDER_ENV: str(here / "results/mine")}
    assert folder(given=False, main=False, environ=environ) == Path("results/mine")
    # Run given --directory: it works there, and so does its job step, started there.
    environ = {}
    assert folder(given=True, main=True, environ=environ) is None
    assert environ == {RUN_FOLDER_ENV: str(here)}
    assert folder(given=False, main=False, environ=environ) is None
    # A job step that inherits no record moves as a run does.
    assert folder(given=False, main=False, environ={}) == Path("results/mine")
