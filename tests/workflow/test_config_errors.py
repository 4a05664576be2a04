"""A bad config stops the workflow before any job, naming the key and the allowed values.

One case (CelebA's ``eyeglasses`` as an inlier) runs end to end through ``snakemake -n``: the
"Invalid config" message, a non-zero exit, no output written, in under 5 s of CPU time (not
wall time: under `make test` another pytest worker shares the two cores). The other
config-error cases are the same parse-time checks, tested in-process in tests/test_config.py
(``test_invalid_tiny_config_stops_the_workflow_naming_the_key``).
"""

from __future__ import annotations

import re
import resource
import time
from pathlib import Path

import pytest
import yaml

from tests.workflow.conftest import REPO, run_snakemake, start_snakemake

pytestmark = pytest.mark.workflow

BASE = yaml.safe_load((REPO / "tests/configs/tiny.yaml").read_text())


def _added(workdir: Path, before: set[str]) -> set[str]:
    """What a run added to its working directory (outputs lie directly in it), Snakemake's
    own ``.snakemake/`` left out."""
    return {path.name for path in workdir.iterdir()} - before - {".snakemake"}


def _dry_run_with(tmp_path: Path, **changes: object) -> str:
    config = {**BASE, **changes}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    before = {entry.name for entry in tmp_path.iterdir()}
    result = run_snakemake(tmp_path, "-n", "--configfile", str(path), check=False)
    assert result.returncode != 0
    assert not _added(tmp_path, before)
    return result.stdout + result.stderr


def test_celeba_all_plans_only_the_inlier_class(tmp_path: Path) -> None:
    """`classes: all` on CelebA means its one possible inlier class (data set registry)."""
    config = {**BASE, "datasets": {"celeba": {"classes": "all"}}, "splits": {}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = run_snakemake(tmp_path, "-n", "--configfile", str(path))
    planned = result.stdout + result.stderr
    assert "celeba/no_eyeglasses/" in planned
    assert "celeba/eyeglasses/" not in planned


def test_celeba_eyeglasses_inlier_fails_at_validation_within_5_s(tmp_path: Path) -> None:
    """The error comes from the config validation, not from prepare_split after the
    embedding: no job runs, the class is named with the reason, in under 5 s."""
    start, cpu_start = time.monotonic(), _children_cpu_seconds()
    message = _dry_run_with(tmp_path, datasets={"celeba": {"classes": ["eyeglasses"]}})
    elapsed, cpu = time.monotonic() - start, _children_cpu_seconds() - cpu_start
    assert "Invalid config: config key 'datasets.celeba.classes'" in message
    assert "class 'eyeglasses' cannot be an inlier" in message
    assert "no training images" in message and "no_eyeglasses" in message
    assert cpu < 5.0, f"validation took {cpu:.1f} CPU seconds ({elapsed:.1f} s wall)"
    assert elapsed < 30.0, f"validation took {elapsed:.1f} s wall"


def _children_cpu_seconds() -> float:
    """User + system seconds of this process's finished children (the snakemake run)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: The data-error runs below fail at the data set job; the tracking store they would create
#: first (an MLflow import and its schema migrations) has no part in what they check.
UNTRACKED = {**BASE, "tracking": {**BASE["tracking"], "enabled": False}}


def _cifar_config(tmp_path: Path, base: dict = BASE) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({**base, "datasets": {"cifar10": {"classes": ["cat"]}}}))
    return path


def test_missing_data_root_warns_in_a_dry_run_and_stops_a_real_run_before_any_job(
    tmp_path: Path,
) -> None:
    config, root = _cifar_config(tmp_path), tmp_path / "no_data"
    env = {"DROC_DATA_ROOT": str(root)}
    expected = f"none of {root}/cifar-10-batches-py/ found (the data root {root}/ does not exist)"

    planned = run_snakemake(tmp_path, "-n", "--configfile", str(config), env=env)
    assert "Warning: data not found" in planned.stderr and expected in planned.stderr
    assert "data_batch_1..5, test_batch and batches.meta" in planned.stderr
    assert "prepare_dataset" in planned.stdout  # the plan is made all the same
    # Said again after the job list, which would have scrolled it away: in the one stream a
    # terminal shows, the last lines.
    process = start_snakemake(tmp_path, "-n", "--configfile", str(config), env=env)
    shown, _ = process.communicate(timeout=600)
    assert process.returncode == 0
    last = shown.rsplit("This was a dry-run (flag -n).", 1)[1]
    assert "Warning: data not found" in last and expected in last

    before = {entry.name for entry in tmp_path.iterdir()}
    ran = run_snakemake(tmp_path, "--cores", "1", "--configfile", str(config), check=False, env=env)
    output = ran.stdout + ran.stderr
    assert ran.returncode != 0
    assert "data not found, nothing was run" in output and expected in output
    assert "data.download: true" in output
    assert not _added(tmp_path, before)  # no job started, not even its log folder
    # Not on a cluster: no SQLite warning.
    assert "SQLite" not in output

    # A data set read into its cache still needs its files while its provenance (which
    # hashes them) is unrecorded; once both exist, it needs them no more.
    (tmp_path / "cifar10").mkdir(parents=True)
    (tmp_path / "cifar10/dataset.npz").write_bytes(b"")
    planned = run_snakemake(tmp_path, "-n", "--configfile", str(config), env=env)
    assert "data not found" in planned.stderr
    (tmp_path / "cifar10/data_provenance.json").write_text("{}")
    planned = run_snakemake(tmp_path, "-n", "--configfile", str(config), env=env)
    assert "data not found" not in planned.stderr


def test_sqlite_tracking_on_a_cluster_executor_warns_at_start(tmp_path: Path) -> None:
    """The SLURM executor's run reaches the start hook before it submits anything; the
    missing data then stops it, so no cluster is needed."""
    config = _cifar_config(tmp_path)
    ran = run_snakemake(
        tmp_path,
        *("--executor", "slurm", "--jobs", "1", "--default-resources", "slurm_partition=none"),
        *("--configfile", str(config)),
        check=False,
        env={"DROC_DATA_ROOT": str(tmp_path / "no_data")},
    )
    output = ran.stdout + ran.stderr
    assert ran.returncode != 0 and "data not found, nothing was run" in output
    store = (tmp_path / "mlflow/mlflow.db").as_posix()
    assert f"Warning: MLflow tracking writes the SQLite file sqlite:///{store}" in output
    assert "MLFLOW_TRACKING_URI" in output and "Submitted job" not in output


def test_data_folder_without_its_files_is_named_by_the_job(tmp_path: Path) -> None:
    # The folder the reader starts from exists: the plan runs, the reader names the files.
    config, root = _cifar_config(tmp_path, UNTRACKED), tmp_path / "partial"
    (root / "cifar-10-batches-py").mkdir(parents=True)
    result = run_snakemake(
        tmp_path,
        "--cores",
        "1",
        "--configfile",
        str(config),
        check=False,
        env={"DROC_DATA_ROOT": str(root)},
    )
    assert result.returncode != 0
    log = (tmp_path / "logs/prepare_dataset/cifar10.log").read_text()
    assert str(root / "cifar-10-batches-py") in log
    assert "missing: data_batch_1" in log and "download" in log
    assert not (tmp_path / "cifar10/dataset.npz").exists()


def test_truncated_data_file_is_named_and_leaves_no_output(tmp_path: Path) -> None:
    folder = tmp_path / "images"
    for name in ("good", "bad"):
        (folder / name).mkdir(parents=True)
    from PIL import Image

    for index in range(4):
        Image.new("RGB", (8, 8), (index * 40, 0, 0)).save(folder / "good" / f"{index}.png")
        Image.new("RGB", (8, 8), (0, index * 40, 0)).save(folder / "bad" / f"{index}.png")
    broken = folder / "bad" / "2.png"
    broken.write_bytes(broken.read_bytes()[:20])
    config = {
        **UNTRACKED,
        "datasets": {"image_folder": {"classes": ["good"], "options": {"path": str(folder)}}},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = run_snakemake(tmp_path, "--cores", "1", "--configfile", str(path), check=False)
    assert result.returncode != 0
    log = (tmp_path / "logs/prepare_dataset/image_folder.log").read_text()
    assert str(broken) in log
    assert not (tmp_path / "image_folder/dataset.npz").exists()


def test_mvtec_deploy_of_a_missing_category_stops_the_workflow(tmp_path: Path) -> None:
    """With ``mvtec.categories: all`` only the workflow knows the categories: it names the key.

    The same config with a category that exists plans the deploy job; its only method is a
    rotation one, so this also checks that score_patches and its rotation twin stay apart.
    """
    from tests.mvtec.conftest import write_category

    write_category(tmp_path / "mvtec", "widget", size=32, n_train=2, n_good=1)
    config = {
        "methods": ["rotnet"],
        "seeds": [0],
        "mvtec": {"root": str(tmp_path / "mvtec"), "categories": "all"},
        "deploy": {
            "dataset": "mvtec",
            "inlier": "gadget",
            "method": "rotnet",
            "detector": "kde",
            "registered_name": "droc-gadget",
        },
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = run_snakemake(tmp_path, "-n", "--configfile", str(path), check=False)
    assert result.returncode != 0
    assert "deploy.inlier 'gadget' is not in the sweep (widget)" in result.stdout + result.stderr
    config["deploy"]["inlier"] = "widget"
    path.write_text(yaml.safe_dump(config))
    planned = run_snakemake(tmp_path, "-n", "--configfile", str(path)).stdout
    assert re.search(r"^deploy_model\s+1$", planned, flags=re.MULTILINE)
    assert re.search(r"^score_patches_and_rotation_classifier\s+1$", planned, flags=re.MULTILINE)
