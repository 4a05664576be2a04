"""Shared cases of the planner tests: synthetic jobs, rate-table rows, the tiny config."""

from __future__ import annotations

from pathlib import Path

from pipeline_lib.planning.defaults import default_images_per_s
from pipeline_lib.planning.jobs import Job
from pipeline_lib.planning.timing import RateLog
from pipeline_lib.registry import RATE_DEVICES, TRAINED_METHODS

#: The methods' fallback rates (:attr:`pipeline_lib.registry.MethodSpec.rates`) by device kind.
DEFAULT_IMAGES_PER_S = {
    kind: {method: default_images_per_s(kind, method) for method in TRAINED_METHODS}
    for kind in RATE_DEVICES
}

REPO = Path(__file__).resolve().parents[1]


def small_plan() -> list[Job]:
    """RotNet on a CIFAR-10 split and contrastive DA on a Cat-vs-Dog one, the split's job, and
    the target rule (no outputs): the shape of the jobs :func:`snakemake_jobs` reads."""
    split = {"dataset": "cifar10", "inlier": "cat", "contamination": "0", "seed": "0"}
    cat = {"dataset": "catvsdog", "inlier": "cat", "contamination": "0", "seed": "0"}
    return [
        Job("prepare_split", split, ("cifar10/cat/contam0/seed0/split.npz",)),
        Job(
            "train_representation",
            {**split, "method": "rotnet"},
            (
                "cifar10/cat/seed0/rotnet/model.pt",
                "cifar10/cat/seed0/rotnet/history.json",
            ),
        ),
        Job(
            "train_representation",
            {**cat, "method": "contrastive_da"},
            ("catvsdog/cat/contam0/seed0/contrastive_da/model.pt",),
        ),
        Job("all", {}, ()),
    ]


TINY = REPO / "tests/configs/tiny.yaml"

#: The header of a rate table (pipeline_lib.planning.rates).
HEADER = "device,kind,width,method,step_mode,fuse,images_per_s_per_model,amp,steps,date,command\n"


def rate_row(
    method: str,
    step_mode: str,
    fuse: int,
    per_model: float,
    *,
    width: int = 64,
    date: str = "2026-11-27T10:00:00Z",
    device: str = "NVIDIA H200",
    kind: str = "cuda",
) -> str:
    """One synthetic row (these tables test the selection logic, not any real card)."""
    return (
        f"{device},{kind},{width},{method},{step_mode},{fuse},{per_model},bfloat16,20,{date},"
        f'"python benchmarks/bench_train.py --device cuda"\n'
    )


def write_table(path: Path, *rows: str) -> Path:
    path.write_text(HEADER + "".join(rows))
    return path


def h200_rate_log(path: Path, image_size: int, date: str = "2026-11-28") -> RateLog:
    """A rate log of synthetic H200 rows at ``image_size`` px, dated ``date``."""
    log = RateLog(
        path,
        device="NVIDIA H200",
        kind="cuda",
        width=64,
        amp="bfloat16",
        steps=200,
        image_size=image_size,
    )
    log.common["date"] = f"{date}T00:00:00Z"
    return log
