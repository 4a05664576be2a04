"""Check: fused training (pipeline_lib.ssl.fused) against separate runs on a device.

For each method, K models (own random images, own seed) are trained for ``--steps`` steps at
the paper's batch size, once fused and once separately, and the script prints, per method,
the largest over the K models of

    ||w_fused - w_separate|| / ||w_separate - w_initial||

(all parameters, as one vector) beside the same ratio between the separate runs and separate
runs whose convolutions use the other memory format (``floor``: channels-last on the CPU,
contiguous on CUDA; the same arithmetic summed in another order). Small networks trained
from scratch amplify rounding step by step (contrastive DA most), so neither ratio is tiny
after a few steps; fused training is correct when its ratio is of the order of the floor,
well below 1 (a mix-up of data, views, statistics or optimiser state gives a ratio of order
1 from the first step). tests/ssl/test_fused.py checks the same on the CPU exactly, in
float64. ``--step-mode`` applies to both sides: ``eager`` checks the stacked network;
``graph`` (CUDA) a captured fused job, which runs each model's own captured step side by
side on streams (since 2026-11-27), so its ratio is cuDNN's run-to-run difference, 0 with
deterministic kernels. ``auto`` (default) is graph on CUDA and eager on the CPU.

Usage::

    python benchmarks/check_fused.py --device cuda --k 4 --steps 3     # about a minute
    python benchmarks/check_fused.py --width 8 --steps 1 --k 2         # CPU smoke run
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

import torch
from bench_options import RunSpec

import pipeline_lib.ssl.run as run_module
from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.registry import TRAINED_METHODS, default_batch_size
from pipeline_lib.ssl.fused import train_representations_fused
from pipeline_lib.ssl.run import stream_seed
from pipeline_lib.ssl.train import train_representation


def _vector(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().float().flatten().cpu() for p in model.parameters()])


def _initial(method: str, seed: int, width: int) -> torch.Tensor:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(stream_seed(seed, 0))
        return _vector(build_proxy_model(method, width=width, image_size=32))


@contextlib.contextmanager
def _other_memory_format() -> Iterator[None]:
    """Separate runs whose model uses the other memory format than the trainer's."""
    fresh = run_module._fresh_state

    def swapped(*args, **kwargs):
        state = fresh(*args, **kwargs)
        cuda = next(state.model.parameters()).is_cuda
        other = torch.contiguous_format if cuda else torch.channels_last
        state.model.to(memory_format=other)
        return state

    run_module._fresh_state = swapped
    try:
        yield
    finally:
        run_module._fresh_state = fresh


def check(method: str, spec: RunSpec, *, k: int) -> tuple[float, float]:
    """(fused-vs-separate ratio, separate-vs-separate floor), the largest over the K models."""
    batch = default_batch_size(method)
    generator = torch.Generator().manual_seed(0)
    shape = (k, batch * spec.steps, spec.image_size, spec.image_size, 3)
    images = torch.randint(0, 256, shape, generator=generator)
    sets = list(images.to(torch.uint8))
    settings = spec.settings(method, epochs=1, batch_size=batch)
    execution = spec.execution()
    fused = train_representations_fused(settings, sets, seeds=list(range(k)), execution=execution)
    ratio = floor = 0.0
    for seed, result in enumerate(fused):
        if isinstance(result, Exception):
            raise result
        separate = [
            _vector(train_representation(settings, sets[seed], seed=seed, execution=execution)[0])
        ]
        with _other_memory_format():
            model, _ = train_representation(settings, sets[seed], seed=seed, execution=execution)
        separate.append(_vector(model))
        update = (separate[0] - _initial(method, seed, spec.width)).norm()
        ratio = max(ratio, float((_vector(result[0]) - separate[0]).norm() / update))
        floor = max(floor, float((separate[1] - separate[0]).norm() / update))
    return ratio, floor


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--k", type=int, default=4, help="models fused (default 4)")
    parser.add_argument("--steps", type=int, default=3, help="training steps (default 3)")
    parser.add_argument("--width", type=int, default=64, help="ResNet-18 width (default 64)")
    parser.add_argument(
        "--methods", nargs="+", choices=TRAINED_METHODS, default=list(TRAINED_METHODS)
    )
    parser.add_argument("--amp", choices=["bfloat16", "none"], default="bfloat16")
    parser.add_argument("--step-mode", choices=["auto", "eager", "graph"], default="auto")
    args = parser.parse_args(argv)
    if args.k < 2 or args.steps < 1:
        parser.error("need --k >= 2 and --steps >= 1")
    device = torch.device(args.device)
    amp = None if args.amp == "none" else args.amp
    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    print(
        f"device {name}, amp {amp if device.type == 'cuda' else 'off'}, width {args.width}, "
        f"K {args.k}, {args.steps} steps, step mode {args.step_mode}; "
        "ratio = ||fused - separate|| / ||update||"
    )
    print(f"{'method':<15}{'ratio':>10}{'floor':>10}")
    for method in args.methods:
        ratio, floor = check(method, RunSpec.from_args(args, device, amp), k=args.k)
        print(f"{method:<15}{ratio:>10.2e}{floor:>10.2e}")


if __name__ == "__main__":
    main()
