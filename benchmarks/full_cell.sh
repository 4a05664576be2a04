#!/usr/bin/env bash
# The full-protocol cell (config/experiments/cifar10_fullcell.yaml: RotNet, CIFAR-10
# automobile, seed 0, 2,048 epochs, compiled step) on a lent GPU, then its detectors.
#
# One device command may run 10 minutes and the cell's training alone takes about 12.4 on an
# H200 (13,759 source images/s, compiled). So the run starts in a process session of its own
# (the device machine keeps such a process running until the machine goes back), and each
# call of this script follows it for at most WAIT seconds: the first call starts it, a second
# call made within the 30 s the machine stays warm picks it up where it is -- no restart, no
# second compilation, no epochs lost. The run is the workflow's: Snakemake makes the cell's
# tidy table (target summary/results.csv, in $RUN/workflow; DEVICE=cuda runs it with
# --profile profiles/gpu), then benchmarks/run_record.py writes its record. When the run has
# finished, the call copies to $OUT the run's log (full_cell.txt: Snakemake's, with its jobs'
# log lines, then the record's), the record (results.json, with the code's commit: set
# COMMIT, the device copy has no .git), the per-epoch history (with test-split AUCs every
# train.eval_every epochs), the features (float16) and, for rotation models, the rotation
# logits (float32), for benchmarks/fullcell_detectors.py. If the run is gone unfinished (the
# machine was given back, or the process was killed), the next call starts it again:
# Snakemake redoes the unfinished jobs and training resumes from its last checkpoint. On an
# H200 the cell took 837 of a session's 900 device-seconds (two calls, 585 s and 212 s, with
# the machine's start; benchmarks/fullcell/), run then by the direct runner of commit 9fac754
# (`git show 9fac754:benchmarks/direct_run.py`); the workflow adds its jobs' starts and the
# CPU detectors, seconds each: give the cell a session of its own.
#
#   mkdir -p .data && cp "$DROC_SHARED"/data/{cifar10_jpeg.npz,make_cifar10.py} .data/
#   echo /.data/ >> .git/info/exclude; echo /.whl/ >> .git/info/exclude
#   # the device image lacks Snakemake and jsonschema: their wheels with their dependencies,
#   # for Python 3.12 (about 29 MB; connection_pool has none on PyPI: pip builds it)
#   python3 -m pip wheel --no-deps -w .whl connection_pool==0.0.3
#   python3 -m pip download --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --find-links .whl \
#     -d .whl snakemake==9.27.1 jsonschema
#   # both calls, the same command (the first carries .data and .whl, timeout 600; the
#   # second at once, within the 30 s): the run works from a copy outside the synced tree
#   [ -d /tmp/fcr ] || cp -a . /tmp/fcr; OUT=$OUT RUN=/tmp/fullcell CHECKPOINT_EVERY=128 \
#     COMMIT=<git rev-parse HEAD, typed here> bash /tmp/fcr/benchmarks/full_cell.sh
#
# The CIFAR-10 copy ($DROC_SHARED: the development data) is JPEG q75: pixels differ slightly
# from the official binaries the paper used (results.json says so in `data_source`). CONFIG,
# DEVICE, WAIT, RUN, CORES, PYTHON and COMMIT override the defaults; CHECKPOINT_EVERY
# overrides the config's train.checkpoint_every (a run that is not killed needs few: each
# RotNet checkpoint is 90 MB written in the training loop).
# tests/test_full_cell.py runs it on the CPU with a tiny config.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT=${OUT:?set OUT to a folder for the outputs}
CONFIG=${CONFIG:-config/experiments/cifar10_fullcell.yaml}
DEVICE=${DEVICE:-cuda}
WAIT=${WAIT:-585}  # seconds from this script's start to follow the run; a call may run 600
RUN=${RUN:-results/fullcell}
CORES=${CORES:-$(nproc 2>/dev/null || echo 2)}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT" "$RUN"
RUN=$(cd "$RUN" && pwd)

# The run's session leader exists and is not a zombie (a killed run whose parent is gone may
# stay one where nothing reaps it).
alive() {
  local pid
  pid=$(cat "$RUN/run.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null &&
    ! grep -qs '^State:[[:space:]]*Z' "/proc/$pid/status"
}

if [ -f "$RUN/exit_code" ]; then
  echo "the run has finished (exit code $(cat "$RUN/exit_code")); to run it again, delete $RUN"
elif alive; then
  echo "following the run started earlier (pid $(cat "$RUN/run.pid"))"
else
  if compgen -G ".whl/*.whl" >/dev/null && ! "$PYTHON" -c "import snakemake, jsonschema" 2>/dev/null; then
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
  # What the run's session reads from its environment.
  PROFILE=""
  [ "$DEVICE" = cuda ] && PROFILE=profiles/gpu  # the training and embedding jobs get the GPU
  export PYTHON RUN DEVICE CORES PROFILE CELL_CONFIG=$config COMMIT=${COMMIT:-}
  # A process session of its own outlives this call; the first thing it does is say its pid.
  echo "starting the run (it resumes from its checkpoint in $RUN/workflow if there is one)"
  rm -f "$RUN/run.pid"
  # (os.setsid through Python, which every machine that runs this has; setsid(1) may not be)
  # A group leader (a shell with job control) cannot setsid: it forks first. --nolock: no
  # other run works in $RUN (one starts only when none is alive), and a killed run leaves
  # its lock behind.
  "$PYTHON" -c 'import os, sys
if os.getpgrp() == os.getpid() and os.fork(): os._exit(0)
os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' \
    bash -c 'echo $$ > "$RUN/run.pid"
    {
      "$PYTHON" -m snakemake --snakefile Snakefile --directory "$RUN/workflow" --nolock \
        --configfile "$CELL_CONFIG" --cores "$CORES" ${PROFILE:+--profile "$PROFILE"} \
        summary/results.csv &&
        "$PYTHON" benchmarks/run_record.py --configfile "$CELL_CONFIG" \
          --workdir "$RUN/workflow" --out "$RUN/record" --features --device "$DEVICE" \
          ${COMMIT:+--commit "$COMMIT"}
    } >> "$RUN/run.log" 2>&1
    echo $? > "$RUN/exit_code"' \
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
  # The record and, per trained model, its history, features and rotation logits (one
  # model: 5 files with the log, each under 16 MiB).
  for file in "$RUN"/record/*.json "$RUN"/record/*.npz; do
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
