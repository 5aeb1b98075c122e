#!/usr/bin/env bash
# Data-parallel scaling of the trainer (issue 7) on a machine with 2+ GPUs:
#   scripts/bench_data_parallel.sh [build-dir] [iterations]
# Runs `train --preset tiny-gpu` on one GPU, then on two ranks (--nproc-per-node 2) with the same
# per-GPU batch (weak scaling: twice the API sets, minimum of valid modules and Coder tasks per step);
# KZ_RUNS="one weak strong" adds the unchanged preset on two ranks (strong scaling). Prints each iteration's
# samples/s (sampled completions over the propose + refresh_pool + coder stages; the warm start and
# the evaluation are left out) and the ratio of samples/s over iterations 2.. taken together
# (iteration 1 holds the workers' start and Triton's first compilations). Logs and run directories under $OUT (or /tmp).
# KZ_KEEP=1 keeps the work directory of an earlier call (to run `one` and `weak` in separate calls
# on one machine); scripts/bench_data_parallel_summary.py DIR summarises copied results elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build-gpu}/kernelzero
ITERS=${2:-3}
WORK=${OUT:-/tmp}/dp-bench
[[ ${KZ_KEEP:-0} == 1 ]] || rm -rf "$WORK"
mkdir -p "$WORK"
PY=${KZ_PYTHON:-python3}

# The preset's relative paths name files of this checkout: made absolute for a config file elsewhere.
"$BIN" train --preset tiny-gpu --print-config | sed -e "s#\"data/#\"$PWD/data/#g" -e "s#\"examples/#\"$PWD/examples/#g" > "$WORK/one.toml"
sed -e 's/^api_sets = 4$/api_sets = 8/' -e 's/^min_valid = 4$/min_valid = 8/' -e 's/^tasks_per_step = 4$/tasks_per_step = 8/' \
  "$WORK/one.toml" > "$WORK/weak.toml"
[[ $(diff "$WORK/one.toml" "$WORK/weak.toml" | grep -c '^>') == 3 ]] || { echo "tiny-gpu preset changed: update the sed"; exit 1; }

run() {  # name, config, ranks
  local t0=$(date +%s)
  # Each run compiles from cold (Inductor and Triton caches of its own): module validation runs
  # torch.compile, and a cache left by the run before would favour the run after.
  export TORCHINDUCTOR_CACHE_DIR=$WORK/$1-cache/inductor TRITON_CACHE_DIR=$WORK/$1-cache/triton
  if [[ $3 == 1 ]]; then
    CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} "$BIN" train --config "$2" --out "$WORK/$1" --iterations "$ITERS" > "$WORK/$1.log" 2>&1
  else
    "$BIN" train --config "$2" --out "$WORK/$1" --iterations "$ITERS" --nproc-per-node "$3" > "$WORK/$1.log" 2>&1
  fi || { echo "[dp-bench] $1 failed:"; tail -30 "$WORK/$1.log"; exit 1; }
  echo "[dp-bench] $1: $3 rank(s), $(( $(date +%s) - t0 )) s wall"
}
nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader || true
for name in ${KZ_RUNS:-one weak}; do
  case $name in
    one) run one "$WORK/one.toml" 1 ;;
    weak) run weak "$WORK/weak.toml" 2 ;;
    strong) run strong "$WORK/one.toml" 2 ;;
    *) echo "unknown run '$name' (one, weak, strong)"; exit 2 ;;
  esac
done

"$PY" scripts/bench_data_parallel_summary.py "$WORK"
