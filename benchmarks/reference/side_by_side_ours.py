"""This project's side of ``side_by_side.py``: the workflow's library calls on the same images.

Each run is the chain of the workflow's jobs for one (class, seed, method): the split
(``one_class_split``, its training set cut to the first 1,000 inliers in file order, as the
released side's adapter cuts it), ``train_on_split`` (resuming from its checkpoint after a
kill), ``embed_trained``, ``run_detection`` per detector and ``run_rotation_detection`` per
rotation score, with the settings of ``side_by_side.yaml`` as the workflow's schema fills
them.
"""

from __future__ import annotations

import dataclasses
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from side_by_side_runs import (
    CONFIG,
    INLIER,
    ROTATION_METHODS,
    TRAIN_IMAGES,
    RunResult,
    detectors_of,
)

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def load_side_by_side_config(path: Path = CONFIG) -> dict[str, Any]:
    """``side_by_side.yaml`` validated and filled with defaults as the workflow does."""
    from pipeline_lib.config.validate import validate_config

    return validate_config(yaml.safe_load(path.read_text()), SCHEMA)


def _code_version() -> str:
    """The commit that ran, ``-dirty`` when the worktree has changes."""
    try:
        # A fixed git command on this repository; nothing from input becomes a command.
        out = subprocess.run(  # noqa: S603
            ["git", "-C", str(REPO), "describe", "--always", "--dirty", "--abbrev=10"],  # noqa: S607
            check=True,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "ours (commit not recorded)"
    return f"ours {out.stdout.strip()}"


class OursRunner:
    """Reads CIFAR-10 once; each :meth:`run` trains and scores one model on the CPU."""

    def __init__(self, data_root: Path, *, threads: int, workdir: Path | None = None) -> None:
        import torch

        from pipeline_lib.data.subsample import prepare_dataset
        from pipeline_lib.runtime.devices import set_threads

        self.config = load_side_by_side_config()
        self.dataset = prepare_dataset(
            "cifar10", self.config["datasets"]["cifar10"], root=data_root
        )
        self.inlier = self.dataset.class_names.index(INLIER)
        self.device = torch.device("cpu")
        set_threads(threads)
        self.workdir = workdir or Path(tempfile.gettempdir()) / "side_by_side_ours"
        self.code = _code_version()

    def split(self, seed: int):
        """The workflow's split of the inlier class with its training set cut to the first
        :data:`TRAIN_IMAGES` inliers (``train_index`` is sorted: file order)."""
        from pipeline_lib.data.split import one_class_split

        split = one_class_split(
            self.dataset.train_labels,
            self.dataset.test_labels,
            inlier=self.inlier,
            contamination=0.0,
            seed=seed,
        )
        if len(split.train_index) < TRAIN_IMAGES:
            raise SystemExit(f"{INLIER} has only {len(split.train_index)} training images")
        return dataclasses.replace(split, train_index=split.train_index[:TRAIN_IMAGES])

    def run(self, method: str, seed: int, *, epochs: int) -> RunResult:
        from pipeline_lib.detection.runner import run_detection, run_rotation_detection
        from pipeline_lib.ssl.jobs import embed_trained, train_on_split
        from pipeline_lib.ssl.settings import Execution

        config = self.config
        split = self.split(seed)
        self.workdir.mkdir(parents=True, exist_ok=True)
        checkpoint = self.workdir / f"{method}_s{seed}_e{epochs}.ckpt"
        started = time.perf_counter()
        model, history, _ = train_on_split(
            method,
            self.dataset.train_images,
            split,
            training={**config["train"], "epochs": epochs},
            train_size=None,
            seed=seed,
            width=config["embed"]["width"],
            execution=Execution.from_config(config["train"], device=self.device),
            checkpoint_path=checkpoint,
        )
        trained = time.perf_counter()
        features = embed_trained(
            model,
            self.dataset,
            split,
            method=method,
            batch_size=config["embed"]["batch_size"],
            device=self.device,
        )
        auroc = {}
        wanted = detectors_of(method, "ours")
        for detector in (name for name in wanted if name in config["detectors"]):
            record, _ = run_detection(
                split,
                features,
                fitset="train",
                detector=detector,
                detector_params=config["detectors"][detector],
                max_fit=config["detect"]["max_fit"],
                seed=seed,
                device=self.device,
                intervals=False,
            )
            auroc[detector] = record["auroc"]
        if method in ROTATION_METHODS:
            for detector in (name for name in wanted if name.startswith("rotation")):
                record, _ = run_rotation_detection(
                    split, features, detector=detector, intervals=False
                )
                auroc[detector] = record["auroc"]
        missing = sorted(set(wanted) - set(auroc))
        if missing:
            raise SystemExit(f"{CONFIG} scores no {', '.join(missing)}: add them to its detectors")
        checkpoint.unlink(missing_ok=True)
        return RunResult(
            impl="ours",
            method=method,
            seed=seed,
            auroc={name: auroc[name] for name in wanted},
            n_train=len(split.train_index),
            n_test=len(split.test_index),
            steps=sum(int(record["steps"]) for record in history),
            train_seconds=trained - started,
            eval_seconds=time.perf_counter() - trained,
            code=self.code,
            epochs=epochs,
        )
