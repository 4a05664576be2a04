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
from pathlib import Path

import numpy as np
import torch
import yaml

from pipeline_lib.data.mvtec import read_mvtec_category, resolve_category_paths
from pipeline_lib.models.embed import extract_embeddings
from pipeline_lib.models.representation import TRAINED_METHODS, build_representation
from pipeline_lib.mvtec.localize import IMAGE_SIZE, PATCH_SIZE, STRIDE, grid_side
from pipeline_lib.mvtec.patches import (
    PatchOptions,
    embed_category_patches,
    embed_patches,
    score_category,
    train_on_patches,
)
from pipeline_lib.registry import ROTATION_METHODS, method_training, training_arguments

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


def main() -> None:
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
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    # The config's values with the schema's defaults, read directly (no jsonschema needed,
    # so the script also runs where only torch and the scientific stack are installed).
    config = yaml.safe_load(Path(args.config).read_text())
    mvtec = config["mvtec"]
    patches = mvtec.get("patches", {})
    patch = patches.get("size", PATCH_SIZE)
    stride = args.stride or patches.get("stride", STRIDE)
    per_image = args.per_image or patches.get("per_image", 64)
    width = args.width or config.get("embed", {}).get("width", 64)
    batch = args.embed_batch or mvtec.get("embed", {}).get("batch_size", 4096)
    max_fit = mvtec.get("embed", {}).get("max_fit_patches")
    if args.max_fit is not None:
        max_fit = None if args.max_fit == "all" else int(args.max_fit)
    train = {"epochs": 2048, **config.get("train", {})}
    train.update({k: v for k, v in mvtec.get("train", {}).items() if v is not None})
    if args.epochs:
        train["epochs"] = args.epochs
    methods = args.methods or mvtec.get("methods") or config["methods"]
    root = args.root or mvtec.get("root") or REPO / "data/mvtec_ad"
    paths = resolve_category_paths(root, mvtec.get("categories", "all"), mvtec.get("paths"))
    image_size = mvtec.get("image_size", IMAGE_SIZE)
    print(
        f"device {device} ({args.threads} threads), patches {patch}/stride {stride}, width "
        f"{width}, {train['epochs']} epochs x {per_image} patches/image, fit "
        f"{'all' if max_fit is None else max_fit} patches, embed batch {batch}"
    )
    for name, folder in paths.items():
        start = time.perf_counter()
        category = read_mvtec_category(folder, name=name, image_size=image_size)
        read_s = time.perf_counter() - start
        n_train, n_test = len(category.train_images), len(category.test_images)
        print(f"\n{name}: read {n_train} + {n_test} images in {read_s:.1f} s")
        header = ("method", "train s", "embed s", "patches/s", "score s", "image AUC")
        print(f"{header[0]:<16}" + "".join(f"{h:>11}" for h in header[1:]))
        total = read_s
        for method in methods:
            train_s = 0.0
            if method in TRAINED_METHODS:
                start = time.perf_counter()
                model, _ = train_on_patches(
                    method,
                    category.train_images,
                    per_image=per_image,
                    patch_size=patch,
                    seed=0,
                    width=width,
                    device=device,
                    **{
                        k: v
                        for k, v in training_arguments(
                            method, method_training(method, train)
                        ).items()
                        if k != "checkpoint_every"
                    },
                )
                train_s = _seconds(start, device)
            else:
                model = build_representation(method, seed=0, width=width)
            start = time.perf_counter()
            features = embed_category_patches(
                model,
                category.train_images,
                category.test_images,
                options=PatchOptions(
                    patch_size=patch, stride=stride, batch_size=batch, device=device
                ),
                max_fit_patches=max_fit,
                rotation=method in ROTATION_METHODS,
            )
            embed_s = _seconds(start, device)
            n_patches = len(features["f_fit"]) + len(features["f_test"])
            n_patches += 4 * len(features["f_test"]) if method in ROTATION_METHODS else 0
            start = time.perf_counter()
            record, _ = score_category(
                category,
                features,
                detector="kde",
                detector_params={"chunk_size": args.kde_chunk},
                device=device,
                patch_size=patch,
                stride=stride,
            )
            score_s = _seconds(start, device)
            total += train_s + embed_s + score_s
            print(
                f"{method:<16}{train_s:>11.1f}{embed_s:>11.1f}{n_patches / embed_s:>11.0f}"
                f"{score_s:>11.1f}{record['image_auroc']:>11.1f}"
            )
        print(f"{name}: {total:.1f} s in all ({len(methods)} methods)")
    model = build_representation("resnet18_random", seed=0, width=width)
    ratio = _naive_ratio(model, category.test_images[:2], patch, stride, device)
    print(f"\nnumpy crops + embed (batch 256) / batched unfold embedding: {ratio:.2f}x the time")


if __name__ == "__main__":
    main()
