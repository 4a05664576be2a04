"""How much JPEG compression of CIFAR-10 moves one-class AUCs, and what that predicts for the
lossless originals.

The CIFAR-10 copy used here is a JPEG quality 75 (4:2:0) re-encoding, not the official
lossless binaries (``../shared/data/README.md``). This measures a dose-response curve and
extrapolates it:

1. The shared copy is re-encoded as a whole at lower qualities (PIL, 4:2:0); a second q75
   pass is a small dose point. A dose is the mean absolute pixel change from the shared copy
   (grey levels, 0-255, over every image of both splits); the shared copy is dose 0.
2. At every dose, the one-class cell ``automobile`` (train on the class's 5,000 training
   images, test on all 10,000 test images; ``one_class_split``) is scored with the KDE (the
   paper's gamma) and the RBF OC-SVM on raw pixels, a random-weights ResNet-18
   (``resnet18_random``) and a small RotNet trained on the first ``--n-train`` training
   inliers (the library's recipe at ``--epochs`` and ``--rotnet-width``; paired seeds: the
   same seeds at every dose). Detectors are fitted on all 5,000 training inliers.
3. Per representation and detector (and seed), the AUC change from dose 0 is fitted against
   the dose by least squares through the origin: a slope in AUC points per grey level.
4. How far q75 4:2:0 JPEG moves *lossless* 32x32 images is measured on the MVTec AD
   ``bottle`` PNGs (area-averaged 256 -> 32, an exact 8x8 block mean) and, as a second
   source, on the two photographs shipped with scikit-learn (256x256 crops, area-averaged to
   32x32: JPEGs themselves, so only nearly lossless at that size; a q75 pass at full size
   changes their 32x32 downscale by about 0.8 grey levels). Area averaging is the library's
   ``area_resize`` (cv2.INTER_AREA); PIL's ``Image.BOX`` gives the same 8x8 block means up to
   rounding (0.09 grey levels apart, the same bottle dose to 0.01). Each source is
   also scaled by how much more a further q50 pass changes CIFAR's q75 copy than the
   source's q75 copy (a compressibility calibration). That is the dose separating the shared
   copy from the official binaries, estimated on other photographs than CIFAR's.
5. Predicted AUC(lossless) - AUC(shared) = -slope x that dose, per representation.

Writes ``OUT/results.csv`` (one row per dose x representation x seed x detector),
``OUT/summary.json`` (slopes, dose estimates, predictions, the conclusion) and
``OUT/README.md`` (generated from the two). ``--resume`` keeps the rows of ``results.csv``
measured with the same settings and runs only the rest.

Usage (about 1.5 hours on 2 CPU threads; 2 worker processes of 1 thread each)::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/jpeg_dose.py \
        --data-root "$DROC_DATA_ROOT" --out benchmarks/jpeg --jobs 2
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import multiprocessing
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_MVTEC = REPO.parent / "shared" / "data" / "mvtec_ad" / "bottle"
FULLCELL = REPO / "benchmarks" / "fullcell"

REFERENCE = "shared"  # dose 0: the shared copy as read
FROZEN = ("raw", "resnet18_random")
TRAINED = "rotnet"
REPRESENTATIONS = (*FROZEN, TRAINED)
DETECTORS = ("kde", "ocsvm")
ROTATION_DETECTOR = "rotation_log_p"
SUBSAMPLING_420 = 2  # PIL's code for 4:2:0 chroma subsampling
SUBSAMPLING_444 = 0
HALF_POINT = 0.5
CALIBRATION_QUALITY = 50  # the further pass that compares CIFAR's q75 copy with a source's

CSV_COLUMNS = (
    "dose_name",
    "quality",
    "dose",
    "representation",
    "width",
    "epochs",
    "n_train",
    "seed",
    "detector",
    "auroc",
    "last_loss",
    "train_s",
    "embed_s",
    "detect_s",
    "wall_s",
)

#: The keys of summary.json, documented in the generated README (kept stable: other pages
#: read them).
SUMMARY_KEYS = {
    "schema_version": "1: this layout",
    "command": "the command line that wrote the files",
    "wall_s": "wall time of that command (seconds; the machine was shared with other jobs)",
    "machine": "processor and torch threads per worker",
    "inlier": "CIFAR-10 inlier class",
    "settings": "RotNet width, epochs and training images; frozen width; seeds",
    "doses": "dose name -> mean absolute pixel change from the shared copy (grey levels)",
    "qualities": "dose name -> JPEG quality of the re-encoding (null: the shared copy)",
    "auroc": "'representation/detector' -> dose name -> AUC x 100, mean over seeds",
    "slopes": (
        "'representation/detector' -> {slope (AUC points per grey level, mean over seeds), "
        "slope_seeds (seed -> slope), slope_spread (half the range over seeds), deltas "
        "(dose name -> AUC change from dose 0, mean over seeds), residual_rms (RMS of the "
        "AUC changes about their seed's line, points)}"
    ),
    "q75_dose_estimates": (
        "source -> mean absolute change that q75 4:2:0 JPEG makes to lossless 32x32 images "
        "(grey levels): bottle, bottle_calibrated, photos, photos_calibrated"
    ),
    "q75_dose_estimate": "the central estimate (bottle, as measured)",
    "q75_dose_range": "[lowest, highest] of q75_dose_estimates",
    "predicted_change": (
        "'representation/detector' -> {central, low, high}: predicted AUC(lossless) - "
        "AUC(shared copy), AUC points (-slope x dose; low/high over seeds and dose range)"
    ),
    "predicted_kde_change": "predicted_change of rotnet/kde: {central, low, high}",
    "full_cell": "the measured full-protocol cell's KDE and the paper's (mean, std) and gap",
    "can_move_kde_half_point": (
        "true when the largest magnitude of rotnet/kde's predicted change (over seeds and "
        "the dose range) reaches 0.5 points"
    ),
    "conclusion": "one paragraph",
}


# --------------------------------------------------------------------------------------------
# Doses


@dataclass(frozen=True)
class Dose:
    """One version of the data set: the shared copy, or it re-encoded once at ``quality``."""

    name: str
    quality: int | None


def doses_for(qualities: Sequence[int]) -> tuple[Dose, ...]:
    """The reference (the shared copy) then one re-encoding per quality, named ``q<quality>``.

    Raises
    ------
    ValueError
        If a quality is outside 1..100 or repeated.
    """
    if len(set(qualities)) != len(qualities):
        raise ValueError(f"--qualities has a repeated value: {list(qualities)}")
    for quality in qualities:
        if not 1 <= quality <= 100:
            raise ValueError(f"JPEG quality must be in 1..100, got {quality}")
    return (Dose(REFERENCE, None), *(Dose(f"q{q}", q) for q in qualities))


def jpeg_roundtrip(image: np.ndarray, *, quality: int, subsampling: int) -> np.ndarray:
    """Encode one uint8 RGB image as JPEG with PIL and decode it again."""
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "JPEG", quality=quality, subsampling=subsampling)
    buffer.seek(0)
    with Image.open(buffer) as decoded:
        return np.asarray(decoded.convert("RGB"))


def reencode(images: np.ndarray, *, quality: int, subsampling: int = SUBSAMPLING_420) -> np.ndarray:
    """Every image of ``images`` (uint8, shape (n, h, w, 3)) through one JPEG round trip.

    Raises
    ------
    ValueError
        If ``images`` is not a uint8 array of shape (n, h, w, 3).
    """
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(
            f"images must be uint8 of shape (n, h, w, 3), got {images.dtype} {images.shape}"
        )
    out = np.empty_like(images)
    for i, image in enumerate(images):
        out[i] = jpeg_roundtrip(image, quality=quality, subsampling=subsampling)
    return out


def mean_abs_change(reference: np.ndarray, changed: np.ndarray) -> float:
    """Mean absolute pixel difference in grey levels (0-255), over every pixel and channel.

    Raises
    ------
    ValueError
        If the shapes differ.
    """
    if reference.shape != changed.shape:
        raise ValueError(f"shapes differ: {reference.shape} and {changed.shape}")
    return float(np.abs(reference.astype(np.int16) - changed.astype(np.int16)).mean())


def reencode_dataset(dataset: Any, dose: Dose) -> tuple[Any, float]:
    """The data set at ``dose`` (both splits re-encoded) and its dose in grey levels."""
    from pipeline_lib.data import ImageDataset

    if dose.quality is None:
        return dataset, 0.0
    train = reencode(dataset.train_images, quality=dose.quality)
    test = reencode(dataset.test_images, quality=dose.quality)
    changed = sum(
        np.abs(new.astype(np.int16) - old).sum(dtype=np.int64)
        for new, old in ((train, dataset.train_images), (test, dataset.test_images))
    )
    dose_value = float(changed / (train.size + test.size))
    recoded = ImageDataset(
        name=dataset.name,
        train_images=train,
        train_labels=dataset.train_labels,
        test_images=test,
        test_labels=dataset.test_labels,
        class_names=dataset.class_names,
    )
    return recoded, dose_value


# --------------------------------------------------------------------------------------------
# Dose of q75 on lossless images


def downscale(images: Iterable[np.ndarray], side: int = 32) -> np.ndarray:
    """Area-average each image to ``side`` x ``side`` (cv2.INTER_AREA, the library's
    :func:`~pipeline_lib.data.area_resize.area_resize`; an exact block mean when the side
    divides the input's)."""
    from pipeline_lib.data.area_resize import area_resize

    return np.stack([area_resize(image, side, side) for image in images])


def read_pngs(folder: Path) -> list[np.ndarray]:
    """Every ``*.png`` under ``folder`` (sorted), as uint8 RGB arrays.

    Raises
    ------
    ValueError
        If the folder holds no PNG.
    """
    paths = sorted(Path(folder).rglob("*.png"))
    if not paths:
        raise ValueError(
            f"no PNG under {folder}: pass --mvtec-root, the MVTec AD category folder "
            "(train/good, test/<defect>)"
        )
    images = []
    for path in paths:
        with Image.open(path) as image:
            images.append(np.asarray(image.convert("RGB")))
    return images


def photo_crops(side: int = 256, stride: int = 64) -> list[np.ndarray]:
    """Crops of ``side`` pixels every ``stride`` pixels of scikit-learn's two sample photos."""
    from sklearn.datasets import load_sample_images

    crops = []
    for photo in load_sample_images().images:
        height, width = photo.shape[:2]
        for top in range(0, height - side + 1, stride):
            for left in range(0, width - side + 1, stride):
                crops.append(np.ascontiguousarray(photo[top : top + side, left : left + side]))
    return crops


@dataclass(frozen=True)
class LosslessDose:
    """What q75 4:2:0 JPEG does to one source of lossless 32x32 images."""

    n_images: int
    q75: float  # mean absolute change lossless -> q75
    further: float  # mean absolute change q75 -> a further CALIBRATION_QUALITY pass


def lossless_dose(images: np.ndarray) -> LosslessDose:
    """Mean absolute change of a q75 4:2:0 round trip, and of a further q50 pass after it."""
    q75 = reencode(images, quality=75)
    further = reencode(q75, quality=CALIBRATION_QUALITY)
    return LosslessDose(
        n_images=len(images),
        q75=mean_abs_change(images, q75),
        further=mean_abs_change(q75, further),
    )


def q75_dose_estimates(
    sources: Mapping[str, LosslessDose], cifar_further: float | None
) -> dict[str, float]:
    """Each source's q75 dose, and scaled by CIFAR's over the source's further-pass change.

    ``cifar_further`` is the dose of the shared copy's re-encoding at CALIBRATION_QUALITY
    (None when it was not measured: no calibrated estimates).
    """
    estimates = {}
    for name, source in sources.items():
        estimates[name] = source.q75
        if cifar_further is not None and source.further > 0:
            estimates[f"{name}_calibrated"] = source.q75 * cifar_further / source.further
    return estimates


# --------------------------------------------------------------------------------------------
# One measurement: representation x dose x seed


@dataclass(frozen=True)
class Settings:
    """What every measurement of a run shares."""

    inlier: str = "automobile"
    rotnet_width: int = 16
    epochs: int = 10
    n_train: int = 1000
    frozen_width: int = 64
    batch_size: int | None = None  # embedding batch; None = the config default


def library_defaults(dataset: str, inlier: str, epochs: int) -> dict[str, Any]:
    """A minimal config validated by the workflow's schema: its defaults are the recipe
    (training, embedding batch, detector parameters at the paper's gamma, ``max_fit``)."""
    from pipeline_lib.config.validate import validate_config

    raw = {
        "datasets": {dataset: {"classes": [inlier]}},
        "methods": [TRAINED],
        "seeds": [0],
        "detectors": {detector: {} for detector in DETECTORS},
        "train": {"epochs": epochs},
    }
    return validate_config(raw, SCHEMA)


def measure(
    dataset: Any, *, representation: str, seed: int, settings: Settings, device: str = "cpu"
) -> list[dict[str, Any]]:
    """AUCs of one representation on one version of the data set, one row per detector.

    The workflow's chain (as ``benchmarks/direct_run.py``): ``one_class_split`` ->
    ``build_representation`` + ``embed_split`` (frozen) or ``train_representation`` +
    ``embed_trained`` (RotNet, trained on the first ``n_train`` training inliers) ->
    ``run_detection`` (fitted on every training inlier) and, for RotNet,
    ``run_rotation_detection``.

    Raises
    ------
    ValueError
        If ``representation`` is not one of REPRESENTATIONS.
    """
    from pipeline_lib.config.grids import variant_training
    from pipeline_lib.data.split import one_class_split
    from pipeline_lib.detection.runner import run_detection, run_rotation_detection
    from pipeline_lib.models.embed import embed_split
    from pipeline_lib.models.representation import build_representation
    from pipeline_lib.registry import training_arguments
    from pipeline_lib.ssl.jobs import embed_trained
    from pipeline_lib.ssl.train import train_representation

    if representation not in REPRESENTATIONS:
        raise ValueError(
            f"unknown representation {representation!r}; allowed: {', '.join(REPRESENTATIONS)}"
        )
    config = library_defaults(dataset.name, settings.inlier, settings.epochs)
    batch_size = settings.batch_size or config["embed"]["batch_size"]
    started = time.perf_counter()
    split = one_class_split(
        dataset.train_labels,
        dataset.test_labels,
        inlier=dataset.class_names.index(settings.inlier),
        seed=seed,
    )
    train_s, last_loss = 0.0, math.nan
    if representation in FROZEN:
        # Raw pixels have no width; the random ResNet-18 has the frozen width.
        width = settings.frozen_width if representation == "resnet18_random" else 0
        epochs, n_train = 0, 0
        model = build_representation(representation, seed=seed, width=settings.frozen_width)
        tic = time.perf_counter()
        features = embed_split(
            model, dataset, split.train_index, batch_size=batch_size, device=device
        )
    else:
        width, epochs = settings.rotnet_width, settings.epochs
        images = dataset.train_images[split.train_index[: settings.n_train]]
        n_train = len(images)
        arguments = training_arguments(TRAINED, variant_training(TRAINED, config["train"], {}))
        tic = time.perf_counter()
        model, history = train_representation(
            TRAINED, images, seed=seed, device=device, width=width, **arguments
        )
        train_s = time.perf_counter() - tic
        last_loss = float(history[-1]["loss"])
        tic = time.perf_counter()
        features = embed_trained(
            model, dataset, split, method=TRAINED, batch_size=batch_size, device=device
        )
    embed_s = time.perf_counter() - tic
    aurocs, detect_s = {}, {}
    for detector in DETECTORS:
        tic = time.perf_counter()
        record, _ = run_detection(
            split,
            features,
            fitset="train",
            detector=detector,
            detector_params=config["detectors"][detector],
            max_fit=config["detect"]["max_fit"],
            seed=seed,
            device=device,
        )
        aurocs[detector], detect_s[detector] = record["auroc"], time.perf_counter() - tic
    if representation == TRAINED:
        tic = time.perf_counter()
        record, _ = run_rotation_detection(split, features, detector=ROTATION_DETECTOR)
        aurocs[ROTATION_DETECTOR] = record["auroc"]
        detect_s[ROTATION_DETECTOR] = time.perf_counter() - tic
    wall_s = time.perf_counter() - started
    return [
        {
            "representation": representation,
            "width": width,
            "epochs": epochs,
            "n_train": n_train,
            "seed": seed,
            "detector": detector,
            "auroc": auroc,
            "last_loss": last_loss,
            "train_s": train_s,
            "embed_s": embed_s,
            "detect_s": detect_s[detector],
            "wall_s": wall_s,
        }
        for detector, auroc in aurocs.items()
    ]


@dataclass(frozen=True)
class Unit:
    """One measurement to run in a worker: a cached data set version and a representation."""

    dose: str
    cache: str
    representation: str
    seed: int
    settings: Settings


def run_unit(unit: Unit) -> list[dict[str, Any]]:
    """A worker's job: one thread, read the cached version, :func:`measure`."""
    from pipeline_lib.runtime.devices import set_threads
    from pipeline_lib.runtime.io import load_image_dataset

    set_threads(1)
    dataset = load_image_dataset(unit.cache)
    return measure(
        dataset, representation=unit.representation, seed=unit.seed, settings=unit.settings
    )


# --------------------------------------------------------------------------------------------
# Fit and summary


def fit_through_origin(doses: Sequence[float], deltas: Sequence[float]) -> float:
    """Least-squares slope of ``deltas = slope * doses`` (a line through the origin).

    Raises
    ------
    ValueError
        If the lengths differ, or every dose is 0 (no slope to fit).
    """
    x = np.asarray(doses, dtype=np.float64)
    y = np.asarray(deltas, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"doses and deltas must be 1-D of one length, got {x.shape}, {y.shape}")
    if not np.any(x):
        raise ValueError("every dose is 0: no slope to fit")
    return float(x @ y / (x @ x))


def slopes_from_rows(
    rows: Sequence[Mapping[str, Any]], doses: Mapping[str, float]
) -> dict[str, dict[str, Any]]:
    """Per ``representation/detector``: the slope per seed, their mean and half range, and
    the RMS of the points about their seed's line (how far the AUC changes scatter).

    A seed's points are (dose, AUC - AUC at dose 0) for every dose it was measured at
    besides the reference; seeds without the reference or without another dose are skipped.
    """
    table: dict[str, dict[int, dict[str, float]]] = {}
    for row in rows:
        key = f"{row['representation']}/{row['detector']}"
        table.setdefault(key, {}).setdefault(int(row["seed"]), {})[row["dose_name"]] = float(
            row["auroc"]
        )
    slopes = {}
    for key, by_seed in table.items():
        per_seed, deltas, residuals = {}, {}, []
        for seed, by_dose in sorted(by_seed.items()):
            others = [name for name in by_dose if name != REFERENCE and doses.get(name, 0) > 0]
            if REFERENCE not in by_dose or not others:
                continue
            delta = {name: by_dose[name] - by_dose[REFERENCE] for name in others}
            per_seed[seed] = fit_through_origin([doses[n] for n in others], list(delta.values()))
            for name, value in delta.items():
                deltas.setdefault(name, []).append(value)
                residuals.append(value - per_seed[seed] * doses[name])
        if not per_seed:
            continue
        values = list(per_seed.values())
        slopes[key] = {
            "slope": float(np.mean(values)),
            "slope_seeds": {str(seed): value for seed, value in per_seed.items()},
            "slope_spread": float((max(values) - min(values)) / 2),
            "deltas": {name: float(np.mean(v)) for name, v in deltas.items()},
            "residual_rms": float(np.sqrt(np.mean(np.square(residuals)))),
        }
    return slopes


def predicted_changes(
    slopes: Mapping[str, Mapping[str, Any]], central: float, dose_range: Sequence[float]
) -> dict[str, dict[str, float]]:
    """AUC(lossless) - AUC(shared) = -slope x dose: central, and low/high over seeds x range."""
    predictions = {}
    for key, fit in slopes.items():
        products = [-slope * dose for slope in fit["slope_seeds"].values() for dose in dose_range]
        predictions[key] = {
            "central": -fit["slope"] * central,
            "low": float(min(products)),
            "high": float(max(products)),
        }
    return predictions


def mean_aurocs(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """'representation/detector' -> dose name -> AUC, mean over seeds."""
    collected: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        key = f"{row['representation']}/{row['detector']}"
        collected.setdefault(key, {}).setdefault(row["dose_name"], []).append(float(row["auroc"]))
    return {
        key: {name: float(np.mean(v)) for name, v in by_dose.items()}
        for key, by_dose in collected.items()
    }


def full_cell_reference(inlier: str) -> dict[str, Any]:
    """The measured full-protocol cell's KDE (benchmarks/fullcell) and the paper's value."""
    from pipeline_lib.paper.published import load_published

    published = load_published("per_class_aucs_cifar10")
    paper = published[
        (published["inlier"] == inlier)
        & (published["method"] == TRAINED)
        & (published["detector"] == "kde")
    ]
    measured = []
    for path in sorted(FULLCELL.glob("*.json")):
        for result in json.loads(path.read_text())["results"]:
            if result["inlier"] == inlier and result["method"] == TRAINED:
                measured.append((path.name, result["auroc"]["kde"]))
    reference: dict[str, Any] = {"measured_kde": None, "paper_kde": None}
    if measured:
        reference["measured_kde"], reference["measured_in"] = measured[-1][1], measured[-1][0]
    if len(paper):
        reference["paper_kde"] = float(paper["mean"].iloc[0])
        reference["paper_kde_std"] = float(paper["std"].iloc[0])
    if reference["measured_kde"] is not None and reference["paper_kde"] is not None:
        reference["gap"] = reference["paper_kde"] - reference["measured_kde"]
    return reference


def _slope_phrase(fit: Mapping[str, Any]) -> str:
    """'-0.143 +- 0.082 (seeds -0.060, -0.225)' or '-0.007' for one seed."""
    if len(fit["slope_seeds"]) == 1:
        return f"{fit['slope']:+.3f}"
    seeds = ", ".join(f"{value:+.3f}" for value in fit["slope_seeds"].values())
    return f"{fit['slope']:+.3f} +- {fit['slope_spread']:.3f} (seeds {seeds})"


def conclusion_text(summary: Mapping[str, Any]) -> str:
    """The one-paragraph conclusion, written from the numbers of ``summary``."""
    doses, slopes, settings = summary["doses"], summary["slopes"], summary["settings"]
    lo, hi = summary["q75_dose_range"]
    kde = summary["predicted_kde_change"]
    rotnet = slopes[f"{TRAINED}/kde"]
    dose_list = ", ".join(
        f"{name} {value:.2f}" for name, value in doses.items() if name != REFERENCE
    )
    others = [
        f"its {key.split('/')[1]} {_slope_phrase(slopes[key])}"
        for key in slopes
        if key.startswith(f"{TRAINED}/") and key != f"{TRAINED}/kde"
    ]
    frozen = [key for key in slopes if not key.startswith(f"{TRAINED}/")]
    frozen_part = ""
    if frozen:
        largest = max(abs(slopes[key]["slope"]) for key in frozen)
        levels = ", ".join(
            f"{key} {summary['auroc'][key][REFERENCE]:.1f}"
            for key in frozen
            if REFERENCE in summary["auroc"].get(key, {})
        )
        frozen_part = (
            f" The frozen representations ({levels} at dose 0) move by at most "
            f"{largest:.3f} points per grey level."
        )
    within = ""
    if hi <= max(doses.values()):
        within = (
            ", so the shared copy's distance from the lossless originals lies within the "
            "measured doses"
        )
    cell = summary["full_cell"]
    gap = cell.get("gap")
    if summary["can_move_kde_half_point"]:
        verdict = "the data can plausibly move the full cell's KDE by half a point or more"
        if kde["central"] > 0:
            verdict += ", towards the paper"
        if gap is not None and kde["high"] < gap:
            verdict += (
                f", but even the highest estimate is below the full cell's {gap:.1f}-point gap "
                f"({cell['measured_kde']:.1f} against the paper's {cell['paper_kde']:.1f}), "
                "so it does not explain the whole gap alone"
            )
        elif gap is not None:
            verdict += (
                f"; the full cell's gap is {gap:.1f} points ({cell['measured_kde']:.1f} "
                f"against the paper's {cell['paper_kde']:.1f})"
            )
    else:
        verdict = "the data alone is unlikely to move the full cell's KDE by half a point"
        if gap is not None:
            verdict += f" (the full cell's gap to the paper is {gap:.1f} points)"
    return (
        f"Re-encoding the shared q75 copy changes its pixels by {dose_list} grey levels (mean "
        f"absolute change), and q75 4:2:0 JPEG changes lossless 32x32 images by "
        f"{summary['q75_dose_estimate']:.2f} (MVTec bottle; {lo:.2f} to {hi:.2f} over bottle, "
        f"scikit-learn's sample photographs and their compressibility-calibrated values){within}"
        f". The small RotNet (width {settings['rotnet_width']}, first "
        f"{settings['n_train']:,} training inliers, {settings['epochs']} epochs; KDE "
        f"{summary['auroc'][f'{TRAINED}/kde'][REFERENCE]:.1f} at dose 0, mean over seeds) "
        f"changes its KDE AUC by {_slope_phrase(rotnet)} points per grey level, the AUC "
        f"changes scattering by {rotnet['residual_rms']:.2f} points (RMS) about each seed's "
        f"line; {', '.join(others)}.{frozen_part} Extrapolated, the RotNet KDE on lossless "
        f"images would differ by {kde['central']:+.2f} points ({kde['low']:+.2f} to "
        f"{kde['high']:+.2f} over seeds and doses): {verdict}. Limits: the slope comes from "
        "compressing already-compressed images further and is applied to the first "
        "compression; the dose is a mean absolute change measured on other photographs than "
        f"CIFAR's; {len(rotnet['slope_seeds'])} seeds of a small, briefly trained RotNet, "
        "whereas the full cell is width 64 at 2,048 epochs and may depend on fine detail more "
        "or less."
    )


def processor_name() -> str:
    """The CPU's model name and logical CPU count (Linux), else the machine type."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} CPUs)"
    return platform.machine()


def build_summary(
    rows: Sequence[Mapping[str, Any]],
    *,
    doses: Mapping[str, float],
    qualities: Mapping[str, int | None],
    lossless: Mapping[str, LosslessDose],
    settings: Settings,
    seeds: Sequence[int],
    command: str,
    wall_s: float,
) -> dict[str, Any]:
    """summary.json: the fit, the dose estimates, the predictions and the conclusion."""
    slopes = slopes_from_rows(rows, doses)
    further = doses.get(f"q{CALIBRATION_QUALITY}")
    estimates = q75_dose_estimates(lossless, further)
    central = estimates.get("bottle", next(iter(estimates.values())))
    dose_range = [min(estimates.values()), max(estimates.values())]
    predictions = predicted_changes(slopes, central, dose_range)
    kde_key = f"{TRAINED}/kde"
    kde = predictions.get(kde_key)  # None until RotNet has a dose besides the reference
    can_move = kde is not None and max(abs(kde["low"]), abs(kde["high"])) >= HALF_POINT
    summary: dict[str, Any] = {
        "schema_version": 1,
        "command": command,
        "wall_s": round(wall_s, 1),
        "machine": f"{processor_name()}, 1 torch thread per worker",
        "inlier": settings.inlier,
        "settings": {**asdict(settings), "seeds": list(seeds)},
        "doses": dict(doses),
        "qualities": dict(qualities),
        "auroc": mean_aurocs(rows),
        "slopes": slopes,
        "q75_dose_sources": {name: asdict(source) for name, source in lossless.items()},
        "q75_dose_estimates": estimates,
        "q75_dose_estimate": central,
        "q75_dose_range": dose_range,
        "predicted_change": predictions,
        "predicted_kde_change": kde,
        "full_cell": full_cell_reference(settings.inlier),
        "can_move_kde_half_point": can_move,
    }
    summary["conclusion"] = conclusion_text(summary) if kde is not None else ""
    return summary


# --------------------------------------------------------------------------------------------
# Files


def write_rows(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """results.csv, the columns of CSV_COLUMNS, floats rounded for reading."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            out = {}
            for column in CSV_COLUMNS:
                value = row.get(column)
                if isinstance(value, float):
                    value = "" if math.isnan(value) else round(value, 4)
                out[column] = "" if value is None else value
            writer.writerow(out)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """results.csv back as dicts (numbers parsed; empty cells None)."""
    rows = []
    with path.open(newline="") as handle:
        for raw in csv.DictReader(handle):
            row: dict[str, Any] = {}
            for key, value in raw.items():
                if value == "":
                    row[key] = None
                elif key in ("quality", "width", "epochs", "n_train", "seed"):
                    row[key] = int(value)
                elif key in ("dose_name", "representation", "detector"):
                    row[key] = value
                else:
                    row[key] = float(value)
            rows.append(row)
    return rows


def render_readme(summary: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    """README.md from summary.json and results.csv: command, time, tables, conclusion, keys."""
    doses = summary["doses"]
    names = list(doses)
    settings = summary["settings"]
    lines = [
        "# JPEG dose and one-class AUC (CIFAR-10 `automobile`)",
        "",
        "Generated by `benchmarks/jpeg_dose.py` from `results.csv` and `summary.json` (do not",
        "edit by hand). The question: can the shared CIFAR-10 copy being JPEG q75 (4:2:0)",
        "instead of the lossless official binaries move the full cell's KDE by half a point?",
        "",
        f"Command: `{summary['command']}`  ",
        f"Wall time: {summary['wall_s'] / 60:.0f} min on {summary['machine']} (a shared "
        "machine: per-row times in `results.csv` include waiting for the CPU).",
        "",
        "## AUC x 100 per dose (mean over seeds) and fitted slope",
        "",
        "Dose: mean absolute pixel change from the shared copy, grey levels; every `qN` is the "
        "shared copy re-encoded once at quality N, 4:2:0 (`q75` is a second q75 pass). "
        f"RotNet: width {settings['rotnet_width']}, first {settings['n_train']:,} training "
        f"inliers, {settings['epochs']} epochs, the library's recipe otherwise, seeds "
        f"{', '.join(map(str, settings['seeds']))} (the same at every dose); ResNet-18 random: "
        f"width {settings['frozen_width']}, seed 0. RotNet is trained only at the doses of "
        "its rows (`--rotnet-doses`). Detectors: KDE and RBF OC-SVM at the paper's kernel "
        "width (gamma = 10 / (d Var), L2-normalised features), fitted on all 5,000 training "
        "automobiles and scored on the 10,000 test images; the rotation classifier's sum of "
        "log p (rotation_log_p) needs no fit. Slope: AUC points per grey level, least "
        "squares through the origin (+- half the range over seeds); residual: RMS of the AUC "
        "changes about each seed's line.",
        "",
        "| representation / detector | "
        + " | ".join(f"{n} ({doses[n]:.2f})" for n in names)
        + " | slope | residual |",
        "|---|" + "---|" * (len(names) + 2),
    ]
    for key, by_dose in summary["auroc"].items():
        fit = summary["slopes"].get(key)
        slope, residual = "n/a", "n/a"
        if fit:
            slope = f"{fit['slope']:+.3f}"
            if len(fit["slope_seeds"]) > 1:
                slope += f" +- {fit['slope_spread']:.3f}"
            residual = f"{fit['residual_rms']:.2f}"
        cells = [f"{by_dose[n]:.2f}" if n in by_dose else "" for n in names]
        lines.append(f"| {key} | " + " | ".join(cells) + f" | {slope} | {residual} |")
    trained = [r for r in rows if r["representation"] == TRAINED]
    if trained:
        seeds = sorted({r["seed"] for r in trained})
        detectors = list(dict.fromkeys(r["detector"] for r in trained))
        measured = [n for n in names if any(r["dose_name"] == n for r in trained)]
        auc = {(r["seed"], r["detector"], r["dose_name"]): r["auroc"] for r in trained}
        lines += [
            "",
            "RotNet per seed (AUC x 100; the paired change from dose 0 in brackets):",
            "",
            "| seed | detector | " + " | ".join(measured) + " |",
            "|---|---|" + "---|" * len(measured),
        ]
        for seed in seeds:
            for detector in detectors:
                base = auc.get((seed, detector, REFERENCE))
                cells = []
                for name in measured:
                    value = auc.get((seed, detector, name))
                    if value is None:
                        cells.append("")
                    elif name == REFERENCE or base is None:
                        cells.append(f"{value:.2f}")
                    else:
                        cells.append(f"{value:.2f} ({value - base:+.2f})")
                lines.append(f"| {seed} | {detector} | " + " | ".join(cells) + " |")
    sources = summary["q75_dose_sources"]
    lines += [
        "",
        "## What q75 4:2:0 does to lossless 32x32 images",
        "",
        "MVTec AD `bottle` PNGs (lossless, 256x256) and 256x256 crops of scikit-learn's two "
        "sample photographs (JPEGs themselves, so only nearly lossless at 32x32: the bottle "
        "is the central estimate), area-averaged to 32x32 (the library's `area_resize`, "
        "cv2.INTER_AREA: an exact 8x8 block mean), then encoded "
        f"at q75 4:2:0 and decoded. `further`: the change a q{CALIBRATION_QUALITY} pass then "
        "makes; the calibrated values scale the q75 change by CIFAR's further change "
        f"({doses.get(f'q{CALIBRATION_QUALITY}', float('nan')):.2f}) over the source's. These "
        "are not CIFAR's images, so the dose is an estimate.",
        "",
        "| source | images | q75 change | further change | estimate (calibrated) |",
        "|---|---|---|---|---|",
    ]
    estimates = summary["q75_dose_estimates"]
    for name, source in sources.items():
        calibrated = estimates.get(f"{name}_calibrated")
        shown = f"{calibrated:.2f}" if calibrated is not None else "n/a"
        lines.append(
            f"| {name} | {source['n_images']} | {source['q75']:.2f} | {source['further']:.2f} "
            f"| {shown} |"
        )
    lines += [
        "",
        "## Predicted AUC(lossless) - AUC(shared copy), points",
        "",
        f"-slope x dose, at {summary['q75_dose_estimate']:.2f} grey levels (bottle); low/high "
        f"over seeds and the dose range {summary['q75_dose_range'][0]:.2f} to "
        f"{summary['q75_dose_range'][1]:.2f}.",
        "",
        "| representation / detector | central | low | high |",
        "|---|---|---|---|",
    ]
    for key, change in summary["predicted_change"].items():
        lines.append(
            f"| {key} | {change['central']:+.2f} | {change['low']:+.2f} | {change['high']:+.2f} |"
        )
    lines += [
        "",
        f"`can_move_kde_half_point`: **{str(summary['can_move_kde_half_point']).lower()}**",
        "",
        "## Conclusion",
        "",
        summary["conclusion"],
        "",
        "## `summary.json` keys",
        "",
        "| key | meaning |",
        "|---|---|",
    ]
    lines += [f"| `{key}` | {meaning} |" for key, meaning in SUMMARY_KEYS.items()]
    lines += [
        "| `q75_dose_sources` | source -> {n_images, q75, further}: the measurements behind "
        "the estimates |",
        "",
        f"`results.csv`: {len(rows)} rows, one per dose x representation x seed x detector; "
        "columns " + ", ".join(f"`{c}`" for c in CSV_COLUMNS) + " (times in seconds; "
        "`wall_s` is the whole measurement of that representation, shared by its detectors).",
        "",
    ]
    return "\n".join(lines)


def write_outputs(out: Path, rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> None:
    """results.csv, summary.json and README.md in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    write_rows(out / "results.csv", rows)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=False) + "\n")
    (out / "README.md").write_text(render_readme(summary, rows))


# --------------------------------------------------------------------------------------------
# Main


def build_units(
    doses: Sequence[Dose],
    caches: Mapping[str, str],
    *,
    representations: Sequence[str],
    seeds: Sequence[int],
    rotnet_doses: Sequence[str],
    settings: Settings,
) -> list[Unit]:
    """Every measurement; RotNet first (the longest), its reference and largest dose first."""
    units = []
    trained = [d for d in reversed(doses) if d.name in rotnet_doses]
    trained.sort(key=lambda d: d.name != REFERENCE)
    if TRAINED in representations:
        for seed in seeds:
            for dose in trained:
                units.append(Unit(dose.name, caches[dose.name], TRAINED, seed, settings))
    for representation in (r for r in FROZEN if r in representations):
        for dose in doses:
            units.append(Unit(dose.name, caches[dose.name], representation, 0, settings))
    return units


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", default=None, help="CIFAR-10 root (else $DROC_DATA_ROOT)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "jpeg")
    parser.add_argument("--mvtec-root", type=Path, default=DEFAULT_MVTEC)
    parser.add_argument("--qualities", type=int, nargs="+", default=[75, 50, 30])
    parser.add_argument(
        "--rotnet-doses",
        nargs="+",
        default=[REFERENCE, "q50", "q30"],
        help="doses RotNet is trained at (default: shared q50 q30; the q75 second pass is "
        "too small a dose to weigh in a fit against RotNet's training noise)",
    )
    parser.add_argument("--representations", nargs="+", default=list(REPRESENTATIONS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--rotnet-width", type=int, default=16)
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--frozen-width", type=int, default=64)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (1 thread each)")
    parser.add_argument("--cache", type=Path, default=None, help="folder for the re-encoded sets")
    parser.add_argument("--resume", action="store_true", help="keep matching rows of results.csv")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: rebuild summary.json and README.md from OUT's results.csv and "
        "summary.json (doses, dose sources, settings, command and wall time kept)",
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.representations) - set(REPRESENTATIONS))
    if unknown:
        parser.error(f"--representations {unknown}: allowed {', '.join(REPRESENTATIONS)}")
    return args


def _unit_done(rows: Sequence[Mapping[str, Any]], unit: Unit) -> bool:
    settings = unit.settings
    for row in rows:
        if (row["dose_name"], row["representation"], row["seed"]) != (
            unit.dose,
            unit.representation,
            unit.seed,
        ):
            continue
        if unit.representation != TRAINED:
            return row["width"] == (settings.frozen_width if unit.representation != "raw" else 0)
        return (row["width"], row["epochs"], row["n_train"]) == (
            settings.rotnet_width,
            settings.epochs,
            settings.n_train,
        )
    return False


def rebuild_report(out: Path) -> dict[str, Any]:
    """summary.json and README.md again from ``out``'s results.csv and summary.json.

    For a change of the report's wording or fit without measuring again: the doses, the
    lossless sources, the settings, the command and its wall time come from the old summary.
    """
    old = json.loads((out / "summary.json").read_text())
    rows = read_rows(out / "results.csv")
    settings = dict(old["settings"])
    seeds = settings.pop("seeds")
    summary = build_summary(
        rows,
        doses=old["doses"],
        qualities=old["qualities"],
        lossless={name: LosslessDose(**v) for name, v in old["q75_dose_sources"].items()},
        settings=Settings(**settings),
        seeds=seeds,
        command=old["command"],
        wall_s=old["wall_s"],
    )
    write_outputs(out, rows, summary)
    return summary


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from pipeline_lib.data import load_dataset
    from pipeline_lib.runtime.io import save_image_dataset

    args = parse_args(argv)
    if args.report_only:
        return rebuild_report(args.out)
    started = time.perf_counter()
    command = "python benchmarks/jpeg_dose.py " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    settings = Settings(
        rotnet_width=args.rotnet_width,
        epochs=args.epochs,
        n_train=args.n_train,
        frozen_width=args.frozen_width,
    )
    doses = doses_for(args.qualities)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    previous = (
        read_rows(out / "results.csv") if args.resume and (out / "results.csv").exists() else []
    )

    lossless = {
        "bottle": lossless_dose(downscale(read_pngs(args.mvtec_root))),
        "photos": lossless_dose(downscale(photo_crops())),
    }
    for name, source in lossless.items():
        print(f"[lossless] {name}: {source}", flush=True)

    temporary = tempfile.TemporaryDirectory(prefix="jpeg_dose_") if args.cache is None else None
    cache = Path(temporary.name) if temporary else args.cache
    cache.mkdir(parents=True, exist_ok=True)
    shared = load_dataset("cifar10", root=args.data_root)
    dose_values, caches = {}, {}
    for dose in doses:
        version, value = reencode_dataset(shared, dose)
        dose_values[dose.name] = value
        caches[dose.name] = str(cache / f"{dose.name}.npz")
        save_image_dataset(caches[dose.name], version)
        print(f"[dose] {dose.name}: {value:.3f} grey levels", flush=True)
    del shared

    units = build_units(
        doses,
        caches,
        representations=args.representations,
        seeds=args.seeds,
        rotnet_doses=args.rotnet_doses,
        settings=settings,
    )
    quality = {dose.name: dose.quality for dose in doses}
    rows = [r for r in previous if any(_unit_done([r], u) for u in units)]
    todo = [u for u in units if not _unit_done(rows, u)]
    print(
        f"{len(units)} measurements, {len(units) - len(todo)} kept, {args.jobs} at once", flush=True
    )

    def summarise() -> dict[str, Any]:
        ordered = sorted(
            rows,
            key=lambda r: (
                REPRESENTATIONS.index(r["representation"]),
                r["seed"],
                list(quality).index(r["dose_name"]),
                r["detector"],
            ),
        )
        write_rows(out / "results.csv", ordered)  # first: the measurements survive any error
        summary = build_summary(
            ordered,
            doses=dose_values,
            qualities=quality,
            lossless=lossless,
            settings=settings,
            seeds=args.seeds,
            command=command,
            wall_s=time.perf_counter() - started,
        )
        write_outputs(out, ordered, summary)
        return summary

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:
        pending = {pool.submit(run_unit, unit): unit for unit in todo}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                unit = pending.pop(future)
                for row in future.result():
                    rows.append(
                        {
                            "dose_name": unit.dose,
                            "quality": quality[unit.dose],
                            "dose": dose_values[unit.dose],
                            **row,
                        }
                    )
                print(
                    f"[{time.perf_counter() - started:6.0f} s] {unit.dose} {unit.representation} "
                    f"seed {unit.seed}: "
                    + ", ".join(
                        f"{r['detector']} {r['auroc']:.2f}"
                        for r in rows
                        if (r["dose_name"], r["representation"], r["seed"])
                        == (unit.dose, unit.representation, unit.seed)
                    ),
                    flush=True,
                )
                if any(r["dose_name"] == REFERENCE for r in rows):
                    summarise()  # kept if the run is stopped
    summary = summarise()
    if temporary:
        temporary.cleanup()
    print(summary["conclusion"])
    return summary


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
