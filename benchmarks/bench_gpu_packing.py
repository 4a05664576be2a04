"""Benchmark: N training jobs sharing one device against one job alone (GPU packing).

For each N of ``--jobs`` (default 1 and 4) the script starts N worker processes at once, as
Snakemake would start N ``train_representation`` jobs given ``--resources gpu=N`` on one GPU.
Each worker, like a real job, takes its device through
:func:`pipeline_lib.runtime.devices.job_device` (a lock-file slot on the least-loaded visible
GPU; every worker sees only ``--gpu``), then runs
:func:`pipeline_lib.ssl.train.train_representation` on random uint8 32x32 images at the paper's
batch size (32 instances a step for the contrastive methods, 64 otherwise):

* an untimed warm-up call of one step (CUDA context, cuDNN algorithm choice, allocator);
* a barrier, so all N workers start the timed part together;
* epochs of ``--steps-per-epoch`` steps until ``--seconds`` have passed (the first timed
  epoch is left out as a second warm-up); each epoch ends with the loop's own host sync.

A worker's rate is its training instances (source images; contrastive DA: its expanded
rotated copies) over its timed seconds; the aggregate of N workers is
the sum of their rates (their timed windows overlap: same start, same length). The speed-up
is aggregate(N) / aggregate(1): above 1 means packing pays, about N means the device was
mostly idle with one job. GPU memory per worker (peak allocated) tells how many fit.

On the CPU the same runs work (tiny settings below), with ``--threads`` CPU threads split
evenly between the N workers, which mostly shows the harness works: 2 CPU cores do not get
faster by packing.

Usage::

    python benchmarks/bench_gpu_packing.py --device cuda                       # 1 and 4 jobs
    python benchmarks/bench_gpu_packing.py --device cuda --jobs 1 2 4 8 --seconds 10
    python benchmarks/bench_gpu_packing.py --device cpu --width 8 --steps-per-epoch 2 \
        --seconds 2 --jobs 1 2                                              # CPU smoke run

The numbers depend on the machine and its load: the script prints what it measured in this
run only.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import queue
import tempfile
import time
import traceback
from typing import Any

from pipeline_lib.registry import TRAINED_METHODS, default_batch_size

#: Source images per step in the paper (docs/protocol.md, "Training recipe").
PAPER_BATCH_SIZE: dict[str, int] = {m: default_batch_size(m) for m in TRAINED_METHODS}


class _Done(Exception):
    """Raised from the epoch callback once the timed window is over."""


def _worker(settings: dict[str, Any], barrier: Any, results: Any) -> None:
    """One training job: slot, warm-up, barrier, timed epochs; puts its numbers on ``results``."""
    try:
        import torch

        from pipeline_lib.runtime.devices import job_device, set_threads
        from pipeline_lib.ssl.settings import Execution, TrainSettings
        from pipeline_lib.ssl.train import train_representation

        set_threads(settings["threads"])
        batch = PAPER_BATCH_SIZE[settings["method"]]
        generator = torch.Generator().manual_seed(settings["rank"])
        images = torch.randint(
            0, 256, (batch * settings["steps_per_epoch"], 32, 32, 3), generator=generator
        ).to(torch.uint8)
        recipe = TrainSettings(
            settings["method"],
            epochs=1,
            batch_size=batch,
            width=settings["width"],
            amp=settings["amp"],
        )
        gpus = 1 if settings["device"] == "cuda" else 0
        with job_device(gpus, lock_dir=settings["lock_dir"]) as device:
            common = {
                "seed": settings["rank"],
                "execution": Execution(device=device, step_mode=settings["step_mode"]),
            }
            train_representation(recipe, images[:batch], **common)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            records: list[dict[str, float]] = []
            barrier.wait(timeout=600)
            start = time.perf_counter()

            def stop_when_done(record: dict[str, float]) -> None:
                records.append(record)
                if time.perf_counter() - start >= settings["seconds"] and len(records) >= 2:
                    raise _Done

            try:
                train_representation(
                    dataclasses.replace(recipe, epochs=10**6),
                    images,
                    callback=stop_when_done,
                    **common,
                )
            except _Done:
                pass
            timed = records[1:]  # the first timed epoch is a second warm-up
            seconds = sum(record["seconds"] for record in timed)
            # The epochs' own steps: contrastive DA (expanded) trains 4 instances per image.
            n_images = batch * sum(record["steps"] for record in timed)
            peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
            results.put(
                {
                    "rank": settings["rank"],
                    "device": str(device),
                    "images_per_s": n_images / seconds,
                    "epochs": len(timed),
                    "peak_mib": peak / 2**20,
                }
            )
    except BaseException as error:  # noqa: BLE001 - reported by the parent, which goes on
        barrier.abort()
        results.put({"rank": settings["rank"], "error": f"{type(error).__name__}: {error}"})
        traceback.print_exc()


def run_packed(n_jobs: int, args: argparse.Namespace, lock_dir: str) -> list[dict[str, Any]]:
    """Start ``n_jobs`` workers at once and return their results (one dict each)."""
    context = multiprocessing.get_context("spawn")  # CUDA cannot be used after fork
    barrier = context.Barrier(n_jobs)
    results = context.Queue()
    threads = max(1, args.threads // n_jobs)
    workers = []
    for rank in range(n_jobs):
        settings = {
            "rank": rank,
            "method": args.method,
            "width": args.width,
            "steps_per_epoch": args.steps_per_epoch,
            "seconds": args.seconds,
            "device": args.device,
            "amp": None if args.amp == "none" else args.amp,
            "step_mode": args.step_mode,
            "threads": threads,
            "lock_dir": lock_dir,
        }
        worker = context.Process(target=_worker, args=(settings, barrier, results))
        worker.start()
        workers.append(worker)
    collected = []
    deadline = time.monotonic() + args.seconds + args.startup_timeout
    while len(collected) < n_jobs:
        try:
            collected.append(results.get(timeout=max(1.0, deadline - time.monotonic())))
        except queue.Empty:
            collected.append({"rank": -1, "error": "timed out waiting for a worker"})
            break
    for worker in workers:
        worker.join(timeout=30)
        if worker.is_alive():
            worker.kill()
            worker.join()
    return sorted(collected, key=lambda result: result["rank"])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--gpu", default="0", help="the one GPU all workers share (cuda)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 4], help="values of N")
    parser.add_argument("--method", choices=sorted(PAPER_BATCH_SIZE), default="contrastive")
    parser.add_argument("--width", type=int, default=64, help="ResNet-18 width (default 64)")
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds per N")
    parser.add_argument("--steps-per-epoch", type=int, default=10)
    parser.add_argument("--amp", choices=["bfloat16", "float16", "none"], default="bfloat16")
    parser.add_argument("--peak-tflops", type=float, default=None, help="device peak TFLOP/s")
    parser.add_argument(
        "--step-mode",
        choices=["auto", "eager", "graph"],
        default="auto",
        help="each job's training step (auto: graph-captured on CUDA, eager elsewhere)",
    )
    parser.add_argument(
        "--threads", type=int, default=os.cpu_count() or 1, help="CPU threads, split over N"
    )
    parser.add_argument(
        "--startup-timeout", type=float, default=300.0, help="seconds allowed for start-up"
    )
    args = parser.parse_args(argv)
    if min(args.jobs) < 1 or args.seconds <= 0 or args.steps_per_epoch < 1:
        parser.error("--jobs, --seconds and --steps-per-epoch must be positive")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda but CUDA is not available")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.device == "cuda":
        # Workers are spawned after this, so they all see exactly the one GPU.
        os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu
    import torch

    from pipeline_lib.models.flops import training_tflops

    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "CPU"
    print(
        f"device {name} ({args.device}), {args.method} at batch {PAPER_BATCH_SIZE[args.method]}, "
        f"ResNet-18 width {args.width}, step mode {args.step_mode}, "
        f"{args.seconds:g} s timed per N, "
        f"{args.threads} CPU threads split over the N workers"
    )
    print(
        f"{'N':>3}{'img/s per job':>15}{'aggregate img/s':>17}{'speed-up':>10}"
        f"{'TFLOP/s':>9}{'% peak':>8}{'peak MiB/job':>14}"
    )
    baseline = None
    summary = []
    with tempfile.TemporaryDirectory(prefix="droc-gpu-slots-") as lock_dir:
        for n_jobs in args.jobs:
            results = run_packed(n_jobs, args, lock_dir)
            errors = [result["error"] for result in results if "error" in result]
            if errors:
                print(f"{n_jobs:>3}  failed: {errors[0]}")
                continue
            devices = sorted({result["device"] for result in results})
            aggregate = sum(result["images_per_s"] for result in results)
            baseline = aggregate if baseline is None and n_jobs == 1 else baseline
            speedup = f"{aggregate / baseline:.2f}x" if baseline else "-"
            peak = max(result["peak_mib"] for result in results)
            tflops = training_tflops(args.method, width=args.width, instances_per_s=aggregate)
            share = f"{100 * tflops / args.peak_tflops:.1f}" if args.peak_tflops else "-"
            print(
                f"{n_jobs:>3}{aggregate / n_jobs:>15.1f}{aggregate:>17.1f}{speedup:>10}"
                f"{tflops:>9.3f}{share:>8}{peak:>14.0f}   on {', '.join(devices)}"
            )
            summary.append((n_jobs, aggregate))
    if baseline is None or len(summary) < 2:
        print("RESULT: incomplete (need N=1 and another N that both finished)")
        return
    others = ", ".join(
        f"N={n}: {rate:.1f} img/s = {rate / baseline:.2f}x" for n, rate in summary if n != 1
    )
    print(
        f"RESULT: {args.method} on {name}: N=1: {baseline:.1f} img/s; {others} "
        f"(aggregate instances/s of N packed jobs vs one)"
    )


if __name__ == "__main__":
    main()
