#!/usr/bin/env bash
# Data-parallel scaling of the trainer (issue 7) on a machine with 2+ GPUs:
#   scripts/bench_data_parallel.sh [build-dir] [iterations]
# Runs `train --preset tiny-gpu` on one GPU, then on two ranks (--nproc-per-node 2) with the same
# per-GPU batch (weak scaling: twice the API sets, minimum of valid modules and Coder tasks per step);
# KZ_RUNS="one weak strong" adds the unchanged preset on two ranks (strong scaling). Prints each iteration's
# samples/s (sampled completions over the propose + refresh_pool + coder stages; the warm start and
# the evaluation are left out) and the ratio of samples/s over iterations 2.. taken together
# (iteration 1 holds the workers' start and Triton's first compilations). Logs and run directories under $OUT (or /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build-gpu}/kernelzero
ITERS=${2:-3}
WORK=${OUT:-/tmp}/dp-bench
rm -rf "$WORK" && mkdir -p "$WORK"
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

"$PY" - "$WORK" <<'PYEOF'
import json, statistics, sys, os, sqlite3
work = sys.argv[1]
def validations(name):
    """Per iteration: (modules the workers validated, of them compiled, slowest validation s, slowest compile s)."""
    p = os.path.join(work, name, "tasks.sqlite")
    out = {}
    if not os.path.exists(p): return out
    for (v,) in sqlite3.connect(p).execute("SELECT validation FROM tasks"):
        info = json.loads(v).get("info", {})
        if "validate_s" not in info: continue  # turned down by the store's checks alone
        it = int(info.get("submission", "/iter-0").rsplit("-", 1)[1])
        n, c, vmax, cmax = out.get(it, (0, 0, 0.0, 0.0))
        cs = info.get("compile_s")
        out[it] = (n + 1, c + (cs is not None), max(vmax, info["validate_s"]), max(cmax, cs or 0.0))
    return out
def load(name):
    p = os.path.join(work, name, "metrics.jsonl")
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else None
base = None
for name in ["one", "weak", "strong"]:
    ms = load(name)
    if ms is None: continue
    later_n = later_s = 0
    rates = []
    vals = validations(name)
    for m in ms:
        st, p = m["stage_s"], m.get("propose", {})
        secs = sum(st.get(k, 0) for k in ("propose", "refresh_pool", "coder"))
        parts = " ".join(f"{k} {p[k]:.1f}s" for k in ("sample_s", "validate_s", "probe_s", "update_s") if k in p)
        if "symbolic_rounds" in p:
            parts += f"; {p['valid_from_proposer']} valid proposals, symbolic {p['symbolic']} of {p['symbolic_tried']} valid in {p['symbolic_rounds']} round(s)"
        if m["iteration"] in vals:
            n, c, vmax, cmax = vals[m["iteration"]]
            parts += f"; stored modules validated {n}, compiled {c}, slowest validation {vmax:.1f}s, slowest compile {cmax:.1f}s"
        print(f"[dp-bench] {name} iter {m['iteration']}: world {m['world_size']}, {m['samples']} samples in {secs:.1f} s "
              f"= {m['samples_per_s']:.2f} samples/s (propose {st.get('propose', 0):.1f}s [{parts}], coder {st.get('coder', 0):.1f}s)")
        if m["iteration"] >= 2:
            later_n += m["samples"]; later_s += secs; rates.append(m["samples_per_s"])
    total = later_n / later_s
    if name == "one": base = total
    ratio = f", {total / base:.2f}x one GPU" if base else ""
    print(f"[dp-bench] {name}: {later_n} samples in {later_s:.1f} s over iterations 2..{ms[-1]['iteration']} = {total:.2f} samples/s "
          f"(per iteration: median {statistics.median(rates):.2f}, range {min(rates):.2f}-{max(rates):.2f}){ratio}")
PYEOF
