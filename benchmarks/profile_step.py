"""Profile: where a captured training step's GPU time goes, alone and K runs side by side.

Why: on an H200 (benchmarks/rates/README.md) the contrastive methods reach about 14-16 % of
dense bf16 peak with K = 8-16 captured runs side by side on streams, and more streams stop
paying at K = 8. Whether the rest is the convolutions' own efficiency at 64 views of 32x32,
BatchNorm, the augmentation's elementwise kernels, the MLP head or the optimiser decides what
is worth changing, and only a kernel profile says which.

Per method and K this builds the group that ``bench_streams.py`` times (K runs of the
trainer's own :class:`~pipeline_lib.ssl.stepper.StaticStep`, each on its stream), trains one
epoch (capture) and one more (warm), then profiles a third with ``torch.profiler`` and prints,
per model step: wall time, summed kernel time and kernel count, the share of the profiled
span in which at least one kernel ran (busy), kernel time by category, and the kernels that
take the most time. On the CPU there are no kernels: the CPU operators are reported the same
way (a smoke run of the harness; tests/test_profile_step.py).

``--summary-out FILE`` appends each profile's time per category to a CSV
(:data:`SUMMARY_COLUMNS`: what was profiled, then one row per category and a ``total``), the
summary to commit beside a claim about where a step's time goes (``PROFILE=1
benchmarks/gpu_session.sh`` writes ``$OUT/profiles.csv``).

Usage::

    python benchmarks/profile_step.py --device cuda --methods contrastive_da rotnet --streams 1 8
    python benchmarks/profile_step.py --device cuda --image-size 64 --step-mode compiled \
        --summary-out profiles.csv
    python benchmarks/profile_step.py --device cpu --width 4 --steps 2 --methods rotnet
"""

from __future__ import annotations

import argparse
import datetime
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from bench_options import RunSpec
from bench_streams import device_and_amp, make_group  # a sibling: run from benchmarks/
from bench_tables import append_csv
from torch.profiler import ProfilerActivity, profile

from pipeline_lib.registry import DRAW_SOURCES, TRAINED_METHODS

#: Kernel (or CPU operator) name patterns of each category, tried in this order.
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("batchnorm", r"batch_?norm|bn_fw|bn_bw|bn_bwd|bn_fwd|welford|native_batch_norm"),
    ("optimizer", r"sgd|multi_tensor|foreach"),
    ("convolution", r"conv(?!ert)|fprop|dgrad|wgrad|implicit_gemm|winograd|cudnn"),
    ("matmul", r"gemm|nvjet|cublas|cutlass|matmul|addmm|\bmm\b|bmm|linear"),
    ("loss/softmax", r"softmax|nll|cross_entropy|log_softmax"),
    ("reduction", r"reduce|sum|norm|mean|max|min"),
    ("copy/cast", r"memcpy|memset|copy|cast|to_copy|fill|convert_element_type"),
    (
        "elementwise",
        r"elementwise|vectorized|unrolled|index|gather|scatter|where|mul|add|"
        r"div|sub|clamp|relu|threshold|pow|sqrt|exp|cat|flip|floor|fmod|abs|sign",
    ),
)


#: Inductor's generated kernels (``triton_poi_fused_...``) are named after the ops they
#: fuse; they never run a convolution (those are extern cuDNN calls), and their names carry
#: ``convert_element_type`` (a cast) and ``convolution`` (the op whose epilogue they fuse).
_GENERATED = re.compile(r"^triton_")
_CAST = re.compile(r"convert_element_type|_to_copy")


def category(name: str) -> str:
    """The first category whose pattern matches ``name`` (case-insensitive), else ``other``.

    A generated (Triton) kernel is never a convolution; it is a cast when that is all it
    does besides the ops it names (``convert_element_type``, ``_to_copy``).
    """
    lowered = name.lower()
    generated = bool(_GENERATED.match(lowered))
    if generated:
        lowered = lowered.replace("convolution_backward", "").replace("convolution", "")
    for label, pattern in CATEGORIES:
        if label == "convolution" and generated:
            continue
        if re.search(pattern, lowered):
            return label
    if generated and _CAST.search(lowered):
        return "copy/cast"
    return "other"


@dataclass
class Profile:
    """Kernel (GPU) or operator (CPU) intervals of one profiled epoch, in microseconds."""

    model_steps: int
    wall_us: float
    intervals: list[tuple[str, float, float]] = field(default_factory=list)  # name, start, end
    step_mode: str = ""  # what the runs stepped through: eager, graph or compiled

    @property
    def busy_us(self) -> float:
        """Time in which at least one interval ran (overlapping streams counted once)."""
        busy, reach = 0.0, float("-inf")
        for _, start, end in sorted(self.intervals, key=lambda interval: interval[1]):
            if end <= reach:
                continue
            busy += end - max(start, reach)
            reach = end
        return busy

    def per_step(self, value: float) -> float:
        return value / self.model_steps

    def by(self, key: Any) -> dict[str, tuple[int, float]]:
        """Count and summed time of the intervals grouped by ``key(name)``."""
        table: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        for name, start, end in self.intervals:
            entry = table[key(name)]
            entry[0] += 1
            entry[1] += end - start
        return {label: (int(count), total) for label, (count, total) in table.items()}


def _device_intervals(prof: profile, device: torch.device) -> list[tuple[str, float, float]]:
    """Kernels on CUDA (graph replays included, as CUPTI reports them); top-level CPU ops."""
    wanted = "CUDA" if device.type == "cuda" else "CPU"
    intervals = []
    for event in prof.profiler.kineto_results.events():
        if str(event.device_type()).rsplit(".", 1)[-1] != wanted:
            continue
        name = event.name()
        activity = getattr(event, "activity_type", lambda: "kernel")()
        if device.type == "cuda" and activity not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        if device.type == "cpu" and not name.startswith("aten::"):
            continue
        intervals.append((name, event.start_ns() / 1e3, event.end_ns() / 1e3))
    return intervals


def profile_group(method: str, k: int, spec: RunSpec, *, trace: Path | None = None) -> Profile:
    """Profile the third epoch of K side-by-side runs: ``bench_streams.make_group`` of
    ``spec``."""
    group = make_group(method, k, spec)
    device = spec.device
    for _ in range(2):  # capture, then one warm epoch
        group.train_epoch()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        started = time.perf_counter()
        group.train_epoch()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        wall = time.perf_counter() - started
    if trace is not None:
        prof.export_chrome_trace(str(trace))
    run = group.runs[0]
    result = Profile(
        model_steps=k * run.data.steps_per_epoch, wall_us=wall * 1e6, step_mode=run.step_mode
    )
    result.intervals = _device_intervals(prof, device)
    if device.type == "cpu":  # nested CPU operators would count twice: keep the outermost
        result.intervals = _outermost(result.intervals)
    return result


def _outermost(intervals: list[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    kept: list[tuple[str, float, float]] = []
    reach = float("-inf")
    for interval in sorted(intervals, key=lambda item: (item[1], -item[2])):
        if interval[1] >= reach:
            kept.append(interval)
            reach = interval[2]
    return kept


def report(method: str, k: int, result: Profile, *, top: int) -> None:
    total = sum(end - start for _, start, end in result.intervals)
    step = result.per_step
    print(
        f"\n{method}, K = {k}: per model step {step(result.wall_us):.1f} us wall, "
        f"{step(total):.1f} us of kernels in {step(len(result.intervals)):.1f} kernels; "
        f"busy {100 * result.busy_us / max(result.wall_us, 1e-9):.1f} % of the wall time"
    )
    if not result.intervals:
        print("  no kernels recorded (the profiler saw none of the replayed graphs' kernels)")
        return
    print(f"  {'category':<14}{'us/step':>10}{'share':>8}{'kernels/step':>14}")
    for label, (count, spent) in sorted(result.by(category).items(), key=lambda item: -item[1][1]):
        print(f"  {label:<14}{step(spent):>10.1f}{100 * spent / total:>7.1f}%{step(count):>14.2f}")
    print(f"  {'top kernels':<70}{'us/step':>10}{'per step':>10}{'us each':>10}")
    ranked = sorted(result.by(lambda name: name).items(), key=lambda item: -item[1][1])
    for name, (count, spent) in ranked[:top]:
        print(f"  {name[:68]:<70}{step(spent):>10.1f}{step(count):>10.2f}{spent / count:>10.1f}")


#: The columns of ``--summary-out``: one row per profile and kernel category, with what was
#: profiled; the ``total`` row holds the whole step (its share is 100).
SUMMARY_COLUMNS: tuple[str, ...] = (
    "date",
    "device",
    "torch",
    "method",
    "k",
    "step_mode",
    "image_size",
    "width",
    "amp",
    "draws",
    "model_steps",
    "wall_us_per_step",
    "busy_pct",
    "category",
    "us_per_step",
    "share_pct",
    "kernels_per_step",
)


def summary_rows(result: Profile, context: dict[str, Any]) -> list[dict[str, Any]]:
    """The profile as :data:`SUMMARY_COLUMNS` rows: ``total``, then each category by time."""
    total = sum(end - start for _, start, end in result.intervals)
    step = result.per_step
    shared = {
        **context,
        "step_mode": result.step_mode,
        "model_steps": result.model_steps,
        "wall_us_per_step": round(step(result.wall_us), 2),
        "busy_pct": round(100 * result.busy_us / max(result.wall_us, 1e-9), 2),
    }
    by_category = sorted(result.by(category).items(), key=lambda item: -item[1][1])
    entries = [("total", (len(result.intervals), total)), *by_category]
    return [
        {
            **shared,
            "category": label,
            "us_per_step": round(step(spent), 2),
            "share_pct": round(100 * spent / total, 2) if total else 0.0,
            "kernels_per_step": round(step(count), 3),
        }
        for label, (count, spent) in entries
    ]


def append_summary(path: Path, rows: list[dict[str, Any]]) -> None:
    """Append ``rows`` to the summary CSV at ``path`` (:func:`bench_tables.append_csv`)."""
    append_csv(path, rows, SUMMARY_COLUMNS)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--methods", nargs="+", choices=TRAINED_METHODS, default=["contrastive_da"])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 8], help="values of K")
    parser.add_argument("--width", type=int, default=64, help="ResNet-18 width (default 64)")
    parser.add_argument("--steps", type=int, default=10, help="steps an epoch (default 10)")
    parser.add_argument("--amp", choices=["bfloat16", "none"], default="bfloat16")
    parser.add_argument("--top", type=int, default=15, help="kernels listed (default 15)")
    parser.add_argument("--trace-dir", type=Path, default=None, help="write Chrome traces here")
    parser.add_argument(
        "--step-mode",
        choices=["auto", "compiled"],
        default="auto",
        help="the trainer's step mode (compiled: CUDA only)",
    )
    parser.add_argument("--image-size", type=int, default=32, help="image side (default 32)")
    parser.add_argument("--draws", choices=DRAW_SOURCES, default="host", help="train.draws")
    parser.add_argument(
        "--summary-out",
        type=Path,
        default=None,
        help="append each profile's per-category rows to this CSV (SUMMARY_COLUMNS)",
    )
    args = parser.parse_args(argv)
    if args.step_mode == "compiled" and args.device != "cuda":
        parser.error("--step-mode compiled needs --device cuda")
    if min(args.streams) < 1:
        parser.error("--streams must be positive")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but CUDA is not available")
    return args


def main(argv: list[str] | None = None) -> dict[tuple[str, int], Profile]:
    """Print the profiles; return them (``(method, K) -> Profile``), for the tests."""
    args = parse_args(argv)
    device, amp, name = device_and_amp(args)
    print(
        f"device {name} ({args.device}, amp {amp}), ResNet-18 width {args.width}, "
        f"{args.image_size}x{args.image_size}, step mode {args.step_mode}, draws {args.draws}, "
        f"{args.steps} profiled steps per run"
    )
    context = {
        "date": datetime.date.today().isoformat(),
        "device": name,
        "torch": torch.__version__,
        "image_size": args.image_size,
        "width": args.width,
        "amp": amp or "none",
        "draws": args.draws,
    }
    spec = RunSpec.from_args(args, device, amp)
    results = {}
    for method in args.methods:
        for k in args.streams:
            trace = None
            if args.trace_dir is not None:
                args.trace_dir.mkdir(parents=True, exist_ok=True)
                trace = args.trace_dir / f"{method}_k{k}.json"
            result = profile_group(method, k, spec, trace=trace)
            report(method, k, result, top=args.top)
            if args.summary_out is not None:
                rows = summary_rows(result, {**context, "method": method, "k": k})
                append_summary(args.summary_out, rows)
            results[method, k] = result
    return results


if __name__ == "__main__":
    main()
