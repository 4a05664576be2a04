"""Benchmark: K separate graph-captured training runs replayed side by side on K CUDA streams.

Why: on an H200 (benchmarks/rates/README.md) one graph-captured job reaches 6-15 % of dense
bf16 peak, and neither of the two ways tried to fill the rest helped: the stacked fused
network (grouped convolutions) trained 0.73-1.05x the images of one captured job, and four
captured jobs packed as processes 1.01x (contrastive DA) to 1.26x (contrastive), since
kernels of different processes time-slice rather than overlap without MPS. Kernels of one
process on different streams can overlap, and a captured fused job runs that way
(:class:`pipeline_lib.ssl.fused.ConcurrentGroup`): K independent runs (own model, data,
seed, optimiser, generators, and :class:`~pipeline_lib.ssl.stepper.StaticStep`, each the
separate trainer's), stepped in turn from one host thread, run ``k``'s host phase and graph
replay on stream ``k``. This script times that group alone, at K = 1, 2, 4, 8.

Per method and K it trains one epoch that captures (each run at its fourth step), timed
apart, and ``--repeats`` (default 3) timed epochs, each one call of the group's epoch of
``--steps`` batches of source images per run (default 200 on CUDA, 20 on the CPU; contrastive DA's
expanded epoch is 4x as many steps), on random images of ``--image-size`` (32 or 64), and
prints the K runs' total training instances/s (as bench_train.py counts them): the median
of the timed epochs and their range (max - min, as a share of the median), the median's
ratio to K = 1, and run 0's weight gap to the K = 1 run of the same seed
(``||w - w_alone|| / ||w_alone - w_0||``): the runs share nothing, so it is 0 unless the
streams race. It found one on an H200: graphs captured on torch's shared capture stream
shared a cuBLAS workspace, and contrastive DA's run 0 ended 0.15 from the run alone (0.0
since each graph captures on its own stream). ``--cudnn default`` measures what the
trainer's deterministic cuDNN kernels cost (nothing measurable there). On the CPU there are
no streams: the runs step one after the other (a smoke run of the harness;
tests/test_bench_streams.py). ``--draws device`` times the candidate ``train.draws: device``
(:mod:`pipeline_lib.ssl.draws`: the random numbers drawn on the GPU inside the captured step,
no host drawing or copy), printed beside the host-drawn rows but not written to a rate
table, which holds the trainer's default only.

Usage::

    python benchmarks/bench_streams.py --device cuda                       # K = 1, 2, 4, 8
    python benchmarks/bench_streams.py --device cpu --width 4 --steps 2 --streams 1 2
    python benchmarks/bench_streams.py --device cuda --image-size 64 --rates-out rates.csv
    python benchmarks/bench_streams.py --device cuda --image-size 64 --draws device
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch._dynamo
from bench_options import RunSpec, add_rate_options, at_least_one, check_rate_options

from pipeline_lib.models.embed import extract_embeddings
from pipeline_lib.models.flops import training_tflops
from pipeline_lib.planning.rates import Overheads
from pipeline_lib.planning.timing import (
    RateLog,
    Spread,
    capture_seconds,
    median_seconds,
    time_repeats,
)
from pipeline_lib.registry import TRAINED_METHODS, default_batch_size
from pipeline_lib.runtime.devices import device_name
from pipeline_lib.ssl.compiling import eager_copy
from pipeline_lib.ssl.fused import ConcurrentGroup
from pipeline_lib.ssl.loop import divergence, epoch_record, write_checkpoint
from pipeline_lib.ssl.run import TrainingState, prepare_run


def make_group(method: str, k: int, spec: RunSpec, *, epochs: int = 2) -> ConcurrentGroup:
    """K runs of seeds 0..K-1, each on its own seeded random images, as the trainer groups
    captured fused runs (:class:`pipeline_lib.ssl.fused.ConcurrentGroup`)."""
    batch = default_batch_size(method)
    runs, states = [], []
    for seed in range(k):
        generator = torch.Generator().manual_seed(seed)
        shape = (batch * spec.steps, spec.image_size, spec.image_size, 3)
        images = torch.randint(0, 256, shape, generator=generator)
        settings = spec.settings(method, epochs=epochs, batch_size=batch)
        run, state = prepare_run(
            settings, images.to(torch.uint8), seed=seed, execution=spec.execution()
        )
        runs.append(run)
        states.append(state)
    return ConcurrentGroup(list(range(k)), runs, states)


def _weights(state: TrainingState) -> dict[str, torch.Tensor]:
    return {
        name: value.detach().to("cpu", torch.float64)
        for name, value in state.model.state_dict().items()
        if value.is_floating_point()
    }


#: Images a measured embedding rate is timed over (at most; fewer in a smoke run).
EMBED_IMAGES = 10_000


def measure_overheads(
    group: ConcurrentGroup,
    losses: torch.Tensor,
    first_epoch_s: float,
    steady: Spread,
    *,
    repeats: int,
    sync: Callable[[], object],
) -> Overheads:
    """The group's per-job costs besides its steps, by the trainer's own epoch-end and
    checkpoint functions (:mod:`pipeline_lib.ssl.loop`), as the fused loop calls them."""
    run = group.runs[0]
    instances = len(group.runs) * run.data.steps_per_epoch * run.data.per_step
    members = list(zip(group.runs, group.states, strict=True))

    def epoch_end() -> None:
        for index, (member, state) in enumerate(members):
            error = divergence(member, losses[index], state.model, 0)
            if error is not None:
                raise error
            epoch_record(member, 0, losses[index], 1.0, group.mode)

    with tempfile.TemporaryDirectory(prefix="bench-checkpoints-") as folder:

        def checkpoint() -> None:
            for index, (member, state) in enumerate(members):
                write_checkpoint(member, state, Path(folder) / f"run{index}.pt")

        checkpoint_s = median_seconds(checkpoint, repeats=repeats, sync=sync)
    return Overheads(
        capture_s=capture_seconds(first_epoch_s, steady, instances),
        epoch_end_s=median_seconds(epoch_end, repeats=repeats, sync=sync),
        checkpoint_s=checkpoint_s,
    )


def embedding_rate(
    state: TrainingState,
    *,
    images: int,
    image_size: int,
    batch_size: int,
    device: torch.device,
    repeats: int,
    sync: Callable[[], object],
) -> float:
    """Images/s an uncompiled copy of the run's network embeds (``embed_trained``'s
    :func:`~pipeline_lib.models.embed.extract_embeddings`), after one warm-up batch."""
    model = eager_copy(state.model)
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (images, image_size, image_size, 3), dtype=np.uint8)

    def embed(part: np.ndarray = pixels) -> None:
        extract_embeddings(model, part, batch_size=batch_size, device=device)

    embed(pixels[:batch_size])
    return images / median_seconds(embed, repeats=repeats, sync=sync)


def measure(
    method: str,
    k: int,
    spec: RunSpec,
    *,
    cudnn: str = "deterministic",
    repeats: int = 1,
    embed_batch_size: int = 512,
) -> dict[str, Any]:
    """Instances/s of K runs stepped side by side, run 0's weights and mode, the
    overheads and (K = 1) the embedding rate.

    The rate (``spread``) is the median and range of ``repeats`` timed epochs after the
    epoch that captures; ``images_per_s`` is its median.

    ``cudnn="default"`` undoes the trainer's deterministic choice (made when a run is
    prepared, :func:`pipeline_lib.runtime.devices.use_deterministic_kernels`) before the
    first step, to measure what determinism costs.
    """
    group = make_group(method, k, spec, epochs=1 + repeats)
    device = spec.device
    if cudnn == "default":
        torch.backends.cudnn.deterministic = False
    initial = _weights(group.states[0])
    run = group.runs[0]
    instances = k * run.data.steps_per_epoch * run.data.per_step

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    last: list[torch.Tensor] = []

    def epoch() -> None:
        last[:] = [group.train_epoch()]

    with run.precision():  # amp none: float32 without TF32, as the trainer
        first_epoch_s = median_seconds(epoch, repeats=1, sync=sync)  # captures
        spread = time_repeats(
            epoch, repeats=repeats, instances=instances, clock=time.perf_counter, sync=sync
        )
    weights = _weights(group.states[0])
    overheads = measure_overheads(group, last[0], first_epoch_s, spread, repeats=repeats, sync=sync)
    embed = None
    if k == 1:
        embed = embedding_rate(
            group.states[0],
            images=min(EMBED_IMAGES, instances),
            image_size=spec.image_size,
            batch_size=embed_batch_size,
            device=device,
            repeats=repeats,
            sync=sync,
        )
    return {
        "images_per_s": spread.median,
        "spread": spread,
        "overheads": overheads,
        "embed_images_per_s": embed,
        "weights": weights,
        "initial": initial,
        "mode": group.mode,
        "peak_mib": torch.cuda.max_memory_allocated(device) / 2**20
        if device.type == "cuda"
        else 0.0,
    }


def relative_gap(weights: dict, reference: dict, initial: dict) -> float:
    gap = sum(float(((weights[n] - reference[n]) ** 2).sum()) for n in reference)
    moved = sum(float(((reference[n] - initial[n]) ** 2).sum()) for n in reference)
    return (gap / moved) ** 0.5


#: Steps of a timed epoch on the CPU (a smoke run of the harness) unless ``--steps`` says.
CPU_STEPS = 20


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_rate_options(parser, cpu_steps=CPU_STEPS)
    parser.add_argument("--methods", nargs="+", choices=TRAINED_METHODS, default=TRAINED_METHODS)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 2, 4, 8], help="values of K")
    parser.add_argument(
        "--embed-batch-size",
        type=int,
        default=512,
        help="images per forward pass of the embedding rate (config/paper.yaml's "
        "embed.batch_size; default 512)",
    )
    parser.add_argument("--amp", choices=["bfloat16", "none"], default="bfloat16")
    parser.add_argument(
        "--cudnn",
        choices=["deterministic", "default"],
        default="deterministic",
        help="cuDNN's algorithms: deterministic (the trainer's) or its default choice, to "
        "measure what determinism costs (rates of 'default' are not written to --rates-out)",
    )
    parser.add_argument(
        "--step-mode",
        choices=["auto", "compiled"],
        default="auto",
        help="auto: the graph-captured step on CUDA (two-phase, uncaptured, on the CPU); "
        "compiled: the same with the network compiled by inductor (CUDA only; "
        "pipeline_lib.ssl.compiling)",
    )
    parser.add_argument(
        "--draw-ahead",
        choices=["on", "off"],
        default="on",
        help="on (the trainer's): each run's next random numbers are drawn on a worker "
        "thread; off: the one host thread draws them in turn, to measure what that buys "
        "(rates of 'off' are not written to --rates-out)",
    )
    parser.add_argument(
        "--draws",
        choices=["host", "device"],
        default="host",
        help="where the steps' random numbers are drawn (train.draws): host (the trainer's "
        "default) or device, the candidate that draws them on the GPU inside the captured "
        "step (rates of 'device' are not written to --rates-out)",
    )
    parser.add_argument(
        "--rates-out",
        type=Path,
        default=None,
        help="append each K's rate to this rate table (pipeline_lib.planning.rates) as a graph "
        "fuse-K row: what a captured fused job (train.fuse: K) trains at",
    )
    args = parser.parse_args(argv)
    check_rate_options(parser, args, cpu_steps=CPU_STEPS)
    at_least_one(parser, args, ("embed_batch_size",))
    if 1 not in args.streams or min(args.streams) < 1:
        parser.error("--streams must hold 1 (the baseline) and positive values only")
    if args.step_mode == "compiled" and args.device != "cuda":
        parser.error("--step-mode compiled needs --device cuda")
    return args


def device_and_amp(args: argparse.Namespace) -> tuple[torch.device, str | None, str]:
    """``--device`` as a device, the AMP dtype (None with ``--amp none`` and on the CPU) and
    the device's name for the table's header."""
    device = torch.device(args.device)
    amp = None if args.amp == "none" or device.type == "cpu" else args.amp
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    return device, amp, name


def main(argv: list[str] | None = None) -> dict[str, dict[int, dict[str, Any]]]:
    """Print the table; return the measurements (method -> K -> numbers), for the tests."""
    args = parse_args(argv)
    ConcurrentGroup.draw_ahead = args.draw_ahead == "on"
    device, amp, name = device_and_amp(args)
    print(
        f"device {name} ({args.device}, amp {amp}), ResNet-18 width {args.width}, "
        f"{args.image_size}x{args.image_size}, median of {args.repeats} timed epochs of "
        f"{args.steps} steps per run after one epoch that captures, cuDNN {args.cudnn}, "
        f"step mode {args.step_mode}, draws {args.draws}, draw ahead {args.draw_ahead}; "
        "TFLOP/s: all K runs' model FLOPs; capture: the first epoch beyond a steady one; "
        "end: an epoch's end; ckpt: one checkpoint of every run; embed: images/s embedded"
    )
    print(
        f"{'method':<16}{'K':>3}{'img/s':>11}{'range%':>8}{'vs K=1':>8}{'TFLOP/s':>9}{'% peak':>8}"
        f"{'gap run 0':>11}{'MiB':>8}{'capture s':>10}{'end ms':>8}{'ckpt s':>8}{'embed/s':>9}"
        "  ran"
    )
    log = RateLog(
        args.rates_out,
        device=device_name(device),
        kind=device.type,
        width=args.width,
        amp=amp or "none",
        steps=args.steps,
        command=None if argv is None else ["benchmarks/bench_streams.py", *argv],
        image_size=args.image_size,
    )
    spec = RunSpec.from_args(args, device, amp)
    results: dict[str, dict[int, dict[str, Any]]] = {}
    for method in args.methods:
        if args.step_mode == "compiled":
            # This process compiles every method: each starts from an empty dynamo cache, so
            # none meets dynamo's recompile limit (a trainer process compiles one method).
            torch._dynamo.reset()
        results[method] = {}
        for k in sorted(args.streams):
            result = measure(
                method,
                k,
                spec,
                cudnn=args.cudnn,
                repeats=args.repeats,
                embed_batch_size=args.embed_batch_size,
            )
            results[method][k] = result
            # Captured runs side by side are the trainer's fused job (graph, fuse K); on the
            # CPU the runs step in turn, uncaptured ("two_phase"): RateLog skips that row.
            if args.cudnn == "deterministic" and args.draw_ahead == "on" and args.draws == "host":
                log.add(
                    method,
                    result["mode"],
                    k,
                    result["spread"],
                    overheads=result["overheads"],
                    embed_images_per_s=result["embed_images_per_s"],
                )
            alone = results[method][1]
            result["ratio"] = result["images_per_s"] / alone["images_per_s"]
            result["gap"] = relative_gap(result["weights"], alone["weights"], alone["initial"])
            tflops = training_tflops(
                method,
                width=args.width,
                instances_per_s=result["images_per_s"],
                image_size=args.image_size,
            )
            spread = result["spread"]
            range_percent = 100 * (spread.high - spread.low) / spread.median
            share = f"{100 * tflops / args.peak_tflops:.1f}" if args.peak_tflops else "-"
            cost = result["overheads"]
            embed = result["embed_images_per_s"]
            print(
                f"{method:<16}{k:>3}{result['images_per_s']:>11.1f}{range_percent:>8.1f}"
                f"{result['ratio']:>8.2f}"
                f"{tflops:>9.3f}{share:>8}"
                f"{result['gap']:>11.1e}{result['peak_mib']:>8.0f}"
                f"{cost.capture_s:>10.2f}{1000 * cost.epoch_end_s:>8.1f}{cost.checkpoint_s:>8.2f}"
                f"{'-' if embed is None else f'{embed:.0f}':>9}  {result['mode']}",
                flush=True,
            )
    log.report()
    return results


if __name__ == "__main__":
    main()
