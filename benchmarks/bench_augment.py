"""Benchmark: batched on-device view augmentation against per-image torchvision in a DataLoader.

Both sides produce one augmented float32 view per image of the same 5,000 random uint8
CIFAR-sized images, in batches of 256:

* ours: :class:`pipeline_lib.ssl.augment.ViewAugment` on whole batches (crop + flip, colour
  jitter in random order, grayscale), on ``--device`` with ``--threads`` torch threads;
* torchvision: ``transforms.v2`` per image (``RandomResizedCrop(32, scale=(0.25, 1),
  ratio=(1, 1))`` -- the crop-side range [0.5 H, H] -- ``RandomHorizontalFlip``,
  ``ColorJitter(0.4, 0.4, 0.4, 0.4)``, ``RandomGrayscale(0.2)``, ``ToDtype``) in a
  ``DataLoader`` with ``--workers`` worker processes.

Each side runs one untimed warm-up pass (worker start-up, allocator), then ``--repeats``
timed passes; the best pass is reported. The numbers depend on the machine and its load:
the script prints what it measured in this run only.

Usage::

    python benchmarks/bench_augment.py                    # 5000 images, 2 threads/workers
    python benchmarks/bench_augment.py --n-images 1000    # smoke run
"""

from __future__ import annotations

import argparse
import time

import torch
from bench_options import at_least_one
from torch.utils.data import DataLoader, Dataset
from torchvision import tv_tensors
from torchvision.transforms import v2

from pipeline_lib.ssl.augment import ViewAugment


class _PerImage(Dataset):
    """Applies a torchvision transform to one CHW uint8 image at a time."""

    def __init__(self, images: torch.Tensor, transform: v2.Transform) -> None:
        self.images = images
        self.transform = transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.transform(tv_tensors.Image(self.images[index]))


def torchvision_pipeline(size: int) -> v2.Transform:
    """The per-image reference pipeline (see the module docstring)."""
    return v2.Compose(
        [
            v2.RandomResizedCrop(size, scale=(0.25, 1.0), ratio=(1.0, 1.0), antialias=True),
            v2.RandomHorizontalFlip(0.5),
            v2.ColorJitter(0.4, 0.4, 0.4, 0.4),
            v2.RandomGrayscale(0.2),
            v2.ToDtype(torch.float32, scale=True),
        ]
    )


def time_ours(
    images: torch.Tensor, *, batch_size: int, repeats: int, device: torch.device
) -> float:
    """Best images/s of :class:`ViewAugment` over ``repeats`` passes (after one warm-up)."""
    augment = ViewAugment()
    generator = torch.Generator().manual_seed(0)
    data = images.to(device)
    best = 0.0
    for repeat in range(repeats + 1):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for first in range(0, len(data), batch_size):
            views = augment(data[first : first + batch_size], generator)
        if device.type == "cuda":
            torch.cuda.synchronize()
        rate = len(data) / (time.perf_counter() - start)
        if repeat > 0:
            best = max(best, rate)
    assert views.dtype == torch.float32  # noqa: S101 - a benchmark's self-check
    return best


def time_torchvision(images: torch.Tensor, *, batch_size: int, repeats: int, workers: int) -> float:
    """Best images/s of the per-image DataLoader over ``repeats`` epochs (after a warm-up)."""
    loader = DataLoader(
        _PerImage(images, torchvision_pipeline(images.shape[-1])),
        batch_size=batch_size,
        num_workers=workers,
        persistent_workers=workers > 0,
    )
    best = 0.0
    for repeat in range(repeats + 1):
        start = time.perf_counter()
        for batch in loader:  # noqa: B007 (the last batch is checked below)
            pass
        rate = len(images) / (time.perf_counter() - start)
        if repeat > 0:
            best = max(best, rate)
    assert batch.dtype == torch.float32  # noqa: S101 - a benchmark's self-check
    return best


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-images", type=int, default=5000)
    parser.add_argument("--size", type=int, default=32, help="image side (default 32)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes (best is kept)")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    parser.add_argument("--threads", type=int, default=2, help="torch threads for ours")
    parser.add_argument("--device", default="cpu", help="device for ours (default cpu)")
    parser.add_argument("--seed", type=int, default=0)
    return at_least_one(
        parser, parser.parse_args(argv), ("n_images", "size", "batch_size", "repeats", "threads")
    )


def main(argv: list[str] | None = None) -> float:
    """Run both pipelines, print images/s and the ratio; return the ratio."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(args.seed)
    images = torch.randint(
        0, 256, (args.n_images, 3, args.size, args.size), dtype=torch.uint8, generator=generator
    )
    print(
        f"{args.n_images} random uint8 images 3x{args.size}x{args.size}, batch {args.batch_size}, "
        f"best of {args.repeats} passes"
    )
    ours = time_ours(
        images, batch_size=args.batch_size, repeats=args.repeats, device=torch.device(args.device)
    )
    print(f"ours (batched, {args.device}, {args.threads} threads): {ours:12,.0f} images/s")
    reference = time_torchvision(
        images, batch_size=args.batch_size, repeats=args.repeats, workers=args.workers
    )
    print(f"torchvision v2 per image ({args.workers} workers): {reference:10,.0f} images/s")
    ratio = ours / reference
    print(f"speed-up: {ratio:.1f}x")
    return ratio


if __name__ == "__main__":
    main()
