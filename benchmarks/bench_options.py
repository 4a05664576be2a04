"""Command-line options, their checks and the run they describe, shared by the benchmark
scripts (a sibling module: the scripts import it as ``bench_options``, run from benchmarks/
or its parent)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

import torch

from pipeline_lib.ssl.settings import Execution, TrainSettings

#: Steps of a timed epoch on CUDA unless ``--steps`` says otherwise.
CUDA_STEPS = 200


def at_least_one(
    parser: argparse.ArgumentParser, args: argparse.Namespace, names: Iterable[str]
) -> argparse.Namespace:
    """``args``, after a usage error (``parser.error``, exit status 2) naming the first
    option of ``names`` (destination names) below 1: a count or size of 0 would time
    nothing."""
    for name in names:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    return args


def add_rate_options(parser: argparse.ArgumentParser, *, cpu_steps: int) -> None:
    """The options of a training-rate benchmark: ``--device``, ``--width``, ``--steps``
    (:data:`CUDA_STEPS` on CUDA, ``cpu_steps`` on the CPU), ``--repeats``, ``--image-size``
    and ``--peak-tflops``; :func:`check_rate_options` completes them."""
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--width", type=int, default=64, help="ResNet-18 width (default 64)")
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help=f"steps of each timed epoch (default {CUDA_STEPS} on CUDA, {cpu_steps} on the CPU)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed epochs a rate is the median of (default 3)"
    )
    parser.add_argument(
        "--image-size",
        type=int,
        choices=[32, 64],
        default=32,
        help="side of the training images (64: Cat-vs-Dog and CelebA; default 32)",
    )
    parser.add_argument("--peak-tflops", type=float, default=None, help="device peak TFLOP/s")


def check_rate_options(
    parser: argparse.ArgumentParser, args: argparse.Namespace, *, cpu_steps: int
) -> argparse.Namespace:
    """``args`` with the device's default ``--steps`` filled in, after a usage error for a
    count below 1 or ``--device cuda`` without CUDA."""
    if args.steps is None:
        args.steps = CUDA_STEPS if args.device == "cuda" else cpu_steps
    at_least_one(parser, args, ("steps", "repeats"))
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but CUDA is not available")
    return args


@dataclass(frozen=True)
class RunSpec:
    """How a training benchmark builds each run it times: ResNet-18 width, steps an epoch,
    device, AMP dtype, the trainer's step mode and draw source, image side."""

    width: int
    steps: int
    device: Any
    amp: str | None
    step_mode: str = "auto"
    image_size: int = 32
    draws: str = "host"

    @classmethod
    def from_args(
        cls, args: argparse.Namespace, device: torch.device, amp: str | None, **fixed: Any
    ) -> RunSpec:
        """The run of the command line: ``device`` and ``amp`` as resolved, the fields in
        ``fixed`` as given, every other field the option of its name (or its default)."""
        options = {f.name: getattr(args, f.name) for f in fields(cls) if f.name in vars(args)}
        return cls(**{**options, "device": device, "amp": amp, **fixed})

    def settings(self, method: str, *, epochs: int, batch_size: int) -> TrainSettings:
        """The training recipe of one run of ``method``."""
        return TrainSettings(
            method, epochs=epochs, batch_size=batch_size, width=self.width, amp=self.amp
        )

    def execution(self) -> Execution:
        """Where and how each run steps."""
        return Execution(device=self.device, step_mode=self.step_mode, draws=self.draws)
