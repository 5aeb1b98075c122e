#!/usr/bin/env bash
# The harness self-test on a KernelBench level as a user runs it: `kernelzero bench --model reference`
# with the default lanes, for each backend, from cold caches (the first backend measures every
# baseline; the next ones find them cached, as a second run would). Records the wall time, the lanes,
# the device memory (nvidia-smi, sampled every 200 ms) and a per-task summary.
# Usage: scripts/bench_kernelbench.sh BUILD_DIR OUT_DIR TASKS_DIR [BACKEND ...]   (default: cuda triton)
# KZ_KB_TIMEOUT=S stops each backend's run after S seconds (the summary covers what finished).
# KZ_KB_CACHE=DIR keeps the build cache and baselines there (default: a new folder, cold caches).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?build dir}
OUTD=${2:?out dir}
TASKS=$(cd "${3:?tasks dir}" && pwd)
shift 3
BACKENDS=("${@:-cuda}")
(( $# )) || BACKENDS=(cuda triton)
KZ=$BUILD/kernelzero
PY=${KZ_PYTHON:-python3}
WORK=$(mktemp -d /tmp/kz-kb-XXXXXX)
CACHE=${KZ_KB_CACHE:-$WORK/cache}
mkdir -p "$OUTD"
echo "[kb] $(date -u +%FT%TZ) $($PY -c 'import torch; print(torch.__version__, torch.cuda.get_device_name())') $(nproc) cores, $(ls "$TASKS"/*.py | wc -l) tasks"
for backend in "${BACKENDS[@]}"; do
  smi=$OUTD/smi-$backend.csv
  nvidia-smi --query-gpu=timestamp,memory.used,memory.total,utilization.gpu --format=csv,noheader,nounits -lms 200 > "$smi" 2>/dev/null &
  smi_pid=$!
  # The verdicts so far, every 10 s: what a run cut short (a device call's limit) still shows.
  (while sleep 10; do cp "$WORK/$backend/verdicts.jsonl" "$OUTD/verdicts-$backend.jsonl" 2>/dev/null; done) &
  copier=$!
  t0=$(date +%s.%N)
  timeout -s INT "${KZ_KB_TIMEOUT:-100000}" $KZ bench --tasks "$TASKS" --backend "$backend" --model reference --device cuda --out "$WORK/$backend" \
    --cache-dir "$CACHE" --no-progress --json > "$OUTD/bench-$backend.json" 2> "$OUTD/bench-$backend.log"
  rc=$?
  wall=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN{printf "%.1f", a-b}')
  kill $smi_pid $copier 2>/dev/null; wait $smi_pid $copier 2>/dev/null
  echo "[kb] $backend: rc=$rc wall ${wall} s; $(grep -m1 'lanes' "$OUTD/bench-$backend.log")"
  $PY scripts/bench_kernelbench_summary.py "$WORK/$backend/verdicts.jsonl" "$smi" "$wall" | tee "$OUTD/summary-$backend.txt"
  cp "$WORK/$backend/verdicts.jsonl" "$OUTD/verdicts-$backend.jsonl"
  cp "$CACHE/baselines.sqlite" "$OUTD/baselines-$backend.sqlite" 2>/dev/null
done
