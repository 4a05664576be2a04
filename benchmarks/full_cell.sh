#!/usr/bin/env bash
# Issue 15, item 6: the full-protocol cell (config/cifar10_fullcell.yaml: RotNet, CIFAR-10
# automobile, seed 0, 2,048 epochs, compiled step) on a lent GPU, then its detectors.
#
# One device command may run 10 minutes and the cell's training alone takes about 12.4 on an
# H200 (13,759 source images/s, compiled), so this runs twice, back to back on the warm
# machine (it stays warm 30 s after a call): the first call trains until DEADLINE seconds
# and stops (the checkpoint, every 16 epochs, stays in results/fullcell on the machine's
# disk); the second resumes it, finishes, embeds and scores, and copies the result JSON to
# $OUT. About 14 of a session's 15 device-minutes in all: give it a session of its own.
#
#   mkdir -p .data && cp ../shared/data/cifar10_jpeg.npz ../shared/data/make_cifar10.py .data/
#   echo /.data/ >> .git/info/exclude; echo /.whl/ >> .git/info/exclude
#   # the device image lacks jsonschema (config validation): its wheels, for Python 3.12
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_17_x86_64 -d .whl jsonschema \
#     jsonschema-specifications referencing rpds-py
#   device run (carry .data, .whl):  OUT=$OUT bash benchmarks/full_cell.sh   # call 1: ~9 min
#   device run (carry .data, .whl):  OUT=$OUT bash benchmarks/full_cell.sh   # call 2: the rest
#
# The CIFAR-10 copy is JPEG q75 re-encoded (../shared/data/README): pixels differ slightly
# from the official binaries the paper used. CONFIG, DEVICE, DEADLINE and RUN override the
# defaults (tests/test_full_cell.py runs it on the CPU with a tiny config).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT=${OUT:?set OUT to a folder for the outputs}
CONFIG=${CONFIG:-config/cifar10_fullcell.yaml}
DEVICE=${DEVICE:-cuda}
DEADLINE=${DEADLINE:-550}  # seconds from this script's start; a call may run 600
RUN=${RUN:-results/fullcell}
PYTHON=${PYTHON:-python3}
if compgen -G ".whl/*.whl" >/dev/null && ! "$PYTHON" -c "import jsonschema" 2>/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit
  export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi
if [ -f .data/cifar10_jpeg.npz ]; then
  export DROC_DATA_ROOT=${DROC_DATA_ROOT:-/tmp/droc-data}
  [ -d "$DROC_DATA_ROOT/cifar-10-batches-py" ] || "$PYTHON" .data/make_cifar10.py "$DROC_DATA_ROOT"
fi
mkdir -p "$OUT"
LEFT=$((DEADLINE - SECONDS))  # what making the data set left of it
"$PYTHON" benchmarks/direct_run.py --configfile "$CONFIG" --device "$DEVICE" --parallel 1 \
  --out "$RUN" --deadline "$LEFT" 2>&1 | tee -a "$OUT/full_cell.txt"
cp "$RUN/results.json" "$OUT/" 2>/dev/null || true
