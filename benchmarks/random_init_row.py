"""The random-weights ResNet-18 row under the released and the former initialisers.

Embeds a data set once per initialiser (``build_representation("resnet18_random",
init=...)``, BatchNorm in inference mode) and scores every class as the inlier with the
paper's detectors (``run_detection``, as the ``score_detectors`` jobs do), then prints the
per-detector mean AUC over the classes beside the paper's "ResNet-18 (Random)" row
(``visual_results_full``, mean +- std over 5 seeds). The full CIFAR-10 run embeds 60,000
images per initialiser: about 15 CPU-minutes each on one core.

Usage::

    DROC_DATA_ROOT=... python benchmarks/random_init_row.py \
        --features /tmp/features --out benchmarks/random_init/cifar10_seed0.json
    DROC_DATA_ROOT=... python benchmarks/random_init_row.py --max-per-class 20 --out /tmp/smoke.json

``--features DIR`` keeps each initialiser's features as ``DIR/<dataset>_<init>_seed<seed>.npz``
and reuses them when present.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from pipeline_lib.data import load_dataset
from pipeline_lib.data.split import one_class_split
from pipeline_lib.data.subsample import subsample_dataset
from pipeline_lib.detection.runner import run_detection
from pipeline_lib.models.embed import embed_dataset
from pipeline_lib.models.representation import build_representation
from pipeline_lib.registry import INITS
from pipeline_lib.report.published import load_published

DETECTORS: tuple[str, ...] = ("ocsvm", "kde", "gde", "ocsvm_linear")


def features_of(args: argparse.Namespace, dataset: Any, init: str, seed: int) -> dict[str, Any]:
    """The data set's features under ``init`` (from ``--features`` when already there)."""
    cached = None
    if args.features is not None:
        cached = Path(args.features) / f"{args.dataset}_{init}_seed{seed}.npz"
        if cached.is_file():
            return dict(np.load(cached))
    model = build_representation("resnet18_random", seed=seed, width=args.width, init=init)
    started = time.perf_counter()
    features = embed_dataset(model, dataset, batch_size=args.batch_size)
    print(f"{init} seed {seed}: embedded in {time.perf_counter() - started:.0f} s", flush=True)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cached, **features)
    return features


def class_aucs(dataset: Any, features: dict[str, Any], seed: int) -> dict[str, dict[str, float]]:
    """Detector -> class -> AUC, each class the inlier in turn (fit on its training images)."""
    aucs: dict[str, dict[str, float]] = {detector: {} for detector in DETECTORS}
    for index, name in enumerate(dataset.class_names):
        split = one_class_split(dataset.train_labels, dataset.test_labels, inlier=index, seed=seed)
        for detector in DETECTORS:
            record, _ = run_detection(
                split,
                features,
                fitset="train",
                detector=detector,
                detector_params={},
                max_fit=20000,
                seed=seed,
            )
            aucs[detector][name] = float(record["auroc"])
    return aucs


def paper_row(dataset: str) -> dict[str, tuple[float, float]]:
    """Detector -> (mean, std) of the paper's random-weights row on ``dataset``."""
    table = load_published("visual_results_full")
    rows = table[(table["dataset"] == dataset) & (table["method"] == "resnet18_random")]
    return {row.detector: (float(row.mean), float(row.std)) for row in rows.itertuples()}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="cifar10")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--inits", nargs="+", choices=INITS, default=list(INITS))
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=250)
    parser.add_argument("--max-per-class", type=int, default=None, help="smoke runs")
    parser.add_argument("--features", default=None, help="folder to keep / reuse features in")
    parser.add_argument("--out", required=True, help="JSON file of every AUC")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Embed, score and print the table; write and return every AUC."""
    args = parse_args(argv)
    root = os.environ.get("DROC_DATA_ROOT")
    dataset = load_dataset(args.dataset, root=Path(root) if root else None)
    if args.max_per_class is not None:
        dataset = subsample_dataset(
            dataset, max_train_per_class=args.max_per_class, max_test_per_class=args.max_per_class
        )
    results: dict[str, Any] = {"dataset": args.dataset, "width": args.width, "aucs": {}}
    for init in args.inits:
        for seed in args.seeds:
            features = features_of(args, dataset, init, seed)
            results["aucs"].setdefault(init, {})[str(seed)] = class_aucs(dataset, features, seed)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    paper = paper_row(args.dataset)
    print(f"{'detector':<14}" + "".join(f"{init:>10}" for init in args.inits) + "   paper")
    for detector in DETECTORS:
        means = [
            np.mean([np.mean(list(per[detector].values())) for per in results["aucs"][i].values()])
            for i in args.inits
        ]
        published = paper.get(detector)
        reference = f"   {published[0]:.1f} +- {published[1]:.1f}" if published else "   —"
        print(f"{detector:<14}" + "".join(f"{m:>10.2f}" for m in means) + reference)
    return results


if __name__ == "__main__":
    main()
