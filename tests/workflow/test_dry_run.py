"""Every shipped config plans the jobs it promises (`snakemake -n`, no data needed).

The plans are Snakemake's own DAGs, built in this process through its API
(:func:`pipeline_lib.planning.jobs.snakemake_jobs`, the job stats a dry run prints): one
import of Snakemake for every config, and no printing of thousands of job blocks. The
command line itself plans in tests/workflow/test_profiles.py and every workflow run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipeline_lib.data import dataset_class_names
from pipeline_lib.planning.jobs import snakemake_jobs
from pipeline_lib.planning.planner import plan_config
from pipeline_lib.registry import TRAINED_METHODS
from tests.workflow.conftest import REPO

pytestmark = pytest.mark.workflow

# Configs of the image benchmarks (MVTec-only configs have their own checks in tests/mvtec).
SHIPPED = [
    path
    for path in sorted((REPO / "config").glob("**/*.yaml"))
    + [REPO / "tests/configs/tiny.yaml", REPO / "tests/configs/studies_toy.yaml"]
    if "datasets" in yaml.safe_load(path.read_text())
]


def planned_jobs(workdir: Path, config: Path) -> dict[str, int]:
    """Jobs per rule of ``config``'s DAG in the empty ``workdir``: what `snakemake -n` plans."""
    _, stats = snakemake_jobs([config], workdir=workdir)
    return stats


def grids(config: dict) -> list[dict]:
    """The config's own grid and each included study's (files or inline mappings)."""
    included = [
        yaml.safe_load((REPO / entry).read_text()) if isinstance(entry, str) else entry
        for entry in config.get("studies", [])
    ]
    return [config, *included]


def classes(name: str, settings: dict) -> list[str]:
    requested = (settings or {}).get("classes", "all")
    return list(dataset_class_names(name)) if requested == "all" else requested


def variant_bases(grid: dict) -> dict[str, str]:
    return {name: spec["method"] for name, spec in (grid.get("variants") or {}).items()}


def expected_jobs(config: dict) -> tuple[int, int]:
    """(score_detectors, train_representation) jobs: distinct over all grids, as the DAG
    computes a result two studies share once."""
    detection, training = set(), set()
    for grid in grids(config):
        splits = grid.get("splits", {})
        bases = variant_bases(grid)
        fitsets = ["train"] + [f"clean{n}" for n in splits.get("clean_inliers", [])]
        for name, settings in grid["datasets"].items():
            for inlier in classes(name, settings):
                for contamination in splits.get("contamination", [0.0]):
                    for seed in grid["seeds"]:
                        for method in grid["methods"]:
                            split = (name, inlier, float(contamination), seed, method)
                            detection.update((*split, fitset) for fitset in fitsets)
                            if bases.get(method, method) in TRAINED_METHODS:
                                training.add(split)
    return len(detection), len(training)


def one_seed(tmp_path: Path, config_path: Path) -> tuple[Path, dict]:
    """The config with its first seed only: the same grid shape, 5x fewer jobs to plan."""
    config = yaml.safe_load(config_path.read_text())
    config["seeds"] = config["seeds"][:1]
    path = tmp_path / config_path.name
    path.write_text(yaml.safe_dump(config))
    return path, config


# Every study file plans inside config/paper.yaml's run below; two also plan alone (the
# standalone path: a top-level `study` block).
STANDALONE = [REPO / "config/studies/uniformity.yaml", REPO / "config/studies/rotated.yaml"]


@pytest.mark.parametrize(
    "config_path",
    [
        path
        for path in SHIPPED
        if path != REPO / "config/paper.yaml"
        and (path.parent != REPO / "config/studies" or path in STANDALONE)
    ],
    ids=lambda path: path.relative_to(REPO).as_posix(),
)
def test_dry_run_plans_every_detection_job(tmp_path: Path, config_path: Path) -> None:
    path, config = one_seed(tmp_path, config_path)
    jobs = planned_jobs(tmp_path, path)
    detection, training = expected_jobs(config)
    assert jobs["score_detectors"] == detection
    assert jobs.get("train_representation", 0) == training
    datasets = {name for grid in grids(config) for name in grid["datasets"]}
    assert jobs["prepare_dataset"] == jobs["record_data_provenance"] == len(datasets)
    assert jobs["collect_results"] == 1 and jobs["make_tables"] == 1
    # One table-and-figures job per grid: the main grid's reuses the main table
    # (make_main_study), every other study has its own make_study.
    assert jobs["make_main_study"] == 1
    assert jobs.get("make_study", 0) == len(config.get("studies", [])) + (
        1 if config.get("study", {}).get("kind", "main") != "main" else 0
    )
    assert jobs["make_summary"] == 1


@pytest.mark.parametrize(
    "config_path", sorted((REPO / "config/studies").glob("*.yaml")), ids=lambda p: p.stem
)
def test_study_configs_are_at_the_papers_scale(config_path: Path) -> None:
    config = yaml.safe_load(config_path.read_text())
    assert config["seeds"] == [0, 1, 2, 3, 4]
    assert all(
        settings.get("classes", "all") == "all" or name == "celeba"
        for name, settings in config["datasets"].items()
    )
    assert "train" not in config and "embed" not in config  # the paper's training settings


def test_paper_config_plans_the_main_table_and_every_study(tmp_path: Path) -> None:
    """`snakemake -n --configfile config/paper.yaml` (README, docs/studies.md) plans the main
    table and the ten studies in one DAG, shared results once. Planned here with one seed
    everywhere (every job names its seed, so the full plan is exactly 5x the per-seed jobs),
    about 4,700 jobs, by the cost planner: its per-rule job counts are the DAG's own."""
    config = yaml.safe_load((REPO / "config/paper.yaml").read_text())
    assert len(config["studies"]) == 10
    full_detection, full_training = expected_jobs(config)
    # The documented full-size numbers (docs/studies.md), from the configs themselves.
    assert (full_detection, full_training) == (8940, 5125)
    config["seeds"] = [0]
    studies = []
    for entry in config["studies"]:
        study_path, _ = one_seed(tmp_path, REPO / entry)
        studies.append(str(study_path))
    config["studies"] = studies
    path = tmp_path / "paper_one_seed.yaml"
    path.write_text(yaml.safe_dump(config))
    plan = plan_config(path, device="cuda", measure=False)
    jobs = plan.stats
    detection, training = expected_jobs(config)
    assert 5 * detection == full_detection and 5 * training == full_training
    assert jobs["score_detectors"] == detection
    assert jobs["train_representation"] == training
    assert jobs["make_study"] == 10 and jobs["make_main_study"] == 1
    assert "score_detectors_g" in jobs and jobs["all"] == 1
    # Uniformity: 2 methods x 7 batch sizes x 10 classes, MMD once per model.
    assert jobs["measure_uniformity"] == 2 * 7 * 10
    # The planner costs every job of the DAG, under the rule Snakemake counts it in; the
    # main table's grid trains each of its 5 methods on 43 inlier classes (10 + 20 + 10 +
    # 2 + 1) per seed, as tests/workflow/test_profiles.py counts them at the command line.
    assert {rule: cost.jobs for rule, cost in plan.costs.items()} == jobs
    by_method = plan.costs["train_representation"].by_method
    for method in ("rotnet", "rotation", "denoising", "contrastive", "contrastive_da"):
        assert by_method[method].jobs >= 43
