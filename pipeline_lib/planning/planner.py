"""Cost planner: the jobs of a config per rule, and what they will cost, before running them.

``python -m pipeline_lib.planning.planner --configfile config/paper.yaml`` (or ``droc-plan``) plans
the real DAG with ``snakemake --dry-run --forceall`` (so its job counts are Snakemake's own),
then projects per rule:

* **device-hours**: training jobs cost ``models x epochs x instances per epoch / instances
  per device-second`` (an instance is a source image, except for contrastive DA with
  ``da_batching: expanded``, which trains on each image and its 3 rotated copies: 4
  instances; every rate, measured or default, counts instances), with each variant's own
  epochs, batch size, base method and training subset taken from the grid functions the
  DAG itself uses (:mod:`pipeline_lib.config.grids`: ``base_method``, ``variant_training``,
  ``variant_train_size``), so a 60-epoch variant costs 60 epochs; every other job a fixed
  number of seconds. The torch rules (:data:`DEVICE_RULES`) are counted as device-hours on
  ``--device``; the rest as CPU-hours.
  Training rates come, in this order, from

  1. ``--images-per-s METHOD=RATE`` (one job alone);
  2. rate tables (``--rates FILE ...``, :mod:`pipeline_lib.planning.rates`, written by
     ``benchmarks/bench_train.py --rates-out``): the rows of ``--device``'s kind, the
     config's ``embed.width`` and the job's base method, in the setting the config runs: a
     ``train_representation`` job at fuse 1 in ``train.step_mode`` (absent or ``auto``:
     ``graph`` on CUDA when a graph row exists, else ``eager``); a ``train_fused`` job of m
     models at the fused-m rate in ``train.step_mode`` (the same rule, among fuse-m rows),
     else as m separate eager trainings (an upper bound). A table measured at another width
     is reported in the source column, never scaled. A job on 64x64 data (Cat-vs-Dog,
     CelebA: :data:`DATASET_SIZES`) takes a row measured on 64x64 images when the table has
     one for that setting, else the 32x32 row scaled by pixels (a 64x64 image costs 4x);
     the source column says which (``64 px as measured`` or ``64 px extrapolated from 32
     px``) and whether the rate is a median of repeated timed calls or a single sample (every
     row of a table written before the ``repeats`` column);
  3. measurements of earlier runs in the working directory (per-epoch ``images_per_s`` in
     the ``train_history.json`` files of that device and width);
  4. the documented defaults :data:`DEFAULT_IMAGES_PER_S` (one job alone, width 64; on CUDA
     with the graph-captured step, the default there).

  Sources 1, 3 and 4 are 32x32 rates: a 64x64 job scales them by pixels, and says so.

  A rate given on the command line is the most deliberate; a table is chosen explicitly
  and names its device, setting and date, while histories are whatever happens to lie in
  the working directory (any code version, any load), so they rank below it. Seconds of
  the other rules: the median wall time ``s`` of each rule's ``benchmark:`` files under
  ``results/benchmarks/``, else :data:`DEFAULT_JOB_SECONDS`.
* **best setting** (with rate tables): the training hours of the config at each measured
  (step mode, fuse) setting, its models regrouped as ``train.fuse`` would group them
  (:func:`setting_costs`), and the cheapest: what to put in the config's ``train`` section.
  Cheapest means fewest device-hours, i.e. most training instances per device-second (per-model
  rate x fuse), not the highest per-model rate: K fused models each slower than one alone
  can still train more images a second together; one line per setting and method says
  where its rate came from. The last group of a data set's models
  may be smaller than K: costed at its own fused rate, else (graph) at the rate of the most
  models side by side measured below it, else (eager) as separate runs. A config with
  ``studies`` is also costed without them (the main table alone).
* **disk**: the median size of the rule's existing outputs when there are any, else an
  estimate from the data set sizes in :data:`DATASET_SIZES`.

Each ``--configfile`` is planned on its own (a study file gives that study's jobs; jobs that
two studies share are counted in both, but run once when the studies run together).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline_lib.config.fusing import fused_groups, group_members, group_name
from pipeline_lib.config.grids import (
    base_method,
    merge_datasets,
    study_grids,
    variant_train_size,
    variant_training,
)
from pipeline_lib.config.validate import validate_config
from pipeline_lib.planning.rate_choice import (
    Choice,
    Setting,
    choose_rate,
    settings_measured,
    size_label,
)
from pipeline_lib.planning.rates import STEP_MODES, Rate, RateTableError, read_rates
from pipeline_lib.registry import (
    CAPTURED_STEP_MODES,
    TRAINED_METHODS,
    instances_per_image,
    training_arguments,
)

REPO = Path(__file__).resolve().parents[2]
#: The schema the Snakefile validates a config with (defaults filled, studies merged).
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"

#: Rules that run on the accelerator when given a GPU (the rest always use the CPU).
DEVICE_RULES: tuple[str, ...] = (
    "train_representation",
    "train_fused",
    "embed_trained",
    "embed_frozen_dataset",
)

#: Training instances per second (source images; contrastive DA: its expanded copies,
#: :func:`~pipeline_lib.registry.instances_per_image`), ResNet-18 width 64 on 32x32 images
#: at the paper's batch size, per device: measured with ``benchmarks/bench_train.py``.
#: ``cpu``: a 2-core CPU (the CI machine). ``cuda``: one job alone on an H200 (below);
#: earlier runs' benchmark files or ``--images-per-s`` take precedence.
DEFAULT_IMAGES_PER_S: dict[str, dict[str, float | None]] = {
    "cpu": {
        "rotnet": 5.8,
        "rotation": 6.7,
        "denoising": 26.4,
        "contrastive": 12.0,
        "contrastive_da": 3.0,
    },
    # One job alone on an NVIDIA H200 (bf16 autocast, channels-last, width 64) with the
    # graph-captured step, the default on CUDA: the fuse-1 graph rows of
    # benchmarks/rates/h200.csv (the median of a day's rows, as --rates takes them; device
    # sessions of 2026-11-27). The eager step trained 2.5-6.3x slower in the same run (those
    # rows: `--rates` with that file and `train.step_mode: eager`); a fused job of K captured
    # models side by side trains 1.3-2.4x one job's images (`train.fuse`, CHANGELOG.md).
    "cuda": {
        "rotnet": 11297.0,
        "rotation": 10687.0,
        "denoising": 23088.0,
        "contrastive": 10280.5,
        "contrastive_da": 10414.0,
    },
}

#: Wall seconds per job of the rules that do not train, at the paper's sizes, when no
#: ``benchmark:`` file measured them: rough guesses (a Python start with torch and
#: scikit-learn is ~5 s; embedding a 60,000-image data set through ResNet-18 takes minutes
#: on a CPU; OC-SVM and KDE on 5,000 x 512 features about a minute). Replace them by
#: measurements: run a few jobs first, then plan again in the same working directory.
DEFAULT_JOB_SECONDS: dict[str, float] = {
    "prepare_dataset": 120.0,
    "prepare_split": 5.0,
    "embed_frozen_dataset": 600.0,
    "embed_trained": 120.0,
    "score_detectors": 120.0,
    "score_rotation_classifier": 10.0,
}
#: Any rule not in :data:`DEFAULT_JOB_SECONDS` (aggregation, plots, MLflow, ...).
DEFAULT_OTHER_SECONDS = 30.0


@dataclass(frozen=True)
class DatasetSize:
    """Standard split sizes: training images per inlier class, test images, image side."""

    train_per_class: int
    n_test: int
    side: int
    n_classes: int


#: The readers' standard splits (pipeline_lib.data and PROTOCOL.md, "Datasets and splits").
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


class PlanError(RuntimeError):
    """The dry run failed or printed nothing the planner could read."""


@dataclass(frozen=True)
class Job:
    """One job of the dry run: its rule, wildcards and output paths."""

    rule: str
    wildcards: dict[str, str]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class TrainingSpec:
    """How one method or variant trains, as the DAG's ``train_representation`` job runs it.

    Built by :func:`training_spec` from the grid functions the Snakefile's params use, so the
    planner cannot drift from what the jobs do (it once costed every variant at the global
    epochs, guessing base methods from name prefixes).
    """

    name: str
    base: str
    epochs: int
    batch_size: int
    train_size: int | None
    #: Training instances per source image (contrastive DA, expanded batching: 4), the unit
    #: of the measured rates (:func:`pipeline_lib.registry.instances_per_image`).
    instances_per_image: int = 1


@dataclass
class MethodCost:
    """The training jobs of one method or variant: what they train and what they cost."""

    spec: TrainingSpec
    jobs: int = 0
    hours: float | None = 0.0
    #: Where its rates came from (a rate table's setting, device and date; a default).
    sources: set[str] = field(default_factory=set)


@dataclass
class RuleCost:
    """What one rule's jobs cost in all; ``sources`` says where each number came from."""

    jobs: int = 0
    hours: float | None = 0.0
    disk_bytes: float = 0.0
    sources: set[str] = field(default_factory=set)
    #: Training only: method or variant -> its spec, job count and hours.
    by_method: dict[str, MethodCost] = field(default_factory=dict)


_RULE_LINE = re.compile(r"^\s*(?:local)?rule (\w+):\s*$")
_FIELD_LINE = re.compile(r"^\s*(wildcards|output): (.*)$")
_STATS_LINE = re.compile(r"^(\w+)\s+(\d+)$")


def dry_run(
    configfiles: Sequence[str | os.PathLike],
    *,
    workdir: str | os.PathLike,
    snakefile: str | os.PathLike = REPO / "Snakefile",
    snakemake: str | os.PathLike | None = None,
    forceall: bool = True,
    extra_args: Sequence[str] = (),
) -> str:
    """Text of ``snakemake --dry-run`` for ``configfiles`` in ``workdir``.

    Raises
    ------
    PlanError
        If Snakemake fails; the message holds the end of its output.
    """
    executable = snakemake or Path(sys.executable).with_name("snakemake")
    command = [
        str(executable),
        "--snakefile",
        str(snakefile),
        "--directory",
        str(workdir),
        "--dry-run",
        *(["--forceall"] if forceall else []),
        *extra_args,
        "--configfile",
        *map(str, configfiles),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800)  # noqa: S603 - this env's snakemake
    if result.returncode != 0:
        raise PlanError(
            f"snakemake --dry-run failed ({result.returncode}):\n"
            f"{(result.stdout + result.stderr)[-3000:]}"
        )
    return result.stdout


def parse_dry_run(text: str) -> tuple[list[Job], dict[str, int]]:
    """Jobs of a dry run's job listing, and its "Job stats" table (rule -> count).

    Raises
    ------
    PlanError
        If the listing and the table disagree (Snakemake changed its output format).
    """
    jobs: list[Job] = []
    rule: str | None = None
    fields: dict[str, str] = {}

    def close() -> None:
        if rule is not None:
            wildcards = dict(
                item.split("=", 1) for item in fields.get("wildcards", "").split(", ") if item
            )
            outputs = tuple(path for path in fields.get("output", "").split(", ") if path)
            jobs.append(Job(rule, wildcards, outputs))

    lines = text.splitlines()
    # Snakemake 9 prints the table before the listing and again after it: read the last one.
    starts = [i for i, line in enumerate(lines) if line.startswith("Job stats:")]
    stats_at = starts[-1] if starts else None
    for line in lines:
        if match := _RULE_LINE.match(line):
            close()
            rule, fields = match.group(1), {}
        elif rule is not None and (match := _FIELD_LINE.match(line)):
            fields[match.group(1)] = match.group(2).strip()
    close()
    stats: dict[str, int] = {}
    if stats_at is not None:
        for line in lines[stats_at + 1 :]:
            if match := _STATS_LINE.match(line.strip()):
                if match.group(1) == "total":
                    break
                stats[match.group(1)] = int(match.group(2))
    counted: dict[str, int] = {}
    for job in jobs:
        counted[job.rule] = counted.get(job.rule, 0) + 1
    if counted != stats:
        raise PlanError(f"dry-run listing {counted} disagrees with its job stats {stats}")
    return jobs, stats


def training_spec(name: str, config: Mapping[str, Any]) -> TrainingSpec | None:
    """The training of method or variant ``name`` under ``config``; None if it trains nothing.

    Parameters
    ----------
    name : str
        A ``method`` wildcard: a method id or a variant of ``config["variants"]``.
    config : mapping
        The (validated) config: its ``train`` section and ``variants``.

    Returns
    -------
    TrainingSpec or None
        Base method, epochs and batch size after the variant's overrides (the paper's
        per-method batch size when unset), and the variant's training subset size.
    """
    variants = config.get("variants") or {}
    base = base_method(name, variants)
    if base not in TRAINED_METHODS:
        return None
    arguments = training_arguments(
        base, variant_training(name, config.get("train") or {}, variants)
    )
    return TrainingSpec(
        name=name,
        base=base,
        epochs=int(arguments.get("epochs") or 2048),
        batch_size=int(arguments["batch_size"]),
        train_size=variant_train_size(name, variants),
        instances_per_image=instances_per_image(base, arguments),
    )


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


def measured_images_per_s(
    results: Path, *, device: str | None = None, width: int | None = None
) -> dict[str, list[float]]:
    """Per-epoch training rates (epochs after the first) of earlier runs, per method.

    With ``device`` / ``width``, only runs on that device type and at that network width
    count (a CPU smoke run at width 8 says nothing about a GPU plan at width 64); histories
    that do not record them are left out then.
    """
    rates: dict[str, list[float]] = {}
    for path in results.glob("**/train_history.json"):
        try:
            record = json.loads(path.read_text())
            if device is not None and record.get("device") != device:
                continue
            if width is not None and record.get("width") != width:
                continue
            # A fused model's rate is its share of a group's time, not a separate job's rate.
            if record.get("fused"):
                continue
            # Histories record the base method (train_representation.py), never a variant.
            method = str(record["method"])
            history = record["history"][1:] or record["history"]
            values = [float(epoch["images_per_s"]) for epoch in history]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if method in TRAINED_METHODS:
            rates.setdefault(method, []).extend(value for value in values if value > 0)
    return rates


def measured_job_seconds(benchmarks: Path) -> dict[str, list[float]]:
    """Wall seconds (column ``s``) of every ``benchmark:`` file, per rule (first folder)."""
    seconds: dict[str, list[float]] = {}
    for path in benchmarks.glob("*/**/*.tsv"):
        rule = path.relative_to(benchmarks).parts[0]
        try:
            with open(path, newline="") as handle:
                rows = list(csv.DictReader(handle, delimiter="\t"))
            seconds.setdefault(rule, []).extend(float(row["s"]) for row in rows)
        except (OSError, ValueError, KeyError):
            continue
    return seconds


def measured_output_bytes(workdir: Path, jobs: Iterable[Job]) -> dict[str, list[int]]:
    """Sizes of the planned outputs that already exist (an earlier run), per rule."""
    sizes: dict[str, list[int]] = {}
    for job in jobs:
        existing = [workdir / path for path in job.outputs if (workdir / path).is_file()]
        if existing and len(existing) == len(job.outputs):
            sizes.setdefault(job.rule, []).append(sum(path.stat().st_size for path in existing))
    return sizes


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


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def plan_costs(
    jobs: Sequence[Job],
    config: Mapping[str, Any],
    *,
    device: str = "cuda",
    workdir: str | os.PathLike | None = None,
    images_per_s: Mapping[str, float] | None = None,
    rates: Sequence[Rate] = (),
) -> dict[str, RuleCost]:
    """Hours and disk of ``jobs`` per rule (see the module docstring for the sources).

    Parameters
    ----------
    jobs : sequence of Job
        From :func:`parse_dry_run`.
    config : mapping
        The config the jobs were planned from (epochs, batch size, subsampling, width).
    device : {"cuda", "cpu"}, default="cuda"
        Which default training rates apply to the torch rules.
    workdir : str or PathLike or None, default=None
        A working directory with earlier results to measure; ``None`` = defaults only.
    images_per_s : mapping or None, default=None
        Training rates per method that override everything else.
    rates : sequence of Rate, default=()
        Rows of rate tables (:func:`pipeline_lib.planning.rates.read_rates`), after
        ``images_per_s`` and before earlier runs' histories.

    Returns
    -------
    dict
        Rule -> :class:`RuleCost`; ``hours`` is None when a training rate is unknown.

    Raises
    ------
    ValueError
        On an unknown ``device``.
    RateTableError
        If ``rates`` hold rows of two devices of ``device``'s kind.
    """
    if device not in DEFAULT_IMAGES_PER_S:
        raise ValueError(f"device must be one of {sorted(DEFAULT_IMAGES_PER_S)}, got {device!r}")
    rates_measured: dict[str, list[float]] = {}
    seconds_measured: dict[str, list[float]] = {}
    bytes_measured: dict[str, list[int]] = {}
    width = int((config.get("embed") or {}).get("width") or 64)
    train = config.get("train") or {}
    table = TableQuery(rates, device, width, train.get("step_mode"), train.get("amp"))
    if workdir is not None:
        root = Path(workdir)
        rates_measured = measured_images_per_s(root / "results", device=device, width=width)
        seconds_measured = measured_job_seconds(root / "results" / "benchmarks")
        bytes_measured = measured_output_bytes(root, jobs)
    costs: dict[str, RuleCost] = {}
    for job in jobs:
        cost = costs.setdefault(job.rule, RuleCost())
        cost.jobs += 1
        if job.rule in bytes_measured:
            cost.disk_bytes += _median(bytes_measured[job.rule])
            cost.sources.add("disk measured")
        else:
            cost.disk_bytes += estimated_output_bytes(job, config)
            cost.sources.add("disk estimated")
        spec = None
        models = 1
        if job.rule in ("train_representation", "train_fused"):
            spec = training_spec(job.wildcards.get("method", ""), config)
        if job.rule == "train_fused":
            # train.fuse: the group's members (classes and seeds). Costed at the fused rate of
            # that many models if a rate table has it, else as TableQuery.fused says.
            models = len(group_members(job.wildcards.get("group", "")))
        if spec is not None:
            by_method = cost.by_method.setdefault(spec.name, MethodCost(spec))
            by_method.jobs += models
            fused = models if job.rule == "train_fused" else None
            size, known = dataset_size(config, job.wildcards.get("dataset", ""))
            rate, sources = _training_rate(
                spec.base,
                device,
                images_per_s,
                table,
                rates_measured,
                fused=fused,
                image_size=size.side,
            )
            cost.sources.update(sources)
            by_method.sources.update(sources)
            if rate is None or cost.hours is None:
                cost.hours = by_method.hours = None
                cost.sources.add(f"no {device} rate for {spec.base}")
                continue
            if not known:
                cost.sources.add(f"size of {job.wildcards.get('dataset')} guessed")
            images = size.train_per_class
            if spec.train_size is not None:
                images = min(images, spec.train_size)
            # Rates count training instances (contrastive DA's expanded copies included).
            instances = images * spec.instances_per_image
            batch = spec.batch_size
            per_epoch = max(instances // batch, 1) * min(batch, instances)
            # The rate is for this data set's image size (a 32x32 rate scaled by pixels
            # where nothing was measured at that size: _training_rate).
            hours = models * spec.epochs * per_epoch / rate / 3600
            cost.hours += hours
            if by_method.hours is not None:
                by_method.hours += hours
        elif cost.hours is not None:
            if job.rule in seconds_measured:
                seconds = _median(seconds_measured[job.rule])
                cost.sources.add("time measured")
            else:
                seconds = DEFAULT_JOB_SECONDS.get(job.rule, DEFAULT_OTHER_SECONDS)
                cost.sources.add("time default")
            cost.hours += seconds / 3600
    return costs


@dataclass(frozen=True)
class TableQuery:
    """What a rate table is asked for a config: device kind, width and its train settings."""

    rates: Sequence[Rate]
    kind: str
    width: int
    step_mode: str | None
    amp: str | None

    def mode(self, method: str, fuse: int, image_size: int = 32) -> str:
        """The step mode whose rows cost a job of ``fuse`` models (``train.step_mode``).

        Absent or ``auto`` is what the stepper does: graph on CUDA (unless amp float16), costed
        from graph rows when one of that fuse or fewer models exists (:meth:`fused`), else
        from the eager ones.
        """
        if self.step_mode in STEP_MODES:
            return self.step_mode
        if self.kind == "cuda" and self.amp != "float16":
            if self._captured_fuse_at_most(method, "graph", fuse, image_size) is not None:
                return "graph"
        return "eager"

    def _captured_fuse_at_most(
        self, method: str, mode: str, fuse: int, image_size: int
    ) -> Choice | None:
        """The ``mode`` row of the most models, at most ``fuse``, measured for ``method``."""
        for fewer in range(fuse, 0, -1):
            choice, _ = self._choose(method, mode, fewer, image_size)
            if choice is not None:
                return choice
        return None

    def single(self, method: str, image_size: int = 32) -> tuple[float | None, str]:
        """Images per device-second of one model trained alone as the config says, or why not.

        For ``image_size`` images: measured there, else extrapolated by pixels from the
        32x32 rows (:func:`pipeline_lib.planning.rates.choose_rate`; the text says which).
        """
        choice, why = self._choose(method, self.mode(method, 1, image_size), 1, image_size)
        return (choice.device_images_per_s if choice else None), why

    def fused(self, method: str, models: int, image_size: int = 32) -> tuple[float | None, str]:
        """Images per device-second of a fused job of ``models`` models as the config says.

        Fused jobs step as ``train.step_mode`` says, as single ones do (:meth:`mode`).
        Without a fused-``models`` row of that mode:

        * graph or compiled: the rate of the most models side by side measured below ``models`` (a
          captured group replays its members' graphs side by side on CUDA streams; on an
          H200 the group's total rose from K = 1 to 2, 4 and 8 for every method, so fewer
          members are a floor, e.g. the group of 2 that fuse 4 leaves of CIFAR-10's 10);
        * eager: ``models`` separate eager trainings, an upper bound of the hours (a stacked
          group can train slower than one model alone: RotNet at K = 4, 0.97x).
        """
        mode = self.mode(method, models, image_size)
        choice, why = self._choose(method, mode, models, image_size)
        if choice is not None:
            return choice.device_images_per_s, why
        if models == 1:
            return None, why
        captured = mode in CAPTURED_STEP_MODES
        fewer = self._captured_fuse_at_most(method, mode, models, image_size) if captured else None
        if fewer is not None:
            return fewer.device_images_per_s, (
                f"fuse {models} not measured ({mode}): as {fewer.describe()}, the most models "
                "side by side measured below it"
            )
        alone, why_alone = self._choose(method, "eager", 1, image_size)
        if alone is None:
            return None, f"{why}; {why_alone}"
        return alone.images_per_s_per_model, (
            f"fuse {models} not measured ({mode}): {models} separate runs ({why_alone}), "
            "an upper bound"
        )

    def _choose(
        self, method: str, step_mode: str, fuse: int, image_size: int
    ) -> tuple[Choice | None, str]:
        return choose_rate(
            self.rates,
            kind=self.kind,
            width=self.width,
            method=method,
            step_mode=step_mode,
            fuse=fuse,
            image_size=image_size,
        )


def _training_rate(
    method: str,
    device: str,
    overrides: Mapping[str, float] | None,
    table: TableQuery,
    measured: Mapping[str, list[float]],
    *,
    fused: int | None = None,
    image_size: int = 32,
) -> tuple[float | None, list[str]]:
    """Images per device-second for a job of ``method`` on ``image_size`` images, and where
    they came from.

    ``fused``: the models of a train_fused job. Only a rate table knows fused rates: every
    other source is one job alone, so the job costs ``fused`` separate trainings then. Only
    a rate table knows rates at other image sizes: every other source is a 32x32 rate,
    scaled by pixels for larger images (and said so).
    """
    sources = ["fused = sum of separate runs"] if fused is not None and fused > 1 else []
    if overrides and method in overrides:
        rate, source = float(overrides[method]), "rate given"
    else:
        if table.rates:
            found, why = (
                table.single(method, image_size)
                if fused is None
                else table.fused(method, fused, image_size)
            )
            if found is not None:
                return found, [why]
            sources.append(why)
        default = DEFAULT_IMAGES_PER_S[device][method]
        if measured.get(method):
            rate, source = _median(measured[method]), "rate measured"
        elif default is not None:
            rate, source = default, f"rate default ({device})"
        else:
            return None, sources
    if image_size != 32:
        source = f"{source}, {size_label(image_size, 32)}"
    return rate * (32 / image_size) ** 2, [*sources, source]


def _human_bytes(value: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def format_plan(name: str, costs: Mapping[str, RuleCost], *, device: str) -> str:
    """A plain-text table: jobs, hours (device-hours for the torch rules) and disk per rule."""
    lines = [f"plan of {name} (device {device})"]
    lines.append(f"{'rule':<28}{'jobs':>8}{'hours':>12}  {'on':<7}{'disk':>12}  source")
    totals = {"jobs": 0, "device": 0.0, "cpu": 0.0, "disk": 0.0}
    unknown = False
    for rule, cost in costs.items():
        on = device if rule in DEVICE_RULES else "cpu"
        hours = "unknown" if cost.hours is None else f"{cost.hours:,.1f}"
        lines.append(
            f"{rule:<28}{cost.jobs:>8,}{hours:>12}  {on:<7}{_human_bytes(cost.disk_bytes):>12}"
            f"  {', '.join(sorted(cost.sources))}"
        )
        totals["jobs"] += cost.jobs
        totals["disk"] += cost.disk_bytes
        if cost.hours is None:
            unknown = True
        else:
            totals["device" if rule in DEVICE_RULES else "cpu"] += cost.hours
        # Per method or variant, indented under its rule: what each one trains and costs.
        for method, part in cost.by_method.items():
            spec = part.spec
            part_hours = "unknown" if part.hours is None else f"{part.hours:,.2f}"
            subset = "all" if spec.train_size is None else f"{spec.train_size:,}"
            lines.append(
                f"  {method:<26}{part.jobs:>8,}{part_hours:>12}  {on:<7}{'':>12}  "
                f"{spec.base}, {spec.epochs} epochs, batch {spec.batch_size}, "
                f"train size {subset}; {', '.join(sorted(part.sources))}"
            )
    device_hours = "unknown" if unknown else f"{totals['device']:,.1f}"
    lines.append(
        f"total: {totals['jobs']:,} jobs, {device_hours} {device}-hours on the torch rules, "
        f"{totals['cpu']:,.1f} CPU-hours on the others, {_human_bytes(totals['disk'])} of "
        f"outputs"
    )
    return "\n".join(lines)


#: The rules that train models (one alone, or fused).
TRAINING_RULES: tuple[str, ...] = ("train_representation", "train_fused")


def training_models(jobs: Iterable[Job]) -> dict[tuple[str, ...], list[tuple[str, str]]]:
    """(data set, contamination, method) -> the (class, seed) of each of its trained models.

    Read from either training rule (a train_fused job's group names its members,
    :mod:`pipeline_lib.config.fusing`), so a plan made at any ``train.fuse`` can be regrouped at
    another.
    """
    models: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for job in jobs:
        if job.rule not in TRAINING_RULES:
            continue
        w = job.wildcards
        key = (w.get("dataset", ""), w.get("contamination", ""), w["method"])
        if job.rule == "train_fused":
            members = group_members(w["group"])
        else:
            members = [(w.get("inlier", ""), w.get("seed", "0"))]
        models.setdefault(key, []).extend(members)
    return models


def regroup(jobs: Iterable[Job], fuse: int) -> list[Job]:
    """The training jobs the DAG runs at ``train.fuse = fuse`` for the models of ``jobs``.

    As workflow/rules/common.smk groups them (:func:`pipeline_lib.config.fusing.fused_groups`:
    the models of one data set, contamination and method, classes and seeds, ``fuse`` at a
    time); fuse 1 is one train_representation job per model. Outputs are left empty: only
    the hours are wanted.
    """
    regrouped = []
    for (dataset, contamination, method), members in training_models(jobs).items():
        common = {"dataset": dataset, "contamination": contamination, "method": method}
        if fuse == 1:
            regrouped += [
                Job("train_representation", {**common, "inlier": inlier, "seed": seed}, ())
                for inlier, seed in members
            ]
            continue
        for group in fused_groups(members, fuse):
            regrouped.append(Job("train_fused", {**common, "group": group_name(group)}, ()))
    return regrouped


@dataclass(frozen=True)
class SettingCost:
    """The training hours of a config's models at one (step mode, fuse) setting."""

    setting: Setting
    hours: float | None
    #: Base method -> where its rates at this setting came from (image size measured or
    #: extrapolated, median of repeats or single sample: ``rates.Choice.describe``).
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)


def rate_sources(costs: Mapping[str, RuleCost]) -> dict[str, tuple[str, ...]]:
    """Base method -> the sources of its training rates in ``costs`` (every variant's)."""
    found: dict[str, set[str]] = {}
    for rule in TRAINING_RULES:
        for part in costs[rule].by_method.values() if rule in costs else ():
            found.setdefault(part.spec.base, set()).update(part.sources)
    return {method: tuple(sorted(sources)) for method, sources in sorted(found.items())}


def training_hours(costs: Mapping[str, RuleCost]) -> float | None:
    """Hours of the training rules; None if any is unknown."""
    parts = [costs[rule].hours for rule in TRAINING_RULES if rule in costs]
    return None if any(part is None for part in parts) else sum(p or 0.0 for p in parts)


def setting_costs(
    jobs: Sequence[Job],
    config: Mapping[str, Any],
    *,
    device: str,
    rates: Sequence[Rate],
    workdir: str | os.PathLike | None = None,
    images_per_s: Mapping[str, float] | None = None,
) -> list[SettingCost]:
    """The training hours of ``jobs``' models at each setting the rate tables measured.

    Each setting is one config for every trained method (``train.fuse`` and
    ``train.step_mode`` are global): each measured (step mode, fuse), fused ones included
    (a fused job steps as ``train.step_mode`` says). The models are regrouped as the DAG
    would group them (:func:`regroup`) and costed by :func:`plan_costs` with the setting in
    the config, so a method without a row for the setting falls back as the plan does (and
    says so).
    """
    width = int((config.get("embed") or {}).get("width") or 64)
    settings = {Setting("eager", 1)}
    settings.update(settings_measured(rates, kind=device, width=width))
    results = []
    for setting in sorted(settings, key=lambda s: (s.fuse, s.step_mode)):
        train = {**(config.get("train") or {}), "fuse": setting.fuse}
        train["step_mode"] = setting.step_mode
        costs = plan_costs(
            regroup(jobs, setting.fuse),
            {**config, "train": train},
            device=device,
            workdir=workdir,
            images_per_s=images_per_s,
            rates=rates,
        )
        results.append(SettingCost(setting, training_hours(costs), rate_sources(costs)))
    return results


def format_settings(
    name: str, costs: Mapping[str, RuleCost], settings: Sequence[SettingCost], *, device: str
) -> str:
    """The cheapest measured setting's device-hours beside the planned ones, then the rates.

    The first line names the cheapest setting; the torch rules other than training
    (embedding) are the same in every setting and are added to give the device-hours of the
    whole config. Then one line per setting and trained base method: where its rate came
    from, whether measured at the data's image size or extrapolated by pixels, and whether
    a median of repeats or a single sample.
    """
    planned = training_hours(costs)
    other = sum(
        cost.hours or 0.0
        for rule, cost in costs.items()
        if rule in DEVICE_RULES and rule not in TRAINING_RULES
    )
    known = [s for s in settings if s.hours is not None]
    if not known or planned is None:
        return f"best setting of {name}: unknown (a training rate is missing)"
    best = min(known, key=lambda s: s.hours or 0.0)
    every = "; ".join(
        f"{s.setting}: {'unknown' if s.hours is None else f'{s.hours:,.1f}'}" for s in settings
    )
    lines = [
        f"best setting of {name}: {best.setting}: {best.hours:,.1f} {device}-hours of training, "
        f"{(best.hours or 0.0) + other:,.1f} on the torch rules (as configured: "
        f"{planned:,.1f} of training); every setting: {every}"
    ]
    for cost in settings:
        for method, sources in cost.sources.items():
            lines.append(f"  rate at {cost.setting}: {method}: {'; '.join(sources)}")
    return "\n".join(lines)


def planned_config(configfile: str | os.PathLike) -> dict[str, Any]:
    """``configfile`` as the Snakefile sees it: validated, defaults filled, studies merged.

    The data sets of every grid (the included studies' too) are put under ``datasets`` with
    their shared reader settings (:func:`pipeline_lib.config.grids.merge_datasets`), so a
    study-only data set is sized with its own subsampling.

    Raises
    ------
    PlanError
        If the config does not validate (the message names the key).
    """
    raw = yaml.safe_load(Path(configfile).read_text()) or {}
    try:
        config = validate_config(raw, SCHEMA)
        grids = study_grids(config, config["studies"])
    except ValueError as error:
        raise PlanError(f"invalid config: {error}") from error
    return {**config, "datasets": merge_datasets(grids)}


@dataclass(frozen=True)
class PlanResult:
    """A planned config: Snakemake's job counts, the costs, and (with rate tables) settings."""

    stats: dict[str, int]
    costs: dict[str, RuleCost]
    settings: list[SettingCost]


def plan_config(
    configfile: str | os.PathLike,
    *,
    workdir: str | os.PathLike | None = None,
    device: str = "cuda",
    images_per_s: Mapping[str, float] | None = None,
    measure: bool = True,
    rates: Sequence[Rate] = (),
) -> PlanResult:
    """Plan one config; with ``rates``, also cost it at every measured setting.

    ``workdir`` is where the sweep runs (its ``results/`` is measured when ``measure``);
    ``None`` plans in an empty temporary folder with defaults only.
    """
    config = planned_config(configfile)
    with tempfile.TemporaryDirectory(prefix="droc-plan-") as empty:
        where = Path(workdir) if workdir is not None else Path(empty)
        jobs, stats = parse_dry_run(dry_run([configfile], workdir=where))
        measured = where if (measure and workdir is not None) else None
        costs = plan_costs(
            jobs, config, device=device, workdir=measured, images_per_s=images_per_s, rates=rates
        )
        settings = []
        if rates:
            settings = setting_costs(
                jobs,
                config,
                device=device,
                workdir=measured,
                images_per_s=images_per_s,
                rates=rates,
            )
    return PlanResult(stats, costs, settings)


def without_studies(configfile: str | os.PathLike, folder: str | os.PathLike) -> Path | None:
    """A copy of ``configfile`` in ``folder`` with ``studies: []``; None if it has none.

    config/paper.yaml is the main table plus every study in one DAG: planning the copy too
    gives the main table's hours beside the whole paper's.
    """
    raw = yaml.safe_load(Path(configfile).read_text()) or {}
    if not raw.get("studies"):
        return None
    copy = Path(folder) / f"{Path(configfile).stem}-main-table.yaml"
    copy.write_text(yaml.safe_dump({**raw, "studies": []}, sort_keys=False))
    return copy


def _parse_rates(values: Sequence[str]) -> dict[str, float]:
    rates = {}
    for value in values:
        method, _, rate = value.partition("=")
        if method not in TRAINED_METHODS or not rate:
            raise argparse.ArgumentTypeError(
                f"--images-per-s takes METHOD=RATE with METHOD in {', '.join(TRAINED_METHODS)}; "
                f"got {value!r}"
            )
        rates[method] = float(rate)
    return rates


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: print the plan of each ``--configfile``."""
    parser = argparse.ArgumentParser(
        prog="droc-plan", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--configfile", nargs="+", required=True, type=Path)
    parser.add_argument(
        "--directory",
        type=Path,
        default=Path.cwd(),
        help="working directory of the sweep, measured for rates, times and sizes (default: .)",
    )
    parser.add_argument("--device", choices=sorted(DEFAULT_IMAGES_PER_S), default="cuda")
    parser.add_argument(
        "--images-per-s", nargs="+", default=[], metavar="METHOD=RATE", help="training rates"
    )
    parser.add_argument(
        "--no-measured", action="store_true", help="ignore earlier runs: defaults only"
    )
    parser.add_argument(
        "--rates",
        nargs="+",
        default=[],
        type=Path,
        metavar="FILE",
        help="rate tables (benchmarks/rates/*.csv): training rates per device, width, method, "
        "step mode and fuse; also prints each config's best measured setting",
    )
    args = parser.parse_args(argv)
    try:
        given = _parse_rates(args.images_per_s)
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    try:
        table = read_rates(args.rates)
    except RateTableError as error:
        parser.error(str(error))
    options = {
        "workdir": args.directory,
        "device": args.device,
        "images_per_s": given,
        "measure": not args.no_measured,
        "rates": table,
    }
    for configfile in args.configfile:
        if not configfile.is_file():
            parser.error(f"no such config file: {configfile}")
        try:
            result = plan_config(configfile, **options)  # type: ignore[arg-type]
            print(format_plan(str(configfile), result.costs, device=args.device))
            if table:
                name = str(configfile)
                print(format_settings(name, result.costs, result.settings, device=args.device))
                _print_main_table(configfile, options, device=args.device)
        except (PlanError, RateTableError) as error:
            print(f"{configfile}: {error}", file=sys.stderr)
            return 1
        print()
    return 0


def _print_main_table(configfile: Path, options: Mapping[str, Any], *, device: str) -> None:
    """The best-setting line of ``configfile`` without its studies, if it has any."""
    with tempfile.TemporaryDirectory(prefix="droc-plan-main-") as folder:
        main_table = without_studies(configfile, folder)
        if main_table is None:
            return
        result = plan_config(main_table, **options)
    name = f"{configfile} without its studies (main table)"
    print(format_settings(name, result.costs, result.settings, device=device))


if __name__ == "__main__":
    sys.exit(main())
