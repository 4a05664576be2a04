"""Time the MVTec patch pipeline per category: read, train, dense embedding, KDE scoring.

Runs the same library calls as the DAG's jobs (without Snakemake's job starts) on the
categories of an MVTec config, by default the CPU-sized `config/mvtec_bottle_reduced.yaml`
on the real `bottle` copy, and prints seconds per stage and method, the category's total,
and the dense-embedding throughput. Overrides bring it to the paper's sizes on a GPU::

    .venv/bin/python benchmarks/bench_patches.py                      # reduced config, CPU
    .venv/bin/python benchmarks/bench_patches.py --device cuda --stride 4 --width 64 \\
        --max-fit all --epochs 1 --embed-batch 4096 --kde-chunk 8192

It also times the batched ``unfold`` embedding against a naive one (crop every patch with
numpy, then embed the crops) on two test images and prints the ratio.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from pipeline_lib.data.mvtec import MVTecCategory, read_mvtec_category, resolve_category_paths
from pipeline_lib.models.embed import extract_embeddings
from pipeline_lib.models.representation import build_representation
from pipeline_lib.mvtec.localize import IMAGE_SIZE, PATCH_SIZE, STRIDE, grid_side
from pipeline_lib.mvtec.patches import (
    PatchOptions,
    embed_category_patches,
    embed_patches,
    score_category,
    train_on_patches,
)
from pipeline_lib.registry import is_trained, method_spec, method_training
from pipeline_lib.ssl.settings import Execution, TrainSettings

REPO = Path(__file__).resolve().parents[1]


def _seconds(start: float, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def _naive_ratio(
    model: torch.nn.Module, images: np.ndarray, patch: int, stride: int, device: torch.device
) -> float:
    """Seconds of a numpy crop-then-embed loop over seconds of :func:`embed_patches`
    (second run of each, after a warm-up)."""
    grid = grid_side(images.shape[1], patch, stride)

    def batched() -> None:
        embed_patches(model, images, options=PatchOptions(patch, stride, device=device))

    def naive() -> None:
        crops = np.stack(
            [
                images[i, r * stride : r * stride + patch, c * stride : c * stride + patch]
                for i in range(len(images))
                for r in range(grid)
                for c in range(grid)
            ]
        )
        extract_embeddings(model, crops, batch_size=256, device=device)

    timings = []
    for run in (batched, naive):
        run()
        start = time.perf_counter()
        run()
        timings.append(_seconds(start, device))
    return timings[1] / timings[0]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "config/mvtec_bottle_reduced.yaml"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--methods", nargs="+", help="default: the config's mvtec methods")
    parser.add_argument("--root", help="MVTec root (default: the config's mvtec.root)")
    parser.add_argument("--stride", type=int)
    parser.add_argument("--width", type=int)
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--per-image", type=int)
    parser.add_argument("--max-fit", help="'all' or a number of fit patches")
    parser.add_argument("--embed-batch", type=int)
    parser.add_argument("--kde-chunk", type=int, default=2048)
    return parser.parse_args()


@dataclass(frozen=True)
class PatchBench:
    """The sizes of one benchmark run: the config's, with the schema's defaults and the
    command line's overrides."""

    patch: int
    stride: int
    per_image: int
    width: int
    batch: int
    max_fit: int | None  # None: every training patch
    train: dict[str, Any]
    methods: list[str]
    paths: dict[str, Path]
    image_size: int
    kde_chunk: int


def resolve_bench(args: argparse.Namespace) -> PatchBench:
    """The config's values with the schema's defaults, read directly (no jsonschema needed, so
    the script also runs where only torch and the scientific stack are installed), then the
    command line's overrides."""
    config = yaml.safe_load(Path(args.config).read_text())
    mvtec = config["mvtec"]
    patches = mvtec.get("patches", {})
    max_fit = mvtec.get("embed", {}).get("max_fit_patches")
    if args.max_fit is not None:
        max_fit = None if args.max_fit == "all" else int(args.max_fit)
    train = {"epochs": 2048, **config.get("train", {})}
    train.update({k: v for k, v in mvtec.get("train", {}).items() if v is not None})
    if args.epochs:
        train["epochs"] = args.epochs
    root = args.root or mvtec.get("root") or REPO / "data/mvtec_ad"
    return PatchBench(
        patch=patches.get("size", PATCH_SIZE),
        stride=args.stride or patches.get("stride", STRIDE),
        per_image=args.per_image or patches.get("per_image", 64),
        width=args.width or config.get("embed", {}).get("width", 64),
        batch=args.embed_batch or mvtec.get("embed", {}).get("batch_size", 4096),
        max_fit=max_fit,
        train=train,
        methods=args.methods or mvtec.get("methods") or config["methods"],
        paths=resolve_category_paths(root, mvtec.get("categories", "all"), mvtec.get("paths")),
        image_size=mvtec.get("image_size", IMAGE_SIZE),
        kde_chunk=args.kde_chunk,
    )


def representation_for(
    method: str, images: np.ndarray, bench: PatchBench, device: torch.device
) -> tuple[torch.nn.Module, float]:
    """The method's network, trained on random patches of ``images`` when it is trained, and
    the training seconds."""
    if not is_trained(method):
        return build_representation(method, seed=0, width=bench.width), 0.0
    training = method_training(method, bench.train)
    start = time.perf_counter()
    model, _ = train_on_patches(
        TrainSettings.from_config(method, training, width=bench.width),
        images,
        per_image=bench.per_image,
        patch_size=bench.patch,
        seed=0,
        execution=Execution(device=device),
    )
    return model, _seconds(start, device)


def time_method(
    method: str, category: MVTecCategory, bench: PatchBench, device: torch.device
) -> dict[str, float]:
    """Seconds to train, embed every patch and score with KDE, the embedded patches per
    second and the image AUC of one method on one category."""
    model, train_s = representation_for(method, category.train_images, bench, device)
    rotation = method_spec(method).rotation_classifier
    start = time.perf_counter()
    features = embed_category_patches(
        model,
        category.train_images,
        category.test_images,
        options=PatchOptions(
            patch_size=bench.patch, stride=bench.stride, batch_size=bench.batch, device=device
        ),
        max_fit_patches=bench.max_fit,
        rotation=rotation,
    )
    embed_s = _seconds(start, device)
    n_patches = len(features["f_fit"]) + len(features["f_test"])
    n_patches += 4 * len(features["f_test"]) if rotation else 0
    start = time.perf_counter()
    record, _ = score_category(
        category,
        features,
        detector="kde",
        detector_params={"chunk_size": bench.kde_chunk},
        device=device,
        patch_size=bench.patch,
        stride=bench.stride,
    )
    score_s = _seconds(start, device)
    return {
        "train_s": train_s,
        "embed_s": embed_s,
        "patches_per_s": n_patches / embed_s,
        "score_s": score_s,
        "image_auroc": record["image_auroc"],
    }


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    bench = resolve_bench(args)
    print(
        f"device {device} ({args.threads} threads), patches {bench.patch}/stride "
        f"{bench.stride}, width {bench.width}, {bench.train['epochs']} epochs x "
        f"{bench.per_image} patches/image, fit "
        f"{'all' if bench.max_fit is None else bench.max_fit} patches, embed batch {bench.batch}"
    )
    for name, folder in bench.paths.items():
        start = time.perf_counter()
        category = read_mvtec_category(folder, name=name, image_size=bench.image_size)
        read_s = time.perf_counter() - start
        n_train, n_test = len(category.train_images), len(category.test_images)
        print(f"\n{name}: read {n_train} + {n_test} images in {read_s:.1f} s")
        header = ("method", "train s", "embed s", "patches/s", "score s", "image AUC")
        print(f"{header[0]:<16}" + "".join(f"{h:>11}" for h in header[1:]))
        total = read_s
        for method in bench.methods:
            timing = time_method(method, category, bench, device)
            total += timing["train_s"] + timing["embed_s"] + timing["score_s"]
            print(
                f"{method:<16}{timing['train_s']:>11.1f}{timing['embed_s']:>11.1f}"
                f"{timing['patches_per_s']:>11.0f}{timing['score_s']:>11.1f}"
                f"{timing['image_auroc']:>11.1f}"
            )
        print(f"{name}: {total:.1f} s in all ({len(bench.methods)} methods)")
    model = build_representation("resnet18_random", seed=0, width=bench.width)
    ratio = _naive_ratio(model, category.test_images[:2], bench.patch, bench.stride, device)
    print(f"\nnumpy crops + embed (batch 256) / batched unfold embedding: {ratio:.2f}x the time")


if __name__ == "__main__":
    main()
