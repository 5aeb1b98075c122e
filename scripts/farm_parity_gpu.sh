#!/usr/bin/env bash
# Issue 8 on a GPU host: a farm of two verifier daemons on this host against the in-process pool, on
# the known-good and adversarial suites (the cases with an expectation on the device):
#   scripts/farm_parity_gpu.sh [build-dir]
# (KZ_FARM_DEVICE=cpu runs the same on the CPU cases, Triton under the interpreter: a check of the
# script itself on a machine without a GPU.)
# Needs the build of scripts/gpu_test.sh and redis-server (on PATH, or from the Debian packages that
# scripts/fetch_gpu_deps.sh puts in .deps/debs). Prints per-case disagreements, the statuses and both
# runs' jobs per minute; exits 1 on any disagreement. Logs under $OUT (or /tmp/kz-farm-parity).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BIN=$ROOT/${1:-build-gpu}/kernelzero
WORK=${OUT:-/tmp/kz-farm-parity}
mkdir -p "$WORK"
PY=${KZ_PYTHON:-python3}
PREFIX=$ROOT/.deps/prefix
if ! command -v redis-server >/dev/null; then
  [[ -x $PREFIX/usr/bin/redis-server ]] || { mkdir -p "$PREFIX"; for d in .deps/debs/*.deb; do dpkg -x "$d" "$PREFIX"; done; }
  export PATH=$PREFIX/usr/bin:$PATH LD_LIBRARY_PATH=$PREFIX/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
fi
DEVICE=${KZ_FARM_DEVICE:-cuda}
PORT=6390
redis-server --port $PORT --bind 127.0.0.1 --dir "$WORK" --appendonly yes --appendfsync always --save "" \
  --logfile "$WORK/redis.log" --daemonize yes || exit 1
trap 'redis-cli -p $PORT shutdown nosave >/dev/null 2>&1; kill $(jobs -p) 2>/dev/null' EXIT
URL=redis://127.0.0.1:$PORT/0

# The suites' CUDA-device cases as one jobs file (ids: suite/case).
"$PY" - "$WORK/jobs.jsonl" "$DEVICE" examples/known_good/manifest.json tests/verify/adversarial/manifest.json <<'PYEOF'
import json, os, sys
out = open(sys.argv[1], "w")
device = sys.argv[2]
for m in sys.argv[3:]:
    base = os.path.dirname(os.path.abspath(m))
    suite = os.path.basename(base)
    for c in json.load(open(m))["cases"]:
        if device not in c.get("expect", {}): continue
        job = {"id": f"{suite}/{c['name']}", "task": os.path.join(base, c["task"]),
               "candidate": os.path.join(base, c["candidate"]), "backend": c["backend"]}
        if "timeout" in c: job["timeout"] = c["timeout"]
        out.write(json.dumps(job) + "\n")
PYEOF
N=$(wc -l < "$WORK/jobs.jsonl")

t0=$(date +%s)
# Each side starts from an empty build cache and baseline database of its own (a side that found the
# other's compiled kernels and measured baselines would look faster than it is).
"$BIN" verify --jobs "$WORK/jobs.jsonl" --out "$WORK/local.jsonl" --device $DEVICE --workers 4 --no-progress \
  --cache-dir "$WORK/local-cache" > "$WORK/local.log" 2>&1 || { tail -20 "$WORK/local.log"; exit 1; }
t_local=$(( $(date +%s) - t0 ))
echo "[farm-parity] in-process pool: $N jobs in $t_local s"

for name in d1 d2; do
  "$BIN" verifier-daemon --redis $URL --devices ${DEVICE/cuda/cuda:0} --workers 2 --name $name \
    --cache-dir "$WORK/farm-cache" > "$WORK/$name.log" 2>&1 &
done
sleep 1
t0=$(date +%s)
"$BIN" verify --jobs "$WORK/jobs.jsonl" --out "$WORK/farm.jsonl" --device $DEVICE --in-flight 8 --verifier $URL \
  --no-progress > "$WORK/farm.log" 2>&1 || { tail -20 "$WORK/farm.log"; exit 1; }
t_farm=$(( $(date +%s) - t0 ))
"$BIN" farm status --redis $URL

"$PY" - "$WORK/local.jsonl" "$WORK/farm.jsonl" "$N" "$t_local" "$t_farm" <<'PYEOF'
import json, sys
load = lambda p: {r["id"]: r for r in map(json.loads, open(p))}
local, farm = load(sys.argv[1]), load(sys.argv[2])
n, tl, tf = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
bad = [i for i in local if farm.get(i, {}).get("status") != local[i]["status"]]
for i in bad: print(f"[farm-parity] {i}: local {local[i]['status']}, farm {farm.get(i, {}).get('status')}")
statuses = {}
for r in local.values(): statuses[r["status"]] = statuses.get(r["status"], 0) + 1
print(f"[farm-parity] {n} jobs, {len(local)} local / {len(farm)} farm verdicts, {len(bad)} disagreements; statuses {statuses}")
print(f"[farm-parity] in-process pool (4 lanes): {tl} s = {60 * n / max(tl, 1):.0f} jobs/min; "
      f"farm (2 daemons x 2 workers, one device): {tf} s = {60 * n / max(tf, 1):.0f} jobs/min")
sys.exit(1 if bad or len(farm) != n else 0)
PYEOF
