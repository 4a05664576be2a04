"""Sizes the planner costs with: data set splits (training images, test images, image
side) and the disk a job's outputs take when no earlier run measured them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipeline_lib.planning.jobs import Job


@dataclass(frozen=True)
class DatasetSize:
    """Standard split sizes: training images per inlier class, test images, image side."""

    train_per_class: int
    n_test: int
    side: int
    n_classes: int


#: The readers' standard splits (pipeline_lib.data and docs/protocol.md, "Datasets and splits").
#: CelebA: the train split without eyeglasses (~152,000 of 162,770); digits: 70 % of 1,797.
DATASET_SIZES: dict[str, DatasetSize] = {
    "cifar10": DatasetSize(5000, 10000, 32, 10),
    "cifar100": DatasetSize(2500, 10000, 32, 20),
    "fmnist": DatasetSize(6000, 10000, 32, 10),
    "mnist": DatasetSize(6000, 10000, 32, 10),
    "digits": DatasetSize(126, 540, 32, 10),
    "catvsdog": DatasetSize(10000, 5000, 64, 2),
    "celeba": DatasetSize(152_000, 19_962, 64, 1),
}
#: Used for a data set the table does not know (an image folder, say); reported as a guess.
UNKNOWN_DATASET = DatasetSize(1000, 2000, 32, 10)

#: Parameters of ResNet-18 at width 64 plus the depth-8 MLP head (about 11.2 M + 2.2 M).
PARAMS_WIDTH_64 = 13_400_000
#: Outputs under this size count as this (logs, JSON, small score files).
SMALL_OUTPUT_BYTES = 50_000


def dataset_size(config: Mapping[str, Any], dataset: str) -> tuple[DatasetSize, bool]:
    """Sizes of ``dataset`` under ``config``'s subsampling; the flag says whether known."""
    # A randomly rotated copy (``cifar10_rotated``, the rotation study) has its source's size.
    size = DATASET_SIZES.get(dataset) or DATASET_SIZES.get(dataset.removesuffix("_rotated"))
    known = size is not None
    size = size or UNKNOWN_DATASET
    settings = (config.get("datasets") or {}).get(dataset) or {}
    options = settings.get("options") or {}
    train = int(options.get("n_train_per_class", size.train_per_class))
    n_test = size.n_test
    if "n_test_per_class" in options:
        n_test = int(options["n_test_per_class"]) * size.n_classes
    if settings.get("max_train_per_class"):
        train = min(train, int(settings["max_train_per_class"]))
    if settings.get("max_test_per_class"):
        n_test = min(n_test, int(settings["max_test_per_class"]) * size.n_classes)
    return DatasetSize(train, n_test, size.side, size.n_classes), known


def estimated_output_bytes(job: Job, config: Mapping[str, Any]) -> float:
    """Disk of one job's outputs from the data set sizes (no earlier run to measure)."""
    if not job.outputs:
        return 0.0
    width = int((config.get("embed") or {}).get("width", 64))
    feature_dim = 512 * width / 64
    dataset = job.wildcards.get("dataset")
    size, _ = dataset_size(config, dataset) if dataset else (UNKNOWN_DATASET, False)
    n_train = size.train_per_class * size.n_classes
    if job.rule == "prepare_dataset":
        return (n_train + size.n_test) * size.side**2 * 3
    if job.rule in ("train_representation", "unpack_fused_model"):
        return PARAMS_WIDTH_64 * (width / 64) ** 2 * 4
    if job.rule == "embed_trained":
        return (size.train_per_class + size.n_test) * (feature_dim + 128) * 4
    if job.rule == "embed_frozen_dataset":
        dim = size.side**2 * 3 if job.wildcards.get("method") == "raw" else feature_dim
        return (n_train + size.n_test) * dim * 4
    if job.rule == "score_detectors":
        return len(job.outputs) / 2 * (size.n_test * 8 + 1000)
    return SMALL_OUTPUT_BYTES
