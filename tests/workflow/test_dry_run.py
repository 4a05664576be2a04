"""Every shipped config plans the jobs it promises (`snakemake -n`, no data needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from pipeline_lib.data import dataset_class_names
from pipeline_lib.representations import TRAINED_METHODS
from tests.workflow.conftest import REPO, run_snakemake

pytestmark = pytest.mark.workflow

SHIPPED = sorted((REPO / "config").glob("*.yaml")) + [REPO / "tests/configs/tiny.yaml"]


def planned_jobs(workdir: Path, config: Path) -> dict[str, int]:
    result = run_snakemake(workdir, "-n", "--configfile", str(config))
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, flags=re.MULTILINE))
    return {rule: int(count) for rule, count in counts.items()}


def n_classes(config: dict) -> int:
    return sum(
        len(dataset_class_names(name))
        if settings.get("classes", "all") == "all"
        else len(settings["classes"])
        for name, settings in config["datasets"].items()
    )


def expected_detection_jobs(config: dict) -> int:
    splits = config.get("splits", {})
    return (
        n_classes(config)
        * len(splits.get("contamination", [0.0]))
        * len(config["seeds"])
        * len(config["methods"])
        * (1 + len(splits.get("clean_inliers", [])))
    )


def expected_training_jobs(config: dict) -> int:
    trained = [method for method in config["methods"] if method in TRAINED_METHODS]
    contaminations = config.get("splits", {}).get("contamination", [0.0])
    return n_classes(config) * len(contaminations) * len(config["seeds"]) * len(trained)


@pytest.mark.parametrize("config_path", SHIPPED, ids=lambda path: path.name)
def test_dry_run_plans_every_detection_job(tmp_path: Path, config_path: Path) -> None:
    config = yaml.safe_load(config_path.read_text())
    jobs = planned_jobs(tmp_path, config_path)
    assert jobs["score_detectors"] == expected_detection_jobs(config)
    assert jobs.get("train_representation", 0) == expected_training_jobs(config)
    assert jobs["prepare_dataset"] == len(config["datasets"])
    assert jobs["collect_results"] == 1 and jobs["make_tables"] == 1


def test_paper_config_plans_the_main_table(tmp_path: Path) -> None:
    # 43 inlier classes (10 + 20 + 10 + 2 + 1) x 5 seeds x 5 trained representations.
    jobs = planned_jobs(tmp_path, REPO / "config/paper.yaml")
    assert jobs["train_representation"] == 43 * 5 * 5
    assert jobs["score_rotation_classifier"] == 43 * 5 * 2
