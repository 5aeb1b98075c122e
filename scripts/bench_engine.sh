#!/usr/bin/env bash
# Policy-engine benchmarks on a GPU machine (results go to docs/BENCHMARKS.md), with the anchor in
# the same command: generation throughput of a random 7B-shaped Qwen2 in bf16 (prompt 256, 256 new
# tokens, batch 1/16/64), ours then Hugging Face generate (../shared/anchors/hf_generate.py).
# Usage: scripts/bench_engine.sh BUILD_DIR OUT_DIR [ANCHORS_DIR | none]
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?build dir}
OUTD=${2:?out dir}
ANCHORS=$(cd "${3:-../shared/anchors}" 2>/dev/null && pwd || true)
PY=${KZ_PYTHON:-python3}
mkdir -p "$OUTD"
echo "[bench-engine] $(date -u +%FT%TZ) $($PY -c 'import torch, transformers; print(torch.__version__, torch.cuda.get_device_name(), "transformers", transformers.__version__)')"
"$BUILD"/kernelzero bench-engine --arch qwen2 --preset 7b-shape --batch 1,16,64 --prompt-len 256 --new-tokens 256 \
  --repeats ${KZ_BENCH_REPEATS:-3} --json | tee "$OUTD/engine_generate.jsonl"
if [[ -f "$ANCHORS/hf_generate.py" ]]; then
  echo "[bench-engine] anchor (hf_generate.py):"
  (cd /tmp && timeout 400 $PY "$ANCHORS/hf_generate.py") 2>&1 | grep -E "ANCHOR|Error" | tee "$OUTD/anchor_generate.log"
fi
