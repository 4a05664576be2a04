"""Make the reference traces: the released code run on fixed inputs, written as .npz + JSON.

    make reference-env
    .venv-reference/bin/python benchmarks/reference/trace.py \
        --released PATH/TO/deep_representation_one_class --out tests/fixtures/reference/

Each family is one module ``trace_<family>.py`` beside this file with a function
``trace(released, out) -> list[Path]``; ``--only`` runs some of them. The tests that read the
traces (tests/reference/) need no TensorFlow.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAMILIES = ("network", "steps", "schedule", "augment", "data", "detectors", "order")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--released", required=True, help="a checkout of the released code")
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/reference"))
    parser.add_argument("--only", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from released import load_released

    released = load_released(args.released)
    print(f"released code at {released.commit[:12]}, {released.versions}", flush=True)
    # In FAMILIES' order whatever --only's: a family that builds released models first (the
    # initialisers draw their seeds when first used) writes the same trace every time.
    for family in (f for f in FAMILIES if f in args.only):
        started = time.perf_counter()
        module = importlib.import_module(f"trace_{family}")
        written = module.trace(released, args.out)
        seconds = time.perf_counter() - started
        print(f"{family}: {len(written)} trace(s) in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
