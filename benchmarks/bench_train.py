"""Benchmark: self-supervised training throughput per method, and what config/paper.yaml costs.

For every trained method (rotnet, rotation, denoising, contrastive, contrastive_da) at the
paper's batch size (32 instances a step for the contrastive methods, 64 otherwise), the script
trains the full training loop, :func:`pipeline_lib.ssl.train.train_representation` (views built
on the device, SGD, autocast on CUDA), on random uint8 images of ``--image-size`` (32 or 64,
the sides of the paper's data sets):

* one untimed warm-up call of a single step (CUDA context, cuDNN algorithm choice, allocator),
* one call of ``--repeats`` (default 3) timed epochs of ``--steps`` steps each (default 200
  on CUDA, 5 on the CPU), each timed on the loop's own clock, which ends with the epoch's
  host sync and excludes model building and the data digest. A rate is the **median** of
  those timed epochs; the table also gives their range (max - min, as a share of the
  median), and the rate table both ends of it.

It prints training instances/s ("img/s") and views/s. An instance is a source image, except
for contrastive DA, whose default ``da_batching: expanded`` (the released code's) trains on the
training set expanded by its 3 rotations: 4 instances per source image, each one a batch
member (:func:`pipeline_lib.registry.instances_per_image`). Views per instance: rotation
methods 4, contrastive and contrastive DA 2, denoising 1. (Before 2026-11-26 this script
counted contrastive DA at 8 views per instance, the ``per_image`` batching's figure, so its
views/s, TFLOP/s and share of peak were 4x too high, and its hours 4x too low.)

FLOPs (model FLOPs, as in MFU figures; the peak of a GPU counts one multiply-add as 2 FLOPs):
the forward pass of one view through backbone, head and proxy module (rotation classifier or
denoising decoder) is counted with :class:`torch.utils.flop_counter.FlopCounterMode` on the
meta device at ``--image-size`` (convolutions and matrix products, 2 FLOPs per
multiply-add; BatchNorm, activations and the augmentations are not counted). For the paper's
ResNet-18 (width 64) at 32x32 the backbone alone is 1.11 GFLOP per view (= 0.56 G
multiply-adds, the "0.56 GFLOPs" usually quoted for CIFAR ResNet-18); the heads add under
1 %, the denoising decoder more.
A training step is estimated at 3x the forward FLOPs (backward = 2x forward) times views per
instance times the batch (instances per step). With ``--peak-tflops`` the achieved TFLOP/s
is also shown as a share of that peak (e.g. 989 for an H100 SXM in dense BF16).

Cost of the paper's sweep: for each method of ``--config`` (default config/paper.yaml) the
instances trained on (classes x training instances per class, rounded down to whole
batches, x epochs x seeds x contamination ratios; sizes from :data:`TRAIN_SETS`), converted
to hours at the measured instances/s. Data sets of another side than ``--image-size`` are
counted by pixels (measured at 32: Cat-vs-Dog and CelebA at 4x the cost of a 32x32 image,
4x the FLOPs; a GPU may use them a little more efficiently, so this errs high; measure with
``--image-size 64`` for their own rate). The hours are for one device like this one, at
``--width``: only width 64 on CUDA estimates the paper's GPU-hours.

Fused training (``--fuse K [K ...]``, :mod:`pipeline_lib.ssl.fused`): K models of the
method, each on its own random images and seed, trained in one job: eager as one stacked
network, graph-captured side by side on CUDA streams (each its own captured step; since
2026-11-27, after the stacked captured group measured no faster than one run). A table per
K gives the instances/s of all K together beside one separate run's in the same step
mode (K separate runs one after the other train at that rate), the ratio (what fusing
buys on this device at this width), and the K models' TFLOP/s and share of the peak.
Each K is timed in the step mode(s) of ``--step-mode``.

Graph capture (``--step-mode``, :mod:`pipeline_lib.ssl.stepper`): ``eager`` (default) times
today's loop as above; ``graph`` (CUDA) times the graph-captured step; ``both`` times each
and prints a second table with the ratio. The same holds for the fused runs. A captured
run records its step's plan, warms up for three steps and captures in its first epoch,
so with ``graph`` or ``both`` the call trains one more epoch, untimed, before the timed ones
(steady state), for either mode, separate or fused.

The numbers depend on the machine and its load: the script prints what it measured in this
run only. With ``--rates-out PATH`` it also appends every rate it measured (eager, graph,
fused K) to the rate table at PATH, the format of :mod:`pipeline_lib.planning.rates` (one row
per method and setting, per-model instances/s, the median and range of the timed epochs,
``image_size`` and ``repeats``; fused K: the group's total / K), which
``droc-plan --rates PATH`` costs a sweep from (benchmarks/rates/README.md).

Usage::

    python benchmarks/bench_train.py --device cuda --peak-tflops 989   # paper network
    python benchmarks/bench_train.py --width 16 --steps 2              # CPU smoke run
    python benchmarks/bench_train.py --device cuda --image-size 64     # 64x64 data sets
    python benchmarks/bench_train.py --device cuda --fuse 8            # fused vs separate
    python benchmarks/bench_train.py --device cuda --step-mode both    # graph vs eager
    python benchmarks/bench_train.py --device cuda --step-mode both --fuse 4 10  # all of it
    python benchmarks/bench_train.py --width 8 --steps 1 --fuse 2 --methods rotnet  # CPU
    python benchmarks/bench_train.py --width 16 --steps 2 --rates-out /tmp/rates.csv
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml
from bench_options import RunSpec, add_rate_options, check_rate_options

from pipeline_lib.models.flops import forward_flops_per_view, training_tflops
from pipeline_lib.planning.rates import Rate
from pipeline_lib.planning.timing import RateLog, Spread
from pipeline_lib.registry import (
    TRAINED_METHODS,
    default_batch_size,
    instances_per_image,
    method_spec,
)
from pipeline_lib.runtime.devices import device_name
from pipeline_lib.ssl.fused import train_representations_fused
from pipeline_lib.ssl.train import train_representation

REPO = Path(__file__).resolve().parents[1]

#: Source images per step in the paper (docs/protocol.md, "Training recipe").
PAPER_BATCH_SIZE: dict[str, int] = {m: default_batch_size(m) for m in TRAINED_METHODS}

#: Data set -> (classes, training images per inlier class, image side). Sources: the data
#: sets' standard train splits as the readers in pipeline_lib.data load them -- CIFAR-10
#: 50,000 / 10 classes, CIFAR-100 50,000 / 20 coarse superclasses, Fashion-MNIST 60,000 / 10
#: -- and docs/protocol.md, "Datasets and splits": Cat-vs-Dog 10,000 per class, CelebA the
#: train split without eyeglasses (about 152,000 of its 162,770 images: roughly 6.5 % wear
#: eyeglasses; approximate, the reader gives the exact count).
TRAIN_SETS: dict[str, tuple[int, int, int]] = {
    "cifar10": (10, 5000, 32),
    "cifar100": (20, 2500, 32),
    "fmnist": (10, 6000, 32),
    "catvsdog": (2, 10000, 64),
    "celeba": (1, 152_000, 64),
}


def peak_share(tflops: float, peak: float | None) -> str:
    """``tflops`` as a percentage of ``peak`` TFLOP/s, or ``-`` without a peak."""
    return f"{100 * tflops / peak:.1f}" if peak else "-"


def random_images(*count: int, side: int = 32) -> torch.Tensor:
    """Seeded random uint8 RGB images of shape ``(*count, side, side, 3)``."""
    generator = torch.Generator().manual_seed(0)
    return torch.randint(0, 256, (*count, side, side, 3), generator=generator).to(torch.uint8)


@dataclass(frozen=True)
class Measured:
    """One rate: the timed epochs' instances/s, and how they ran."""

    spread: Spread
    #: Median seconds and steps of a timed epoch (separate runs; fused: the group's epoch).
    seconds: float
    steps: int
    step_mode: str


def measure(method: str, spec: RunSpec, *, warm_epochs: int = 0, repeats: int = 3) -> Measured:
    """Training instances/s of ``repeats`` timed epochs of ``spec.steps`` steps: median and
    range.

    After a one-step warm-up call, one run trains ``warm_epochs`` untimed epochs (1: a
    graph-captured run's capture) and then the timed ones, each on the loop's own clock.
    """
    batch = PAPER_BATCH_SIZE[method]
    images = random_images(batch * spec.steps, side=spec.image_size)
    settings = spec.settings(method, epochs=1, batch_size=batch)
    execution = spec.execution()
    train_representation(settings, images[:batch], seed=0, execution=execution)  # one step
    settings = dataclasses.replace(settings, epochs=warm_epochs + repeats)
    _, history = train_representation(settings, images, seed=0, execution=execution)
    timed = history[warm_epochs:]
    return Measured(
        spread=Spread.of([record["images_per_s"] for record in timed]),
        seconds=float(statistics.median(record["seconds"] for record in timed)),
        steps=int(timed[-1]["steps"]),  # contrastive DA (expanded): 4 x ``steps`` an epoch
        step_mode=str(timed[-1].get("step_mode", spec.step_mode)),
    )


def measure_fused(
    method: str, spec: RunSpec, *, k: int, warm_epochs: int = 0, repeats: int = 3
) -> Measured:
    """Training instances/s of K fused models (all together): median and range of ``repeats``
    timed epochs.

    Each model trains on its own random images with its own seed, after a one-step fused
    warm-up and ``warm_epochs`` untimed epochs (1: a graph-captured group's capture); an
    epoch's time is the fused epoch's (the members share it).

    Raises
    ------
    TrainingDivergedError
        If a model diverged (its rate would not be the group's).
    """
    batch = PAPER_BATCH_SIZE[method]
    images = random_images(k, batch * spec.steps, side=spec.image_size)
    settings = spec.settings(method, epochs=1, batch_size=batch)
    common = {"seeds": list(range(k)), "execution": spec.execution()}
    train_representations_fused(settings, [x[:batch] for x in images], **common)
    histories = []
    settings = dataclasses.replace(settings, epochs=warm_epochs + repeats)
    for result in train_representations_fused(settings, list(images), **common):
        if isinstance(result, Exception):
            raise result
        histories.append(result[1][warm_epochs:])
    rates, seconds = [], []
    for epoch in range(repeats):
        seconds.append(max(history[epoch]["seconds"] for history in histories))
        # The epoch's own step count: contrastive DA (expanded) trains 4 instances per image.
        trained = sum(history[epoch]["steps"] * batch for history in histories)
        rates.append(trained / seconds[-1])
    ran = sorted({str(history[-1]["step_mode"]) for history in histories})
    return Measured(
        spread=Spread.of(rates),
        seconds=float(statistics.median(seconds)),
        steps=int(histories[0][-1]["steps"]),
        step_mode="+".join(ran),  # one group: one mode
    )


def paper_instances(config: dict, method: str) -> list[tuple[str, int, int]]:
    """(data set, training instances trained on, image side) of ``method`` in ``config``."""
    train = config.get("train", {})
    copies = instances_per_image(method, train)
    batch = train.get("batch_size") or PAPER_BATCH_SIZE[method]
    epochs = train.get("epochs", 2048)
    runs = len(config["seeds"]) * len(config.get("splits", {}).get("contamination", [0.0]))
    rows = []
    for name, settings in config["datasets"].items():
        if name not in TRAIN_SETS:
            raise ValueError(f"no training-set size for data set {name!r} in TRAIN_SETS")
        n_classes, per_class, side = TRAIN_SETS[name]
        classes = (settings or {}).get("classes", "all")
        n_classes = n_classes if classes == "all" else len(classes)
        per_epoch = (per_class * copies // batch) * batch  # the last partial batch is dropped
        rows.append((name, n_classes * per_epoch * epochs * runs, side))
    return rows


#: Steps of a timed epoch on the CPU (a smoke run of the harness) unless ``--steps`` says.
CPU_STEPS = 5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_rate_options(parser, cpu_steps=CPU_STEPS)
    parser.add_argument(
        "--methods", nargs="+", choices=TRAINED_METHODS, default=list(TRAINED_METHODS)
    )
    parser.add_argument(
        "--amp", choices=["bfloat16", "float16", "none"], default="bfloat16", help="CUDA only"
    )
    parser.add_argument("--config", type=Path, default=REPO / "config" / "paper.yaml")
    parser.add_argument(
        "--fuse",
        type=int,
        nargs="+",
        default=[1],
        metavar="K",
        help="also time K models trained fused against one separate run, for each K given "
        "(default 1: no)",
    )
    parser.add_argument(
        "--step-mode",
        choices=["eager", "graph", "both"],
        default="eager",
        help="time the eager loop, the graph-captured step (CUDA), or both with the ratio",
    )
    parser.add_argument(
        "--rates-out",
        type=Path,
        default=None,
        metavar="PATH",
        help="append every measured rate to this rate table (pipeline_lib.planning.rates)",
    )
    args = parser.parse_args(argv)
    if args.step_mode != "eager" and args.device != "cuda":
        parser.error("--step-mode graph / both needs --device cuda (the CPU steps eagerly)")
    check_rate_options(parser, args, cpu_steps=CPU_STEPS)
    if min(args.fuse) < 1:
        parser.error("--fuse must be >= 1")
    if max(args.fuse) > 1 and args.amp == "float16":
        parser.error("--fuse needs --amp bfloat16 or none (float16 loss scaling couples models)")
    return args


def spread_percent(spread: Spread) -> str:
    """The range of the timed epochs as a share of their median, e.g. ``2.1``."""
    return f"{100 * (spread.high - spread.low) / spread.median:.1f}"


def print_graph_table(
    args: argparse.Namespace,
    eager: dict[str, float],
    spec: RunSpec,
    timing: dict[str, int],
    *,
    peak: float | None,
    log: RateLog,
) -> dict[str, float]:
    """Graph-captured vs eager instances/s per method (medians, both after a warm epoch).

    Returns the graph-captured rates (medians), per method.
    """
    print("graph-captured step vs eager (instances/s, medians of the timed epochs)")
    print(
        f"{'method':<15}{'eager':>10}{'graph':>10}{'range%':>8}{'ratio':>8}{'TFLOP/s':>9}"
        f"{'% peak':>8}  ran"
    )
    rates = {}
    for method in args.methods:
        options = {**timing, "warm_epochs": 1}  # the capture
        graph = measure(method, dataclasses.replace(spec, step_mode="graph"), **options)
        spread = graph.spread
        log.add(method, graph.step_mode, 1, spread)
        rates[method] = spread.median
        tflops = training_tflops(
            method, width=args.width, instances_per_s=spread.median, image_size=args.image_size
        )
        share = peak_share(tflops, peak)
        print(
            f"{method:<15}{eager[method]:>10.1f}{spread.median:>10.1f}"
            f"{spread_percent(spread):>8}{spread.median / eager[method]:>8.2f}{tflops:>9.3f}"
            f"{share:>8}  {graph.step_mode}"
        )
    return rates


def print_fused_table(
    args: argparse.Namespace,
    k: int,
    separate: dict[str, dict[str, float]],
    spec: RunSpec,
    timing: dict[str, int],
    *,
    log: RateLog,
) -> None:
    """K fused models vs one separate run, per method and step mode of ``separate``."""
    print(f"fused: {k} models in one job vs one separate run (instances/s, medians, same mode)")
    print(
        f"{'method':<15}{'K':>4}{'mode':>7}{'separate':>10}{'fused':>10}{'range%':>8}"
        f"{'speed-up':>10}{'TFLOP/s':>9}{'% peak':>8}  ran"
    )
    for method in args.methods:
        for mode, alone in separate.items():
            fused = measure_fused(method, dataclasses.replace(spec, step_mode=mode), k=k, **timing)
            spread = fused.spread
            log.add(method, fused.step_mode, k, spread)
            rate = spread.median
            tflops = training_tflops(
                method, width=args.width, instances_per_s=rate, image_size=args.image_size
            )
            print(
                f"{method:<15}{k:>4}{mode:>7}{alone[method]:>10.1f}{rate:>10.1f}"
                f"{spread_percent(spread):>8}{rate / alone[method]:>10.2f}{tflops:>9.3f}"
                f"{peak_share(tflops, args.peak_tflops):>8}  {fused.step_mode}"
            )


def main(argv: list[str] | None = None) -> list[Rate]:
    """Print the tables; return the rates measured (the rows ``--rates-out`` gets)."""
    args = parse_args(argv)
    device = torch.device(args.device)
    amp = None if args.amp == "none" else args.amp
    config = yaml.safe_load(args.config.read_text())
    paper_methods = set(config["methods"])
    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    side = args.image_size
    print(
        f"device {name} ({args.device}, amp {amp if device.type == 'cuda' else 'off'}, "
        f"{torch.get_num_threads()} CPU threads), ResNet-18 width {args.width}, {side}x{side}, "
        f"median of {args.repeats} timed epochs of {args.steps} steps after a 1-step warm-up"
    )
    header = (
        f"{'method':<15}{'batch':>6}{'views':>6}{'s/step':>9}{'img/s':>10}{'range%':>8}"
        f"{'views/s':>10}{'GFLOP/step':>12}{'TFLOP/s':>9}{'% peak':>8}{'hours':>10}"
    )
    print(header)
    total_hours = 0.0
    separate: dict[str, float] = {}
    table_mode = "eager" if args.step_mode == "both" else args.step_mode
    warm_epochs = 0 if args.step_mode == "eager" else 1
    spec = RunSpec.from_args(args, device, amp, step_mode=table_mode)
    timing = {"repeats": args.repeats, "warm_epochs": warm_epochs}
    log = RateLog(
        args.rates_out,
        device=device_name(device),
        kind=device.type,
        width=args.width,
        amp=(amp or "none") if device.type == "cuda" else "none",
        steps=args.steps,
        command=None if argv is None else ["benchmarks/bench_train.py", *argv],
        image_size=side,
    )
    for method in args.methods:
        batch, views = PAPER_BATCH_SIZE[method], method_spec(method).views_per_instance
        speed = measure(method, spec, **timing)
        spread = speed.spread
        rate = spread.median
        separate[method] = rate
        log.add(method, speed.step_mode, 1, spread)
        flops = forward_flops_per_view(method, width=args.width, image_size=side)
        step_flops = 3 * flops * views * batch
        tflops = training_tflops(method, width=args.width, instances_per_s=rate, image_size=side)
        share = peak_share(tflops, args.peak_tflops)
        hours = "-"
        if method in paper_methods:
            # Data sets of another side than the one measured: scaled by pixels.
            cost = sum(
                images * (size / side) ** 2 for _, images, size in paper_instances(config, method)
            )
            method_hours = cost / rate / 3600
            total_hours += method_hours
            hours = f"{method_hours:,.0f}"
        seconds_per_step = speed.seconds / speed.steps
        print(
            f"{method:<15}{batch:>6}{views:>6}{seconds_per_step:>9.3f}"
            f"{rate:>10.1f}{spread_percent(spread):>8}{rate * views:>10.1f}"
            f"{step_flops / 1e9:>12.1f}{tflops:>9.3f}{share:>8}{hours:>10}"
        )
    backbone = forward_flops_per_view(
        "rotnet", width=args.width, image_size=side, backbone_only=True
    )
    print(
        f"forward GFLOP per {side}x{side} view: ResNet-18 backbone {backbone / 1e9:.3f} "
        f"(2 FLOPs per multiply-add); step = 3 x forward (backbone + head + proxy) x views "
        f"x batch; range% = (max - min) / median of the timed epochs"
    )
    print(
        f"hours: {args.config.name} (epochs {config.get('train', {}).get('epochs', 2048)}, "
        f"{len(config['seeds'])} seeds, data sets {', '.join(config['datasets'])}; other "
        f"sides than {side} by pixels) on one such device at width {args.width}, trained "
        f"methods of the config: {total_hours:,.0f} in all"
    )
    by_mode = {table_mode: separate}  # the separate rates each fused mode is compared with
    if args.step_mode == "both":
        by_mode["graph"] = print_graph_table(
            args, separate, spec, timing, peak=args.peak_tflops, log=log
        )
    for k in args.fuse:
        if k > 1:
            print_fused_table(args, k, by_mode, spec, timing, log=log)
    log.report()
    return log.rows


if __name__ == "__main__":
    main()
