"""Two configs run in one folder keep their results apart (pipeline_lib.config.experiment).

Snakemake is started in one folder, as a user starts it in a checkout, without
``--directory``: each config runs in ``results/<experiment>/``, with its own results,
summary, logs, benchmark timings and ``.snakemake/`` directly in it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from PIL import Image

from pipeline_lib.config.experiment import CONFIG_RECORD
from tests.workflow.conftest import ONE_THREAD_PER_JOB, run_snakemake_in

pytestmark = pytest.mark.workflow

#: The smallest sweep: one representation, one seed, one detector, no MLflow.
SMALL = {
    "methods": ["raw"],
    "seeds": [0],
    "detectors": {"knn": {}},
    "tracking": {"enabled": False},
}


def _image_folder(folder: Path) -> None:
    """Two classes of 10 tiny PNGs each (flat layout: 70/30 train/test per class)."""
    rng = np.random.default_rng(0)
    for name, level in (("dark", 40), ("light", 200)):
        (folder / name).mkdir(parents=True)
        for index in range(10):
            pixels = np.clip(level + rng.normal(0, 20, (12, 12, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(folder / name / f"{index}.png")


def _summary(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / "summary/results.csv", dtype=str)


def test_two_configs_in_one_folder_keep_their_results_apart(tmp_path: Path) -> None:
    # Config files without an `experiment` key: each is named after its file. The image
    # folder's path is relative to where Snakemake starts, as a user writes it.
    _image_folder(tmp_path / "my_images")
    digits = tmp_path / "configs/digits_zero.yaml"
    digits.parent.mkdir()
    digits.write_text(
        yaml.safe_dump(
            {
                **SMALL,
                "datasets": {
                    "digits": {
                        "classes": ["0"],
                        "max_train_per_class": 30,
                        "max_test_per_class": 20,
                    }
                },
            }
        )
    )
    mine = tmp_path / "configs/my_folder.yaml"
    options = {"path": "my_images", "image_size": 8}
    mine.write_text(
        yaml.safe_dump(
            {**SMALL, "datasets": {"image_folder": {"classes": "all", "options": options}}}
        )
    )

    # The first declares a GPU its jobs never get (every rule declares gpu=0): it warns.
    first = run_snakemake_in(
        tmp_path,
        *("--cores", "2", *ONE_THREAD_PER_JOB, "--resources", "gpu=1"),
        *("--configfile", str(digits)),
    )
    assert (
        "Warning: --resources gpu=1 declares 1 GPU, but none of its training or embedding jobs "
        "asks for one: they all run on the CPU" in first.stderr
    )
    assert "--set-resources embed_frozen_dataset:gpu=1" in first.stderr
    run_snakemake_in(tmp_path, "--cores", "2", *ONE_THREAD_PER_JOB, "--configfile", str(mine))

    zero, folder = tmp_path / "results/digits_zero", tmp_path / "results/my_folder"
    # results/ holds the two experiments' folders and nothing else; nothing else was written
    # where Snakemake started (no second output folder, no Snakemake records).
    assert {path.name for path in (tmp_path / "results").iterdir()} == {"digits_zero", "my_folder"}
    started = {path.name for path in tmp_path.iterdir()} - {".snakemake"}
    assert started == {"configs", "my_images", "results"}
    assert not (tmp_path / ".snakemake/metadata").exists()
    for experiment in (zero, folder):
        assert (experiment / "summary/index.html").is_file()
        assert not (experiment / "results").exists()
    digits_rows, folder_rows = _summary(zero), _summary(folder)
    assert set(digits_rows["dataset"]) == {"digits"} and set(digits_rows["inlier"]) == {"0"}
    assert set(folder_rows["dataset"]) == {"image_folder"}
    assert set(folder_rows["inlier"]) == {"dark", "light"}
    # Logs, timings and Snakemake's records: each experiment's own.
    for experiment, dataset in ((zero, "digits"), (folder, "image_folder")):
        logged = {path.name for path in (experiment / "logs/prepare_dataset").iterdir()}
        timed = {p.name for p in (experiment / "benchmarks/prepare_dataset").iterdir()}
        assert logged == {f"{dataset}.log"} and timed == {f"{dataset}.tsv"}
        assert (experiment / ".snakemake/metadata").is_dir()
    assert (zero / CONFIG_RECORD).read_text() == "configs/digits_zero.yaml\n"

    # The second run left the first one's outputs as they were: nothing to redo.
    again = run_snakemake_in(tmp_path, "-n", "--configfile", str(digits))
    assert "Nothing to be done" in again.stdout + again.stderr

    # A copy that keeps the first config's experiment name is refused before any job.
    copy = tmp_path / "configs/copy.yaml"
    copy.write_text(
        yaml.safe_dump({**yaml.safe_load(digits.read_text()), "experiment": "digits_zero"})
    )
    refused = run_snakemake_in(tmp_path, "-n", "--configfile", str(copy), check=False)
    assert refused.returncode != 0
    assert (
        "Invalid config: config key 'experiment': results/digits_zero/ holds the runs of "
        "configs/digits_zero.yaml, and this run of configs/copy.yaml has the same experiment "
        "name 'digits_zero'" in refused.stderr
    )
