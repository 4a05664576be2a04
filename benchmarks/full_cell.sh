#!/usr/bin/env bash
# The full-protocol cell (config/experiments/cifar10_fullcell.yaml: RotNet, CIFAR-10
# automobile, seed 0, 2,048 epochs, compiled step) on a lent GPU, then its detectors.
#
# One device command may run 10 minutes and the cell's training alone takes about 12.4 on an
# H200 (13,759 source images/s, compiled). So the run starts in a process session of its own
# (the device machine keeps such a process running until the machine goes back), and each
# call of this script follows it for at most WAIT seconds: the first call starts it, a second
# call made within the 30 s the machine stays warm picks it up where it is -- no restart, no
# second compilation, no epochs lost. When the run has finished, the call copies its log,
# result JSON (with the code's commit: set COMMIT, the device copy has no .git), per-epoch
# history (with test-split AUCs every train.eval_every epochs), features (float16) and, for
# rotation models, rotation logits (float32) to $OUT, for benchmarks/fullcell_detectors.py.
# If the run is gone unfinished (the machine was given back, or
# the process was killed), the next call starts it again and it resumes from its last
# checkpoint. On an H200 it took 837 of a session's 900 device-seconds (two calls, 585 s and
# 212 s, with the machine's start; benchmarks/fullcell/): give it a session of its own.
#
#   mkdir -p .data && cp "$DROC_SHARED"/data/{cifar10_jpeg.npz,make_cifar10.py} .data/
#   echo /.data/ >> .git/info/exclude; echo /.whl/ >> .git/info/exclude
#   # the device image lacks jsonschema (config validation): its wheels, for Python 3.12
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_17_x86_64 -d .whl jsonschema \
#     jsonschema-specifications referencing rpds-py
#   # both calls, the same command (the first carries .data and .whl, timeout 600; the
#   # second at once, within the 30 s): the run works from a copy outside the synced tree
#   [ -d /tmp/fcr ] || cp -a . /tmp/fcr; OUT=$OUT RUN=/tmp/fullcell CHECKPOINT_EVERY=128 \
#     COMMIT=<git rev-parse HEAD, typed here> bash /tmp/fcr/benchmarks/full_cell.sh
#
# The CIFAR-10 copy ($DROC_SHARED: the development data) is JPEG q75: pixels differ slightly
# from the official binaries the paper used (results.json says so in `data_source`). CONFIG,
# DEVICE, WAIT, RUN, PYTHON and COMMIT override the defaults; CHECKPOINT_EVERY overrides the config's train.checkpoint_every (a run that
# is not killed needs few: each RotNet checkpoint is 90 MB written in the training loop).
# tests/test_full_cell.py runs it on the CPU with a tiny config.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT=${OUT:?set OUT to a folder for the outputs}
CONFIG=${CONFIG:-config/experiments/cifar10_fullcell.yaml}
DEVICE=${DEVICE:-cuda}
WAIT=${WAIT:-585}  # seconds from this script's start to follow the run; a call may run 600
RUN=${RUN:-results/fullcell}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT" "$RUN"
RUN=$(cd "$RUN" && pwd)

alive() { [ -f "$RUN/run.pid" ] && kill -0 "$(cat "$RUN/run.pid")" 2>/dev/null; }

if [ -f "$RUN/exit_code" ]; then
  echo "the run has finished (exit code $(cat "$RUN/exit_code")); to run it again, delete $RUN"
elif alive; then
  echo "following the run started earlier (pid $(cat "$RUN/run.pid"))"
else
  if compgen -G ".whl/*.whl" >/dev/null && ! "$PYTHON" -c "import jsonschema" 2>/dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl || exit
    export PYTHONPATH="/tmp/site:$PYTHONPATH"
  fi
  if [ -f .data/cifar10_jpeg.npz ]; then
    export DROC_DATA_SOURCE="cifar10_jpeg.npz: CIFAR-10 re-encoded as JPEG at quality 75"
    export DROC_DATA_ROOT=${DROC_DATA_ROOT:-/tmp/droc-data}
    [ -d "$DROC_DATA_ROOT/cifar-10-batches-py" ] || "$PYTHON" .data/make_cifar10.py "$DROC_DATA_ROOT"
  fi
  config=$CONFIG
  if [ -n "${CHECKPOINT_EVERY:-}" ]; then
    config="$RUN/config.yaml"
    "$PYTHON" - "$CONFIG" "$config" "$CHECKPOINT_EVERY" <<'EOF' || exit
import sys
import yaml
source, target, every = sys.argv[1:]
config = yaml.safe_load(open(source))
config.setdefault("train", {})["checkpoint_every"] = int(every)
open(target, "w").write(yaml.safe_dump(config, sort_keys=False))
EOF
  fi
  # A process session of its own outlives this call; the first thing it does is say its pid.
  echo "starting the run (it resumes from $RUN/jobs/*.ckpt if there is one)"
  rm -f "$RUN/run.pid"
  # (os.setsid through Python, which every machine that runs this has; setsid(1) may not be)
  # A group leader (a shell with job control) cannot setsid: it forks first.
  "$PYTHON" -c 'import os, sys
if os.getpgrp() == os.getpid() and os.fork(): os._exit(0)
os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' \
    bash -c 'run=$1; shift; echo $$ > "$run/run.pid"
    "$@" >> "$run/run.log" 2>&1; echo $? > "$run/exit_code"' _ "$RUN" \
    "$PYTHON" benchmarks/direct_run.py --configfile "$config" --device "$DEVICE" \
    --parallel 1 --progress --features ${COMMIT:+--commit "$COMMIT"} --out "$RUN" \
    </dev/null >/dev/null 2>&1 &
  for _ in $(seq 100); do [ -f "$RUN/run.pid" ] && break; sleep 0.1; done
fi

# The log goes to $OUT as it grows: a call stopped at its limit still brings it back.
while alive && [ "$SECONDS" -lt "$WAIT" ]; do
  sleep 1
  [ $((SECONDS % 10)) -eq 0 ] && cp "$RUN/run.log" "$OUT/full_cell.txt" 2>/dev/null
done
cp "$RUN/run.log" "$OUT/full_cell.txt" 2>/dev/null
if [ -f "$RUN/exit_code" ]; then
  cp "$RUN/results.json" "$OUT/" 2>/dev/null
  # One job: its history, features and rotation logits (under 16 MiB each, 8 files in all).
  for file in "$RUN"/jobs/*.history.json "$RUN"/jobs/*.features.npz "$RUN"/jobs/*.rotation.npz; do
    if [ -f "$file" ]; then cp "$file" "$OUT/"; fi
  done
  tail -n 20 "$RUN/run.log"
  exit "$(cat "$RUN/exit_code")"
fi
if alive; then
  tail -c 2000 "$RUN/run.log"
  echo "still running after ${SECONDS} s: call this again (within 30 s on a device machine)"
  exit 0
fi
echo "the run stopped without an exit code; call this again to resume it" >&2
exit 1
