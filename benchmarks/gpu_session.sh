#!/usr/bin/env bash
# The training-speed device measurements in one prepared run for a session lent a GPU; each step has
# its own time limit so one slow step cannot eat the others, and everything it prints also
# lands in $OUT/<step>.txt.
#
#   OUT=/tmp/gpu bash benchmarks/gpu_session.sh                       # on the device machine
#   RATES=1 COMPILE=1 OUT=/tmp/gpu bash benchmarks/gpu_session.sh     # + the measured ones
#   DEVICE=cpu WIDTH=4 STEPS=2 RATES=1 OUT=/tmp/gpu bash benchmarks/gpu_session.sh  # CPU smoke
#
# Measured rates, one method per 10-minute command, 64 px and contrastive DA first (each row
# the median of REPEATS epochs of STEPS steps, as pipeline_lib.planning.rates records):
#   SIZE=64 COMPILED=1 METHODS=contrastive_da STREAMS=1 STREAMS_COMPILED="1 5 10" LIMIT=280 \
#     OUT=/tmp/gpu bash benchmarks/gpu_session.sh
#
# Default steps (at most 560 s of limits): the CUDA tests of the graph-captured and compiled
# steps (graph == eager bit for bit under deterministic cuDNN, separate and fused; resume; the
# fallback warning; one capture per fused group, retrains after a leaked NaN; compiled:
# resume, a fresh compilation and side-by-side runs repeat the run; device draws; the whole
# step compiled and captured stays near the graph run), fused ==
# separate on the device (check_fused.py), and bench_streams.py: K = 1, 2, 4, 8 separate
# captured runs replayed side by side on K streams, the candidate for filling the GPU that
# stacking and process packing were not (benchmarks/rates/README.md); its rates go to $OUT/rates.csv as
# graph fuse-K rows (what a captured `train.fuse: K` job trains at).
#
# The streams step appends graph fuse-K rates (deterministic cuDNN, the trainer's); measured
# on an H200 on 2026-11-27, so opt-in: RATES=1 runs bench_train.py (eager and graph
# rates per method, fused K = 4 and 10 in both modes, share of bf16 peak; 290 s), appending
# every rate to $OUT/rates.csv (pipeline_lib.planning.rates; committed as benchmarks/rates/h200.csv,
# read by `droc-plan --rates`); COMPILED=1 runs bench_streams.py under `train.step_mode:
# compiled` (K = 1, 4, 10; about 150 s, compile included), appending compiled fuse-K rows;
# DRAWS=1 runs bench_streams.py again with `--draws device` (the steps' random numbers drawn
# on the GPU inside the captured step, DRAWS_MODE=compiled for the compiled step; printed
# beside the host-drawn rows, not written to rates.csv);
# COMPILE=1 runs bench_compile.py (torch.compile reduce-overhead
# beside the CUDA graph; inductor compiles a method in 25-50 s; 240 s); COMPILE_CAPTURE=1
# the same with the whole compiled step captured as the trainer's own graph (the whole-step
# candidate); AUTOTUNE=1 max-autotune, captured, in three processes (AUTOTUNE_METHODS,
# default rotnet; AUTOTUNE_STEPS, 50; AUTOTUNE_LIMIT each, 180 s): two on one saved cache,
# whose compiled weights must agree, and one on a fresh cache (autotune_digests.txt);
# PROFILE=1 profile_step.py's kernel categories per method at K = 1 and 8 (PROFILE_MODE
# auto or compiled; $OUT/profiles.csv; 200 s); DETECTORS=1 the detector benchmarks at the paper's sizes (80 s). The full-protocol cell
# (config/experiments/cifar10_fullcell.yaml) needs about 12.4 minutes of training even compiled (one
# model: fusing does not speed it up): benchmarks/full_cell.sh, in a session of its own.
set -uo pipefail
cd "$(dirname "$0")/.."
# The device machine has torch but not this package installed: import it from the checkout.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT=${OUT:?set OUT to a folder for the outputs}
DEVICE=${DEVICE:-cuda}
WIDTH=${WIDTH:-64}
STEPS=${STEPS:-200}  # steps per timed epoch; every rate is the median of REPEATS such epochs
REPEATS=${REPEATS:-3}
SIZE=${SIZE:-32}  # training image side: 64 for the Cat-vs-Dog and CelebA rows
# Most hours first (contrastive DA is over half the main table's), so a limit cuts the least.
METHODS=${METHODS:-contrastive_da contrastive rotation rotnet denoising}
STREAMS=${STREAMS:-1 2 4 8}
STREAMS_COMPILED=${STREAMS_COMPILED:-1 5 10}
LIMIT=${LIMIT:-200}  # seconds per streams step; 200 steps x 3 repeats x K models per method
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
  step graph_tests 300 "$PYTHON" -m pytest -q -p no:cacheprovider tests/ssl/test_compiling.py \
    tests/ssl/test_stepper_cuda.py tests/ssl/test_device_draws.py tests/test_devices.py \
    tests/test_bench_compile.py -k on_cuda
fi
step check_fused 60 "$PYTHON" benchmarks/check_fused.py --device "$DEVICE" --k 4 --steps 3 \
  --width "$WIDTH"  # auto: on CUDA the captured fused job (models side by side on streams)
# shellcheck disable=SC2086  # METHODS, STREAMS, FUSE are lists
step streams "$LIMIT" "$PYTHON" benchmarks/bench_streams.py --device "$DEVICE" --width "$WIDTH" \
  --steps "$STEPS" --repeats "$REPEATS" --image-size "$SIZE" --streams $STREAMS \
  --peak-tflops "$PEAK" --rates-out "$OUT/rates.csv" --methods $METHODS
if [ "${COMPILED:-0}" = 1 ] && [ "$DEVICE" = cuda ]; then
  step streams_compiled "$LIMIT" "$PYTHON" benchmarks/bench_streams.py --device cuda --width "$WIDTH" \
    --steps "$STEPS" --repeats "$REPEATS" --image-size "$SIZE" --step-mode compiled \
    --streams $STREAMS_COMPILED --peak-tflops "$PEAK" \
    --rates-out "$OUT/rates.csv" --methods $METHODS
fi
if [ "${DRAWS:-0}" = 1 ] && [ "$DEVICE" = cuda ]; then
  # The candidate `train.draws: device` beside the rows above (printed, not written to the
  # rate table): same methods, K and step mode, the numbers drawn on the GPU in the graph.
  step streams_device_draws "$LIMIT" "$PYTHON" benchmarks/bench_streams.py --device cuda \
    --width "$WIDTH" --steps "$STEPS" --repeats "$REPEATS" --image-size "$SIZE" \
    --step-mode "${DRAWS_MODE:-auto}" --streams $STREAMS --peak-tflops "$PEAK" --draws device \
    --methods $METHODS
fi
if [ "${RATES:-0}" = 1 ]; then
  step train 290 "$PYTHON" benchmarks/bench_train.py --device "$DEVICE" --width "$WIDTH" \
    --steps "$STEPS" --repeats "$REPEATS" --image-size "$SIZE" --peak-tflops "$PEAK" \
    --step-mode "$MODES" --fuse ${FUSE:-5 10} --methods $METHODS --rates-out "$OUT/rates.csv"
fi
if [ "${COMPILE:-0}" = 1 ]; then
  BACKEND=inductor; [ "$DEVICE" = cuda ] || BACKEND=eager  # on the CPU: no compiler needed
  step train_compile 240 "$PYTHON" benchmarks/bench_compile.py --device "$DEVICE" \
    --width "$WIDTH" --steps "$STEPS" --repeats "$REPEATS" --backend "$BACKEND"
fi
if [ "${COMPILE_CAPTURE:-0}" = 1 ] && [ "$DEVICE" = cuda ]; then
  # The whole-step candidate: views, network, loss, backward and SGD compiled by inductor
  # and captured as the step's own CUDA graph (not inductor's three graphs per step).
  step train_compile_captured 240 "$PYTHON" benchmarks/bench_compile.py --device cuda \
    --width "$WIDTH" --steps "$STEPS" --repeats "$REPEATS" --capture --mode default \
    --methods $METHODS
fi
if [ "${AUTOTUNE:-0}" = 1 ] && [ "$DEVICE" = cuda ]; then
  # max-autotune with a saved cache: two processes on one cache folder must train the same
  # weights (equal compiled digests); a third on a fresh folder shows what the cache fixes.
  cache=${AUTOTUNE_CACHE:-/tmp/droc-inductor-autotune}
  rm -rf "$cache" "$cache-fresh"
  for name in autotune_first autotune_cached autotune_fresh; do
    folder=$cache; [ "$name" = autotune_fresh ] && folder=$cache-fresh
    step "$name" "${AUTOTUNE_LIMIT:-180}" "$PYTHON" benchmarks/bench_compile.py --device cuda \
      --width "$WIDTH" --steps "${AUTOTUNE_STEPS:-50}" --capture --mode max-autotune-no-cudagraphs \
      --cache-dir "$folder" --methods ${AUTOTUNE_METHODS:-rotnet}
  done
  for name in autotune_first autotune_cached autotune_fresh; do
    echo "$name: $(grep -o 'compiled [0-9a-f]\{16\}' "$OUT/$name.txt" | tr '\n' ' ')"
  done | tee "$OUT/autotune_digests.txt"
fi
if [ "${PROFILE:-0}" = 1 ]; then
  # Where a step's time goes, one row per kernel category into $OUT/profiles.csv (the
  # summaries behind the performance claims): K = 1 and 8, PROFILE_MODE (auto or compiled).
  step profile "${PROFILE_LIMIT:-200}" "$PYTHON" benchmarks/profile_step.py --device "$DEVICE" \
    --width "$WIDTH" --image-size "$SIZE" --step-mode "${PROFILE_MODE:-auto}" \
    --streams ${PROFILE_STREAMS:-1 8} --methods $METHODS --summary-out "$OUT/profiles.csv"
fi
if [ "${DETECTORS:-0}" = 1 ]; then
  # shellcheck disable=SC2086  # DETECT is a list of options
  step ocsvm 40 "$PYTHON" benchmarks/bench_ocsvm.py --device "$DEVICE" $DETECT
  # shellcheck disable=SC2086
  step kde 40 "$PYTHON" benchmarks/bench_kde.py --device "$DEVICE" $DETECT
fi
