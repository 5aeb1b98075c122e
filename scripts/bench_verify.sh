#!/usr/bin/env bash
# Verifier benchmarks on a GPU machine (results go to docs/BENCHMARKS.md):
#   1. end-to-end latency (compile + 5 trials + 100 timed iterations) of a one-kernel CUDA candidate on
#      the fast path, each a new kernel (salted source, so every NVRTC compile is real);
#   2. throughput of a 64-candidate mixed batch (CUDA fast path and Triton, every candidate salted),
#      first with cold caches (baselines and builds), then with the baselines cached (the RL steady
#      state: the task pool's baselines are measured once) and new kernels;
#   3. the anchor (../shared/anchors/compile_paths.py: load_inline vs NVRTC vs Triton) in the same command.
# Usage: scripts/bench_verify.sh BUILD_DIR OUT_DIR [ANCHORS_DIR | none]
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?build dir}
OUTD=${2:?out dir}
ANCHORS=$(cd "${3:-../shared/anchors}" 2>/dev/null && pwd || true)
KZ=$BUILD/kernelzero
PY=${KZ_PYTHON:-python3}
WORK=$(mktemp -d /tmp/kz-bench-XXXXXX)
KG=$(pwd)/examples/known_good
mkdir -p "$OUTD"
WORKERS=${KZ_BENCH_WORKERS:-6}

salt_cuda() { sed "s|^CUDA_SRC = r'''|CUDA_SRC = r'''// salt $2|" "$1"; }
salt_triton() { awk -v s="$2" '{print} /^@triton\.jit/{f=1} f && /:[ \t]*$/ && /^def|^ /{print "    # salt " s; f=0}' "$1"; }
job() { printf '{"id": "%s", "task": "%s", "candidate": "%s", "backend": "%s"}\n' "$1" "$2" "$3" "$4"; }

echo "[bench] $(date -u +%FT%TZ) $($PY -c 'import torch; print(torch.__version__, torch.cuda.get_device_name())') $(nproc) cores"

# 3. anchor, in the background of the same command (its load_inline builds use few cores)
if [[ -f "$ANCHORS/compile_paths.py" ]]; then
  (cd "$WORK" && PYTHONUNBUFFERED=1 timeout 900 $PY "$ANCHORS/compile_paths.py" > "$OUTD/anchor.log" 2>&1) &
  ANCHOR_PID=$!
fi

# 1. latency: one lane, one compile worker, one job at a time (no queueing in the figure), 21 salted
#    relu kernels; the first also measures the task's baselines (eager and torch.compile) and is
#    reported apart.
mkdir -p "$WORK/lat"
for i in $(seq 0 20); do
  salt_cuda "$KG/cuda/relu.py" "lat$i" > "$WORK/lat/relu_$i.py"
  job "lat-$i" "$KG/tasks/relu.py" "$WORK/lat/relu_$i.py" cuda
done > "$WORK/lat.jsonl"
t0=$(date +%s.%N)
$KZ verify --jobs "$WORK/lat.jsonl" --out "$OUTD/latency.jsonl" --device cuda --workers 1 --compile-workers 1 \
  --in-flight 1 --cache-dir "$WORK/cache-lat" --no-progress
echo "[bench] latency batch wall $(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN{print a-b}') s"
grep '"lat-0"' "$OUTD/latency.jsonl" | head -c 600; echo
grep -v '"lat-0"' "$OUTD/latency.jsonl" > "$WORK/lat_warm.jsonl"
echo "[bench] latency (jobs 1..20, baselines cached):"; $KZ results --stages "$WORK/lat_warm.jsonl"

# 2. throughput: 64 candidates, alternating CUDA fast path and Triton over the 17 known-good tasks.
make_batch() {  # $1 salt prefix
  local n=0 dir="$WORK/$1"; mkdir -p "$dir"
  for i in $(seq 0 63); do
    local tasks=("$KG"/tasks/*.py); local t=${tasks[$(( i % ${#tasks[@]} ))]}; local name=$(basename "$t" .py)
    if (( i % 2 == 0 )); then salt_cuda "$KG/cuda/$name.py" "$1-$i" > "$dir/$i.py"; b=cuda
    else salt_triton "$KG/triton/$name.py" "$1-$i" > "$dir/$i.py"; b=triton; fi
    job "$1-$i-$name-$b" "$t" "$dir/$i.py" "$b"
  done > "$WORK/$1.jsonl"
}
for phase in cold warm; do
  make_batch "$phase"
  t0=$(date +%s.%N)
  $KZ verify --jobs "$WORK/$phase.jsonl" --out "$OUTD/throughput_$phase.jsonl" --device cuda --workers $WORKERS \
    --compile-workers $WORKERS --cache-dir "$WORK/cache-tp" --no-progress
  wall=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN{print a-b}')
  echo "[bench] throughput $phase: 64 candidates in $wall s = $(awk -v w="$wall" 'BEGIN{printf "%.1f", 64*60/w}') per minute (workers $WORKERS)"
  $KZ results --stages "$OUTD/throughput_$phase.jsonl"
done

if [[ -n "${ANCHOR_PID:-}" ]]; then
  wait $ANCHOR_PID
  echo "[bench] anchor (compile_paths.py):"; cat "$OUTD/anchor.log"
fi
rm -rf "$WORK"
