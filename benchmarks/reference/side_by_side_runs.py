"""What the side-by-side runs share: their setting, one run's result, and the CSV of finished
runs (``side_by_side.py`` runs them, ``parity_report.py`` compares them).

Both runners (``side_by_side_released.py``, ``side_by_side_ours.py``) import this module and
nothing of the command that drives them.
"""

from __future__ import annotations

import csv
import fcntl
import os
import tempfile
from collections.abc import Iterable, Mapping
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
