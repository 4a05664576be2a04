"""The cluster profiles plan the paper's sweep (`snakemake -n --profile ...`, no cluster).

The executor plugins are optional extras (``.[slurm]``, ``.[kubernetes]``). Where one is not
installed, Snakemake rejects ``executor: slurm`` before planning, so the profile is planned
without the keys that only the plugin understands (``executor`` and its ``slurm-*`` or
``kubernetes-*`` and storage settings); every other key -- resources, groups, retries -- is
checked by Snakemake either way.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from pipeline_lib.config.gpus import GPU_RULES, gpu_warning
from pipeline_lib.planning.jobs import command_resources, snakemake_jobs
from tests.workflow.conftest import REPO, run_snakemake

pytestmark = pytest.mark.workflow

PROFILES = REPO / "profiles"
PROFILE_FILE = "config.v8+.yaml"
#: Keys that need the executor plugin (or its storage plugin) to be parsed at all.
PLUGIN_KEYS = ("executor", "container-image", "default-storage-provider", "default-storage-prefix")


def plannable_profile(name: str, tmp_path: Path) -> Path:
    """``profiles/<name>`` itself when its plugin is installed, else a copy without its keys."""
    settings = yaml.safe_load((PROFILES / name / PROFILE_FILE).read_text())
    executor = settings["executor"]
    needed = [f"snakemake_executor_plugin_{executor}"]
    if "default-storage-provider" in settings:
        needed.append(f"snakemake_storage_plugin_{settings['default-storage-provider']}")
    if all(importlib.util.find_spec(module) for module in needed):
        return PROFILES / name
    kept = {
        key: value
        for key, value in settings.items()
        if key not in PLUGIN_KEYS and not key.startswith(f"{executor}-")
    }
    folder = tmp_path / f"profile_{name}"
    folder.mkdir()
    (folder / PROFILE_FILE).write_text(yaml.safe_dump(kept))
    return folder


def _jobs_of(output: str, rule: str) -> list[str]:
    """The printed blocks (up to the resources line) of every job of ``rule``."""
    return re.findall(rf"(?:local)?rule {rule}:\n(?:.*\n)*?\s*resources: .*", output)


def test_slurm_profile_plans_the_papers_main_table(tmp_path: Path) -> None:
    # The main table of config/paper.yaml at its first seed (its studies left out: they
    # multiply the plan by about six without using the profile any differently; every job
    # names its seed, so the five seeds' plan is five of these, fused training aside).
    config = yaml.safe_load((REPO / "config/paper.yaml").read_text())
    config.pop("studies", None)
    config["seeds"] = config["seeds"][:1]
    config_path = tmp_path / "paper_main.yaml"
    config_path.write_text(yaml.safe_dump(config))
    profile = plannable_profile("slurm", tmp_path)
    result = run_snakemake(
        tmp_path, "-n", "--profile", str(profile), "--configfile", str(config_path)
    )
    output = result.stdout
    assert "workflow specific profile profiles/default" in result.stderr

    # The plan has the jobs the config implies (one "rule X:" block per job, group members
    # indented): 43 classes (10 + 20 + 10 + 2 + 1), 5 trained of 6 representations.
    stats = Counter(re.findall(r"^\s*(?:local)?rule (\w+):\s*$", output, flags=re.MULTILINE))
    assert stats["prepare_split"] == 43
    assert stats["unpack_fused_model"] == stats["embed_trained"] == 43 * 5
    assert stats["score_detectors"] == 43 * 6
    assert stats["score_rotation_classifier"] == 43 * 2
    # The profile's train.fuse 10: per method, the classes (x seeds) of each data set 10 at
    # a time (CIFAR-10's 10 models: 1 job, CIFAR-100's 20: 2, Fashion-MNIST 1, Cat-vs-Dog's
    # 2: 1, CelebA's 1: 1), instead of one job per model.
    assert "train_representation" not in stats
    assert stats["train_fused"] == (1 + 2 + 1 + 1 + 1) * 5

    training = _jobs_of(output, "train_fused")
    assert len(training) == stats["train_fused"]
    for resources in ("gpu=1", "cpus_per_gpu=4", "slurm_partition=CHANGE_ME_gpu_partition"):
        assert resources in training[0]
    assert "mem_mb=12000" in training[0]  # first attempt; retries get 2x and 3x
    detector = _jobs_of(output, "score_detectors")[0]
    assert "slurm_partition=CHANGE_ME_cpu_partition" in detector and "gpu=0" in detector

    # Light jobs travel in bundles of 20 (18 submissions instead of 344; at five seeds 97
    # instead of 1,935).
    light = stats["score_detectors"] + stats["score_rotation_classifier"]
    assert output.count("Group job light_detect") == math.ceil(light / 20)
    assert output.count("Group job light_split") == math.ceil(stats["prepare_split"] / 20)


def test_kubernetes_profile_plans(tmp_path: Path) -> None:
    profile = plannable_profile("kubernetes", tmp_path)
    result = run_snakemake(
        tmp_path,
        "-n",
        "--profile",
        str(profile),
        "--configfile",
        str(REPO / "tests/configs/tiny.yaml"),
    )
    embedding = _jobs_of(result.stdout, "embed_frozen_dataset")
    assert embedding and "gpu=1" in embedding[0] and "gpu_manufacturer=nvidia" in embedding[0]
    assert "Group job light_detect" in result.stdout


def _tracking_config(tmp_path: Path) -> Path:
    """Every MLflow writer in one plan: image benchmarks, MVTec and a deployed cell."""
    config = yaml.safe_load((REPO / "tests/configs/deploy_toy.yaml").read_text())
    config["mvtec"] = {"root": str(tmp_path / "mvtec_ad"), "categories": ["widget"]}
    path = tmp_path / "tracking.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _writes_mlflow(script: str | None) -> bool:
    """A rule's script opens the tracking store (docs/architecture.md, "Conventions")."""
    path = REPO / "workflow/scripts" / Path(script or "none").name
    text = path.read_text() if path.exists() else ""
    writers = ("tracking.mlflow_store import", "tracking.loggers import", "register_package")
    return any(name in text for name in writers)


#: Parse the workflow with Snakemake's API; print every rule, whether a cluster executor
#: keeps it local, and its script. Without one (a dry run included) Snakemake treats every
#: job as local, so the plan's "localrule" lines cannot tell; the rules that stay local under
#: a remote executor are Workflow._localrules (the ``localrules:`` lists and ``localrule:
#: True``), which Workflow.is_local reads.
_LOCAL_RULES = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

snakefile, workdir, configfile = map(Path, sys.argv[1:4])
with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(
        resource_settings=ResourceSettings(cores=1),
        config_settings=ConfigSettings(configfiles=[configfile]),
        snakefile=snakefile,
        workdir=workdir,
    )._workflow
    print(json.dumps({
        rule.name: [rule.name in workflow._localrules, rule.script] for rule in workflow.rules
    }))
"""


def test_every_mlflow_writer_is_a_local_rule_and_they_run_one_after_another(
    tmp_path: Path,
) -> None:
    config = _tracking_config(tmp_path)
    parsed = subprocess.run(
        [sys.executable, "-c", _LOCAL_RULES, str(REPO / "Snakefile"), str(tmp_path), str(config)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    rules = json.loads(parsed.stdout.strip().splitlines()[-1])
    is_local = {rule: local for rule, (local, _) in rules.items()}
    writers = {rule for rule, (_, script) in rules.items() if _writes_mlflow(script)}
    assert writers == {"init_tracking", "log_to_mlflow", "log_mvtec_to_mlflow", "register_model"}
    # Both benchmarks' results go through one script.
    assert rules["log_to_mlflow"][1] == rules["log_mvtec_to_mlflow"][1]
    assert all(is_local[rule] for rule in writers), {rule: is_local[rule] for rule in writers}
    # Packaging and the training it needs still go to the cluster.
    for rule in ("deploy_model", "train_representation", "train_patch_representation"):
        assert not is_local[rule], rule

    # One writer at a time: each waits for the previous one's output.
    graph = run_snakemake(tmp_path, "--rulegraph", "--configfile", str(config)).stdout
    names = dict(re.findall(r'^\s*(\d+)\[label = "(\w+)"', graph, flags=re.MULTILINE))
    edges = {(names[a], names[b]) for a, b in re.findall(r"^\s*(\d+) -> (\d+)", graph, re.M)}
    chain = ["init_tracking", "log_to_mlflow", "log_mvtec_to_mlflow", "register_model"]
    for before, after in zip(chain, chain[1:], strict=False):
        assert (before, after) in edges, f"{after} does not wait for {before}"
    assert ("deploy_model", "register_model") in edges


def test_the_documented_one_gpu_command_gives_the_training_job_a_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full-cell config's command, as Snakemake parses it (profiles included), builds a
    DAG whose training and embedding jobs each hold a GPU: none runs on the CPU by mistake."""
    header = (REPO / "config/experiments/cifar10_fullcell.yaml").read_text()
    found = re.search(r"^#   (snakemake --profile profiles/gpu .*)$", header, flags=re.MULTILINE)
    assert found is not None
    command = found.group(1)
    assert f"\n{command}\n" in (REPO / "docs/usage.md").read_text()  # the docs say the same
    argv = shlex.split(command)[1:]
    configfile = REPO / argv[argv.index("--configfile") + 1]
    monkeypatch.chdir(REPO)  # where the command is typed: its profile path is relative

    def gpus_of(argv: list[str]) -> tuple[dict[str, int], int | None]:
        resources, overwrite = command_resources(argv)
        jobs, _ = snakemake_jobs(
            [configfile], workdir=tmp_path, resources=resources, overwrite_resources=overwrite
        )
        return {job.rule: job.gpus for job in jobs if job.rule in GPU_RULES}, resources.get("gpu")

    gpus, declared = gpus_of(argv)
    assert gpus == {"train_representation": 1, "embed_trained": 1} and declared == 1
    assert gpu_warning(gpus, declared=declared, cuda_devices=1) is None
    # The command the config's header gave before: one GPU declared, no job given it.
    plain = ["--cores", "8", "--resources", "gpu=1", "--configfile", str(configfile)]
    gpus, declared = gpus_of(plain)
    assert gpus == {"train_representation": 0, "embed_trained": 0} and declared == 1
    warning = gpu_warning(gpus, declared=declared, cuda_devices=1)
    assert warning is not None and "--profile profiles/gpu" in warning


def test_the_gpu_profile_gives_mvtec_s_torch_jobs_a_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MVTec AD's training, dense embedding and patch scoring get the GPU under the same
    profile as the image benchmarks'; without it, the warning names each of those rules."""
    monkeypatch.chdir(REPO)
    configfile = REPO / "config/mvtec_bottle_reduced.yaml"  # a plan needs no data

    def gpus_of(argv: list[str]) -> dict[str, set[int]]:
        resources, overwrite = command_resources(argv)
        jobs, _ = snakemake_jobs(
            [configfile], workdir=tmp_path, resources=resources, overwrite_resources=overwrite
        )
        gpus: dict[str, set[int]] = {}
        for job in jobs:
            if job.rule in GPU_RULES:
                gpus.setdefault(job.rule, set()).add(job.gpus)
        return gpus

    mvtec_rules = {
        "train_patch_representation",
        "embed_patches",
        "score_patches",
        "score_patches_and_rotation_classifier",
    }
    assert gpus_of(["--profile", "profiles/gpu"]) == {rule: {1} for rule in mvtec_rules}
    plain = gpus_of(["--resources", "gpu=1"])
    assert plain == {rule: {0} for rule in mvtec_rules}
    warning = gpu_warning(
        {rule: min(gpus) for rule, gpus in plain.items()}, declared=1, cuda_devices=0
    )
    assert warning is not None and "--profile profiles/gpu" in warning
    assert all(f"{rule}:gpu=1" in warning for rule in mvtec_rules)
