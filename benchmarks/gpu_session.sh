#!/usr/bin/env bash
# Issue 15's device measurements in one prepared run, for the next session lent a GPU
# (at most 560 s of step limits, under 10 minutes on an H200; each step has its own time
# limit so one slow step cannot eat the others). Everything it prints also lands in $OUT/<step>.txt.
#
#   OUT=/tmp/gpu bash benchmarks/gpu_session.sh                 # on the device machine
#   DEVICE=cpu WIDTH=8 STEPS=1 DETECTORS=1 DETECT="--n-fit 500 --n-test 1000 --dim 64" \
#     OUT=/tmp/gpu bash benchmarks/gpu_session.sh                      # CPU smoke run
#
# Steps: the graph-captured step's CUDA tests (graph vs eager weights, resume bit-identity,
# fallback warning; fused graph vs fused eager, one capture per fused group), fused ==
# separate on the device, then one bench_train call: eager and graph-captured training
# throughput per method (ratio, share of the card's dense bf16 peak), and fused K = 4 and 10
# per method, each eager and graph-captured; then torch.compile(mode="reduce-overhead") of
# the same step beside its CUDA graph (bench_compile.py, RotNet: inductor compiles for about
# a minute). The detectors at the paper's sizes (bench_ocsvm.py, bench_kde.py) were measured
# on an H200 already (docs/status.md): with DETECTORS=1 they run too, 80 s more. The bench_train call measures the separate runs once for both K (it was
# three calls, each re-measuring them: the graph-vs-eager one and one per K, 345 s of
# limits; now 290 s with the fused graph runs added). The full-protocol cell
# (config/cifar10_fullcell.yaml, ~30 minutes) is a separate call: see docs/status.md.
#
# bench_train appends each rate as soon as it is measured (eager, graph, fused K in both
# modes; per model) to $OUT/rates.csv (pipeline_lib.dag.rates), so a step cut by its time
# limit keeps what it had measured (the fused K = 10 graph rows come last). Commit that file as benchmarks/rates/<card>.csv
# (h200.csv, h100.csv; benchmarks/rates/README.md), then the planner costs the paper from it:
#   droc-plan --configfile config/paper.yaml --device cuda --no-measured \
#     --rates benchmarks/rates/h200.csv
set -uo pipefail
cd "$(dirname "$0")/.."
# The device machine has torch but not this package installed: import it from the checkout.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT=${OUT:?set OUT to a folder for the outputs}
DEVICE=${DEVICE:-cuda}
WIDTH=${WIDTH:-64}
STEPS=${STEPS:-20}
PEAK=${PEAK:-989}  # dense bf16 TFLOP/s of an H100/H200 SXM
PYTHON=${PYTHON:-python3}
DETECT=${DETECT:-}  # detector benchmark sizes; default: the paper's (5,000 x 10,000 x 512)
mkdir -p "$OUT"

step() {  # step NAME SECONDS COMMAND...: run with a limit, keep its output, go on either way
  local name=$1 limit=$2
  shift 2
  echo "== $name (limit ${limit} s)"
  timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.txt"
  echo "== $name: exit ${PIPESTATUS[0]}"
}

MODES=eager  # graph capture is CUDA-only (the CPU tests run in CI)
if [ "$DEVICE" = cuda ]; then
  MODES=both
  step graph_tests 90 "$PYTHON" -m pytest -q -p no:cacheprovider tests/ssl/test_stepper.py tests/test_devices.py -k on_cuda
fi
step check_fused 60 "$PYTHON" benchmarks/check_fused.py --device "$DEVICE" --k 4 --steps 3 \
  --width "$WIDTH"
step train 290 "$PYTHON" benchmarks/bench_train.py --device "$DEVICE" --width "$WIDTH" \
  --steps "$STEPS" --peak-tflops "$PEAK" --step-mode "$MODES" --fuse 4 10 \
  --rates-out "$OUT/rates.csv"
# torch.compile(mode="reduce-overhead") vs the CUDA graph vs eager (bench_compile.py): rotnet
# only, 120 s, so the limits sum to 560 s (inductor compiles a method in an expected 30-90 s;
# more methods need a call of their own). On the CPU: dynamo's eager backend.
BACKEND=inductor; [ "$DEVICE" = cuda ] || BACKEND=eager
step train_compile 120 "$PYTHON" benchmarks/bench_compile.py --device "$DEVICE" --width "$WIDTH" \
  --steps "$STEPS" --methods rotnet --backend "$BACKEND"
if [ "${DETECTORS:-0}" = 1 ]; then  # measured on an H200 already: opt-in
  # shellcheck disable=SC2086  # DETECT is a list of options
  step ocsvm 40 "$PYTHON" benchmarks/bench_ocsvm.py --device "$DEVICE" $DETECT
  # shellcheck disable=SC2086
  step kde 40 "$PYTHON" benchmarks/bench_kde.py --device "$DEVICE" $DETECT
fi
