"""Declared GPUs get used: ``pipeline_lib.config.gpus``, ``profiles/gpu`` and the rules.

A job uses CUDA only when given a ``gpu`` resource and the rules declare ``gpu=0``, so the
profile must name every rule that trains or embeds, and a run with GPUs that gives them none
must say so. The documented command's own DAG: tests/workflow/test_profiles.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from pipeline_lib.config.gpus import (
    GPU_PROFILE,
    GPU_RULES,
    IMAGE_GPU_RULES,
    gpu_warning,
    visible_cuda_devices,
)
from pipeline_lib.planning.defaults import DEVICE_RULES

REPO = Path(__file__).resolve().parents[1]
#: Rules that take a `gpu` resource but stay on the CPU by default (GPU_RULES says why).
CPU_BY_DEFAULT = {"score_detectors", "score_detectors_g"}


def _rule_blocks() -> dict[str, str]:
    """Each rule of workflow/rules/*.smk -> its text (snakefmt's layout: one rule's block runs
    from its `rule NAME:` line to the next)."""
    found = {}
    for path in (REPO / "workflow/rules").glob("*.smk"):
        blocks = re.split(r"^\s*rule (\w+):", path.read_text(), flags=re.MULTILINE)[1:]
        found |= dict(zip(blocks[::2], blocks[1::2], strict=True))
    return found


def _rules_declaring_a_gpu() -> set[str]:
    """Rules with a `gpu=` resource."""
    return {
        name
        for name, body in _rule_blocks().items()
        if re.search(r"^\s+gpu=", body, flags=re.MULTILINE)
    }


def test_the_gpu_profile_gives_every_training_and_embedding_rule_a_gpu() -> None:
    profile = yaml.safe_load((REPO / GPU_PROFILE / "config.v8+.yaml").read_text())
    assert profile["set-resources"] == {rule: {"gpu": 1} for rule in GPU_RULES}
    assert profile["resources"] == {"gpu": 1}  # one machine, one GPU; --resources replaces it
    declared = _rules_declaring_a_gpu()
    assert len(declared) > len(GPU_RULES)  # the scan finds the rules
    # Every rule that can use a GPU is in the profile, or on the CPU on purpose.
    assert declared == set(GPU_RULES) | CPU_BY_DEFAULT
    assert DEVICE_RULES == IMAGE_GPU_RULES and set(IMAGE_GPU_RULES) < set(GPU_RULES)


@pytest.mark.parametrize("profile", ["slurm", "kubernetes"])
def test_the_cluster_profiles_give_every_torch_rule_a_gpu(profile: str) -> None:
    settings = yaml.safe_load((REPO / "profiles" / profile / "config.v8+.yaml").read_text())
    given = {rule for rule, values in settings["set-resources"].items() if values.get("gpu")}
    assert given == set(GPU_RULES)


def test_every_torch_rule_retries_with_more_memory_and_packs_on_a_gpu_slot() -> None:
    """The image benchmarks' and MVTec AD's torch rules keep one convention: retries (twice
    for training, which resumes from its checkpoint), memory growing with the attempt, and
    the device from job_device, a slot on the least-loaded visible GPU, never a device the
    script picks itself."""
    blocks = _rule_blocks()
    for rule in GPU_RULES:
        body = blocks[rule]
        retries = re.search(r"^\s+retries: (\d+)$", body, flags=re.MULTILINE)
        assert retries is not None, f"{rule} has no retries"
        assert int(retries.group(1)) == (2 if rule.startswith("train_") else 1), rule
        assert re.search(r"^\s+mem_mb=mem_mb_by_attempt\(\d+\),$", body, re.MULTILINE), rule
        script = re.search(r'^\s+script:\s+"\.\./scripts/(\w+\.py)"', body, re.MULTILINE)
        assert script is not None, f"{rule} runs no script"
        text = (REPO / "workflow/scripts" / script.group(1)).read_text()
        assert (
            "job_device(gpus_requested(snakemake.resources)) as device" in text
            or "torch_job(snakemake) as device" in text  # job_device inside (torch_jobs.py)
        ), rule
        assert "select_device" not in text, rule


def test_declared_gpus_that_no_training_job_gets_are_a_warning() -> None:
    none = {"train_representation": 0, "embed_trained": 0}
    message = gpu_warning(none, declared=1, cuda_devices=0)
    assert message is not None
    assert message.startswith("Warning: --resources gpu=1 declares 1 GPU, but none of its ")
    assert "--profile profiles/gpu" in message
    assert "--set-resources embed_trained:gpu=1 train_representation:gpu=1" in message
    # CUDA on the host counts as declared.
    assert "2 CUDA devices are visible" in (gpu_warning(none, declared=None, cuda_devices=2) or "")
    # Some of them get one: the others are named.
    part = gpu_warning({"train_fused": 0, "embed_trained": 1}, declared=4, cuda_devices=4)
    assert part is not None and "4 GPUs" in part
    assert "but the jobs of train_fused ask for none and run on the CPU" in part


@pytest.mark.parametrize(
    ("rule_gpus", "declared", "cuda"),
    [
        ({"train_representation": 1, "embed_trained": 1}, 1, 1),  # all get one
        ({"train_representation": 0}, None, 0),  # no GPU anywhere: the CPU is right
        ({"score_detectors": 0}, 1, 1),  # a rule on the CPU on purpose
        ({}, 1, 1),  # nothing of the kind to run
    ],
)
def test_no_warning_when_the_gpus_are_used_or_absent(
    rule_gpus: dict[str, int], declared: int | None, cuda: int
) -> None:
    assert gpu_warning(rule_gpus, declared=declared, cuda_devices=cuda) is None


def test_visible_cuda_devices_counts_the_driver_s_gpus_as_cuda_visible_devices_limits(
    tmp_path: Path,
) -> None:
    for address in ("0000:01:00.0", "0000:02:00.0"):
        (tmp_path / "gpus" / address).mkdir(parents=True)
    assert visible_cuda_devices({}, driver=tmp_path) == 2
    assert visible_cuda_devices({"CUDA_VISIBLE_DEVICES": "1"}, driver=tmp_path) == 1
    assert visible_cuda_devices({"CUDA_VISIBLE_DEVICES": ""}, driver=tmp_path) == 0
    assert visible_cuda_devices({"CUDA_VISIBLE_DEVICES": "-1"}, driver=tmp_path) == 0
    assert visible_cuda_devices({"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, driver=tmp_path) == 2
    assert visible_cuda_devices({}, driver=tmp_path / "no_driver") == 0
