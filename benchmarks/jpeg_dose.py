"""How much JPEG compression of CIFAR-10 moves one-class AUCs, and what that predicts for the
lossless originals.

The CIFAR-10 copy used here is a JPEG quality 75 (4:2:0) re-encoding, not the official
lossless binaries. This measures a dose-response curve and
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
measured with the same settings and runs only the rest. This script schedules the work; the
study itself is the package ``benchmarks/jpeg/`` (one module per step above).

Usage (about 1.5 hours on 2 CPU threads; 2 worker processes of 1 thread each)::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/jpeg_dose.py \
        --data-root "$DROC_DATA_ROOT" --out benchmarks/jpeg --jobs 2
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jpeg.doses import REFERENCE, Dose, doses_for, reencode_dataset
from jpeg.lossless import LosslessDose, downscale, lossless_dose, photo_crops, read_pngs
from jpeg.measure import FROZEN, REPRESENTATIONS, TRAINED, Settings, Unit, run_unit
from jpeg.report import rebuild_report, write_outputs
from jpeg.rows import read_rows, write_rows
from jpeg.summary import build_summary

REPO = Path(__file__).resolve().parents[1]
#: MVTec AD's ``bottle`` PNGs (lossless photographs): ``--mvtec-root``, else under
#: ``$DROC_SHARED``, the development data, by default the folder ``shared`` beside the checkout.
SHARED = Path(os.environ.get("DROC_SHARED") or REPO.parent / "shared")
DEFAULT_MVTEC = SHARED / "data" / "mvtec_ad" / "bottle"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", default=None, help="CIFAR-10 root (else $DROC_DATA_ROOT)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "jpeg")
    parser.add_argument(
        "--mvtec-root",
        type=Path,
        default=DEFAULT_MVTEC,
        help="MVTec AD category folder of lossless PNGs (default: %(default)s)",
    )
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
        "summary.json (doses, dose sources, settings, command, wall time and machine kept)",
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.representations) - set(REPRESENTATIONS))
    if unknown:
        parser.error(f"--representations {unknown}: allowed {', '.join(REPRESENTATIONS)}")
    return args


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


def measure_lossless(mvtec_root: Path) -> dict[str, LosslessDose]:
    """What q75 does to the lossless sources: the MVTec bottle PNGs and the sample photos."""
    lossless = {
        "bottle": lossless_dose(downscale(read_pngs(mvtec_root))),
        "photos": lossless_dose(downscale(photo_crops())),
    }
    for name, source in lossless.items():
        print(f"[lossless] {name}: {source}", flush=True)
    return lossless


@contextmanager
def cache_folder(cache: Path | None) -> Iterator[Path]:
    """``cache``, or a temporary folder removed at the end, for the re-encoded data sets."""
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        yield cache
        return
    with tempfile.TemporaryDirectory(prefix="jpeg_dose_") as temporary:
        yield Path(temporary)


def cache_doses(
    doses: Sequence[Dose], cache: Path, data_root: str | None
) -> tuple[dict[str, float], dict[str, str]]:
    """Each dose's version of CIFAR-10 saved under ``cache`` for the workers: its dose in grey
    levels and its file, per dose name (the shared copy is freed before the workers start)."""
    from pipeline_lib.data import load_dataset
    from pipeline_lib.runtime.io import save_image_dataset

    shared = load_dataset("cifar10", root=data_root)
    dose_values, caches = {}, {}
    for dose in doses:
        version, value = reencode_dataset(shared, dose)
        dose_values[dose.name] = value
        caches[dose.name] = str(cache / f"{dose.name}.npz")
        save_image_dataset(caches[dose.name], version)
        print(f"[dose] {dose.name}: {value:.3f} grey levels", flush=True)
    return dose_values, caches


@dataclass(frozen=True)
class Run:
    """What a run writes beside its measured rows, from its start to its end."""

    out: Path
    dose_values: Mapping[str, float]
    qualities: Mapping[str, int | None]  # in dose order
    lossless: Mapping[str, LosslessDose]
    settings: Settings
    seeds: Sequence[int]
    command: str
    started: float

    def row(self, unit: Unit, measured: Mapping[str, Any]) -> dict[str, Any]:
        """A worker's row with its dose's name, quality and value in front."""
        return {
            "dose_name": unit.dose,
            "quality": self.qualities[unit.dose],
            "dose": self.dose_values[unit.dose],
            **measured,
        }

    def summarise(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Write the three files from the rows so far (in a fixed order) and return the
        summary; results.csv first, so the measurements survive any error after it."""
        order = list(self.qualities)
        ordered = sorted(
            rows,
            key=lambda r: (
                REPRESENTATIONS.index(r["representation"]),
                r["seed"],
                order.index(r["dose_name"]),
                r["detector"],
            ),
        )
        write_rows(self.out / "results.csv", ordered)
        summary = build_summary(
            ordered,
            doses=self.dose_values,
            qualities=self.qualities,
            lossless=self.lossless,
            settings=self.settings,
            seeds=self.seeds,
            command=self.command,
            wall_s=time.perf_counter() - self.started,
        )
        write_outputs(self.out, ordered, summary)
        return summary


def progress_line(run: Run, unit: Unit, rows: Sequence[Mapping[str, Any]]) -> str:
    """Elapsed time, the unit and the AUC of each of its detectors."""
    aurocs = ", ".join(
        f"{r['detector']} {r['auroc']:.2f}"
        for r in rows
        if (r["dose_name"], r["representation"], r["seed"])
        == (unit.dose, unit.representation, unit.seed)
    )
    return (
        f"[{time.perf_counter() - run.started:6.0f} s] {unit.dose} {unit.representation} "
        f"seed {unit.seed}: " + aurocs
    )


def run_units(
    run: Run, todo: Sequence[Unit], rows: list[dict[str, Any]], *, jobs: int
) -> dict[str, Any]:
    """Measure ``todo`` in ``jobs`` worker processes, adding to ``rows``; the files are
    rewritten after each unit once a reference row exists (kept if the run is stopped)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        pending = {pool.submit(run_unit, unit): unit for unit in todo}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                unit = pending.pop(future)
                rows += [run.row(unit, measured) for measured in future.result()]
                print(progress_line(run, unit, rows), flush=True)
                if any(r["dose_name"] == REFERENCE for r in rows):
                    run.summarise(rows)
    return run.summarise(rows)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
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
    lossless = measure_lossless(args.mvtec_root)
    with cache_folder(args.cache) as cache:
        dose_values, caches = cache_doses(doses, cache, args.data_root)
        units = build_units(
            doses,
            caches,
            representations=args.representations,
            seeds=args.seeds,
            rotnet_doses=args.rotnet_doses,
            settings=settings,
        )
        rows = [r for r in previous if any(_unit_done([r], u) for u in units)]
        todo = [u for u in units if not _unit_done(rows, u)]
        print(
            f"{len(units)} measurements, {len(units) - len(todo)} kept, {args.jobs} at once",
            flush=True,
        )
        run = Run(
            out=out,
            dose_values=dose_values,
            qualities={dose.name: dose.quality for dose in doses},
            lossless=lossless,
            settings=settings,
            seeds=args.seeds,
            command=command,
            started=started,
        )
        summary = run_units(run, todo, rows, jobs=args.jobs)
    print(summary["conclusion"])
    return summary


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
