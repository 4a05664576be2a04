"""Six tiny CPU training runs and their weight fingerprints: a change to the trainer either
keeps every built-in method's weights bit for bit or names the run it changed.

The runs (digits images, 32x32, width 8, two epochs, seconds each) go through the public run
API, :func:`pipeline_lib.ssl.train.train_representation` and
:func:`pipeline_lib.ssl.fused.train_representations_fused`: ``rotation``, ``rotnet``,
``denoising`` and ``contrastive_da`` alone, and two fused groups of two contrastive models
(``contrastive`` and ``contrastive_da``, stacked on the CPU). For each model the script
records

* ``weights_sha256``: SHA-256 over every tensor of the trained model's state dict (name,
  dtype, shape and bytes, in name order), and
* ``fingerprint_sha256``: SHA-256 of the fingerprint the library writes into the run's
  resumable checkpoint (what a checkpoint must have been written for to be resumed), with
  that fingerprint itself beside it, so a mismatch shows which setting moved.

Bit-identity holds on one machine, not across CPUs (another vector unit sums in another
order), so the committed file is a record to compare against on the machine that wrote it:
run ``--write`` before a change and ``--check`` after it on the same machine. ``--check``
exits 1 naming every run whose fingerprints differ::

    python benchmarks/reference_runs.py --write     # record (benchmarks/reference_runs.json)
    python benchmarks/reference_runs.py --check     # compare; exit 1 on any difference
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pipeline_lib.data import load_dataset
from pipeline_lib.models.checkpoints import load_checkpoint
from pipeline_lib.ssl.fused import train_representations_fused
from pipeline_lib.ssl.settings import TrainSettings
from pipeline_lib.ssl.train import train_representation

RECORD = Path(__file__).with_name("reference_runs.json")

#: Images per model and the settings every run shares: small enough for seconds a run,
#: two epochs so that the per-epoch learning rate moves once.
IMAGES = 48
SHARED: dict[str, Any] = {"epochs": 2, "width": 8}
#: MLP heads kept small (the paper's 8 x 512 would dominate a width-8 network's time).
SMALL_HEAD: dict[str, Any] = {"head_depth": 1, "head_hidden": 16, "proj_dim": 8}


@dataclasses.dataclass(frozen=True)
class ReferenceRun:
    """One reference run: a method, its recipe beyond :data:`SHARED`, and its models' seeds
    (two seeds: a fused group of two models, each on its own images)."""

    method: str
    options: Mapping[str, Any]
    seeds: tuple[int, ...] = (0,)

    @property
    def fused(self) -> bool:
        return len(self.seeds) > 1


RUNS: dict[str, ReferenceRun] = {
    "rotation": ReferenceRun("rotation", {"batch_size": 12, **SMALL_HEAD}),
    "rotnet": ReferenceRun("rotnet", {"batch_size": 12}),
    "denoising": ReferenceRun("denoising", {"batch_size": 12}),
    "contrastive_da": ReferenceRun("contrastive_da", {"batch_size": 24, **SMALL_HEAD}),
    "fused_contrastive": ReferenceRun("contrastive", {"batch_size": 12, **SMALL_HEAD}, (0, 1)),
    "fused_contrastive_da": ReferenceRun(
        "contrastive_da", {"batch_size": 24, **SMALL_HEAD}, (2, 3)
    ),
}


def weights_sha256(model: torch.nn.Module) -> str:
    """SHA-256 over every state tensor of ``model``: name, dtype, shape and bytes, by name."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        array = np.ascontiguousarray(tensor.detach().cpu().numpy())
        digest.update(f"{name}|{array.dtype}|{array.shape}|".encode())
        digest.update(memoryview(array).cast("B"))
    return digest.hexdigest()


def fingerprint_sha256(fingerprint: Mapping[str, Any]) -> str:
    """SHA-256 of a checkpoint's fingerprint as canonical JSON (sorted keys)."""
    text = json.dumps(fingerprint, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _images(count: int) -> list[np.ndarray]:
    """``count`` disjoint sets of :data:`IMAGES` digits training images, uint8 (n, 32, 32, 3)."""
    images = load_dataset("digits").train_images
    return [images[k * IMAGES : (k + 1) * IMAGES] for k in range(count)]


def _settings(run: ReferenceRun) -> TrainSettings:
    return TrainSettings(method=run.method, **SHARED, **run.options)


def _trained(run: ReferenceRun, folder: Path) -> list[tuple[torch.nn.Module, Path]]:
    """Train ``run``'s models; each with the path of its resumable checkpoint."""
    settings = _settings(run)
    images = _images(len(run.seeds))
    paths = [folder / f"seed{seed}.pt" for seed in run.seeds]
    if not run.fused:
        model, _ = train_representation(
            settings, images[0], seed=run.seeds[0], checkpoint_path=paths[0]
        )
        return [(model, paths[0])]
    results = train_representations_fused(
        settings, images, seeds=list(run.seeds), checkpoint_paths=paths
    )
    for result in results:
        if isinstance(result, Exception):
            raise result
    return [(model, path) for (model, _), path in zip(results, paths, strict=True)]


def fingerprints(run: ReferenceRun) -> list[dict[str, Any]]:
    """The fingerprints of ``run``'s models, in seed order (one thread, as recorded)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory() as folder:
            models = []
            for model, path in _trained(run, Path(folder)):
                fingerprint = load_checkpoint(path)["fingerprint"]
                models.append(
                    {
                        "weights_sha256": weights_sha256(model),
                        "fingerprint_sha256": fingerprint_sha256(fingerprint),
                        "fingerprint": fingerprint,
                    }
                )
            return models
    finally:
        torch.set_num_threads(threads)


def differences(
    recorded: Mapping[str, Sequence[Mapping[str, Any]]],
    computed: Mapping[str, Sequence[Mapping[str, Any]]],
) -> list[str]:
    """One line per run whose models' fingerprints differ (or that one side lacks)."""
    lines = []
    for name in dict.fromkeys([*recorded, *computed]):
        if name not in recorded or name not in computed:
            side = "the record" if name not in recorded else "this run"
            lines.append(f"{name}: missing from {side}")
            continue
        old, new = recorded[name], computed[name]
        if len(old) != len(new):
            lines.append(f"{name}: {len(old)} models recorded, {len(new)} trained")
            continue
        for index, (was, now) in enumerate(zip(old, new, strict=True)):
            for key in ("weights_sha256", "fingerprint_sha256"):
                if was[key] != now[key]:
                    moved = sorted(
                        k
                        for k in set(was["fingerprint"]) | set(now["fingerprint"])
                        if was["fingerprint"].get(k) != now["fingerprint"].get(k)
                    )
                    detail = f" (fingerprint keys changed: {moved})" if moved else ""
                    lines.append(f"{name} model {index}: {key} differs{detail}")
    return lines


def compute(names: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    return {name: fingerprints(RUNS[name]) for name in names}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help=f"record into {RECORD.name}")
    action.add_argument("--check", action="store_true", help="compare with the record")
    parser.add_argument("--runs", nargs="+", choices=list(RUNS), default=list(RUNS))
    parser.add_argument("--record", type=Path, default=RECORD)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    computed = compute(args.runs)
    if args.write:
        recorded = json.loads(args.record.read_text())["runs"] if args.record.exists() else {}
        recorded = {name: recorded[name] for name in RUNS if name in recorded} | computed
        record = {
            "torch": torch.__version__,
            "runs": {n: recorded[n] for n in RUNS if n in recorded},
        }
        args.record.write_text(json.dumps(record, indent=1, sort_keys=False) + "\n")
        print(f"recorded {', '.join(args.runs)} in {args.record}")
        return 0
    recorded = json.loads(args.record.read_text())["runs"]
    lines = differences({name: recorded.get(name, []) for name in args.runs}, computed)
    for line in lines:
        print(line)
    print(
        f"{len(args.runs) - len({line.split()[0].rstrip(':') for line in lines})} of "
        f"{len(args.runs)} runs identical to {args.record.name}"
    )
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
