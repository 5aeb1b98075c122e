#!/usr/bin/env bash
# Everything the verifier claims on a GPU, in one device call (fits the 10-minute limit when the
# per-job overhead is a few seconds): build, benchmarks, then the anchor in the background of the
# GPU suites. Carry .deps and .anchors (copy of ../shared/anchors). Logs and results go to $OUT.
#   scripts/gpu_session.sh [seconds budget, default 580]
set -uo pipefail
cd "$(dirname "$0")/.."
BUDGET=${1:-580}
S=$SECONDS
left() { echo $(( BUDGET - (SECONDS - S) )); }
export KZ_CACHE_DIR=${KZ_CACHE_DIR:-/tmp/kzcache} PYTHONUNBUFFERED=1 OUT=${OUT:-/tmp/kz-out}
mkdir -p "$OUT"
KZ_TEST_LABEL=none timeout 260 bash scripts/gpu_test.sh build-gpu || exit 1
echo "[session] built at $((SECONDS - S)) s"
timeout $(( $(left) / 2 )) bash scripts/bench_verify.sh build-gpu "$OUT" none 2>&1 | tee "$OUT/bench.log" \
  | grep -E "^\[bench\]|jobs:|total_s|compile_s"
echo "[session] benchmarks done at $((SECONDS - S)) s"
if [[ -f .anchors/compile_paths.py ]]; then
  (cd /tmp && timeout $(( $(left) - 5 )) python3 "$OLDPWD/.anchors/compile_paths.py" > "$OUT/anchor.log" 2>&1) &
fi
timeout $(( $(left) - 5 )) bash scripts/gpu_test.sh build-gpu
echo "[session] suites rc=$? at $((SECONDS - S)) s"
wait
echo "[session] anchor:"; cat "$OUT/anchor.log" 2>/dev/null
