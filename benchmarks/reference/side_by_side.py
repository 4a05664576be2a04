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
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from side_by_side_runs import (
    DEFAULT_SEEDS,
    EPOCHS,
    HERE,
    IMPLEMENTATIONS,
    METHODS,
    RESULTS,
    append_run,
    data_root,
    finished_runs,
    read_rows,
)


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
