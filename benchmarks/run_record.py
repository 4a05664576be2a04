"""A finished workflow run as one ``results.json``, with each trained model's history beside
it and, on request, its features and rotation logits.

What the records under ``benchmarks/`` are made from (``benchmarks/fullcell/*.json``, the
input of ``python -m pipeline_lib.paper.reproduction``, and the ``results.json`` that
``benchmarks/denoising/results.py`` reads). Snakemake runs the config; this reads what the run
left in its folder (``--workdir``: ``results/<experiment>/``, or the ``--directory`` it was
given) and writes to ``--out``:

- ``results.json``: the code's ``commit`` (``--commit``, else ``git rev-parse HEAD``),
  ``$DROC_DATA_SOURCE`` (what the images were made from), the validated ``config`` and one
  record per (data set, class, contamination, seed, method) job of the tidy table
  (``summary/results.csv``): its AUCs x 100 by detector (a clean fit set's as
  ``detector/clean{n}``), the training summary of a trained model (epochs, first and last
  loss, images/s of the last epoch, batch size, the ``train.eval_every`` AUCs), the wall
  seconds of its jobs (``timings``: their benchmark files, data loading included) and the
  sizes of its split;
- ``<job>.history.json`` per trained model: its ``train_history.json``;
- with ``--features``, per trained model, ``<job>.features.npz`` (the split's training and
  test features as float16, about 15 MB for one CIFAR-10 class at width 64: under the 16 MiB a
  device call brings back per file) and, for rotation models, ``<job>.rotation.npz`` (the
  rotation logits of the four rotated views of each image, float32, computed here from the
  model on ``--device``): the input of ``benchmarks/fullcell_detectors.py``.

``<job>`` is ``{dataset}-{inlier}-c{contamination}-s{seed}-{method}``. Usage::

    snakemake --profile profiles/gpu --cores 16 --configfile config/experiments/cifar10_gpu.yaml
    python benchmarks/run_record.py --configfile config/experiments/cifar10_gpu.yaml \\
        --out /tmp/cifar10_gpu --features --device cuda
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]

#: Rules whose benchmark file times a job's training, embedding and scoring.
TRAINING_RULE = "train_representation"
EMBEDDING_RULES = ("embed_trained", "embed_frozen_dataset")
SCORING_RULES = ("score_detectors", "score_rotation_classifier")


def load_config(path: Path) -> dict[str, Any]:
    """The config validated and filled with defaults as the workflow does, named as it is."""
    from pipeline_lib.config.experiment import default_experiment
    from pipeline_lib.config.validate import validate_config

    raw = yaml.safe_load(path.read_text())
    config = validate_config(raw, REPO / "workflow" / "schemas" / "config.schema.yaml")
    config.setdefault("experiment", default_experiment([path]))
    return config


def job_stem(record: dict[str, Any]) -> str:
    """The files' name of one job (``benchmarks/fullcell_detectors.py`` parses it)."""
    return (
        f"{record['dataset']}-{record['inlier']}-c{record['contamination']:g}"
        f"-s{record['seed']}-{record['method']}"
    )


def split_folder(record: dict[str, Any]) -> str:
    """The folder of a job's split in the run's folder; its model's is ``/{method}`` below."""
    from pipeline_lib.config.keys import SPLIT, contamination_text

    return SPLIT.format(
        dataset=record["dataset"],
        inlier=record["inlier"],
        contamination=contamination_text(record["contamination"]),
        seed=record["seed"],
    )


def training_summary(history: dict[str, Any]) -> dict[str, Any]:
    """What a ``train_history.json`` says about the training, in a few numbers."""
    epochs = history["history"]
    summary: dict[str, Any] = {
        "epochs": len(epochs),
        "first_loss": epochs[0]["loss"],
        "last_loss": epochs[-1]["loss"],
        "images_per_s_last_epoch": epochs[-1]["images_per_s"],
        "batch_size": history["arguments"]["batch_size"],
    }
    evaluated = [{"epoch": e["epoch"], **e["eval"]} for e in epochs if "eval" in e]
    if evaluated:
        summary["eval"] = evaluated
    return summary


def _seconds(path: Path) -> float | None:
    """A Snakemake benchmark file's wall seconds (its first row), None where there is none."""
    if not path.is_file():
        return None
    header, row = path.read_text().splitlines()[:2]
    return float(dict(zip(header.split("\t"), row.split("\t"), strict=False))["s"])


def job_timings(workdir: Path, record: dict[str, Any]) -> dict[str, float]:
    """Wall seconds of a job's training, embedding and scoring jobs, as far as recorded."""
    benchmarks, split, method = workdir / "benchmarks", split_folder(record), record["method"]
    frozen = f"{record['dataset']}/{method}/seed{record['seed']}.tsv"
    embedding = [
        _seconds(benchmarks / EMBEDDING_RULES[0] / split / f"{method}.tsv"),
        _seconds(benchmarks / EMBEDDING_RULES[1] / frozen),
    ]
    scoring = [
        _seconds(path)
        for path in [
            *sorted((benchmarks / SCORING_RULES[0] / split / method).glob("*.tsv")),
            benchmarks / SCORING_RULES[1] / split / f"{method}.tsv",
        ]
    ]
    timings = {
        "train_s": _seconds(benchmarks / TRAINING_RULE / split / f"{method}.tsv"),
        "embed_s": next((s for s in embedding if s is not None), None),
        "detect_s": sum(s for s in scoring if s is not None) if any(scoring) else None,
    }
    return {name: seconds for name, seconds in timings.items() if seconds is not None}


def job_records(workdir: Path) -> list[dict[str, Any]]:
    """One record per (data set, class, contamination, seed, method) of the run's tidy table."""
    from pipeline_lib.data.split import load_split
    from pipeline_lib.results.tidy_table import load_results_csv
    from pipeline_lib.runtime.io import load_json

    table = load_results_csv(workdir / "summary" / "results.csv")
    job = ["dataset", "inlier", "contamination", "seed", "method"]
    records = []
    for (dataset, inlier, contamination, seed, method), rows in table.groupby(job, sort=False):
        record: dict[str, Any] = {
            "dataset": dataset,
            "inlier": inlier,
            "contamination": float(contamination),
            "seed": int(seed),
            "method": method,
            "auroc": {
                row.detector if row.fitset == "train" else f"{row.detector}/{row.fitset}": row.auroc
                for row in rows.itertuples()
            },
            "training": {},
        }
        record["timings"] = job_timings(workdir, record)
        split = load_split(workdir / split_folder(record) / "split.npz")
        record["n_train"], record["n_test"] = len(split.train_index), len(split.test_index)
        history = workdir / split_folder(record) / method / "train_history.json"
        if history.is_file():
            trained = load_json(history)
            record["device"] = trained["device"]
            record["training"] = training_summary(trained)
        records.append(record)
    return records


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
    of the test rows and both index arrays. Given ``rotation_logits`` (``{"train": ...,
    "test": ...}`` of shape ``(n, 4, 4)``), a second file ``*.rotation.npz`` holds them as
    float32 with the library's own rotation scores (float64) of the test rows. Returns the
    paths written.
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


def export_features(
    workdir: Path, record: dict[str, Any], out: Path, *, device: str, batch_size: int
) -> list[Path]:
    """A trained job's features and, for a rotation model, the rotation logits of its
    split's images (the model on ``device``), as :func:`save_features` writes them."""
    from pipeline_lib.data.split import load_split
    from pipeline_lib.models.checkpoints import load_trained_representation
    from pipeline_lib.runtime.io import load_image_dataset, load_npz
    from pipeline_lib.ssl.rotation import rotation_logits_of_images

    folder = workdir / split_folder(record)
    split = load_split(folder / "split.npz")
    dataset = load_image_dataset(workdir / record["dataset"] / "dataset.npz")
    features = load_npz(folder / record["method"] / "features.npz")
    logits = None
    if "log_p_rotations_test" in features:  # a rotation model: its classifier's scores
        model = load_trained_representation(
            folder / record["method"] / "model.pt", map_location=device
        )
        logits = {
            part: rotation_logits_of_images(model, images, device=device, batch_size=batch_size)
            for part, images in (
                ("train", dataset.train_images[split.train_index]),
                ("test", dataset.test_images[split.test_index]),
            )
        }
    return save_features(
        out / f"{job_stem(record)}.features.npz",
        features,
        split,
        test_labels=dataset.test_labels,
        rotation_logits=logits,
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", type=Path, required=True, help="the run's config")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="the run's folder (default: results/<experiment> of the config)",
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for the record")
    parser.add_argument(
        "--features",
        action="store_true",
        help="also write each trained model's features and rotation logits",
    )
    parser.add_argument(
        "--device", default="cpu", help="where the rotation logits are computed (cpu, cuda)"
    )
    parser.add_argument(
        "--commit",
        default=None,
        help="the code's commit, for the record (default: git rev-parse HEAD of this tree)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    import json

    from pipeline_lib.config.experiment import experiment_folder
    from pipeline_lib.runtime.io import save_json
    from pipeline_lib.tracking.mlflow_store import code_version

    args = parse_args(argv)
    config = load_config(args.configfile)
    workdir = args.workdir or experiment_folder(config["experiment"])
    if not (workdir / "summary" / "results.csv").is_file():
        raise SystemExit(
            f"{workdir / 'summary' / 'results.csv'} not found: run the workflow on "
            f"{args.configfile} first (its target summary/results.csv at least), or pass the "
            "folder it ran in as --workdir"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    records = job_records(workdir)
    for record in records:
        if record["training"]:
            history = workdir / split_folder(record) / record["method"] / "train_history.json"
            shutil.copyfile(history, args.out / f"{job_stem(record)}.history.json")
            if args.features:
                export_features(
                    workdir,
                    record,
                    args.out,
                    device=args.device,
                    batch_size=config["embed"]["batch_size"],
                )
        aurocs = {detector: round(auroc, 1) for detector, auroc in record["auroc"].items()}
        print(f"{job_stem(record)} {json.dumps(aurocs)}")
    save_json(
        args.out / "results.json",
        {
            "commit": args.commit or code_version(REPO),
            "data_source": os.environ.get("DROC_DATA_SOURCE"),
            "config": config,
            "results": records,
        },
    )


if __name__ == "__main__":
    main()
