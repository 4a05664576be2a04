"""The released code and this project side by side: the same images, the same recipes, AUCs.

Both implementations train the paper-named recipes of RotNet, rotation prediction and
contrastive DA on the first 1,000 training images of CIFAR-10 ``automobile`` (in the order of
the data files), ResNet-18 at width 0.25 with the released 64-channel stem, 30 epochs, then
score the whole 10,000-image test split with KDE and OC-SVM on ``f`` and, for the rotation
methods, the rotation classifier. Each finished (implementation, method, seed) run adds its
rows to ``side_by_side.csv`` at once; a killed run is started again from its first epoch,
and finished rows are never recomputed. ``parity_report.py`` compares the two.

The released code runs in the reference environment, this project in its own::

    DROC_DATA_ROOT=/data .venv-reference/bin/python benchmarks/reference/side_by_side.py \\
        --impl released --released PATH/TO/deep_representation_one_class
    DROC_DATA_ROOT=/data PYTHONPATH=$PWD .venv/bin/python benchmarks/reference/side_by_side.py \\
        --impl ours

Run one at a time on a small machine: each training uses every core. This file imports
neither TensorFlow nor torch; ``side_by_side_released.py`` and ``side_by_side_ours.py`` do.
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "side_by_side.csv"
CONFIG = HERE / "side_by_side.yaml"

IMPLEMENTATIONS = ("released", "ours")
METHODS = ("rotnet", "rotation", "contrastive_da")
ROTATION_METHODS = ("rotnet", "rotation")
INLIER = "automobile"
TRAIN_IMAGES = 1000
EPOCHS = 30
#: The released ``--net_width`` and this project's ``embed.width`` (64 x 0.25): the first
#: stage's channels; the stem keeps 64 in both.
RELEASED_WIDTH = 0.25
WIDTH = 16
STEM_WIDTH = 64
DEFAULT_SEEDS = (1, 2, 3, 4, 5)

#: The detectors compared, each named as this project names it. ``rotation_released`` is
#: the released ``dscore`` (``1 - prod_k p(k | rot_k x)``, float32), ``rotation_p0`` its
#: ``logit.auc`` (``1 - p(0 | x)``).
DETECTORS = ("kde", "ocsvm", "rotation_released", "rotation_p0")
#: Scores of this project only (the paper's sum of probabilities; the released code has none).
OURS_ONLY = ("rotation_classifier",)

COLUMNS = (
    "impl",
    "method",
    "seed",
    "detector",
    "auroc",
    "epochs",
    "n_train",
    "n_test",
    "steps",
    "train_seconds",
    "eval_seconds",
    "code",
)


@dataclass(frozen=True)
class RunResult:
    """One finished training run and its scores (AUC x 100, outliers positive)."""

    impl: str
    method: str
    seed: int
    auroc: Mapping[str, float]
    n_train: int
    n_test: int
    steps: int
    train_seconds: float
    eval_seconds: float
    code: str
    epochs: int = EPOCHS

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "impl": self.impl,
                "method": self.method,
                "seed": self.seed,
                "detector": detector,
                "auroc": f"{value:.4f}",
                "epochs": self.epochs,
                "n_train": self.n_train,
                "n_test": self.n_test,
                "steps": self.steps,
                "train_seconds": f"{self.train_seconds:.1f}",
                "eval_seconds": f"{self.eval_seconds:.1f}",
                "code": self.code,
            }
            for detector, value in self.auroc.items()
        ]


def detectors_of(method: str, impl: str) -> tuple[str, ...]:
    """The scores a run of ``method`` records: no rotation classifier for contrastive DA."""
    names = DETECTORS + (OURS_ONLY if impl == "ours" else ())
    if method in ROTATION_METHODS:
        return names
    return tuple(name for name in names if not name.startswith("rotation"))


def read_rows(path: Path) -> list[dict[str, str]]:
    """The CSV's rows (none if it does not exist); a header other than ours is an error."""
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise SystemExit(
                f"{path}: columns {reader.fieldnames} are not {list(COLUMNS)}; "
                "move it away or pass another --csv"
            )
        return list(reader)


def finished_runs(rows: Iterable[Mapping[str, str]], *, epochs: int) -> set[tuple[str, str, int]]:
    """(impl, method, seed) of the runs the CSV holds; rows of another budget are an error,
    so that one file never mixes two settings."""
    done = set()
    for row in rows:
        if int(row["epochs"]) != epochs or int(row["n_train"]) != TRAIN_IMAGES:
            raise SystemExit(
                f"the CSV holds a {row['impl']} {row['method']} run of {row['epochs']} epochs "
                f"on {row['n_train']} images, this run is {epochs} on {TRAIN_IMAGES}: "
                "pass another --csv"
            )
        done.add((row["impl"], row["method"], int(row["seed"])))
    return done


def append_run(path: Path, result: RunResult) -> None:
    """Add one run's rows: the whole file rewritten atomically under a lock, so a killed
    process leaves either the old file or the new one, and two writers never interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows = read_rows(path)
        key = (result.impl, result.method, str(result.seed))
        if any((row["impl"], row["method"], row["seed"]) == key for row in rows):
            raise RuntimeError(f"{path} already holds {key}: finished rows are never rewritten")
        rows += result.rows()
        rows.sort(key=lambda row: (row["impl"], row["method"], int(row["seed"]), row["detector"]))
        handle = tempfile.NamedTemporaryFile(
            "w", dir=path.parent, prefix=f".{path.name}.", delete=False, newline=""
        )
        with handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(handle.name, path)


def data_root() -> Path:
    """``$DROC_DATA_ROOT``, holding ``cifar-10-batches-py`` (checked before any training)."""
    root = os.environ.get("DROC_DATA_ROOT")
    if not root:
        raise SystemExit("set DROC_DATA_ROOT to the folder that holds cifar-10-batches-py/")
    folder = Path(root) / "cifar-10-batches-py"
    missing = [
        name
        for name in (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch", "batches.meta")
        if not (folder / name).is_file()
    ]
    if missing:
        raise SystemExit(f"{folder} lacks {', '.join(missing)}: the CIFAR-10 python pickles")
    return Path(root)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", required=True, choices=IMPLEMENTATIONS)
    parser.add_argument("--released", type=Path, help="a checkout of the released code")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(DEFAULT_SEEDS))
    parser.add_argument("--epochs", type=int, default=EPOCHS, help="other than 30: a smoke run")
    parser.add_argument("--csv", type=Path, default=RESULTS)
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="threads of each implementation's operations (default: every core); on a machine "
        "shared with other work, 1 keeps idle threads from spinning: a step took 4x less "
        "wall time (torch) and 1.5-2x less CPU time (TensorFlow) on 2 busy cores",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "side_by_side",
        help="scratch space for the released code's checkpoints (emptied after each run)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if any(seed < 1 for seed in args.seeds):
        raise SystemExit("seeds start at 1: the released code seeds nothing for seed 0")
    if args.impl == "released" and args.released is None:
        raise SystemExit("--impl released needs --released PATH (a checkout of the released code)")
    root = data_root()
    done = finished_runs(read_rows(args.csv), epochs=args.epochs)
    todo = [
        (method, seed)
        for seed in args.seeds
        for method in args.methods
        if (args.impl, method, seed) not in done
    ]
    print(f"{args.impl}: {len(todo)} run(s) to go, {len(done)} in {args.csv}", flush=True)
    if not todo:
        return 0
    sys.path.insert(0, str(HERE))
    if args.impl == "released":
        from side_by_side_released import ReleasedRunner

        runner = ReleasedRunner(args.released, root, threads=args.threads, workdir=args.workdir)
    else:
        from side_by_side_ours import OursRunner

        runner = OursRunner(root, threads=args.threads)
    for method, seed in todo:
        started = time.perf_counter()
        result = runner.run(method, seed, epochs=args.epochs)
        append_run(args.csv, result)
        scores = ", ".join(f"{name} {value:.2f}" for name, value in result.auroc.items())
        print(
            f"{args.impl} {method} seed {seed}: {scores} ({result.steps} steps, train "
            f"{result.train_seconds:.0f} s, eval {result.eval_seconds:.0f} s, "
            f"{time.perf_counter() - started:.0f} s in all)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
