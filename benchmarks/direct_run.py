"""Run a config's detection jobs with the library directly, several at once on one device.

For machines where Snakemake cannot be installed (a GPU box with a fixed Python image, say):
every (data set, class, contamination, seed, method) job of ``--configfile`` goes through the
same library calls as the workflow's scripts -- ``one_class_split``, ``ssl.jobs.train_on_split``,
``ssl.jobs.embed_trained`` / ``models.embed.embed_frozen``, ``run_detection`` on every fit set
(``train`` and the ``clean{n}`` sets) and ``run_rotation_detection`` -- in a pool of
``--parallel`` processes that share the device (so it also shows what packing several
small-batch jobs on one GPU gives). Results land in ``--out`` as one JSON per job, and a
table of AUCs per class with the difference to ``resnet18_random`` (when the config has it)
is printed at the end.

Each trained job also writes its per-epoch history beside its JSON (``*.history.json``;
with ``train.eval_every`` its epochs carry test-split AUCs, as in the workflow's
``train_history.json``), and with ``--features`` its features as float16 and, for rotation
models, the rotation logits of the four rotated views as float32 (``*.features.npz`` and
``*.rotation.npz``, the input of ``benchmarks/fullcell_detectors.py``). ``results.json``
records the code's ``commit`` (``--commit``, else ``git rev-parse HEAD``) and
``$DROC_DATA_SOURCE``, what the images were made from.

Jobs still running at ``--deadline`` seconds are stopped and listed as unfinished; the
finished ones are kept. This is a measuring tool: the workflow (``snakemake``) remains the
way to run the pipeline, with its caching, resume and MLflow logging.

Usage::

    python benchmarks/direct_run.py --configfile config/experiments/cifar10_gpu.yaml --device cuda \
        --parallel 12 --out /tmp/direct
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from pipeline_lib.config.grids import base_method, variant_training

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Job:
    """One (data set, class, contamination, seed, method) chain of the workflow."""

    dataset: str
    inlier: str
    contamination: float
    seed: int
    method: str
    cache: str
    out: str
    device: str
    threads: int
    progress: bool = False
    features: bool = False


def load_config(path: Path) -> dict[str, Any]:
    """The config validated and filled with defaults exactly as the workflow does."""
    from pipeline_lib.config.validate import validate_config

    raw = yaml.safe_load(path.read_text())
    return validate_config(raw, REPO / "workflow" / "schemas" / "config.schema.yaml")


def restrict_methods(config: dict[str, Any], methods: list[str], *, source: Path) -> dict[str, Any]:
    """The config with only ``methods`` among its rows, so a table can be completed in parts."""
    unknown = sorted(set(methods) - set(config["methods"]))
    if unknown:
        raise SystemExit(
            f"--methods {' '.join(unknown)}: not among the methods of {source} "
            f"({', '.join(config['methods'])})"
        )
    return config | {"methods": [m for m in config["methods"] if m in methods]}


def prepare_datasets(config: dict[str, Any], out: Path) -> dict[str, tuple[str, list[str]]]:
    """Read and subsample each data set once into ``out`` (the workflow's dataset cache)."""
    from pipeline_lib.config.validate import resolve_classes
    from pipeline_lib.data.subsample import prepare_dataset
    from pipeline_lib.runtime.io import save_image_dataset

    prepared = {}
    for name, settings in config["datasets"].items():
        dataset = prepare_dataset(name, settings, root=config["data"]["root"])
        cache = out / f"{name}_dataset.npz"
        save_image_dataset(cache, dataset)
        classes = resolve_classes(name, settings["classes"], dataset.class_names)
        prepared[name] = (str(cache), list(classes))
    return prepared


def run_job(job: Job, config: dict[str, Any]) -> dict[str, Any]:
    """The workflow's chain for one job; returns its detector records and timings.

    Each step is the library call of the workflow's script: ``one_class_split``
    (prepare_split), :func:`pipeline_lib.ssl.jobs.train_on_split` (train_representation),
    :func:`pipeline_lib.ssl.jobs.embed_trained` (embed_trained),
    :func:`pipeline_lib.models.embed.embed_frozen` (embed_frozen_dataset),
    ``run_detection`` on every fit set (score_detectors) and ``run_rotation_detection``
    (score_rotation_classifier). AUCs of a clean fit set are keyed ``detector/clean{n}``.
    """
    import numpy as np
    import torch

    from pipeline_lib.config.grids import base_method, variant_train_size, variant_training
    from pipeline_lib.data.split import one_class_split
    from pipeline_lib.detection.epoch_eval import epoch_evaluator
    from pipeline_lib.detection.runner import run_detection, run_rotation_detection
    from pipeline_lib.models.embed import embed_frozen
    from pipeline_lib.registry import FROZEN_METHODS, ROTATION_METHODS
    from pipeline_lib.runtime.devices import set_threads
    from pipeline_lib.runtime.io import load_image_dataset, save_json
    from pipeline_lib.ssl.jobs import embed_trained, train_on_split
    from pipeline_lib.ssl.rotation import rotation_logits_of_images
    from pipeline_lib.ssl.settings import Execution

    set_threads(job.threads)
    device = torch.device(job.device)
    started = time.perf_counter()
    dataset = load_image_dataset(job.cache)
    split = one_class_split(
        dataset.train_labels,
        dataset.test_labels,
        inlier=dataset.class_names.index(job.inlier),
        contamination=job.contamination,
        seed=job.seed,
        clean_inliers=config["splits"]["clean_inliers"],
    )
    width = config["embed"]["width"]
    batch_size = config["embed"]["batch_size"]
    timings: dict[str, float] = {}
    training: dict[str, Any] = {}
    variants = config["variants"]
    method = base_method(job.method, variants)  # a variant trains its base method
    if method in FROZEN_METHODS:
        features = embed_frozen(
            method,
            dataset,
            seed=job.seed,
            width=width,
            batch_size=batch_size,
            device=device,
            imagenet_size=(
                config["embed"]["imagenet_size"] if method == "resnet50_imagenet" else None
            ),
        )
    else:
        eval_every = config["train"].get("eval_every") or 0
        evaluate = None
        if eval_every:  # test-split AUCs during training, as the workflow's job records them
            evaluate = epoch_evaluator(
                dataset,
                split,
                method=method,
                detectors=config["detectors"],
                rotation_classifier=config["detect"]["rotation_classifier"],
                max_fit=config["detect"]["max_fit"],
                seed=job.seed,
                batch_size=batch_size,
                device=device,
            )
        tic = time.perf_counter()
        model, history, arguments = train_on_split(
            method,
            dataset.train_images,
            split,
            training=variant_training(job.method, config["train"], variants),
            train_size=variant_train_size(job.method, variants),
            seed=job.seed,
            width=width,
            execution=Execution.from_config(config["train"], device=device),
            checkpoint_path=Path(job.out).with_suffix(".ckpt"),
            progress=job.progress,
            evaluate=evaluate,
            eval_every=eval_every,
        )
        timings["train_s"] = time.perf_counter() - tic
        save_json(
            Path(job.out).with_suffix(".history.json"),
            {"method": method, "arguments": arguments, "history": history},
        )
        last = history[-1]
        training = {
            "epochs": len(history),
            "first_loss": history[0]["loss"],
            "last_loss": last["loss"],
            "images_per_s_last_epoch": last["images_per_s"],
            "batch_size": arguments["batch_size"],
        }
        if eval_every:
            training["eval"] = [
                {"epoch": record["epoch"], **record["eval"]}
                for record in history
                if "eval" in record
            ]
        features = embed_trained(
            model, dataset, split, method=method, batch_size=batch_size, device=device
        )
        if job.features:
            save_features(
                Path(job.out).with_suffix(".features.npz"),
                features,
                split,
                test_labels=dataset.test_labels,
                rotation_logits=(
                    {
                        part: rotation_logits_of_images(
                            model, images, device=device, batch_size=batch_size
                        )
                        for part, images in (
                            ("train", dataset.train_images[split.train_index]),
                            ("test", dataset.test_images[split.test_index]),
                        )
                    }
                    if method in ROTATION_METHODS
                    else None
                ),
            )
    timings["features_s"] = time.perf_counter() - started
    records = {}
    fitsets = ["train"] + [f"clean{n}" for n in config["splits"]["clean_inliers"]]
    for fitset in fitsets:
        for detector, params in config["detectors"].items():
            record, _ = run_detection(
                split,
                features,
                fitset=fitset,
                detector=detector,
                detector_params=params,
                max_fit=config["detect"]["max_fit"],
                seed=job.seed,
                device=device,
            )
            records[detector if fitset == "train" else f"{detector}/{fitset}"] = record["auroc"]
    if method in ROTATION_METHODS and config["detect"]["rotation_classifier"]:
        for detector in config["detect"]["rotation_detectors"]:
            record, _ = run_rotation_detection(split, features, detector=detector)
            records[detector] = record["auroc"]
    timings["total_s"] = time.perf_counter() - started
    result = asdict(job) | {"auroc": records, "training": training, "timings": timings}
    result["n_train"] = int(len(split.train_index))
    result["n_test"] = int(len(split.test_index))
    result["feature_checksum"] = float(np.abs(features["f_test"]).sum())
    save_json(job.out, result)
    return result


def save_features(
    path: str | os.PathLike,
    features: dict[str, Any],
    split: Any,
    *,
    test_labels: Any,
    rotation_logits: dict[str, Any] | None,
) -> list[Path]:
    """The job's features for offline scoring (``benchmarks/fullcell_detectors.py``).

    ``path`` (``*.features.npz``): ``f_train`` (the split's training images, the detectors'
    fit set) and ``f_test`` (its test split) as float16, ``is_outlier`` and ``test_labels``
    of the test rows and both index arrays; about 15 MB for one CIFAR-10 class at width 64,
    under the 16 MiB a device call brings back per file. Given ``rotation_logits``
    (``{"train": ..., "test": ...}`` of shape ``(n, 4, 4)``), a second file
    ``*.rotation.npz`` holds them as float32 with the library's own rotation scores
    (float64) of the test rows. Returns the paths written.
    """
    import numpy as np

    from pipeline_lib.detection.runner import rows_for

    path = Path(path)
    arrays: dict[str, Any] = {
        "train_index": split.train_index,
        "test_index": split.test_index,
        "is_outlier": np.asarray(split.test_is_outlier, dtype=np.int8),
        "test_labels": np.asarray(test_labels)[split.test_index].astype(np.int16),
    }
    for part, index in (("train", split.train_index), ("test", split.test_index)):
        rows = rows_for(index, features[f"{part}_index"], features[f"f_{part}"])
        arrays[f"f_{part}"] = rows.astype(np.float16)
    np.savez_compressed(path, **arrays)
    written = [path]
    if rotation_logits is not None:
        rotation = {
            f"rotation_logits_{part}": np.asarray(logits, dtype=np.float32)
            for part, logits in rotation_logits.items()
        }
        for key in ("p_rot0_test", "log_p_rotations_test"):
            if key in features:
                rotation[key] = rows_for(split.test_index, features["test_index"], features[key])
        rotation["is_outlier"] = arrays["is_outlier"]
        written.append(path.with_name(path.name.replace(".features.npz", ".rotation.npz")))
        np.savez_compressed(written[-1], **rotation)
    return written


def build_jobs(
    config: dict[str, Any], prepared: dict[str, tuple[str, list[str]]], args: argparse.Namespace
) -> list[Job]:
    """Every job of the config, the slowest methods first so they never start last."""
    threads = max(1, (os.cpu_count() or 2) // args.parallel)
    order = ["contrastive_da", "rotnet", "rotation", "contrastive", "denoising"]
    jobs = []
    for name, (cache, classes) in prepared.items():
        for inlier in classes:
            for contamination in config["splits"]["contamination"]:
                for seed in config["seeds"]:
                    for method in config["methods"]:
                        out = args.out / "jobs" / f"{name}-{inlier}-c{contamination:g}"
                        out = f"{out}-s{seed}-{method}.json"
                        jobs.append(
                            Job(
                                name,
                                inlier,
                                contamination,
                                seed,
                                method,
                                cache,
                                out,
                                args.device,
                                threads,
                                args.progress,
                                args.features,
                            )
                        )
    rank = {method: i for i, method in enumerate(order)}
    variants = config["variants"]
    # Longest first: more epochs, then the slower base method.
    return sorted(
        jobs,
        key=lambda job: (
            -variant_training(job.method, config["train"], variants)["epochs"],
            rank.get(base_method(job.method, variants), len(order)),
        ),
    )


def print_table(results: list[dict[str, Any]], unfinished: list[Job]) -> None:
    """AUC per method and class for each detector, and the gain over random weights."""
    import pandas as pd

    rows = [
        {"class": r["inlier"], "method": r["method"], "seed": r["seed"], "detector": d, "auroc": a}
        for r in results
        for d, a in r["auroc"].items()
    ]
    for job in unfinished:
        print(f"[unfinished] {job.inlier} {job.method} seed {job.seed}")
    if not rows:
        print("no job finished")
        return
    table = pd.DataFrame(rows).pivot_table(
        index=["detector", "method"], columns="class", values="auroc", aggfunc="mean"
    )
    table["mean"] = table.mean(axis=1)
    # Gains only where the config has the random-weights rows to compare with.
    if "resnet18_random" in table.index.get_level_values("method"):
        random_mean = table.xs("resnet18_random", level="method")["mean"]
        table["gain_vs_random"] = [
            row["mean"] - random_mean[detector] if detector in random_mean.index else None
            for (detector, _), row in table.iterrows()
        ]
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(table.round(1).to_string())
    for r in results:
        if r["training"]:
            t = r["training"]
            print(
                f"[train] {r['inlier']:>12} {r['method']:<15} epochs {t['epochs']:>4} "
                f"loss {t['first_loss']:.3f} -> {t['last_loss']:.3f}  "
                f"{t['images_per_s_last_epoch']:.0f} img/s  train {r['timings']['train_s']:.0f} s"
            )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--parallel", type=int, default=2, help="jobs at once (default 2)")
    parser.add_argument("--deadline", type=float, default=None, help="seconds; then stop")
    parser.add_argument(
        "--methods",
        nargs="+",
        default=None,
        help="run only these rows of the config's methods (default: all of them)",
    )
    parser.add_argument(
        "--progress", action="store_true", help="a bar over each job's epochs (for --parallel 1)"
    )
    parser.add_argument(
        "--summary", type=Path, default=None, help="JSON of all results (default OUT/results.json)"
    )
    parser.add_argument(
        "--features",
        action="store_true",
        help="also write each trained job's features and rotation logits (*.features.npz)",
    )
    parser.add_argument(
        "--commit",
        default=None,
        help="the code's commit, for the record (default: git rev-parse HEAD of this tree)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    from pipeline_lib.config.validate import export_data_settings
    from pipeline_lib.runtime.io import save_json
    from pipeline_lib.tracking.mlflow_store import code_version

    args = parse_args(argv)
    start = time.perf_counter()
    config = load_config(args.configfile)
    # As common.smk does: the worker processes inherit the data root, download flag and
    # ImageNet weights path ($DROC_IMAGENET_WEIGHTS, read by embed_frozen).
    export_data_settings(
        root=config["data"]["root"],
        download=config["data"]["download"],
        imagenet_weights=config["embed"]["imagenet_weights"],
    )
    if args.methods:
        config = restrict_methods(config, args.methods, source=args.configfile)
    (args.out / "jobs").mkdir(parents=True, exist_ok=True)
    prepared = prepare_datasets(config, args.out)
    jobs = build_jobs(config, prepared, args)
    print(f"{len(jobs)} jobs, {args.parallel} at once on {args.device}", flush=True)
    results: list[dict[str, Any]] = []
    summary = args.summary or args.out / "results.json"
    # What ran: the code's version (a device machine's copy may have no .git: pass --commit)
    # and what the images were made from (benchmarks/full_cell.sh names the JPEG copy).
    record = {
        "commit": args.commit or code_version(REPO),
        "data_source": os.environ.get("DROC_DATA_SOURCE"),
        "config": config,
    }
    context = multiprocessing.get_context("spawn")  # CUDA cannot be forked
    pool = ProcessPoolExecutor(max_workers=args.parallel, mp_context=context)
    pending = {pool.submit(run_job, job, config): job for job in jobs}
    while pending:
        timeout = None
        if args.deadline is not None:
            timeout = max(0.0, args.deadline - (time.perf_counter() - start))
        done, _ = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
        if not done:
            break
        for future in done:
            job = pending.pop(future)
            try:
                result = future.result()
            except Exception as error:  # report and go on: one failure must not hide the rest
                print(f"[failed] {job.inlier} {job.method}: {type(error).__name__}: {error}")
                continue
            results.append(result)
            save_json(summary, {**record, "results": results})  # kept if killed
            print(
                f"[done {time.perf_counter() - start:6.0f} s] {job.inlier} {job.method} "
                + json.dumps({k: round(v, 1) for k, v in result["auroc"].items()}),
                flush=True,
            )
    unfinished = list(pending.values())
    save_json(
        summary, {**record, "results": results, "unfinished": [asdict(j) for j in unfinished]}
    )
    if unfinished:  # past the deadline: the finished results are what we report
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
    pool.shutdown(wait=not unfinished, cancel_futures=True)
    print_table(results, unfinished)
    print(f"wall {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
