#!/usr/bin/env bash
# Verifier benchmarks on a GPU machine (results go to docs/BENCHMARKS.md):
#   latency  end-to-end latency (compile + 5 trials + timed iterations) of a one-kernel CUDA candidate
#            on the fast path, each a new kernel (salted source, so every NVRTC compile is real);
#   batch64  throughput of a 64-candidate mixed batch (CUDA fast path and Triton, every candidate
#            salted, all correct), first with cold caches (baselines and builds), then with the
#            baselines cached (the RL steady state: the task pool's baselines are measured once) and
#            new kernels; 6 lanes (KZ_BENCH_WORKERS), as in issue 2;
#   rl       the same with the mix an RL step produces (scripts/salted_batch.py --mix rl: half correct, most of the
#            rest incorrect, a few crashes and hangs), KZ_RL_BATCH candidates (256), the verifier's
#            default lanes (KZ_RL_LANES=N: N lanes and N compile workers);
#   and the anchor (../shared/anchors/compile_paths.py: load_inline vs NVRTC vs Triton) in the same
#   command. Every batch prints its stages and the host's ceiling (kernelzero results --stages).
# Usage: scripts/bench_verify.sh BUILD_DIR OUT_DIR [ANCHORS_DIR | none]
# KZ_BENCH_PARTS picks the parts (default "latency batch64 rl").
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
PARTS=" ${KZ_BENCH_PARTS:-latency batch64 rl} "
RL_N=${KZ_RL_BATCH:-256}
RL_LANES=()
[[ -n "${KZ_RL_LANES:-}" ]] && RL_LANES=(--workers "$KZ_RL_LANES" --compile-workers "$KZ_RL_LANES")
part() { [[ "$PARTS" == *" $1 "* ]]; }

batch() { $PY scripts/salted_batch.py "$KG" "$WORK/$1" "$2" "$1" "${@:3}" > "$WORK/$1.jsonl" || exit 1; }

echo "[bench] $(date -u +%FT%TZ) $($PY -c 'import torch; print(torch.__version__, torch.cuda.get_device_name())') $(nproc) cores"

# 3. anchor, in the background of the same command (its load_inline builds use few cores)
if [[ -f "$ANCHORS/compile_paths.py" ]]; then
  (cd "$WORK" && PYTHONUNBUFFERED=1 timeout 900 $PY "$ANCHORS/compile_paths.py" > "$OUTD/anchor.log" 2>&1) &
  ANCHOR_PID=$!
fi

# 1. latency: one lane, one compile worker, one job at a time (no queueing in the figure), 21 salted
#    relu kernels; the first also measures the task's baselines (eager and torch.compile) and is
#    reported apart.
if part latency; then
batch lat 21 --mix correct --task relu --backend cuda
t0=$(date +%s.%N)
$KZ verify --jobs "$WORK/lat.jsonl" --out "$OUTD/latency.jsonl" --device cuda --workers 1 --compile-workers 1 \
  --in-flight 1 --cache-dir "$WORK/cache-lat" --no-progress
echo "[bench] latency batch wall $(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN{print a-b}') s"
grep '"lat-0000-' "$OUTD/latency.jsonl" | head -c 600; echo
grep -v '"lat-0000-' "$OUTD/latency.jsonl" > "$WORK/lat_warm.jsonl"
echo "[bench] latency (jobs 1..20, baselines cached):"; $KZ results --stages "$WORK/lat_warm.jsonl"
fi

# 2. throughput: 64 candidates, CUDA fast path and Triton alternating over the 17 known-good tasks.
run_batch() {  # $1 name, $2 jobs file, $3 cache dir, $4 candidates, then verify's options
  local name=$1 jobs=$2 cache=$3 n=$4; shift 4
  local t0=$(date +%s.%N)
  $KZ verify --jobs "$jobs" --out "$OUTD/$name.jsonl" --device cuda --cache-dir "$cache" --no-progress "$@"
  local wall=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN{print a-b}')
  echo "[bench] $name: $n candidates in $wall s = $(awk -v w="$wall" -v n="$n" 'BEGIN{printf "%.1f", n*60/w}') per minute ($*)"
  $KZ results --stages "$OUTD/$name.jsonl"
}
part batch64 && for phase in cold warm; do
  batch "$phase" 64 --mix correct
  run_batch "throughput_$phase" "$WORK/$phase.jsonl" "$WORK/cache-tp" 64 --workers $WORKERS --compile-workers $WORKERS
done

# rl: new kernels in the mix of an RL step, cold then with the baselines cached.
part rl && for phase in cold warm; do
  batch "rl-$phase" "$RL_N" --mix rl
  run_batch "rl_$phase" "$WORK/rl-$phase.jsonl" "$WORK/cache-rl" "$RL_N" "${RL_LANES[@]}"
done

if [[ -n "${ANCHOR_PID:-}" ]]; then
  wait $ANCHOR_PID
  echo "[bench] anchor (compile_paths.py):"; cat "$OUTD/anchor.log"
fi
rm -rf "$WORK"
